//! Where a decision's runs go (lab/notes/decisions-history.md, "Where the runs go"): on `ratchet-lab simulate`'s
//! cells, the procedure's runs split by what made a decision go past its least (a keep: one look
//! in each phase, 2 + 2 pairs), namely the variance guard switching a look to the pairs' own
//! scale, or a look whose evidence was not yet enough.
//!
//! `cargo run --release -p ratchet-lab --example runs_probe -- [key=value ...]`, keys: seed, trials (per cell),
//! only (model names, split by '|', any case; "cv 1%" by default, "all" for every model).

#[path = "common/args.rs"]
mod args;

use ratchet::config::DecisionConfig;
use ratchet::stats::sequential::Sequential;
use ratchet::stats::{LookPhase, Verdict};
use ratchet_lab::simulate::{cell_positions, probe_trial, scenarios, ProbeTrial, Scenario};

#[derive(Default)]
struct Tally {
    trials: usize,
    runs: usize,
    keeps: usize,
    /// Keeps at the least a keep can take (one look in each phase).
    least: usize,
    /// Decisions where the guard switched some look to the pairs' own scale, and their runs.
    tripped: usize,
    tripped_runs: usize,
    first_looks: usize,
    confirm_looks: usize,
}

fn cell(seq: &Sequential, s: &Scenario, effect: f64, trials: usize, seed: u64) -> Tally {
    let positions = cell_positions(seq);
    let mut t = Tally { trials, ..Default::default() };
    for i in 0..trials {
        let ProbeTrial { decision: d, runs, borrowed, .. } = probe_trial(seq, s, positions, effect, seed, i);
        let history = borrowed.is_some();
        let looks = |p: LookPhase| d.trail.iter().filter(|l| l.phase == p).count();
        let (first, confirm) = (looks(LookPhase::Decision), looks(LookPhase::Confirmation));
        let tripped = history && d.trail.iter().any(|l| l.phase != LookPhase::Rescue && l.scale == "own");
        t.runs += runs;
        t.first_looks += first;
        t.confirm_looks += confirm;
        if d.verdict == Verdict::Keep {
            t.keeps += 1;
            t.least += (first == 1 && confirm == 1 && d.rescue.is_none()) as usize;
        }
        if tripped {
            t.tripped += 1;
            t.tripped_runs += runs;
        }
    }
    t
}

fn main() {
    let kv = args::Args::from_env();
    let num = |k: &str, d: f64| kv.num(k, d);
    let seed = num("seed", 20260522.0) as u64;
    let trials = num("trials", 4000.0) as usize;
    let only = kv.get("only").map_or("cv 1%".to_string(), |s| s.to_lowercase());
    let seq = Sequential::new(DecisionConfig::earlier().params(None));
    let models: Vec<Scenario> =
        scenarios().into_iter().filter(|s| only == "all" || only.split('|').any(|o| s.name.to_lowercase() == o.trim())).collect();
    println!("| model | gain | runs | kept | kept at the least (2 + 2 pairs) | a guard switched a look | runs with a switch / without | first-phase looks | confirmation looks |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (i, s) in models.iter().enumerate() {
        for (j, effect) in [0.0, 0.03, 0.10].into_iter().enumerate() {
            let t = cell(&seq, s, effect, trials, seed ^ ((3 * i + j) as u64).wrapping_mul(0x2545_F491_4F6C_DD1D));
            let pct = |k: usize| 100.0 * k as f64 / t.trials as f64;
            let per = |k: usize, of: usize| if of == 0 { "-".to_string() } else { format!("{:.1}", k as f64 / of as f64) };
            println!(
                "| {} | +{:.0}% | {:.2} | {:.1}% | {:.1}% | {:.1}% | {} / {} | {:.2} | {:.2} |",
                s.name,
                effect * 100.0,
                t.runs as f64 / t.trials as f64,
                pct(t.keeps),
                pct(t.least),
                pct(t.tripped),
                per(t.tripped_runs, t.tripped),
                per(t.runs - t.tripped_runs, t.trials - t.tripped),
                t.first_looks as f64 / t.trials as f64,
                t.confirm_looks as f64 / t.trials as f64
            );
        }
    }
}
