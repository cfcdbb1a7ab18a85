//! Every recorded decision recomputes from the records alone: experiments of many shapes (gains
//! large and small, none, losses; an own scale and a borrowed one) run in-process on the mock
//! executor with noisy runs, then `ratchet replay`'s report feeds each row's runs and rule to the
//! test again; an edited run, an edited p-value and a missing rule are each caught.

use crate::support;

use ratchet::bench::mock::{MockExecutor, Step};
use ratchet::bench::Side;
use ratchet::cli::replay::report;
use ratchet::events::Effects;
use ratchet::experiment::{self, Options};
use ratchet::replay::{self, Replayed};
use ratchet::signals::Cancel;
use ratchet::stats::rng::Rng;
use ratchet::store::Status;
use ratchet::workspace::Workspace;
use std::path::Path;

const CONFIG: &str = "[benchmark]\ncommand = \"true\"\ntimeout_s = 20\nkill_grace_s = 0.5\nwarmup = 0\niters = 5\nprofile_iters = 0\n\
    [hardware]\npreset = \"tpu-v5e\"\n[decision]\nmethod = \"sequential\"\nmin_pairs = 4\nmax_pairs = 12\nconfirm_pairs = 4\n[score]\nmetric = \"latency\"\n";

fn repo() -> tempfile::TempDir {
    support::committed_repo(&[("ratchet.toml", CONFIG), ("kernel.py", "BQ = 0\n")])
}

/// The same repo deciding by the one-phase likelihood ratio once it has history.
fn likelihood_ratio_repo() -> tempfile::TempDir {
    let config = CONFIG.replace("method = \"sequential\"", "method = \"likelihood-ratio\"");
    support::committed_repo(&[("ratchet.toml", &config), ("kernel.py", "BQ = 0\n")])
}

/// One experiment whose candidate is `gain` faster (a fraction; negative: slower), each run's
/// latency off its side's by `cv` normal noise (the mock's own iteration noise on top).
fn experiment(dir: &Path, n: usize, gain: f64, cv: f64, seed: u64) -> Status {
    std::fs::write(dir.join("kernel.py"), format!("BQ = {n}\n")).unwrap();
    let mut rng = Rng::new(seed);
    let mut exec = MockExecutor::new(move |c| {
        let base = if c.side == Side::Candidate { 10.0 / (1.0 + gain) } else { 10.0 };
        Step::Latency(base * (1.0 + cv * rng.normal()))
    });
    let mut events = vec![];
    let ws = Workspace::discover(dir).unwrap().lock("test", &mut events).unwrap();
    let mut fx = Effects::new(&mut events, Cancel::new());
    ratchet::sweep::recover(&ws, &mut fx).unwrap();
    let opts = Options { message: format!("exp {n}: gain {gain}"), ..Default::default() };
    experiment::run(&ws, &opts, &mut exec, &mut fx).unwrap().row.status
}

fn replay_all(dir: &Path) -> ratchet::cli::replay::Report {
    let ws = Workspace::discover(dir).unwrap();
    let rows = ws.store.rows().unwrap();
    let refs: Vec<_> = rows.iter().collect();
    report(&refs, &ws.store.runs().unwrap(), &ratchet::replay::records(&ws.store).unwrap())
}

#[test]
fn every_decision_of_a_varied_series_replays_exactly() {
    let dir = repo();
    // Gains of every size against 1% noise: clear keeps, small ones, nothing, losses; the
    // first decide on their own scale, the later ones borrow the history the first built.
    let gains = [0.25, 0.0, 0.03, -0.02, 0.015, 0.0, 0.10, 0.005, -0.05, 0.02, 0.0, 0.04, 0.01, 0.0];
    let statuses: Vec<Status> =
        gains.iter().enumerate().map(|(i, &g)| experiment(dir.path(), i + 1, g, 0.01, 7 + i as u64 * 101)).collect();
    let r = replay_all(dir.path());
    assert_eq!((r.differ, r.cannot), (0, 0), "{}", r.body);
    assert_eq!(r.same, statuses.len(), "{}", r.body);
    // The series covered both scales and more than one verdict, so the check meant something.
    let ws = Workspace::discover(dir.path()).unwrap();
    let rows = ws.store.rows().unwrap();
    assert!(rows.iter().any(|r| r.noise_scale == "own") && rows.iter().any(|r| r.noise_scale == "history"), "{rows:?}");
    assert!(statuses.contains(&Status::Keep) && statuses.contains(&Status::Revert), "{statuses:?}");
    assert!(r.body.contains("all 14 decide as recorded"), "{}", r.body);
}

#[test]
fn likelihood_ratio_decisions_replay_exactly_and_say_so_in_their_row() {
    let dir = likelihood_ratio_repo();
    let gains = [0.0, 0.10, 0.0, 0.03, -0.02, 0.10, 0.0, 0.03, 0.005, 0.05];
    let statuses: Vec<Status> =
        gains.iter().enumerate().map(|(i, &g)| experiment(dir.path(), i + 1, g, 0.01, 31 + i as u64 * 17)).collect();
    let r = replay_all(dir.path());
    assert_eq!((r.differ, r.cannot, r.same), (0, 0, gains.len()), "{}", r.body);
    let ws = Workspace::discover(dir.path()).unwrap();
    let rows = ws.store.rows().unwrap();
    // The first decide on their own scale (too little history yet: `history::MIN_DF`), every
    // later one by the likelihood ratio: one phase, a p that does not rest on the borrowed scale.
    assert!(rows.iter().all(|r| (r.noise_scale == "pooled") == r.borrowed_sd_pct.is_some()), "{rows:?}");
    let lr: Vec<_> = rows.iter().filter(|r| r.noise_scale == "pooled").collect();
    assert!(rows[0].noise_scale == "own" && lr.len() >= gains.len() / 2, "{rows:?}");
    assert!(lr.iter().all(|r| !r.p_conditional && r.confirm_delta_pct.is_none()), "{lr:?}");
    assert!(statuses.contains(&Status::Keep) && statuses.contains(&Status::Revert), "{statuses:?}");
    let rules = replay::records(&ws.store).unwrap();
    assert!(rules.iter().all(|r| r.params.likelihood_ratio == ratchet::stats::sequential::OnePhase::WithHistory), "{rules:?}");
}

#[test]
fn robust_ratio_decisions_replay_exactly_from_the_levels_they_record() {
    let config = CONFIG.replace("method = \"sequential\"", "method = \"robust-ratio\"");
    let dir = support::committed_repo(&[("ratchet.toml", &config), ("kernel.py", "BQ = 0\n")]);
    let gains = [0.10, 0.0, 0.03, -0.02, 0.0, 0.05, 0.005, 0.03];
    let statuses: Vec<Status> =
        gains.iter().enumerate().map(|(i, &g)| experiment(dir.path(), i + 1, g, 0.01, 53 + i as u64 * 29)).collect();
    let r = replay_all(dir.path());
    assert_eq!((r.differ, r.cannot, r.same), (0, 0, gains.len()), "{}", r.body);
    let ws = Workspace::discover(dir.path()).unwrap();
    let rows = ws.store.rows().unwrap();
    // One phase with and without history: no confirmation, no conditional p.
    assert!(rows.iter().all(|r| r.noise_scale == "robust" && !r.p_conditional && r.confirm_delta_pct.is_none()), "{rows:?}");
    assert!(rows[0].borrowed_sd_pct.is_none() && rows.iter().any(|r| r.borrowed_sd_pct.is_some()), "{rows:?}");
    assert!(statuses.contains(&Status::Keep) && statuses.contains(&Status::Revert), "{statuses:?}");
    let rules = replay::records(&ws.store).unwrap();
    let current = Some(ratchet::stats::sequential::RobustLevels::CURRENT);
    assert!(rules.iter().all(|r| r.params.robust == current), "{rules:?}");
}

#[test]
fn auto_hands_a_decision_and_a_history_with_a_gross_outlier_to_the_two_phases_and_all_replay() {
    // The earlier rule (`method = "auto"`).
    let config = CONFIG.replace("method = \"sequential\"\n", "method = \"auto\"\n");
    let dir = support::committed_repo(&[("ratchet.toml", &config), ("kernel.py", "BQ = 0\n")]);
    // Quiet experiments build a history, then one run 3x slow: the session that saw it sets it
    // aside as a gross outlier, and while it is pooled the decisions are the two phases'.
    let outlier_at = 5;
    for (i, gain) in [0.0, 0.10, 0.0, 0.03, 0.10, 0.0, 0.03, 0.10].into_iter().enumerate() {
        std::fs::write(dir.path().join("kernel.py"), format!("BQ = {}\n", i + 1)).unwrap();
        let mut rng = Rng::new(70 + i as u64);
        let mut run = 0;
        let mut exec = MockExecutor::new(move |c| {
            let base = if c.side == Side::Candidate { 10.0 / (1.0 + gain) } else { 10.0 };
            run += 1;
            let slow = if i == outlier_at && run == 3 { 3.0 } else { 1.0 };
            Step::Latency(base * slow * (1.0 + 0.01 * rng.normal()))
        });
        let mut events = vec![];
        let ws = Workspace::discover(dir.path()).unwrap().lock("test", &mut events).unwrap();
        let mut fx = Effects::new(&mut events, Cancel::new());
        ratchet::sweep::recover(&ws, &mut fx).unwrap();
        let opts = Options { message: format!("exp {i}: gain {gain}"), ..Default::default() };
        experiment::run(&ws, &opts, &mut exec, &mut fx).unwrap();
    }
    let ws = Workspace::discover(dir.path()).unwrap();
    let rows = ws.store.rows().unwrap();
    let rules = replay::records(&ws.store).unwrap();
    let scales: Vec<(&str, usize)> = rows.iter().zip(&rules).map(|(r, d)| (r.noise_scale.as_str(), d.outliers)).collect();
    // Before the outlier: the likelihood ratio wherever there was history; after it: the two
    // phases (a borrowed scale, its confirmation), each rule recording the outliers it saw.
    // Before the outlier: the likelihood ratio wherever there was history. The experiment that
    // met it: handed to the two phases at that pair, its reason saying so, and its session
    // keeping the wild pair out of the history's spread. After it: the two phases (a borrowed
    // scale, or the pairs' own), each rule recording the outliers the history saw.
    assert!(scales[..outlier_at].iter().all(|&(s, o)| o == 0 && s != "history"), "{scales:?}");
    assert!(scales[..outlier_at].iter().any(|&(s, _)| s == "pooled"), "{scales:?}");
    assert!(scales[outlier_at].0 != "pooled" && rows[outlier_at].note.contains("lay "), "{:?}", rows[outlier_at]);
    assert!(scales[outlier_at + 1..].iter().all(|&(s, o)| o >= 1 && s != "pooled"), "{scales:?}");
    // The gains after it (+3%, +10%) kept by both phases, the second confirming the first.
    assert!(
        rows[outlier_at + 1..].iter().all(|r| r.status == Status::Keep && r.note.contains("complementary order")),
        "{:?}",
        rows.iter().map(|r| &r.note).collect::<Vec<_>>()
    );
    let r = replay_all(dir.path());
    assert_eq!((r.differ, r.cannot, r.same), (0, 0, rows.len()), "{}", r.body);
}

#[test]
fn an_edited_run_value_or_p_value_does_not_replay() {
    let dir = repo();
    for (i, g) in [0.2, 0.0, 0.06].into_iter().enumerate() {
        experiment(dir.path(), i + 1, g, 0.01, 3 + i as u64);
    }
    assert_eq!(replay_all(dir.path()).differ, 0);
    let runs_path = dir.path().join("results/runs.jsonl");
    let original = std::fs::read_to_string(&runs_path).unwrap();

    // One candidate run of experiment 3 made 30% slower in the record.
    let mut edited = false;
    let lines: Vec<String> = original
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            if !edited && v["experiment"] == "3" && v["side"] == "candidate" {
                edited = true;
                let x = v["value"].as_f64().unwrap();
                v["value"] = (x * 1.3).into();
            }
            v.to_string()
        })
        .collect();
    std::fs::write(&runs_path, lines.join("\n") + "\n").unwrap();
    let ws = Workspace::discover(dir.path()).unwrap();
    let rows = ws.store.rows().unwrap();
    let runs = ws.store.runs().unwrap();
    let own: Vec<_> = runs.iter().filter(|r| r.experiment == "3").collect();
    let replayed = replay::replay(&rows[2], &own, &ratchet::replay::records(&ws.store).unwrap());
    assert!(!matches!(replayed, Replayed::Same(_)), "{replayed:?}");
    let r = replay_all(dir.path());
    assert_eq!((r.same, r.differ, r.cannot), (2, 1, 0), "{}", r.body);
    std::fs::write(&runs_path, &original).unwrap();

    // The row's p-value edited: the replay names it.
    let mut row = rows[0].clone();
    row.p_value = Some(row.p_value.unwrap() * 2.0);
    let own: Vec<_> = runs.iter().filter(|r| r.experiment == "1").collect();
    match replay::replay(&row, &own, &ratchet::replay::records(&ws.store).unwrap()) {
        Replayed::Differs { what, .. } => assert!(what.iter().any(|w| w.starts_with("p: recorded")), "{what:?}"),
        other => panic!("{other:?}"),
    }

    // Without its rule a row cannot be replayed, and the report says why.
    std::fs::remove_file(dir.path().join("results").join(replay::DECISIONS_JSONL)).unwrap();
    let r = replay_all(dir.path());
    assert_eq!(r.cannot, 3, "{}", r.body);
    assert!(r.body.contains("no record of its rule"), "{}", r.body);
}

#[test]
fn the_record_holds_the_levels_and_the_exact_borrowed_scale() {
    let dir = repo();
    for (i, g) in [0.0, 0.0, 0.0, 0.0, 0.1].into_iter().enumerate() {
        experiment(dir.path(), i + 1, g, 0.01, 11 + i as u64);
    }
    let ws = Workspace::discover(dir.path()).unwrap();
    let recs = ratchet::replay::records(&ws.store).unwrap();
    let rows = ws.store.rows().unwrap();
    assert_eq!(
        recs.iter().map(|r| (r.id, r.commit.clone())).collect::<Vec<_>>(),
        rows.iter().map(|r| (r.id, r.commit.clone())).collect::<Vec<_>>()
    );
    let cfg = ws.config().unwrap();
    assert!(recs.iter().all(|r| r.params == cfg.decision.params(None) && r.with_sums && r.trial.is_none()));
    // The first decided on its own pairs; the last borrowed what the others recorded, and its
    // row's rounded figures agree with the record's exact ones.
    assert!(recs[0].borrowed.is_none());
    let (b, row) = (recs[4].borrowed.expect("borrowed"), &rows[4]);
    assert_eq!(row.noise_scale, "history");
    assert!((row.borrowed_sd_pct.unwrap() - b.sd * 100.0).abs() < 1e-9 && row.borrowed_df == Some(b.df), "{row:?} {b:?}");
}

#[test]
fn a_rescued_decision_replays_and_a_rule_recorded_before_the_rescue_replays_without_it() {
    let dir = repo();
    // Small gains in 3% noise: the two phases (12 + 4 pairs here) mostly cannot settle them,
    // and the rescue measures on to 30 pairs in all.
    let statuses: Vec<Status> = (0..6).map(|i| experiment(dir.path(), i + 1, 0.02, 0.03, 301 + i as u64)).collect();
    let ws = Workspace::discover(dir.path()).unwrap();
    let rows = ws.store.rows().unwrap();
    let runs = ws.store.runs().unwrap();
    let rescued: Vec<u64> = rows.iter().filter(|r| r.note.contains("rescue")).map(|r| r.id).collect();
    assert!(!rescued.is_empty(), "no decision went on to the rescue: {statuses:?}");
    for id in &rescued {
        let n = runs.iter().filter(|r| r.experiment == id.to_string()).count();
        assert_eq!(n, 60, "experiment {id}: the rescue reads 30 pairs in all");
    }
    let r = replay_all(dir.path());
    assert_eq!((r.same, r.differ, r.cannot), (6, 0, 0), "{}", r.body);

    // The same records with the rescue taken out of every rule, as a version before it wrote
    // them: the rows it did not touch replay the same; a rescued one now stops before its runs.
    let path = ws.store.dir().join("decisions.jsonl");
    let old: String = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            let p = v["params"].as_object_mut().unwrap();
            assert!(p.remove("rescue_pairs").is_some() && p.remove("rescue_alpha").is_some(), "{l}");
            format!("{v}\n")
        })
        .collect();
    std::fs::write(&path, old).unwrap();
    let r = replay_all(dir.path());
    assert_eq!((r.same, r.differ), (6 - rescued.len(), rescued.len()), "{}", r.body);
}

#[test]
fn decisions_that_read_the_sums_around_a_warm_up_profile_replay_with_it() {
    let dir = repo();
    // A machine that warms up at every experiment's start: its first runs 10% slow, decaying
    // over about 3 runs, 1% noise. The history records each first phase's warm-up step, and
    // the later decisions read their sums around it.
    for (i, gain) in [0.0, 0.03, 0.10, 0.0, 0.05, 0.0, 0.03, 0.10, 0.0, 0.02].into_iter().enumerate() {
        let dir_path = dir.path();
        std::fs::write(dir_path.join("kernel.py"), format!("BQ = {}\n", i + 1)).unwrap();
        let mut rng = Rng::new(900 + i as u64);
        let mut run = 0usize;
        let mut exec = MockExecutor::new(move |c| {
            let base = if c.side == Side::Candidate { 10.0 / (1.0 + gain) } else { 10.0 };
            let warm = 1.0 + 0.10 * (-(run as f64) / 3.0).exp();
            run += 1;
            Step::Latency(base * warm * (1.0 + 0.01 * rng.normal()))
        });
        let mut events = vec![];
        let ws = Workspace::discover(dir_path).unwrap().lock("test", &mut events).unwrap();
        let mut fx = Effects::new(&mut events, Cancel::new());
        ratchet::sweep::recover(&ws, &mut fx).unwrap();
        let opts = Options { message: format!("exp {i}: gain {gain}"), ..Default::default() };
        experiment::run(&ws, &opts, &mut exec, &mut fx).unwrap();
    }
    let ws = Workspace::discover(dir.path()).unwrap();
    let rules = replay::records(&ws.store).unwrap();
    let profiled: Vec<_> = rules.iter().filter_map(|r| r.warmup.as_ref()).collect();
    assert!(!profiled.is_empty(), "no decision borrowed a warm-up profile: {rules:?}");
    // The warm-up makes a session's second pair faster than its first.
    assert!(profiled.iter().all(|w| w.steps[0] < 0.0 && w.sessions >= 1.0), "{profiled:?}");
    // The rule replay runs is the one recorded, profile included.
    for r in rules.iter().filter(|r| r.warmup.is_some()) {
        assert_eq!(r.sequential().borrowed.and_then(|b| b.warmup), r.warmup);
    }
    let r = replay_all(dir.path());
    assert_eq!((r.differ, r.cannot), (0, 0), "{}", r.body);
    assert_eq!(r.same, 10, "{}", r.body);
}

/// `ratchet calibrate` on the mock: `pairs` A/A pairs whose runs `run` draws.
fn calibrate(dir: &Path, pairs: u32, run: impl FnMut(&ratchet::bench::mock::Call) -> Step + 'static) {
    let mut exec = MockExecutor::new(run);
    let mut events = vec![];
    let ws = Workspace::discover(dir).unwrap().lock("test", &mut events).unwrap();
    let mut fx = Effects::new(&mut events, Cancel::new());
    ratchet::sweep::recover(&ws, &mut fx).unwrap();
    ratchet::calibrate::run(&ws, &ratchet::calibrate::CalibrateOptions { pairs: Some(pairs) }, &mut exec, &mut fx).unwrap();
}

#[test]
fn the_likelihood_ratio_keeps_lower_only_after_a_history_of_one_mode_on_enough_pairs_and_all_replay() {
    use ratchet::stats::sequential::{LR_KEEP_AT, LR_KEEP_AT_ONE_MODE, ONE_MODE_TOLD_PAIRS};
    // The earlier rule (`method = "auto"`), on two machines: one of a single normal mode (calibrated with 16
    // pairs, too few to rule out two modes within its noise, and with 60), one whose processes
    // fall 30% of the time in a mode 4% slower (16 pairs).
    let config = CONFIG.replace("method = \"sequential\"\n", "method = \"auto\"\n");
    for (two_modes, pairs, seed) in [(false, 16, 40u64), (false, ONE_MODE_TOLD_PAIRS as u32, 42), (true, 16, 41)] {
        let dir = support::committed_repo(&[("ratchet.toml", &config), ("kernel.py", "BQ = 0\n")]);
        let mut rng = Rng::new(seed);
        calibrate(dir.path(), pairs, move |_| {
            let slow = if two_modes && rng.uniform() < 0.3 { 1.04 } else { 1.0 };
            Step::Latency(10.0 * slow * (1.0 + 0.005 * rng.normal()))
        });
        let noise: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join(".ratchet/noise.json")).unwrap()).unwrap();
        let seen = noise["benchmarks"][0]["entries"][0]["modes"].as_f64().expect("a 16-pair session tells one mode from two");
        assert_eq!(ratchet::stats::modes::shows_two(seen), two_modes, "{seen}");
        // A clear gain on a quiet run of the machine (the modes only steer the level).
        experiment(dir.path(), 1, 0.2, 0.005, seed);
        let ws = Workspace::discover(dir.path()).unwrap();
        let (rows, rules) = (ws.store.rows().unwrap(), replay::records(&ws.store).unwrap());
        let told = !two_modes && pairs as usize >= ONE_MODE_TOLD_PAIRS;
        let level = if told { LR_KEEP_AT_ONE_MODE } else { LR_KEEP_AT };
        assert_eq!(rules[0].modes, Some(two_modes as usize), "{:?}", rules[0]);
        assert_eq!(rules[0].modes_pairs, if two_modes { 0 } else { pairs as usize }, "{:?}", rules[0]);
        assert_eq!((rows[0].status, rows[0].noise_scale.as_str()), (Status::Keep, "pooled"), "{:?}", rows[0]);
        let threshold = rows[0].p_threshold.unwrap();
        assert!((threshold - (-level).exp()).abs() < 1e-9 * threshold, "{threshold} at {level}");
        // The rule as recorded replays; the same rule with the modes left out (as recorded before
        // it) keeps at the level for every machine.
        let r = replay_all(dir.path());
        assert_eq!((r.differ, r.cannot, r.same), (0, 0, 1), "{}", r.body);
        let unchecked = replay::DecisionRecord { modes: None, ..rules[0].clone() };
        let test = unchecked.sequential().params.deciding_ratio(unchecked.sequential().borrowed.as_ref()).unwrap();
        assert_eq!(test.keep_at, LR_KEEP_AT);
    }
}
