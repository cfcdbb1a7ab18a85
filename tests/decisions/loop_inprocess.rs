//! The experiment loop and its decisions run in-process on the mock executor: no
//! binary, no Python, exact run counts. Each case drives `experiment::run` (or `sweep::run`) on a
//! throw-away git repo and checks the outcome, the recorded row, the repo afterwards and the
//! events; one case pins the text the command line renders from those events (insta).

use crate::support;

use ratchet::bench::mock::{MockExecutor, Step};
use ratchet::bench::Side;
use ratchet::error::{Kind, Result};
use ratchet::events::{Effects, Event};
use ratchet::experiment::{self, Options, Outcome};
use ratchet::signals::Cancel;
use ratchet::stats::Verdict;
use ratchet::store::Status;
use ratchet::sweep::{self, SweepOptions, SweepOutcome};
use ratchet::workspace::Workspace;
use std::path::Path;

/// The benchmark command is never run (the mock answers), so any program passes the preflight.
/// The earlier rule (`method = "auto"`: without history, the two phases), whose looks and
/// confirmation most cases here count.
fn config(max_pairs: u32) -> String {
    format!(
        "[benchmark]\ncommand = \"true\"\ntimeout_s = 20\nkill_grace_s = 0.5\nwarmup = 0\niters = 5\nprofile_iters = 0\n\
         [hardware]\npreset = \"tpu-v5e\"\n[decision]\nmethod = \"auto\"\nmin_pairs = 4\nmax_pairs = {max_pairs}\nconfirm_pairs = 4\n\
         [score]\nmetric = \"latency\"\n"
    )
}

/// The default rule, the robust ratio, with a budget of `pairs`.
fn robust_config(pairs: u32) -> String {
    format!(
        "[benchmark]\ncommand = \"true\"\ntimeout_s = 20\nkill_grace_s = 0.5\nwarmup = 0\niters = 5\nprofile_iters = 0\n\
         [hardware]\npreset = \"tpu-v5e\"\n[decision]\nrescue_pairs = {pairs}\n[score]\nmetric = \"latency\"\n"
    )
}

struct Repo {
    dir: tempfile::TempDir,
}

impl Repo {
    fn new(max_pairs: u32) -> Repo {
        Repo::with_config(&config(max_pairs))
    }

    fn with_config(config: &str) -> Repo {
        support::isolate_git();
        let r = Repo { dir: tempfile::tempdir().unwrap() };
        r.git(&["init", "-q", "-b", "main"]);
        r.git(&["config", "user.name", "Test"]);
        r.git(&["config", "user.email", "test@example.com"]);
        r.write("ratchet.toml", config);
        r.write("kernel.py", "BQ = 128\n");
        r.write("bench.mock", "latency 10\n");
        r.git(&["add", "-A"]);
        r.git(&["commit", "-qm", "baseline"]);
        r
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path().join(rel)).unwrap()
    }

    fn git(&self, args: &[&str]) -> String {
        support::git_in(self.path(), args)
    }

    fn head(&self) -> String {
        self.git(&["rev-parse", "HEAD"])
    }

    fn statuses(&self) -> Vec<Status> {
        Workspace::discover(self.path()).unwrap().store.rows().unwrap().iter().map(|r| r.status).collect()
    }

    /// One experiment with the hypothesis `kernel.py: BQ = 256`, as the command line runs it
    /// (lock, recoveries, run).
    fn experiment(&self, exec: &mut MockExecutor, cancel: Cancel) -> (Result<Outcome>, Vec<Event>) {
        self.write("kernel.py", "BQ = 256\n");
        let mut events = vec![];
        let ws = Workspace::discover(self.path()).unwrap().lock("test", &mut events).unwrap();
        let mut fx = Effects::new(&mut events, cancel);
        sweep::recover(&ws, &mut fx).unwrap();
        let opts = Options { message: "exp: BQ 256".into(), ..Default::default() };
        let r = experiment::run(&ws, &opts, exec, &mut fx);
        (r, events)
    }
}

fn run(repo: &Repo, inc: Step, cand: Step) -> (Outcome, Vec<Event>, MockExecutor) {
    let mut exec = MockExecutor::sides(inc, cand);
    let (r, events) = repo.experiment(&mut exec, Cancel::new());
    (r.unwrap(), events, exec)
}

fn count(events: &[Event], f: impl Fn(&Event) -> bool) -> usize {
    events.iter().filter(|e| f(e)).count()
}

/// What every recorded experiment has in common: the row is the last CSV row, every run the
/// mock made is counted, one session started and finished, the outcome is the last event.
fn check_common(repo: &Repo, o: &Outcome, events: &[Event], exec: &MockExecutor) {
    let ws = Workspace::discover(repo.path()).unwrap();
    let rows = ws.store.rows().unwrap();
    assert_eq!(rows.last(), Some(&o.row));
    assert_eq!(o.row.runs as usize, exec.log.len());
    assert_eq!(count(events, |e| matches!(e, Event::RunFinished { .. })), exec.log.len());
    assert_eq!(count(events, |e| matches!(e, Event::SessionStarted { .. })), 1);
    assert_eq!(count(events, |e| matches!(e, Event::SessionFinished)), 1);
    assert_eq!(count(events, |e| matches!(e, Event::ExperimentStarted { .. })), 1);
    assert!(matches!(events.last(), Some(Event::ExperimentFinished { outcome }) if outcome.row == o.row));
    // Nothing of the experiment is left in flight.
    assert!(!ratchet::journal::path(&ws.state_dir).exists());
}

#[test]
fn a_clear_gain_is_kept_after_the_first_look_and_its_confirmation() {
    let repo = Repo::new(16);
    let base = repo.head();
    let (o, events, exec) = run(&repo, Step::Latency(10.0), Step::Latency(8.0));
    check_common(&repo, &o, &events, &exec);
    assert_eq!(o.row.status, Status::Keep);
    let d = o.decision.as_ref().unwrap();
    assert_eq!(d.verdict, Verdict::Keep);
    // 4 pairs to the first look, 4 confirmation pairs: 16 runs, 8 a side.
    assert_eq!((d.pairs, d.confirmation.as_ref().map(|c| c.pairs)), (4, Some(4)));
    assert_eq!((exec.runs(Side::Incumbent), exec.runs(Side::Candidate)), (8, 8));
    assert!((o.row.delta_pct.unwrap() - 25.0).abs() < 2.0, "{:?}", o.row.delta_pct);
    assert_eq!(repo.head(), o.row.commit);
    assert_eq!(o.row.incumbent, base);
    assert!(o.discarded_ref.is_none() && o.error().is_none());
}

#[test]
fn the_default_rule_keeps_a_clear_gain_in_one_phase_after_two_pairs() {
    let repo = Repo::with_config(&robust_config(30));
    let (o, events, exec) = run(&repo, Step::Latency(10.0), Step::Latency(8.0));
    check_common(&repo, &o, &events, &exec);
    assert_eq!(o.row.status, Status::Keep);
    let d = o.decision.as_ref().unwrap();
    // Looks from the second pair, one phase: without history, 5 pairs (the earlier rule's two
    // phases took 4 + 4).
    assert_eq!((d.procedure, d.pairs, d.looks, d.confirmation.is_none()), (ratchet::stats::Procedure::RobustRatio, 5, 4, true));
    assert_eq!((exec.runs(Side::Incumbent), exec.runs(Side::Candidate)), (5, 5));
    assert_eq!(o.row.noise_scale, "robust");
    assert!(d.reason.contains("times as likely as no gain at its best fit after 5 pairs"), "{}", d.reason);
    assert!((o.row.delta_pct.unwrap() - 25.0).abs() < 2.0, "{:?}", o.row.delta_pct);
    assert_eq!(repo.head(), o.row.commit);
}

#[test]
fn the_default_rule_reverts_a_loss_and_parks_it() {
    let repo = Repo::with_config(&robust_config(30));
    let base = repo.head();
    let (o, events, exec) = run(&repo, Step::Latency(10.0), Step::Latency(12.0));
    check_common(&repo, &o, &events, &exec);
    assert_eq!(o.row.status, Status::Revert);
    let d = o.decision.as_ref().unwrap();
    assert!(d.procedure == ratchet::stats::Procedure::RobustRatio && d.pairs <= 4, "{d:?}");
    assert!(d.reason.starts_with("no worthwhile gain"), "{}", d.reason);
    assert_eq!(repo.head(), base);
    assert_eq!(repo.git(&["show", "refs/ratchet/discarded/1:kernel.py"]), "BQ = 256");
}

#[test]
fn the_default_rule_ends_an_unclear_gain_inconclusive_at_its_budget() {
    let repo = Repo::with_config(&robust_config(2));
    // +1.5% in 5% iteration noise: neither clear nor futile at the one look 2 pairs allow.
    let mut exec = MockExecutor::sides(Step::Latency(10.0), Step::Latency(9.85));
    exec.cv = 0.05;
    let (o, events) = repo.experiment(&mut exec, Cancel::new());
    let o = o.unwrap();
    check_common(&repo, &o, &events, &exec);
    assert_eq!(o.row.status, Status::Inconclusive, "{}", o.row.note);
    assert_eq!(o.row.runs, 4, "the budget of 2 pairs, no more");
    assert!(o.row.note.contains("no clear answer after the budget of 2 pairs"), "{}", o.row.note);
}

#[test]
fn the_text_of_an_experiment_the_default_rule_kept() {
    let repo = Repo::with_config(&robust_config(30));
    let (o, events, _) = run(&repo, Step::Latency(10.0), Step::Latency(8.0));
    let redact = |b: String| {
        let b = b
            .replace(&o.row.commit[..8], "[candidate]")
            .replace(&o.row.incumbent[..8], "[incumbent]")
            .replace(&repo.path().display().to_string(), "[repo]")
            .replace(&format!("df on {})", ratchet::stats::history::host()), "df on [host])");
        regex::Regex::new(r"(\(|processes, )[\d.]+ s\)").unwrap().replace_all(&b, "${1}[wall] s)").into_owned()
    };
    let (out, err) = render(&events);
    insta::assert_snapshot!("robust_kept_stdout", redact(out));
    assert_eq!(err, "");
    let (verbose_out, _) = render_at(&events, ratchet::cli::ui::Verbosity::Verbose);
    insta::assert_snapshot!("robust_kept_stdout_verbose", redact(verbose_out));
}

#[test]
fn runs_alternate_in_balanced_orders_and_carry_their_pair_and_phase() {
    let repo = Repo::new(16);
    let base = repo.head();
    let (o, _, exec) = run(&repo, Step::Latency(10.0), Step::Latency(5.0));
    assert_eq!(o.row.status, Status::Keep);
    // BA, AB, AB, BA (adjacent log-ratios of a serially correlated machine are not positively
    // correlated, and every two pairs balance a drift or a warm-up ramp), then the confirmation
    // in the complementary order AB, BA, BA, AB.
    let (i, c) = (Side::Incumbent, Side::Candidate);
    let (ab, ba) = ([i, c], [c, i]);
    let order: Vec<Side> = exec.log.iter().map(|(s, _)| *s).collect();
    assert_eq!(order, [ba, ab, ab, ba, ab, ba, ba, ab].concat());
    // Each run record says which side, pair and phase it was, and which commit ran.
    let runs = Workspace::discover(repo.path()).unwrap().store.runs().unwrap();
    assert_eq!(runs.len(), 16);
    for (k, r) in runs.iter().enumerate() {
        assert_eq!(r.side, order[k]);
        assert_eq!(r.pair, Some((k / 2) % 4), "run {k}");
        assert_eq!(r.phase.as_deref(), Some(if k < 8 { "main" } else { "confirmation" }), "run {k}");
        assert_eq!(r.commit, if r.side == i { base.clone() } else { o.row.commit.clone() });
    }
}

#[test]
fn a_loss_is_reverted_at_the_first_look_and_parked() {
    let repo = Repo::new(16);
    let base = repo.head();
    let (o, events, exec) = run(&repo, Step::Latency(10.0), Step::Latency(10.5));
    check_common(&repo, &o, &events, &exec);
    assert_eq!(o.row.status, Status::Revert);
    assert_eq!(o.row.runs, 8);
    assert!(o.row.note.contains("no worthwhile gain"), "{}", o.row.note);
    assert_eq!(repo.head(), base);
    assert_eq!(repo.read("kernel.py"), "BQ = 128\n");
    assert_eq!(o.discarded_ref.as_deref(), Some("refs/ratchet/discarded/1"));
    assert_eq!(repo.git(&["rev-parse", "refs/ratchet/discarded/1"]), o.row.commit);
    assert!(o.error().is_none());
}

#[test]
fn a_small_gain_under_noise_runs_out_of_budget_inconclusive() {
    let repo = Repo::new(4);
    // A 2.5% gain in 5% iteration noise: neither clear nor futile within 4 pairs (with the
    // mock's seeded draws in the run order BA, AB, AB, BA; 1% was that in the order before it).
    let mut exec = MockExecutor::sides(Step::Latency(10.0), Step::Latency(9.75));
    exec.cv = 0.05;
    let (o, events) = repo.experiment(&mut exec, Cancel::new());
    let o = o.unwrap();
    check_common(&repo, &o, &events, &exec);
    assert_eq!(o.row.status, Status::Inconclusive);
    // Undecided, it went on to the rescue: twice the 4 + 4 pairs the phases could measure (a
    // small budget stays small), whose t-test did not keep it either.
    assert_eq!(o.row.runs, 32);
    assert!(o.row.note.contains("the rescue does not keep it either"), "{}", o.row.note);
    assert_eq!(repo.git(&["show", "refs/ratchet/discarded/1:kernel.py"]), "BQ = 256");
}

#[test]
fn identical_compiled_hlo_is_a_no_op_after_one_pair() {
    let repo = Repo::new(16);
    let base = repo.head();
    let hlo = "HloModule jit_kernel\nENTRY main { ROOT x = f32[] constant(1) }\n".to_string();
    let (o, events, exec) = run(&repo, Step::Hlo(10.0, hlo.clone()), Step::Hlo(10.0, hlo));
    check_common(&repo, &o, &events, &exec);
    assert_eq!(o.row.status, Status::NoOp);
    assert_eq!(o.row.runs, 2);
    assert!(o.row.note.contains("byte-identical"), "{}", o.row.note);
    assert!(o.decision.is_none() && o.discarded_ref.is_some());
    assert_eq!(repo.head(), base);
}

#[test]
fn a_crashing_candidate_is_cross_checked_and_recorded_as_a_crash() {
    let repo = Repo::new(16);
    let base = repo.head();
    let (o, events, exec) = run(&repo, Step::Latency(10.0), Step::Crash(3));
    check_common(&repo, &o, &events, &exec);
    assert_eq!(o.row.status, Status::Crash);
    assert!(o.row.note.contains("exited with code 3") && o.row.note.contains("mock kernel exploded"), "{}", o.row.note);
    // The first pair ran the candidate first; after its crash the incumbent ran once, fine: the
    // hypothesis is to blame.
    assert_eq!(count(&events, |e| matches!(e, Event::CrossCheck { crashed: Side::Candidate, other: Side::Incumbent })), 1);
    assert_eq!((exec.runs(Side::Incumbent), exec.runs(Side::Candidate)), (1, 1));
    assert_eq!(repo.head(), base);
    assert!(o.error().is_none(), "a crashed hypothesis is a result, not a failure of ratchet's");
}

#[test]
fn timeouts_and_invalid_runs_end_the_experiment_with_their_status() {
    for (step, status, says) in [
        (Step::Timeout, Status::Timeout, "timeout"),
        (Step::Silent, Status::Invalid, "wrote no ratchet-result.json"),
        (Step::BadCheck(8.0), Status::Invalid, "correctness check failed"),
    ] {
        let repo = Repo::new(16);
        let (o, events, exec) = run(&repo, Step::Latency(10.0), step.clone());
        check_common(&repo, &o, &events, &exec);
        assert_eq!(o.row.status, status, "{step:?}");
        assert!(o.row.note.contains(says), "{step:?}: {}", o.row.note);
        assert_eq!(count(&events, |e| matches!(e, Event::CrossCheck { .. })), 0, "{step:?}: only a crash is cross-checked");
        assert!(o.error().is_none());
    }
}

#[test]
fn both_sides_crashing_alike_gives_the_hypothesis_back_and_records_nothing() {
    let repo = Repo::new(16);
    let base = repo.head();
    let mut exec = MockExecutor::sides(Step::Crash(3), Step::Crash(3));
    let (r, _) = repo.experiment(&mut exec, Cancel::new());
    let e = r.unwrap_err();
    assert_eq!(e.kind, Kind::Infrastructure, "{e}");
    assert!(e.message.contains("both crash with exit code 3"), "{e}");
    assert!(repo.statuses().is_empty());
    assert_eq!(repo.head(), base);
    // The hypothesis is back in the work tree, uncommitted, and its id is not used up.
    assert_eq!(repo.read("kernel.py"), "BQ = 256\n");
    let (o, _, _) = run(&repo, Step::Latency(10.0), Step::Latency(8.0));
    assert_eq!((o.row.id, o.row.status), (1, Status::Keep));
}

#[test]
fn an_incumbent_that_cannot_run_is_recorded_as_an_error_and_exits_as_a_failure() {
    let repo = Repo::new(16);
    let (o, events, exec) = run(&repo, Step::Crash(1), Step::Latency(8.0));
    check_common(&repo, &o, &events, &exec);
    assert_eq!(o.row.status, Status::Error);
    let e = o.error().expect("an undecidable experiment is an error");
    assert_eq!(e.kind, Kind::Failure);
    assert!(e.message.contains("could not be decided"), "{e}");
    assert_eq!(e.exit_code(), o.clone().into_result().unwrap_err().exit_code());
}

#[test]
fn a_cancelled_experiment_is_rolled_back_recorded_and_exits_interrupted() {
    let repo = Repo::new(16);
    let base = repo.head();
    let cancel = Cancel::new();
    let stop = cancel.clone();
    // The user stops ratchet while the candidate's second run is going.
    let mut exec = MockExecutor::new(move |c| {
        if c.side == Side::Candidate && c.n == 1 {
            stop.cancel();
            return Step::Interrupted;
        }
        Step::Latency(if c.side == Side::Candidate { 8.0 } else { 10.0 })
    });
    let (r, events) = repo.experiment(&mut exec, cancel);
    let o = r.unwrap();
    check_common(&repo, &o, &events, &exec);
    assert_eq!(o.row.status, Status::Interrupted);
    assert_eq!(o.error().map(|e| e.kind), Some(Kind::Interrupted));
    assert_eq!(repo.head(), base);
    assert_eq!(repo.statuses(), [Status::Interrupted]);
    // Its runs so far are kept, but no view shows a half experiment's figures as a result: no
    // latency, roofline point or regime in the row any view reads.
    let r = &o.row;
    assert!(exec.runs(Side::Candidate) >= 1);
    assert_eq!((r.value, r.latency_ms, r.tflops, r.intensity, r.regime.as_deref()), (None, None, None, None, None), "{r:?}");
    let roofline = |rows: &[ratchet::store::ResultRow]| {
        ratchet::plot::svg(ratchet::plot::Chart::Roofline, &ratchet::plot::Night { rows, runs: &[], hw: None }).unwrap()
    };
    assert_eq!(roofline(std::slice::from_ref(r)), roofline(&[]), "the roofline draws nothing of it");
}

#[test]
fn throttled_runs_are_repeated_a_bounded_number_of_times_and_then_used() {
    let repo = Repo::new(16);
    let (o, events, exec) = run(&repo, Step::Throttled(10.0), Step::Latency(8.0));
    check_common(&repo, &o, &events, &exec);
    assert_eq!(o.row.status, Status::Keep);
    // throttle_reruns = 2 (the default): each incumbent sample takes 3 runs.
    assert_eq!((exec.runs(Side::Incumbent), exec.runs(Side::Candidate)), (24, 8));
    let repeats: Vec<(u32, u32)> = events
        .iter()
        .filter_map(|e| match e {
            Event::RunRepeated { attempt, max, side: Side::Incumbent, .. } => Some((*attempt, *max)),
            _ => None,
        })
        .collect();
    assert_eq!(repeats.len(), 16);
    assert!(repeats.chunks(2).all(|c| c == [(1, 2), (2, 2)]), "{repeats:?}");
}

#[test]
fn a_sweep_keeps_skips_and_records_crashes_from_the_checkouts_own_script() {
    let repo = Repo::new(16);
    let hyp = |name: &str, from: &str, to: &str| {
        repo.write(
            &format!("experiments/{name}"),
            &format!("message = \"exp: {name}\"\n[[edit]]\nfile = \"bench.mock\"\nfind = {from:?}\nreplace = {to:?}\n"),
        );
    };
    hyp("01-faster.toml", "latency 10", "latency 8");
    hyp("02-stale.toml", "latency 10", "latency 9");
    hyp("03-crash.toml", "latency 8", "crash 3");
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-qm", "queue"]);
    let mut exec = MockExecutor::from_checkout("bench.mock");
    let mut events = vec![];
    let ws = Workspace::discover(repo.path()).unwrap().lock("test", &mut events).unwrap();
    let out = sweep::run(&ws, &SweepOptions::default(), &mut exec, &mut Effects::new(&mut events, Cancel::new())).unwrap();
    let st: Vec<Status> = out.rows.iter().map(|r| r.status).collect();
    assert_eq!(st, [Status::Keep, Status::Skipped, Status::Crash]);
    assert_eq!(repo.statuses(), st);
    assert!(out.rows[1].note.contains("does not apply"), "{}", out.rows[1].note);
    assert_eq!(repo.read("bench.mock"), "latency 8\n", "the kept gain stays; the crash is reverted");
    assert_eq!(count(&events, |e| matches!(e, Event::Unmeasured { .. })), 1);
    let finished: Vec<&SweepOutcome> = events
        .iter()
        .filter_map(|e| match e {
            Event::SweepFinished { outcome, .. } => Some(outcome),
            _ => None,
        })
        .collect();
    assert_eq!(finished.len(), 1);
    assert_eq!(finished[0].rows, out.rows);

    // Run again: every hypothesis is done, nothing runs.
    let before = exec.log.len();
    let mut events = vec![];
    let out = sweep::run(&ws, &SweepOptions::default(), &mut exec, &mut Effects::new(&mut events, Cancel::new())).unwrap();
    assert_eq!((out.rows.len(), out.already_done, exec.log.len()), (0, 3, before));
    assert_eq!(count(&events, |e| matches!(e, Event::HypothesisDone { .. })), 3);
}

#[test]
fn events_serialize_as_json_lines() {
    let repo = Repo::new(16);
    let (_, events, _) = run(&repo, Step::Latency(10.0), Step::Latency(8.0));
    let mut sink = ratchet::events::JsonLines(Vec::new());
    for e in events.iter().cloned() {
        ratchet::events::Events::emit(&mut sink, e);
    }
    let text = String::from_utf8(sink.0).unwrap();
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), events.len());
    // What the hypothesis commits comes first, then the experiment starts.
    assert_eq!(lines[0]["event"], "hypothesis");
    assert_eq!(lines[1]["event"], "experiment_started");
    let last = lines.last().unwrap();
    assert_eq!(last["event"], "experiment_finished");
    assert_eq!(last["outcome"]["row"]["status"], "keep");
}

/// The text the command line prints for a kept experiment, from its events (commit ids, the
/// temporary directory, the wall time and the host name, which vary, are replaced).
#[test]
fn the_text_of_a_kept_experiment() {
    let repo = Repo::new(16);
    let (o, events, _) = run(&repo, Step::Latency(10.0), Step::Latency(8.0));
    let (out, err) = render(&events);
    // -v: each run, the listing and the reasoning.
    let (verbose_out, verbose_err) = render_at(&events, ratchet::cli::ui::Verbosity::Verbose);
    let redact = |b: String| {
        b.replace(&o.row.commit[..8], "[candidate]")
            .replace(&o.row.incumbent[..8], "[incumbent]")
            .replace(&repo.path().display().to_string(), "[repo]")
            .replace(&format!("df on {})", ratchet::stats::history::host()), "df on [host])")
    };
    // Every wall time (each run's and the experiment's), which depends on the machine's load.
    let redact =
        |b: String| regex::Regex::new(r"(\(|processes, )[\d.]+ s\)").unwrap().replace_all(&redact(b), "${1}[wall] s)").into_owned();
    insta::assert_snapshot!("kept_stdout", redact(out));
    // The default's progress is the bar (none here): nothing else on stderr.
    assert_eq!(err, "");
    insta::assert_snapshot!("kept_stdout_verbose", redact(verbose_out));
    insta::assert_snapshot!("kept_stderr", redact(verbose_err));
}

/// The command line's text of these events: (stdout, stderr).
fn render(events: &[Event]) -> (String, String) {
    render_at(events, ratchet::cli::ui::Verbosity::Normal)
}

fn render_at(events: &[Event], v: ratchet::cli::ui::Verbosity) -> (String, String) {
    let mut ui = ratchet::cli::ui::Text::with_writers(Vec::new(), Vec::new()).with_verbosity(v);
    for e in events.iter().cloned() {
        ratchet::events::Events::emit(&mut ui, e);
    }
    let (out, err) = ui.into_writers();
    (String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap())
}

// Moved from tests/decisions/on_the_binary.rs, where they ran the binary and the fake Python benchmark: the
// same cases and assertions, in-process on the mock executor.

#[test]
fn big_gain_is_kept_early_and_confirmed() {
    let repo = Repo::new(16);
    let (o, events, _) = run(&repo, Step::Latency(10.0), Step::Latency(8.0));
    // -v says which phase measured which pair.
    assert!(render_at(&events, ratchet::cli::ui::Verbosity::Verbose).0.contains("why: 4 pairs + 4 confirming;"));
    assert_eq!(o.row.status, Status::Keep, "{:?}", o.row);
    // 4 pairs at the first look, well under the budget of 16, plus 4 confirmation pairs.
    assert_eq!(o.row.runs, 16);
    assert!(o.row.delta_pct.unwrap() > 15.0);
}

#[test]
fn failed_confirmation_is_not_kept_and_says_how_to_settle_it() {
    let repo = Repo::new(16);
    let base = repo.head();
    // Faster for the candidate's first 4 runs (the first look), as slow as the incumbent afterwards.
    let mut exec = MockExecutor::new(|c| match c.side {
        Side::Candidate if c.n < 4 => Step::Latency(8.0),
        _ => Step::Latency(10.0),
    });
    let (o, events) = repo.experiment(&mut exec, Cancel::new());
    let o = o.unwrap();
    check_common(&repo, &o, &events, &exec);
    let out = render(&events).0;
    assert!(out.contains("UNCONFIRMED") && out.contains("to settle it: ratchet retry 1 --pairs"), "{out}");
    assert_eq!(o.row.status, Status::Unconfirmed, "{:?}", o.row);
    assert!(o.row.note.contains("unconfirmed") && o.row.note.contains("--pairs"), "{}", o.row.note);
    assert!(o.row.confirm_delta_pct.unwrap().abs() < 3.0, "{:?}", o.row);
    // 4 + 4 pairs, then on to the rescue's 30 in all, whose t-test does not keep it.
    assert_eq!(o.row.runs, 60);
    assert!(o.row.note.contains("the rescue does not keep it either"), "{}", o.row.note);
    assert_eq!(repo.head(), base);
}

#[test]
fn a_run_beating_the_roofline_is_invalid() {
    let repo = Repo::new(16);
    let base = repo.head();
    // 1e13 FLOPs in 5 ms is 2000 TFLOP/s on a 197 TFLOP/s chip.
    let (o, events, exec) = run(&repo, Step::Latency(10.0), Step::Claims(5.0, 1e13));
    check_common(&repo, &o, &events, &exec);
    assert_eq!(o.row.status, Status::Invalid);
    assert!(o.row.note.contains("physics gate") && o.row.note.contains("of peak FLOP/s"), "{}", o.row.note);
    assert_eq!(repo.head(), base);
}

#[test]
fn throttled_runs_are_run_again_a_bounded_number_of_times() {
    // The binary tests' default config (score decides, 4 to 8 pairs) with throttle_reruns = 1.
    let repo = Repo::with_config(
        &config(8).replace("[score]\nmetric = \"latency\"\n", "").replace("timeout_s = 20", "timeout_s = 20\nthrottle_reruns = 1"),
    );
    let (o, events, exec) = run(&repo, Step::Latency(10.0), Step::Throttled(12.0));
    check_common(&repo, &o, &events, &exec);
    let runs = Workspace::discover(repo.path()).unwrap().store.runs().unwrap();
    let superseded = runs.iter().filter(|r| r.superseded).count();
    // Only the candidate reports throttling: each of its 4 runs once more, the first one superseded.
    assert_eq!(superseded, 4, "{runs:?}");
    assert_eq!(o.row.runs, 12);
    assert_eq!(o.row.status, Status::Revert);
}

#[test]
fn an_io_error_names_its_file() {
    let d = tempfile::tempdir().unwrap();
    let blocker = d.path().join("results");
    std::fs::write(&blocker, "a file where the results directory should be").unwrap();
    let store = ratchet::store::Store::new(&blocker);
    let row = ratchet::store::ResultRow::unmeasured(1, Status::Skipped, "exp: x", String::new(), String::new());
    let e = store.append_row(&row).unwrap_err();
    assert!(e.message.starts_with("I/O error on ") && e.message.contains(&blocker.display().to_string()), "{e}");
    let e = ratchet::fsutil::write_atomic(&blocker.join("x.json"), b"{}").unwrap_err();
    assert!(e.message.contains(&blocker.display().to_string()), "{e}");
}

/// `ratchet calibrate` of `pairs` A/A pairs on `exec`: its calibration.json's noise figures.
fn calibrated(repo: &Repo, pairs: u32, exec: &mut MockExecutor) -> serde_json::Value {
    let mut events = vec![];
    let ws = Workspace::discover(repo.path()).unwrap().lock("test", &mut events).unwrap();
    let mut fx = Effects::new(&mut events, Cancel::new());
    sweep::recover(&ws, &mut fx).unwrap();
    ratchet::calibrate::run(&ws, &ratchet::calibrate::CalibrateOptions { pairs: Some(pairs) }, exec, &mut fx).unwrap();
    let cal: serde_json::Value = serde_json::from_str(&repo.read("results/calibration.json")).unwrap();
    cal["noise"].clone()
}

#[test]
fn calibrates_suggestion_sets_a_rare_wild_run_aside_as_decisions_do() {
    // 1 run in 24 four times slower: its pair alone multiplies the plain sd of 12 pairs.
    let wild = |c: &ratchet::bench::mock::Call| Step::Latency(if c.side == Side::Incumbent && c.n == 5 { 40.0 } else { 10.0 });
    let noisy = calibrated(&Repo::new(16), 12, &mut MockExecutor::new(wild));
    let quiet = calibrated(&Repo::new(16), 12, &mut MockExecutor::sides(Step::Latency(10.0), Step::Latency(10.0)));
    let f = |v: &serde_json::Value, k: &str| v[k].as_f64().unwrap();
    assert!(f(&noisy, "pair_cv_pct") > 10.0 * f(&quiet, "pair_cv_pct"), "the case bites: {noisy} {quiet}");
    // The scale the suggestion is made at is the trimmed one decisions read: the wild pair is out.
    assert!(f(&noisy, "deciding_sd_pct") < 1.5 * f(&quiet, "deciding_sd_pct"), "{noisy} {quiet}");
    assert!(f(&noisy, "suggested_min_effect_pct") < 1.5 * f(&quiet, "suggested_min_effect_pct") + 0.2, "{noisy} {quiet}");
}

#[test]
fn calibrate_runs_a_a_pairs_on_the_mock_and_records_no_row() {
    let repo = Repo::new(16);
    let mut exec = MockExecutor::sides(Step::Latency(10.0), Step::Latency(10.0));
    let mut events = vec![];
    let ws = Workspace::discover(repo.path()).unwrap().lock("test", &mut events).unwrap();
    let opts = ratchet::calibrate::CalibrateOptions { pairs: Some(4) };
    let mut fx = Effects::new(&mut events, Cancel::new());
    sweep::recover(&ws, &mut fx).unwrap();
    ratchet::calibrate::run(&ws, &opts, &mut exec, &mut fx).unwrap();
    assert_eq!(exec.log.len(), 8);
    assert!(repo.statuses().is_empty());
    let cal: serde_json::Value = serde_json::from_str(&repo.read("results/calibration.json")).unwrap();
    assert_eq!(cal["values"].as_array().unwrap().len(), 8);
    assert!(cal["noise"]["pair_cv_pct"].as_f64().unwrap() > 0.0);
    let out = render(&events).0;
    assert!(out.starts_with("calibrate: 4 A/A pairs of "), "{out}");
    for says in ["run-to-run CV", "drift", "suggested [decision] min_effect_pct", "wrote ", "noise scale"] {
        assert!(out.contains(says), "{says}: {out}");
    }
    // 4 pairs are 3 df: the CV comes with its interval, which holds it, and a note that the
    // figures are rough and not borrowed.
    let noise = &cal["noise"];
    assert_eq!(noise["df"], 3);
    let (cv, lo, hi) = (
        noise["pair_cv_pct"].as_f64().unwrap(),
        noise["pair_cv_interval_pct"][0].as_f64().unwrap(),
        noise["pair_cv_interval_pct"][1].as_f64().unwrap(),
    );
    assert!(lo < cv && cv < hi && hi > 2.0 * cv, "{lo} {cv} {hi}");
    assert!(out.contains("(90% interval, 3 df)") && out.contains("3 df, too few to know the noise"), "{out}");
}

/// What varies from run to run in rendered text (commit ids, the temporary directory, wall
/// times, the host), replaced by fixed marks.
fn redact(text: &str, repo: &Repo) -> String {
    let text = text.replace(&repo.path().display().to_string(), "[repo]");
    let text = text.replace(&format!("df on {})", ratchet::stats::history::host()), "df on [host])");
    let text = regex::Regex::new(r"\b[0-9a-f]{8}\b").unwrap().replace_all(&text, "[sha]").into_owned();
    let text = regex::Regex::new(r"\((\d+h)?(\d+m)?[\d.]+s\)").unwrap().replace_all(&text, "([elapsed])").into_owned();
    let text = regex::Regex::new(r"runs in [\dhms.]+").unwrap().replace_all(&text, "runs in [wall]").into_owned();
    // The sweep's pace: its times (elapsed, left, a run's) depend on the machine's load.
    let time = regex::Regex::new(r"(\d+h)?(\d+m)?\d+(\.\d+)? ?s\b").unwrap();
    let text = regex::Regex::new(r"(?m)^  sweep: .*$")
        .unwrap()
        .replace_all(&text, |c: &regex::Captures| time.replace_all(&c[0], "[t]").into_owned())
        .into_owned();
    regex::Regex::new(r"processes, [\d.]+ s\)").unwrap().replace_all(&text, "processes, [wall] s)").into_owned()
}

/// The text of a sweep: each hypothesis's header and lines, and the summary.
#[test]
fn the_text_of_a_sweep() {
    let repo = Repo::new(16);
    for (name, from, to) in [
        ("01-faster.toml", "latency 10", "latency 8"),
        ("02-stale.toml", "latency 10", "latency 9"),
        ("03-crash.toml", "latency 8", "crash 3"),
    ] {
        repo.write(
            &format!("experiments/{name}"),
            &format!("message = \"exp: {name}\"\n[[edit]]\nfile = \"bench.mock\"\nfind = {from:?}\nreplace = {to:?}\n"),
        );
    }
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-qm", "queue"]);
    let mut exec = MockExecutor::from_checkout("bench.mock");
    let mut events = vec![];
    let ws = Workspace::discover(repo.path()).unwrap().lock("test", &mut events).unwrap();
    sweep::run(&ws, &SweepOptions::default(), &mut exec, &mut Effects::new(&mut events, Cancel::new())).unwrap();
    let (out, _) = render(&events);
    insta::assert_snapshot!("sweep_stdout", redact(&out, &repo));
}

/// A library caller that skips the recoveries is refused before anything is measured or
/// committed (a stopped sweep's edit would otherwise be committed under another message).
#[test]
fn measuring_before_the_recoveries_is_refused() {
    let repo = Repo::new(16);
    repo.write("kernel.py", "BQ = 256\n");
    let mut exec = MockExecutor::sides(Step::Latency(10.0), Step::Latency(9.0));
    let mut events = vec![];
    let ws = Workspace::discover(repo.path()).unwrap().lock("test", &mut events).unwrap();
    let mut fx = Effects::new(&mut events, Cancel::new());
    let opts = Options { message: "exp: BQ 256".into(), ..Default::default() };
    let e = experiment::run(&ws, &opts, &mut exec, &mut fx).unwrap_err();
    assert!(e.to_string().contains("before the workspace's recoveries"), "{e}");
    let cal = ratchet::calibrate::run(&ws, &ratchet::calibrate::CalibrateOptions { pairs: Some(4) }, &mut exec, &mut fx).unwrap_err();
    assert!(cal.to_string().contains("calibrate::run"), "{cal}");
    assert!(exec.log.is_empty(), "nothing may run: {:?}", exec.log);
    assert!(repo.statuses().is_empty());
    assert_eq!(repo.read("kernel.py"), "BQ = 256\n", "the edit stays in the tree, uncommitted");
}
