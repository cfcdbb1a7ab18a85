//! The sequential test's looks are recorded with the decision (statistic, boundaries,
//! phase, scale at each look), written beside the runs as a small versioned JSON file, and drawn
//! as a chart of the statistic against its boundaries. In-process on the mock executor (exact).

use crate::support;

use ratchet::bench::mock::{MockExecutor, Step};
use ratchet::events::{Effects, Event};
use ratchet::experiment::{self, Options, Outcome};
use ratchet::outcome::{read_looks, LOOKS_FILE};
use ratchet::signals::Cancel;
use ratchet::stats::{Decision, Look, LookPhase, Verdict};
use ratchet::store::Status;
use ratchet::sweep;
use ratchet::workspace::Workspace;
use std::path::{Path, PathBuf};

struct Repo {
    dir: tempfile::TempDir,
    n: u32,
}

impl Repo {
    fn new(max_pairs: u32) -> Repo {
        support::isolate_git();
        let r = Repo { dir: tempfile::tempdir().unwrap(), n: 0 };
        let config = format!(
            "[benchmark]\ncommand = \"true\"\ntimeout_s = 20\nkill_grace_s = 0.5\nwarmup = 0\niters = 5\nprofile_iters = 0\n\
             [hardware]\npreset = \"tpu-v5e\"\n[decision]\nmethod = \"sequential\"\nmin_pairs = 4\nmax_pairs = {max_pairs}\nconfirm_pairs = 4\n\
             [score]\nmetric = \"latency\"\n"
        );
        std::fs::write(r.path().join("ratchet.toml"), config).unwrap();
        std::fs::write(r.path().join("kernel.py"), "BQ = 128\n").unwrap();
        for args in [
            &["init", "-q", "-b", "main"][..],
            &["config", "user.name", "Test"],
            &["config", "user.email", "t@example.com"],
            &["add", "-A"],
            &["commit", "-qm", "baseline"],
        ] {
            let out = std::process::Command::new("git").args(args).current_dir(r.path()).output().unwrap();
            assert!(out.status.success(), "git {args:?}");
        }
        r
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn experiment(&mut self, exec: &mut MockExecutor) -> Outcome {
        self.n += 1;
        std::fs::write(self.path().join("kernel.py"), format!("BQ = {}\n", 128 + self.n)).unwrap();
        let mut events: Vec<Event> = vec![];
        let ws = Workspace::discover(self.path()).unwrap().lock("test", &mut events).unwrap();
        let mut fx = Effects::new(&mut events, Cancel::new());
        sweep::recover(&ws, &mut fx).unwrap();
        let opts = Options { message: format!("exp: BQ {}", 128 + self.n), ..Default::default() };
        experiment::run(&ws, &opts, exec, &mut fx).unwrap()
    }

    fn exp_dir(&self, id: u64) -> PathBuf {
        self.path().join(".ratchet/experiments").join(id.to_string())
    }
}

fn phase(d: &Decision, p: LookPhase) -> Vec<&Look> {
    d.trail.iter().filter(|l| l.phase == p).collect()
}

/// The record on disk is the decision's trail, and the trail agrees with the decision: as many
/// looks per phase as it says, ending at its pairs, and every look but the deciding one between
/// its boundaries (the test went on there).
fn check_record(repo: &Repo, o: &Outcome) -> Vec<Look> {
    let d = o.decision.as_ref().expect("decided by the test");
    let rec = read_looks(&repo.exp_dir(o.row.id)).unwrap().expect("looks.json written beside the runs");
    assert!(repo.exp_dir(o.row.id).join("runs").is_dir(), "beside the runs");
    assert_eq!((rec.version, rec.experiment, rec.verdict), (1, o.row.id, d.verdict));
    // As decided, to the last bit that JSON's decimal text carries back.
    assert_eq!(rec.looks.len(), d.trail.len());
    for (a, b) in rec.looks.iter().zip(&d.trail) {
        assert_eq!((a.phase, a.look, a.pairs, a.tested, &a.scale), (b.phase, b.look, b.pairs, b.tested, &b.scale));
        let close = |x: f64, y: f64| (x - y).abs() <= 1e-12 * x.abs().max(1.0);
        let opt = |x: Option<f64>, y: Option<f64>| match (x, y) {
            (Some(x), Some(y)) => close(x, y),
            (x, y) => x == y,
        };
        assert!(
            close(a.estimate_pct, b.estimate_pct) && close(a.se_pct, b.se_pct) && close(a.alpha, b.alpha) && close(a.df, b.df),
            "{a:?} vs {b:?}"
        );
        assert!(
            opt(a.statistic, b.statistic) && opt(a.keep_boundary, b.keep_boundary) && opt(a.revert_boundary, b.revert_boundary),
            "{a:?} vs {b:?}"
        );
    }
    let main = phase(d, LookPhase::Decision);
    assert_eq!(main.len(), d.looks);
    assert_eq!(main.last().unwrap().pairs, d.pairs);
    assert_eq!(main.iter().map(|l| l.look).collect::<Vec<_>>(), (1..=d.looks).collect::<Vec<_>>());
    let conf = phase(d, LookPhase::Confirmation);
    match &d.confirmation {
        Some(c) => assert_eq!((conf.len(), conf.last().unwrap().pairs), (c.looks, c.pairs)),
        None => assert!(conf.is_empty()),
    }
    for l in &d.trail[..d.trail.len() - 1] {
        if l.phase == LookPhase::Decision && !conf.is_empty() && l == *main.last().unwrap() {
            continue; // the first phase's promising look
        }
        let t = l.statistic.unwrap();
        assert!(t < l.keep_boundary.unwrap(), "{l:?}");
        assert!(l.revert_boundary.is_none_or(|r| t >= r), "{l:?}");
    }
    rec.looks
}

#[test]
fn a_keep_records_its_looks_and_the_confirmation_that_decided() {
    let mut repo = Repo::new(16);
    let o = repo.experiment(&mut MockExecutor::sides(Step::Latency(10.0), Step::Latency(8.0)));
    assert_eq!(o.row.status, Status::Keep);
    let looks = check_record(&repo, &o);
    let d = o.decision.as_ref().unwrap();
    // Promising at the first look (4 pairs), confirmed by the 4-pair batch: two looks.
    assert_eq!(looks.len(), 2);
    let (first, last) = (&looks[0], &looks[1]);
    assert_eq!((first.phase, first.pairs, last.phase, last.pairs), (LookPhase::Decision, 4, LookPhase::Confirmation, 4));
    assert!(first.statistic.unwrap() >= first.keep_boundary.unwrap(), "{first:?}");
    assert!(last.statistic.unwrap() >= last.keep_boundary.unwrap(), "{last:?}");
    // The numbers are the decision's: the level spent and the scale of each look.
    assert_eq!(first.alpha, d.p_threshold);
    assert_eq!(last.alpha, d.confirmation.as_ref().unwrap().alpha);
    assert_eq!(first.scale, d.scale);
    assert_eq!(first.scale, "own", "the first experiment has no history to borrow");
    // The estimate at the first look is the 25% speed-up the mock was set to.
    assert!((first.estimate_pct - 25.0).abs() < 2.0, "{first:?}");
    // The last confirmation look can only confirm or fail: one boundary.
    assert_eq!(last.revert_boundary, last.keep_boundary);
}

#[test]
fn a_revert_ends_below_its_revert_boundary_and_has_no_confirmation() {
    let mut repo = Repo::new(16);
    let o = repo.experiment(&mut MockExecutor::sides(Step::Latency(10.0), Step::Latency(10.5)));
    assert_eq!(o.row.status, Status::Revert);
    let looks = check_record(&repo, &o);
    let last = looks.last().unwrap();
    assert_eq!(last.phase, LookPhase::Decision);
    assert!(last.statistic.unwrap() < last.revert_boundary.unwrap(), "{last:?}");
}

#[test]
fn an_undecided_first_phase_ends_at_the_rescue_s_look_and_later_experiments_borrow_the_scale() {
    let mut repo = Repo::new(8);
    // A 4% gain in 5% iteration noise: neither clear nor futile within 8 pairs (with the mock's
    // seeded draws in the run order BA, AB, AB, BA; 2% was that in the order before it).
    let mut exec = MockExecutor::sides(Step::Latency(10.0), Step::Latency(9.6));
    exec.cv = 0.05;
    let o = repo.experiment(&mut exec);
    let looks = check_record(&repo, &o);
    // Interim looks at 4, 6, 8 pairs (min_pairs 4, a look every 2), the last between its
    // boundaries (inconclusive), then the rescue's one look over all 24 pairs (twice the
    // 8 + 4 the phases could measure), below its keep boundary: inconclusive still.
    assert_eq!(
        looks.iter().map(|l| (l.phase, l.pairs)).collect::<Vec<_>>(),
        [(LookPhase::Decision, 4), (LookPhase::Decision, 6), (LookPhase::Decision, 8), (LookPhase::Rescue, 24)]
    );
    let phases_last = &looks[2];
    let t = phases_last.statistic.unwrap();
    assert!(t < phases_last.keep_boundary.unwrap() && t >= phases_last.revert_boundary.unwrap(), "{phases_last:?}");
    let rescue = looks.last().unwrap();
    assert!(rescue.statistic.unwrap() < rescue.keep_boundary.unwrap(), "{rescue:?}");
    assert_eq!(rescue.revert_boundary, rescue.keep_boundary, "the rescue's one look keeps or not");
    // Its own t-test over the pairs it read: all 24 less any over 4 of their robust sds out.
    assert_eq!((rescue.alpha, rescue.scale.as_str(), rescue.df), (0.0001, "own", rescue.tested as f64 - 1.0));
    assert!(rescue.tested >= 22, "{rescue:?}");
    assert_eq!(o.row.status, Status::Inconclusive);
    assert!(o.row.note.contains("the rescue does not keep it either"), "{}", o.row.note);
    // The row's estimate is every pair's: the rescue's look's.
    let d = o.decision.as_ref().unwrap();
    assert!((d.effect_pct - rescue.estimate_pct).abs() < 1e-9, "{} {}", d.effect_pct, rescue.estimate_pct);
    // Once the noise history holds 10 df (the rescue's 24 pairs are enough), the next
    // experiment borrows it: its looks say so, each with the decision's scale.
    let o3 = repo.experiment(&mut MockExecutor::sides(Step::Latency(10.0), Step::Latency(8.0)));
    let looks3 = check_record(&repo, &o3);
    assert_eq!(o3.decision.as_ref().unwrap().verdict, Verdict::Keep);
    assert_eq!(looks3[0].scale, "history", "{looks3:?}");
    assert_eq!(looks3[0].scale, o3.decision.as_ref().unwrap().scale);
    // With a borrowed scale the first look comes after 2 pairs.
    assert_eq!(looks3[0].pairs, 2, "{looks3:?}");
}

#[test]
fn an_experiment_not_decided_by_the_test_writes_no_record() {
    let mut repo = Repo::new(16);
    let hlo = "HloModule jit_kernel\nENTRY main { ROOT x = f32[] constant(1) }\n".to_string();
    let o = repo.experiment(&mut MockExecutor::sides(Step::Hlo(10.0, hlo.clone()), Step::Hlo(10.0, hlo)));
    assert_eq!(o.row.status, Status::NoOp);
    assert!(!repo.exp_dir(1).join(LOOKS_FILE).exists());
    // An old experiment (no file): no record, no error.
    assert_eq!(read_looks(&repo.exp_dir(1)).unwrap(), None);
    assert_eq!(read_looks(&repo.path().join("no/such/dir")).unwrap(), None);
}

#[test]
fn a_record_of_another_version_is_refused_with_its_name() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join(LOOKS_FILE), r#"{"version": 9, "looks": []}"#).unwrap();
    let e = read_looks(d.path()).unwrap_err();
    assert!(e.message.contains(LOOKS_FILE) && e.message.contains("version"), "{}", e.message);
    std::fs::write(d.path().join(LOOKS_FILE), "{not json").unwrap();
    assert!(read_looks(d.path()).unwrap_err().message.contains("not JSON"));
}

#[test]
fn the_chart_draws_the_statistic_against_both_boundaries_and_rings_the_deciding_look() {
    let mut repo = Repo::new(16);
    let o = repo.experiment(&mut MockExecutor::sides(Step::Latency(10.0), Step::Latency(8.0)));
    let rec = o.looks_record().unwrap();
    let svg = ratchet::plot::looks_svg(&rec).unwrap();
    assert!(svg.contains(&format!("experiment {}: the sequential test", o.row.id)), "{svg}");
    for label in ["keep boundary", "revert boundary", "statistic, decision phase", "statistic, confirmation batch", "confirmation"] {
        assert!(svg.contains(label), "no {label:?} in the chart");
    }
    assert!(svg.contains("decided: keep at confirmation look 1 (4 pairs)"), "{svg}");
    assert!(svg.contains("first phase: promising"), "{svg}");
    // One filled dot per look (2), plus the legend's; two rings (deciding look, promising look).
    let circles: Vec<&str> = svg.split("<circle").skip(1).map(|c| c.split('>').next().unwrap()).collect();
    let rings = circles.iter().filter(|c| c.contains("fill=\"none\"") && c.contains("r=\"10\"")).count();
    assert_eq!(rings, 2, "{svg}");
    let dots = circles.iter().filter(|c| c.contains("r=\"4\"") && !c.contains("fill=\"none\"")).count();
    assert_eq!(dots, 2, "{svg}");
    assert!(ratchet::plot::looks_png(&rec).unwrap().starts_with(b"\x89PNG"));
}

#[test]
fn identical_pairs_have_no_finite_statistic_and_still_draw() {
    // A deterministic benchmark: every pair's log-ratio is the same, se = 0, the sign decides.
    let mut repo = Repo::new(16);
    let mut exec = MockExecutor::sides(Step::Latency(10.0), Step::Latency(8.0));
    exec.cv = 0.0;
    let o = repo.experiment(&mut exec);
    let d = o.decision.as_ref().unwrap();
    let first = &d.trail[0];
    assert_eq!((first.statistic, first.keep_boundary), (None, None), "{first:?}");
    assert!(first.estimate_pct > 24.0 && first.se_pct == 0.0, "{first:?}");
    // Drawn at the chart's edge on the side of its sign, without failing.
    let svg = ratchet::plot::looks_svg(&o.looks_record().unwrap()).unwrap();
    assert!(svg.contains(&format!("decided: {}", o.row.status.as_str())), "{svg}");
}
