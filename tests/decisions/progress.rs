//! Progress estimates of real (in-process, mock-benchmark) experiments and sweeps: the bar's
//! total is the likely work that past decisions in results show, not the budget, and every
//! figure can be recomputed from the recorded rows behind it.

use crate::support;

use ratchet::bench::mock::{MockExecutor, Step};
use ratchet::events::{Effects, Event};
use ratchet::experiment::{self, Options};
use ratchet::progress::{Estimate, SweepEta};
use ratchet::signals::Cancel;
use ratchet::store::{ResultRow, Status};
use ratchet::sweep::{self, SweepOptions};
use ratchet::workspace::Workspace;
use std::path::Path;

/// The earlier rule (`method = "auto"`), whose confirmation batches the estimates count ahead.
const CONFIG: &str = "[benchmark]\ncommand = \"true\"\ntimeout_s = 20\nkill_grace_s = 0.5\nwarmup = 0\niters = 5\n\
    profile_iters = 0\n[hardware]\npreset = \"tpu-v5e\"\n[decision]\nmethod = \"auto\"\nmin_pairs = 4\nmax_pairs = 16\nconfirm_pairs = 4\n\
    [score]\nmetric = \"latency\"\n";

fn repo() -> tempfile::TempDir {
    support::committed_repo(&[("ratchet.toml", CONFIG), ("kernel.py", "BQ = 128\n"), ("bench.mock", "latency 10\n")])
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn rows(root: &Path) -> Vec<ResultRow> {
    Workspace::discover(root).unwrap().store.rows().unwrap()
}

/// One experiment (kernel.py edited) with these steps per side: its events.
fn experiment(root: &Path, bq: u32, inc: Step, cand: Step) -> Vec<Event> {
    write(root, "kernel.py", &format!("BQ = {bq}\n"));
    let mut events = vec![];
    let ws = Workspace::discover(root).unwrap().lock("test", &mut events).unwrap();
    let mut fx = Effects::new(&mut events, Cancel::new());
    sweep::recover(&ws, &mut fx).unwrap();
    let opts = Options { message: format!("exp: BQ {bq}"), ..Default::default() };
    experiment::run(&ws, &opts, &mut MockExecutor::sides(inc, cand), &mut fx).unwrap();
    events
}

fn estimates(events: &[Event]) -> Vec<&Estimate> {
    events.iter().filter_map(|e| if let Event::Progress(p) = e { Some(p) } else { None }).collect()
}

fn budget(events: &[Event]) -> usize {
    events.iter().find_map(|e| if let Event::SessionStarted { max_runs } = e { Some(*max_runs) } else { None }).unwrap()
}

#[test]
fn an_experiments_total_is_what_past_decisions_took_not_the_budget() {
    let dir = repo();
    // Nothing on record: the total is the budget, and no time can be said before a run.
    let first = experiment(dir.path(), 256, Step::Latency(10.0), Step::Latency(10.5));
    let e = estimates(&first);
    assert_eq!((e[0].done, e[0].total, e[0].decisions, e[0].left_s), (0, budget(&first), 0, None));
    let recorded = rows(dir.path());
    let r1 = recorded.last().unwrap();
    assert_eq!(r1.status, Status::Revert);
    // One estimate after the start and one after each run.
    assert_eq!(e.len(), r1.runs as usize + 1);
    assert_eq!(e.last().unwrap().done, r1.runs as usize);

    // The next experiment expects what the reverted one took (a whole number of pairs), far
    // under the budget of 30 pairs (16 + 4, and the rescue's to 30 in all), and, before its
    // first run, the record's time per run.
    let second = experiment(dir.path(), 512, Step::Latency(10.0), Step::Latency(8.0));
    let e = estimates(&second);
    let max = budget(&second);
    assert_eq!(max, 60);
    assert_eq!((e[0].done, e[0].total, e[0].max_runs, e[0].decisions), (0, r1.runs as usize, max, 1));
    assert!(e[0].total < max);
    let per_run = r1.wall_s / r1.runs as f64;
    assert!((e[0].secs_per_run.unwrap() - per_run).abs() < 1e-9 && !e[0].measured);
    assert!((e[0].left_s.unwrap() - r1.runs as f64 * per_run).abs() < 1e-9);
    // The kept one runs on past that total (its confirmation): once the confirmation's batch
    // is asked for, the total is its end, so the time left counts every run still to come.
    let r2 = rows(dir.path()).last().unwrap().clone();
    assert!(r2.runs > r1.runs, "{} runs after {}", r2.runs, r1.runs);
    let last = e.last().unwrap();
    assert_eq!((last.done, last.total), (r2.runs as usize, r2.runs as usize + 2));
    assert!(e.iter().all(|p| p.total >= p.done && p.total <= p.done.max(r1.runs as usize) + 2 || p.total == r2.runs as usize));
    let confirming: Vec<&&Estimate> = e.iter().filter(|p| p.done > r1.runs as usize && p.done < r2.runs as usize).collect();
    assert!(!confirming.is_empty());
    for p in confirming {
        assert_eq!(p.total, r2.runs as usize, "{p:?}");
        assert!((p.left_s.unwrap() - (r2.runs as usize - p.done) as f64 * p.secs_per_run.unwrap()).abs() < 1e-9);
    }
}

#[test]
fn a_sweeps_progress_is_its_pace_so_far_and_the_wall_left() {
    let dir = repo();
    for (name, from, to) in [
        ("01-faster.toml", "latency 10", "latency 8"),
        ("02-slower.toml", "latency 8", "latency 9"),
        ("03-same.toml", "latency 8", "latency 8.0"),
    ] {
        write(
            dir.path(),
            &format!("experiments/{name}"),
            &format!("message = \"exp: {name}\"\n[[edit]]\nfile = \"bench.mock\"\nfind = {from:?}\nreplace = {to:?}\n"),
        );
    }
    support::git_in(dir.path(), &["add", "-A"]);
    support::git_in(dir.path(), &["commit", "-qm", "queue"]);
    let mut events = vec![];
    let ws = Workspace::discover(dir.path()).unwrap().lock("test", &mut events).unwrap();
    let opts = SweepOptions { max_wall: Some(std::time::Duration::from_secs(3600)), ..Default::default() };
    sweep::run(&ws, &opts, &mut MockExecutor::from_checkout("bench.mock"), &mut Effects::new(&mut events, Cancel::new())).unwrap();
    let etas: Vec<&SweepEta> = events.iter().filter_map(|e| if let Event::SweepProgress(s) = e { Some(s) } else { None }).collect();
    let recorded = rows(dir.path());
    assert_eq!(etas.len(), 3);
    assert!(recorded.iter().all(|r| r.runs > 0), "{recorded:?}");
    for (i, s) in etas.iter().enumerate() {
        assert_eq!((s.index, s.total, s.left, s.measured), (i, 3, 3 - i, i));
        assert!((s.wall_left_s.unwrap() - (3600.0 - s.elapsed_s)).abs() < 1e-9);
    }
    // Nothing measured nor on record at the start: no pace, only the wall.
    assert_eq!((etas[0].left_s, etas[0].runs_per_hypothesis), (None, None));
    // Before the third: the first two rows' mean runs times their wall over their runs.
    let (runs, wall) = (recorded[0].runs as f64 + recorded[1].runs as f64, recorded[0].wall_s + recorded[1].wall_s);
    assert_eq!(etas[2].runs_per_hypothesis, Some(runs / 2.0));
    assert!((etas[2].secs_per_run.unwrap() - wall / runs).abs() < 1e-9);
    assert!((etas[2].left_s.unwrap() - wall / 2.0).abs() < 1e-9);
    assert_eq!(etas[2].after_this_s, Some(0.0));
    // The experiments inside the sweep count to the likely total too: the third expects the
    // median of the two decisions before it.
    let sessions: Vec<&Estimate> = estimates(&events).into_iter().filter(|p| p.done == 0).collect();
    let median = (recorded[0].runs + recorded[1].runs) as f64 / 2.0;
    assert_eq!(sessions[2].total, 2 * (median / 2.0).ceil() as usize);
}

#[test]
fn a_wall_budget_starts_no_experiment_its_record_says_cannot_finish() {
    let dir = repo();
    write(
        dir.path(),
        "experiments/01-faster.toml",
        "message = \"exp: faster\"\n[[edit]]\nfile = \"bench.mock\"\nfind = \"latency 10\"\nreplace = \"latency 8\"\n",
    );
    support::git_in(dir.path(), &["add", "-A"]);
    support::git_in(dir.path(), &["commit", "-qm", "queue"]);
    // On record: decisions of 10 runs at 60 s a run, 10 minutes a hypothesis.
    let store = Workspace::discover(dir.path()).unwrap().store;
    for id in 1..=3 {
        let row = ResultRow {
            runs: 10,
            wall_s: 600.0,
            metric: "latency".into(),
            ..ResultRow::unmeasured(id, Status::Revert, "old", String::new(), String::new())
        };
        store.append_row(&row).unwrap();
    }
    let mut events = vec![];
    let ws = Workspace::discover(dir.path()).unwrap().lock("test", &mut events).unwrap();
    // A 5-minute budget: the record's pace says a hypothesis takes 10.
    let opts = SweepOptions { max_wall: Some(std::time::Duration::from_secs(300)), ..Default::default() };
    let out =
        sweep::run(&ws, &opts, &mut MockExecutor::from_checkout("bench.mock"), &mut Effects::new(&mut events, Cancel::new())).unwrap();
    assert_eq!((out.rows.len(), out.not_started), (0, 1), "{out:?}");
    let why = out.stopped_by.unwrap();
    assert!(why.starts_with("wall-time budget") && why.contains("an experiment takes about 10m00s"), "{why}");
    assert!(!events.iter().any(|e| matches!(e, Event::HypothesisStarted { .. })), "nothing started");
}
