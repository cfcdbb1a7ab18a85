//! The parallel sweep's controller in process: an engine that runs each trial's
//! worker code in this process with the scripted [`MockExecutor`], finishing trials in the order
//! they were submitted, so the merge lane's scheduling is exact: the first winner merges, the
//! second (its trunk moved) is rechecked against the head once, then merges on top.

use crate::support;

use ratchet::bench::mock::{MockExecutor, Step};
use ratchet::error::Result;
use ratchet::events::{Effects, Event};
use ratchet::scale::engine::{Engine, JobHandle, JobState, TrialSpec};
use ratchet::scale::inline::InlineEngine;
use ratchet::scale::worker;
use ratchet::signals::Cancel;
use ratchet::sweep::SweepOptions;
use ratchet::workspace::Workspace;
use std::path::Path;
use support::git_in;

/// Latency 10 ms times the product of factors.env's `F<i>=x` lines, read in the run's checkout.
fn executor() -> MockExecutor {
    MockExecutor::new(|c| {
        let text = std::fs::read_to_string(c.dir.join("factors.env")).unwrap_or_default();
        let p: f64 = text.lines().filter_map(|l| l.split_once('=')).map(|(_, v)| v.parse::<f64>().unwrap()).product();
        Step::Latency(10.0 * p)
    })
}

/// The library's in-process engine on this file's executor.
type Inline = InlineEngine<MockExecutor>;

fn inline(capacity: usize) -> Inline {
    InlineEngine::new(capacity, executor())
}

fn hypothesis(dir: &Path, name: &str, i: usize, to: f64) {
    let text = format!("message = \"{name}\"\n[[edit]]\nfile = \"factors.env\"\nfind = \"F{i}=1.0\\n\"\nreplace = \"F{i}={to}\\n\"\n");
    std::fs::write(dir.join("experiments").join(format!("{name}.toml")), text).unwrap();
}

/// A repo whose queue holds `hyps` (name, factor index, new factor); returns the baseline commit.
fn setup(dir: &Path, hyps: &[(&str, usize, f64)]) -> String {
    git_in(dir, &["init", "-q", "-b", "main"]);
    git_in(dir, &["config", "user.name", "Test"]);
    git_in(dir, &["config", "user.email", "test@example.com"]);
    std::fs::write(
        dir.join("ratchet.toml"),
        // The earlier rule, whose decisions of 4 pairs and more build a history that trials borrow
        // within this queue (the default's 2-pair decisions add 1 df each).
        "[benchmark]\ncommand = \"true\"\nwarmup = 0\niters = 5\nprofile_iters = 0\n[decision]\nmethod = \"auto\"\nmin_pairs = 4\nmax_pairs = 8\nconfirm_pairs = 4\n[score]\nmetric = \"latency\"\n",
    )
    .unwrap();
    std::fs::write(dir.join("factors.env"), "F0=1.0\nF1=1.0\nF2=1.0\n").unwrap();
    std::fs::create_dir_all(dir.join("experiments")).unwrap();
    for &(name, i, to) in hyps {
        hypothesis(dir, name, i, to);
    }
    git_in(dir, &["add", "-A"]);
    git_in(dir, &["commit", "-qm", "baseline"]);
    git_in(dir, &["rev-parse", "HEAD"])
}

#[test]
fn a_trial_finished_before_the_controller_stopped_is_decided_from_its_run_directory() {
    std::env::set_var("GIT_CONFIG_NOSYSTEM", "1");
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let base = setup(dir, &[("01-half", 0, 0.5), ("02-faster", 1, 0.8)]);
    let cancel = Cancel::new();
    {
        let mut events: Vec<Event> = vec![];
        let ws = Workspace::discover(dir).unwrap().lock("test", &mut events).unwrap();
        // 01's worker finishes and is decided; 02's writes its result, then the controller stops.
        let mut engine = inline(2);
        engine.die_after = Some((2, cancel.clone()));
        let err = ratchet::scale::controller::run(&ws, &SweepOptions::default(), &mut engine, &mut Effects::new(&mut events, cancel))
            .unwrap_err();
        assert_eq!(err.kind, ratchet::error::Kind::Interrupted);
        assert_eq!(ws.store.rows().unwrap().len(), 1, "01 was recorded; 02's trial waits in the journal");
    }
    let mut events: Vec<Event> = vec![];
    let ws = Workspace::discover(dir).unwrap().lock("test", &mut events).unwrap();
    let mut engine = inline(2);
    let out =
        ratchet::scale::controller::run(&ws, &SweepOptions::default(), &mut engine, &mut Effects::new(&mut events, Cancel::new())).unwrap();
    // 02's finished trial was not run again: only its recheck against 01 was.
    assert_eq!(engine.argvs.len(), 1, "{:?}", engine.argvs);
    assert!(engine.argvs[0].iter().any(|a| a == "--recheck"));
    let rows = ws.store.rows().unwrap();
    assert_eq!(
        rows.iter().map(|r| (r.message.as_str(), r.status.as_str())).collect::<Vec<_>>(),
        [("01-half", "keep"), ("02-faster", "keep")]
    );
    assert_eq!(out.rows.len(), 1);
    assert_eq!(git_in(dir, &["log", "--format=%s", &format!("{base}..HEAD")]).lines().count(), 2);
}

#[test]
fn the_second_winner_is_rechecked_against_the_new_head_then_merges_on_top() {
    std::env::set_var("GIT_CONFIG_NOSYSTEM", "1");
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let base = setup(dir, &[("01-half", 0, 0.5), ("02-faster", 1, 0.8), ("03-slower", 2, 1.25)]);

    let mut events: Vec<Event> = vec![];
    let ws = Workspace::discover(dir).unwrap().lock("test", &mut events).unwrap();
    let mut engine = inline(2);
    let out =
        ratchet::scale::controller::run(&ws, &SweepOptions::default(), &mut engine, &mut Effects::new(&mut events, Cancel::new())).unwrap();

    let rows: Vec<_> = out.rows.iter().map(|r| (r.message.as_str(), r.status.as_str(), r.incumbent.clone(), r.commit.clone())).collect();
    assert_eq!(rows.len(), 3, "{rows:?}");
    // 01 and 02 both win against the base: 01 merges at once; 02 is stale, rechecked against 01
    // (the lane holds every other merge meanwhile) and merges; 03, started on 01, loses.
    assert_eq!((rows[0].0, rows[0].1), ("01-half", "keep"), "{rows:?}");
    assert_eq!(rows[0].2, base);
    assert_eq!((rows[1].0, rows[1].1), ("02-faster", "keep"), "{rows:?}");
    assert_eq!(rows[1].2, rows[0].3, "the stale winner was decided against the new head");
    assert!(out.rows[1].note.starts_with("stale winner: kept against"), "{}", out.rows[1].note);
    assert_eq!((rows[2].0, rows[2].1), ("03-slower", "revert"), "{rows:?}");
    let rechecks: Vec<_> = engine.argvs.iter().filter(|a| a.iter().any(|x| x == "--recheck")).collect();
    assert_eq!(rechecks.len(), 1, "one recheck, for the one stale winner");
    assert_eq!(engine.argvs.len(), 4);
    assert_eq!(events.iter().filter(|e| matches!(e, Event::StaleWinner { .. })).count(), 1);
    // Its row counts both trials' runs; runs.jsonl holds them under its id.
    let runs = ws.store.runs().unwrap();
    for r in &out.rows {
        assert_eq!(runs.iter().filter(|x| x.experiment == r.id.to_string()).count() as u32, r.runs, "{}", r.message);
    }
    // Every decision replays from runs.jsonl and its rule; the stale winner's from the
    // recheck's runs alone (the record names that trial).
    let refs: Vec<_> = out.rows.iter().collect();
    let replayed = ratchet::cli::replay::report(&refs, &runs, &ratchet::replay::records(&ws.store).unwrap());
    assert_eq!((replayed.same, replayed.differ, replayed.cannot), (3, 0, 0), "{}", replayed.body);
    let rule = ratchet::replay::records(&ws.store).unwrap().into_iter().find(|d| d.id == out.rows[1].id).unwrap();
    let trials: Vec<_> = runs.iter().filter(|x| x.experiment == out.rows[1].id.to_string()).filter_map(|x| x.trial.clone()).collect();
    assert_eq!(rule.trial.as_ref(), trials.last(), "{rule:?}");
    assert!(trials.iter().any(|t| Some(t) != rule.trial.as_ref()) && rule.with_sums, "{trials:?}");
    // The trunk: both kept commits, merged once each, on top of each other; the tree matches.
    let log = git_in(dir, &["log", "--format=%s", &format!("{base}..HEAD")]);
    assert_eq!(log.lines().collect::<Vec<_>>(), ["02-faster", "01-half"]);
    assert_eq!(std::fs::read_to_string(dir.join("factors.env")).unwrap(), "F0=0.5\nF1=0.8\nF2=1.0\n");
    assert_eq!(git_in(dir, &["status", "--porcelain"]), "");
    // The loser is parked as a serial sweep parks it.
    assert!(git_in(dir, &["for-each-ref", "refs/ratchet/discarded/"]).contains(&format!("discarded/{}", out.rows[2].id)));
    assert_eq!(git_in(dir, &["for-each-ref", "refs/ratchet/trials/"]), "");
}

/// The trunk's log from `base` (oldest first) and each row's (message, status, incumbent, commit).
fn trunk(dir: &Path, base: &str) -> Vec<String> {
    git_in(dir, &["log", "--reverse", "--format=%s", &format!("{base}..HEAD")]).lines().map(str::to_string).collect()
}

#[test]
fn a_trial_started_while_a_recheck_runs_is_measured_on_its_candidate_and_merges_without_one() {
    std::env::set_var("GIT_CONFIG_NOSYSTEM", "1");
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let base = setup(dir, &[("01-half", 0, 0.5), ("02-faster", 1, 0.8), ("03-faster", 2, 0.8)]);
    let mut events: Vec<Event> = vec![];
    let ws = Workspace::discover(dir).unwrap().lock("test", &mut events).unwrap();
    let mut engine = inline(2);
    let out =
        ratchet::scale::controller::run(&ws, &SweepOptions::default(), &mut engine, &mut Effects::new(&mut events, Cancel::new())).unwrap();
    // 01 and 02 win against the base; 01 merges, 02 is rechecked on 01. 03 starts while that
    // recheck runs, on the recheck's candidate (the head it would make), so once 02 merges, 03
    // was measured against the head and merges too, with no recheck of its own.
    let row = |m: &str| out.rows.iter().find(|r| r.message == m).unwrap();
    assert!(out.rows.iter().all(|r| r.status.as_str() == "keep"), "{:?}", out.rows);
    assert_eq!(engine.argvs.len(), 4, "three trials and one recheck: {:?}", engine.argvs);
    assert_eq!(engine.argvs.iter().filter(|a| a.iter().any(|x| x == "--recheck")).count(), 1);
    assert_eq!(row("02-faster").incumbent, row("01-half").commit);
    assert_eq!(row("03-faster").incumbent, row("02-faster").commit);
    assert!(!row("03-faster").note.starts_with("stale winner"), "{}", row("03-faster").note);
    assert_eq!(trunk(dir, &base), ["01-half", "02-faster", "03-faster"]);
    assert_eq!(std::fs::read_to_string(dir.join("factors.env")).unwrap(), "F0=0.5\nF1=0.8\nF2=0.8\n");
    assert_eq!(git_in(dir, &["for-each-ref", "refs/ratchet/trials/"]), "");
}

#[test]
fn a_recheck_not_kept_sends_the_winners_measured_on_its_candidate_back_to_the_head() {
    std::env::set_var("GIT_CONFIG_NOSYSTEM", "1");
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let base = setup(dir, &[("01-half", 0, 0.5), ("02-faster-alone", 1, 0.8), ("03-faster", 2, 0.8)]);
    // 02's change helps alone and slows the kernel once 01's is in (changes that interact).
    let exec = MockExecutor::new(|c| {
        let text = std::fs::read_to_string(c.dir.join("factors.env")).unwrap_or_default();
        let f: Vec<f64> = text.lines().filter_map(|l| l.split_once('=')).map(|(_, v)| v.parse::<f64>().unwrap()).collect();
        let f1 = if f[0] == 1.0 { f[1] } else { 1.0 / f[1] };
        Step::Latency(10.0 * f[0] * f1 * f[2])
    });
    let mut events: Vec<Event> = vec![];
    let ws = Workspace::discover(dir).unwrap().lock("test", &mut events).unwrap();
    let mut engine = InlineEngine::new(2, exec);
    let out =
        ratchet::scale::controller::run(&ws, &SweepOptions::default(), &mut engine, &mut Effects::new(&mut events, Cancel::new())).unwrap();
    let row = |m: &str| out.rows.iter().find(|r| r.message == m).unwrap();
    // 02's recheck on 01 is not kept, so 03 (measured on 02's candidate) is stale: it is
    // rechecked against the head, 01, and merges there.
    assert_eq!(row("01-half").status.as_str(), "keep");
    assert_eq!(row("02-faster-alone").status.as_str(), "revert", "{:?}", row("02-faster-alone"));
    assert_eq!(row("03-faster").status.as_str(), "keep");
    assert_eq!(row("03-faster").incumbent, row("01-half").commit, "decided against the head it merged onto");
    assert!(row("03-faster").note.starts_with("stale winner"), "{}", row("03-faster").note);
    assert_eq!(engine.argvs.iter().filter(|a| a.iter().any(|x| x == "--recheck")).count(), 2);
    assert_eq!(trunk(dir, &base), ["01-half", "03-faster"]);
    assert_eq!(std::fs::read_to_string(dir.join("factors.env")).unwrap(), "F0=0.5\nF1=1.0\nF2=0.8\n");
    // Every run of a row is in runs.jsonl under its id (03's: its first trial's and its recheck's).
    let runs = ws.store.runs().unwrap();
    for r in &out.rows {
        assert_eq!(runs.iter().filter(|x| x.experiment == r.id.to_string()).count() as u32, r.runs, "{}", r.message);
    }
}

#[test]
fn trials_borrow_the_devices_history_with_its_log_sums_as_the_serial_loop_does() {
    borrowing_sweep(&ratchet::stats::history::host());
}

/// A cluster's trials, whose node is not known before they start, borrow and feed the history
/// of the kind of device their request names, as a local slot's trials do its device's.
#[test]
fn cluster_trials_borrow_the_history_of_their_kind_of_device() {
    borrowing_sweep("slurm partition=gpu gres=gpu:1");
}

/// A sweep on one slot whose engine names `device` as each trial's: every decided trial enters
/// that device's history, and once it holds enough the trials borrow it.
fn borrowing_sweep(device: &str) {
    std::env::set_var("GIT_CONFIG_NOSYSTEM", "1");
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    // One slot, so each trial starts after the one before it entered the history. Enough of
    // them for the sums' spread to reach its 10 df (each session's first step is its warm-up,
    // not spread).
    let hyps = [
        ("01-faster", 0, 0.8),
        ("02-slower", 1, 1.25),
        ("03-slower", 1, 1.3),
        ("04-slower", 2, 1.25),
        ("05-faster", 2, 0.8),
        ("06-slower", 1, 1.35),
        ("07-slower", 1, 1.2),
        ("08-slower", 1, 1.4),
        ("09-faster", 1, 0.8),
    ];
    setup(dir, &hyps);
    let mut events: Vec<Event> = vec![];
    let ws = Workspace::discover(dir).unwrap().lock("test", &mut events).unwrap();
    let mut engine = inline(1);
    engine.device = Some(device.to_string());
    let out =
        ratchet::scale::controller::run(&ws, &SweepOptions::default(), &mut engine, &mut Effects::new(&mut events, Cancel::new())).unwrap();
    assert_eq!(
        out.rows.iter().map(|r| r.status.as_str()).collect::<Vec<_>>(),
        ["keep", "revert", "revert", "revert", "keep", "revert", "revert", "revert", "keep"]
    );
    // Every decided trial entered the device's history with its log-sums beside its log-ratios,
    // as the serial loop's experiments do: their spread, and the first phase's first step as its
    // warm-up (a trial of 2 pairs has that step alone).
    let noise: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join(".ratchet/noise.json")).unwrap()).unwrap();
    let benchmarks = noise["benchmarks"].as_array().unwrap();
    assert_eq!(benchmarks.len(), 1, "{noise}");
    assert!(benchmarks[0]["command"].as_str().unwrap().ends_with(&format!(" on {device}")), "{noise}");
    let entries: Vec<&serde_json::Value> = benchmarks.iter().flat_map(|b| b["entries"].as_array().unwrap()).collect();
    assert_eq!(entries.len(), hyps.len(), "{noise}");
    assert!(entries.iter().all(|e| e["warmup"].as_array().is_some_and(|w| w.len() == 1)), "{noise}");
    assert!(entries.iter().any(|e| e["sum_df"].as_f64().unwrap_or(0.0) > 0.0), "{noise}");
    // Once the history holds enough, a worker is handed both scales, its guard reads both, and
    // the decision is rebuilt from the same pairs and sums.
    let borrowing: Vec<usize> = (0..engine.argvs.len()).filter(|&i| engine.argvs[i].iter().any(|a| a == "--sums-scale")).collect();
    assert!(!borrowing.is_empty() && borrowing.iter().all(|&i| engine.argvs[i].iter().any(|a| a == "--noise-scale")), "{:?}", engine.argvs);
    let last = engine.argvs.len() - 1;
    assert!(borrowing.contains(&last), "the last trial borrows: {:?}", engine.argvs[last]);
    let arg = |k: &str| engine.argvs[last].iter().position(|a| a == k).map(|i| worker::parse_noise(&engine.argvs[last][i + 1]).unwrap());
    let trial = ratchet::scale::trial::TrialResult::read(&dir.join(".ratchet/trials").join(format!("t{}", last + 1))).unwrap().unwrap();
    assert_eq!((trial.noise_scale, trial.sums_scale), (arg("--noise-scale"), arg("--sums-scale")));
    assert!(!trial.main_sums.is_empty() && trial.main_sums.len() == trial.main.len() && trial.confirm_sums.len() == trial.confirm.len());
    let records = ratchet::replay::records(&ws.store).unwrap();
    let rule = records.iter().find(|r| r.id == out.rows[last].id).unwrap();
    assert!(rule.with_sums && rule.sums == trial.sums_scale && rule.borrowed == trial.noise_scale, "{rule:?}");
    let refs: Vec<_> = out.rows.iter().collect();
    let replayed = ratchet::cli::replay::report(&refs, &ws.store.runs().unwrap(), &records);
    assert_eq!((replayed.same, replayed.differ, replayed.cannot), (hyps.len(), 0, 0), "{}", replayed.body);
}

/// An engine whose polls fail (as a scheduler that times out would) from the `from`-th poll on,
/// `failures` times in a row, then answer as `inner` does.
struct Flaky {
    inner: Inline,
    polls: usize,
    from: usize,
    failures: usize,
}

impl Engine for Flaky {
    fn name(&self) -> &str {
        "flaky"
    }
    fn capacity(&self) -> usize {
        self.inner.capacity()
    }
    fn submit(&mut self, trials: &[TrialSpec], worker: &[Vec<String>]) -> Result<Vec<JobHandle>> {
        self.inner.submit(trials, worker)
    }
    fn poll(&mut self, job: &JobHandle) -> Result<JobState> {
        self.polls += 1;
        if self.polls > self.from && self.failures > 0 {
            self.failures -= 1;
            return Err(ratchet::error::Error::new(ratchet::error::Kind::Infrastructure, "squeue: Socket timed out on send/recv"));
        }
        self.inner.poll(job)
    }
    fn cancel(&mut self, job: &JobHandle) -> Result<()> {
        self.inner.cancel(job)
    }
}

fn flaky_sweep(dir: &Path, grace_s: f64, from: usize, failures: usize) -> (Result<ratchet::outcome::SweepOutcome>, Vec<Event>) {
    let cfg = std::fs::read_to_string(dir.join("ratchet.toml")).unwrap();
    std::fs::write(dir.join("ratchet.toml"), format!("{cfg}[engine]\npoll_grace_s = {grace_s}\n")).unwrap();
    git_in(dir, &["commit", "-qam", "poll grace"]);
    let mut events: Vec<Event> = vec![];
    let ws = Workspace::discover(dir).unwrap().lock("test", &mut events).unwrap();
    let inner = inline(2);
    let mut engine = Flaky { inner, polls: 0, from, failures };
    let out = ratchet::scale::controller::run(&ws, &SweepOptions::default(), &mut engine, &mut Effects::new(&mut events, Cancel::new()));
    (out, events)
}

fn notes(events: &[Event]) -> Vec<String> {
    events.iter().filter_map(|e| if let Event::Note { text } = e { Some(text.clone()) } else { None }).collect()
}

#[test]
fn polls_that_fail_for_a_while_are_asked_again_and_the_sweep_goes_on() {
    std::env::set_var("GIT_CONFIG_NOSYSTEM", "1");
    let d = tempfile::tempdir().unwrap();
    setup(d.path(), &[("01-half", 0, 0.5), ("02-slower", 1, 1.25)]);
    let (out, events) = flaky_sweep(d.path(), 2.0, 1, 3);
    let out = out.unwrap();
    let statuses: Vec<_> = out.rows.iter().map(|r| r.status.as_str()).collect();
    assert_eq!(statuses, ["keep", "revert"], "{:?}", notes(&events));
    let notes = notes(&events);
    assert!(notes.iter().any(|n| n.starts_with("polling flaky failed: squeue: Socket timed out") && n.contains("up to 2 s")), "{notes:?}");
    assert!(notes.iter().any(|n| n.starts_with("flaky answers again, after")), "{notes:?}");
}

#[test]
fn polls_failing_past_the_grace_stop_the_sweep_with_the_engines_error() {
    std::env::set_var("GIT_CONFIG_NOSYSTEM", "1");
    let d = tempfile::tempdir().unwrap();
    setup(d.path(), &[("01-half", 0, 0.5), ("02-slower", 1, 1.25)]);
    let (out, _) = flaky_sweep(d.path(), 0.5, 0, usize::MAX);
    let err = out.unwrap_err();
    assert_eq!(err.kind, ratchet::error::Kind::Infrastructure);
    assert!(err.message.contains("Socket timed out") && err.message.contains("polls failed for"), "{err:?}");
    // Nothing half-done: no row, and the trials run again on resume.
    assert!(Workspace::discover(d.path()).unwrap().store.rows().unwrap().is_empty());
}

#[path = "../../benches/common/history.rs"]
mod history;

/// The sweep of `dir`'s queue on two in-process slots: the controller's own cost (its workers'
/// left out) and the rows it recorded.
fn costed_sweep(dir: &Path) -> (ratchet::scale::inline::Cost, usize) {
    let mut events: Vec<Event> = vec![];
    let ws = Workspace::discover(dir).unwrap().lock("test", &mut events).unwrap();
    let mut engine = inline(2);
    let before = ratchet::scale::inline::Cost::of_this_thread();
    let out =
        ratchet::scale::controller::run(&ws, &SweepOptions::default(), &mut engine, &mut Effects::new(&mut events, Cancel::new())).unwrap();
    // The thread's, less its in-process workers'.
    let own = ratchet::scale::inline::Cost::of_this_thread().since(before).since(engine.workers);
    (own, out.rows.len())
}

#[test]
fn the_controller_reads_the_history_once_a_sweep_and_syncs_the_same_at_any_size() {
    std::env::set_var("GIT_CONFIG_NOSYSTEM", "1");
    let hyps = [("01-half", 0, 0.5), ("02-slower", 1, 1.25), ("03-slower", 2, 1.3)];
    let (small, big) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    setup(small.path(), &hyps);
    let (fresh, n) = costed_sweep(small.path());
    assert_eq!(n, 3);
    // Other files: the history's rows do not mark these done.
    setup(big.path(), &[("11-half", 0, 0.5), ("12-slower", 1, 1.25), ("13-slower", 2, 1.3)]);
    let (csv, runs) = history::grow(small.path(), big.path(), 1_500);
    let (long, n) = costed_sweep(big.path());
    assert_eq!(n, 3);
    assert!(runs > 4 * csv && runs > 2_000_000, "a history whose runs outweigh its table: {csv} B, {runs} B");
    // The table is read when the queue opens; runs.jsonl and the parked refs are never read whole
    // for a trial (each trial once read the table three times and runs.jsonl once).
    let extra = long.read_bytes.saturating_sub(fresh.read_bytes);
    assert!(extra < 2 * csv + 512 * 1024, "{extra} B more read over a history of {csv} B of rows and {runs} B of runs");
    assert_eq!(long.syncs, fresh.syncs, "fsyncs do not depend on the history");
    // About 14 for the sweep (its lock, the Python helpers) and 8-10 a trial: journal steps, the
    // decision, the runs in one append, the row, the noise history (a trial once took 28).
    assert!(fresh.syncs <= 14 + 10 * 3, "{} fsyncs for 3 trials", fresh.syncs);
}

/// An engine whose first trial polls as stuck, and whose stop of that job ends only after the
/// controller has asked after it `hold` times: what the controller did meanwhile is counted.
struct SlowStop {
    inner: Inline,
    state: std::path::PathBuf,
    stuck: Option<String>,
    hold: usize,
    /// Polls of other jobs while the stop was under way, and whether the journal named the
    /// stopped trial then.
    polls_while_stopping: usize,
    journaled_while_stopping: bool,
    stop_ended: bool,
    /// Jobs submitted and not yet over (finished, failed or their stop ended), at each submit.
    live: std::collections::HashSet<String>,
    most_live: usize,
}

impl Engine for SlowStop {
    fn name(&self) -> &str {
        "slow-stop"
    }
    fn capacity(&self) -> usize {
        self.inner.capacity()
    }
    fn submit(&mut self, trials: &[TrialSpec], worker: &[Vec<String>]) -> Result<Vec<JobHandle>> {
        let handles = self.inner.submit(trials, worker)?;
        self.stuck.get_or_insert_with(|| handles[0].engine_id.clone());
        self.live.extend(handles.iter().map(|h| h.engine_id.clone()));
        self.most_live = self.most_live.max(self.live.len());
        Ok(handles)
    }
    fn poll(&mut self, job: &JobHandle) -> Result<JobState> {
        if self.stuck.as_ref() == Some(&job.engine_id) {
            return Ok(JobState::Stuck("held by the test".into()));
        }
        if self.hold > 0 && !self.stop_ended && self.live.contains(self.stuck.as_ref().unwrap()) {
            self.polls_while_stopping += 1;
        }
        let state = self.inner.poll(job)?;
        if matches!(state, JobState::Finished | JobState::Failed(_)) {
            self.live.remove(&job.engine_id);
        }
        Ok(state)
    }
    fn cancel(&mut self, job: &JobHandle) -> Result<()> {
        self.inner.cancel(job)
    }
    /// Asked at once (the in-process engine runs its trials in turn, so it must drop this
    /// one); only its end is held.
    fn stop(&mut self, job: &JobHandle) -> Result<()> {
        self.inner.cancel(job)
    }
    fn stopped(&mut self, job: &JobHandle) -> Result<bool> {
        if self.hold > 0 {
            self.hold -= 1;
            let journal = std::fs::read_to_string(self.state.join("scale.json")).unwrap_or_default();
            let v: serde_json::Value = serde_json::from_str(&journal).unwrap_or_default();
            let named = v["stopping"].as_array().is_some_and(|s| s.iter().any(|t| t["handle"]["engine_id"] == job.engine_id.as_str()));
            self.journaled_while_stopping = named;
            return Ok(false);
        }
        self.stop_ended = true;
        self.live.remove(&job.engine_id);
        Ok(true)
    }
}

#[test]
fn a_stuck_trials_stop_runs_beside_the_controller_and_holds_its_slot_until_it_ends() {
    std::env::set_var("GIT_CONFIG_NOSYSTEM", "1");
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    setup(dir, &[("01-half", 0, 0.5), ("02-slower", 1, 1.25), ("03-faster", 2, 0.8)]);
    // A cluster's settings (the engine itself is this file's: the hook commands never run).
    let cfg = std::fs::read_to_string(dir.join("ratchet.toml")).unwrap();
    std::fs::write(
        dir.join("ratchet.toml"),
        format!("{cfg}[engine]\nkind = \"hook\"\nsubmit = \"false\"\npoll = \"false\"\ncancel = \"false\"\nstuck_limit_s = 0\n"),
    )
    .unwrap();
    git_in(dir, &["commit", "-qam", "stuck limit"]);
    let mut events: Vec<Event> = vec![];
    let ws = Workspace::discover(dir).unwrap().lock("test", &mut events).unwrap();
    let mut engine = SlowStop {
        inner: inline(2),
        state: ws.state_dir.clone(),
        stuck: None,
        hold: 50,
        polls_while_stopping: 0,
        journaled_while_stopping: false,
        stop_ended: false,
        live: Default::default(),
        most_live: 0,
    };
    let out =
        ratchet::scale::controller::run(&ws, &SweepOptions::default(), &mut engine, &mut Effects::new(&mut events, Cancel::new())).unwrap();
    // The stuck trial was lost and started again; every hypothesis was decided.
    let mut decided: Vec<_> = out.rows.iter().map(|r| r.message.as_str()).collect();
    decided.sort();
    assert_eq!(decided, ["01-half", "02-slower", "03-faster"], "{:?}", notes(&events));
    assert!(notes(&events).iter().any(|n| n.contains("was lost") && n.contains("held by the test")), "{:?}", notes(&events));
    // While its stop was under way the controller polled the other trials, the journal named
    // the stopped trial, and the stopped job kept its slot: never more than two jobs at once.
    assert!(engine.stop_ended);
    assert!(engine.polls_while_stopping > 0, "the controller waited on the stop");
    assert!(engine.journaled_while_stopping, "the journal did not name the trial being stopped");
    assert_eq!(engine.most_live, 2);
    let journal = std::fs::read_to_string(ws.state_dir.join("scale.json")).unwrap_or_default();
    assert!(!journal.contains("\"stopping\""), "{journal}");
}

#[test]
fn recovery_cancels_again_a_job_the_journal_left_stopping() {
    std::env::set_var("GIT_CONFIG_NOSYSTEM", "1");
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    setup(dir, &[("01-half", 0, 0.5)]);
    let log = dir.join("cancelled");
    let cfg = std::fs::read_to_string(dir.join("ratchet.toml")).unwrap();
    let cancel = format!("echo \\\"$RATCHET_JOB\\\" >> {}", log.display());
    std::fs::write(
        dir.join("ratchet.toml"),
        format!("{cfg}[engine]\nkind = \"hook\"\nsubmit = \"false\"\npoll = \"false\"\ncancel = \"{cancel}\"\n"),
    )
    .unwrap();
    git_in(dir, &["commit", "-qam", "hook engine"]);
    // A controller killed while a stop it asked for was under way.
    let ws = Workspace::discover(dir).unwrap();
    let out = dir.join("runs-t9");
    let trial = serde_json::json!({
        "spec": { "id": "t9", "repo": dir, "incumbent": "1".repeat(40), "candidate": "2".repeat(40), "out_dir": out },
        "handle": { "trial": "t9", "engine_id": "job-9", "slot": null },
        "engine": "hook",
        "hypothesis": "01-half.toml@x",
        "first": null
    });
    std::fs::create_dir_all(&ws.state_dir).unwrap();
    std::fs::write(ws.state_dir.join("scale.json"), serde_json::json!({ "next_trial": 10, "stopping": [trial] }).to_string()).unwrap();
    assert!(ratchet::scale::controller::in_flight(&ws.state_dir).is_some_and(|s| s.starts_with("1 unfinished")));
    let mut events: Vec<Event> = vec![];
    ratchet::scale::controller::recover(&ws, &mut Effects::new(&mut events, Cancel::new())).unwrap();
    assert_eq!(std::fs::read_to_string(&log).unwrap().trim(), "job-9");
    let journal = std::fs::read_to_string(ws.state_dir.join("scale.json")).unwrap();
    assert!(!journal.contains("job-9"), "{journal}");
    assert_eq!(ratchet::scale::controller::in_flight(&ws.state_dir), None);
}
