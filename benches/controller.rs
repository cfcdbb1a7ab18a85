//! What the parallel sweep's controller costs per trial as the results history grows: sweeps of
//! 8 and of 24 hypotheses on 4 in-process slots (the mock executor's workers, whose own cost is
//! counted apart and left out) over a history of 100, 1,000 and 10,000 rows (copied from a real
//! sweep's, runs and all, with a parked ref per reverted row, packed as `git gc` leaves them).
//! The 16 trials more that the longer sweep decides give the cost per trial (the controller
//! thread's CPU time, bytes read, fsyncs); what is left is the sweep's own start and end (reading
//! the table once, the lock, the helpers).
//! Figures go to docs/scale-out.md ("The controller's cost").
//!
//! cargo bench --bench controller [-- ROWS...]

#[path = "common/mod.rs"]
mod common;
#[path = "common/history.rs"]
mod history;

use ratchet::bench::mock::{MockExecutor, Step};
use ratchet::events::{Discard, Effects};
use ratchet::scale::inline::{Cost, InlineEngine};
use ratchet::signals::Cancel;
use ratchet::sweep::SweepOptions;
use ratchet::workspace::Workspace;
use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git").args(args).current_dir(dir).env("GIT_CONFIG_NOSYSTEM", "1").output().expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Latency 10 ms times the product of factors.env's `F<i>=x` lines, read in the run's checkout.
fn executor() -> MockExecutor {
    MockExecutor::new(|c| {
        let text = std::fs::read_to_string(c.dir.join("factors.env")).unwrap_or_default();
        let p: f64 = text.lines().filter_map(|l| l.split_once('=')).map(|(_, v)| v.parse::<f64>().unwrap_or(1.0)).product();
        Step::Latency(10.0 * p)
    })
}

/// A repository whose queue holds `hypotheses` hypotheses named `{prefix}NN`: one in four 20% faster, the
/// rest 25% slower, each on a factor of its own.
fn repo(dir: &Path, prefix: &str, hypotheses: usize) {
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.name", "Bench"]);
    git(dir, &["config", "user.email", "bench@example.com"]);
    std::fs::write(
        dir.join("ratchet.toml"),
        "[benchmark]\ncommand = \"true\"\nwarmup = 0\niters = 5\nprofile_iters = 0\n[decision]\nmin_pairs = 4\nmax_pairs = 8\nconfirm_pairs = 4\n[score]\nmetric = \"latency\"\n",
    )
    .unwrap();
    let factors: String = (0..hypotheses).map(|i| format!("F{i}=1.0\n")).collect();
    std::fs::write(dir.join("factors.env"), factors).unwrap();
    std::fs::create_dir_all(dir.join("experiments")).unwrap();
    for i in 0..hypotheses {
        let to = if i % 4 == 0 { 0.8 } else { 1.25 };
        let text =
            format!("message = \"{prefix}{i:02}\"\n[[edit]]\nfile = \"factors.env\"\nfind = \"F{i}=1.0\\n\"\nreplace = \"F{i}={to}\\n\"\n");
        std::fs::write(dir.join("experiments").join(format!("{prefix}{i:02}.toml")), text).unwrap();
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "baseline"]);
}

/// Run the sweep; the controller's own cost (the workers' left out) and the rows it recorded.
fn sweep(dir: &Path) -> (Cost, usize) {
    let mut sink = Discard;
    let ws = Workspace::discover(dir).unwrap().lock("bench", &mut sink).unwrap();
    let mut engine = InlineEngine::new(4, executor());
    let before = Cost::of_this_thread();
    let out = ratchet::scale::controller::run(&ws, &SweepOptions::default(), &mut engine, &mut Effects::new(&mut sink, Cancel::new()))
        .expect("the sweep runs");
    // What the controller spent: the thread's, less its in-process workers'.
    let spent = Cost::of_this_thread().since(before).since(engine.workers);
    (spent, out.rows.len())
}

fn main() {
    let Some(args) = common::bench_args("controller") else { return };
    std::env::set_var("GIT_CONFIG_NOSYSTEM", "1");
    let sizes: Vec<usize> =
        if args.is_empty() { vec![100, 1_000, 10_000] } else { args.iter().map(|a| a.parse().expect("ROWS")).collect() };

    // The template: a real sweep's rows and runs.
    let t = tempfile::tempdir().unwrap();
    repo(t.path(), "template-", 16);
    sweep(t.path());
    let store = ratchet::store::Store::new(&t.path().join("results"));
    let per_row = store.runs().unwrap().len() as f64 / store.rows().unwrap().len() as f64;
    println!("the parallel sweep's controller, 4 in-process slots (the workers' own cost left out)");
    println!("history: rows copied from a real sweep's ({per_row:.1} runs a row), a parked ref per revert");
    println!("per trial: (sweep of 24 - sweep of 8) / 16; per sweep: the sweep of 8 less 8 trials\n");
    println!(
        "{:>8} {:>11} {:>11} | {:>12} {:>12} {:>12} | {:>13}",
        "rows", "results.csv", "runs.jsonl", "CPU ms/trial", "read KB/trial", "fsyncs/trial", "CPU ms/sweep"
    );
    let mut first: Option<f64> = None;
    for &n in &sizes {
        let mut costs = vec![];
        for k in [8, 24] {
            let d = tempfile::tempdir().unwrap();
            repo(d.path(), "hypothesis-", k);
            let sizes = history::grow(t.path(), d.path(), n);
            let (cost, trials) = sweep(d.path());
            assert_eq!(trials, k, "every hypothesis recorded");
            costs.push((cost, sizes));
        }
        let ((short, (csv, runs)), (long, _)) = (costs[0], costs[1]);
        let per = |a: f64, b: f64| (b - a) / 16.0;
        let cpu = per(short.cpu.as_secs_f64(), long.cpu.as_secs_f64()) * 1e3;
        let setup = short.cpu.as_secs_f64() * 1e3 - 8.0 * cpu;
        first.get_or_insert(cpu);
        println!(
            "{n:>8} {:>8.1} MB {:>8.1} MB | {cpu:>12.2} {:>13.1} {:>12.1} | {setup:>13.1}   (per trial {:.2}x the first size's)",
            csv as f64 / 1e6,
            runs as f64 / 1e6,
            per(short.read_bytes as f64, long.read_bytes as f64) / 1e3,
            per(short.syncs as f64, long.syncs as f64),
            cpu / first.unwrap()
        );
    }
}
