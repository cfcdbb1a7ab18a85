//! Where decisions end: for each trial of a `ratchet-lab simulate` cell, drawn as it draws them,
//! the verdict, the procedure and the start of its reason, tallied; with `model=all`, each
//! model's share of decisions by the procedure that ended them, one row a model.
//! `cargo run --release -p ratchet-lab --example route_probe -- model=NAME gain=0.03 trials=1000 levels=JSON history_pairs=61`

#[path = "common/args.rs"]
mod args;

use ratchet::config::DecisionConfig;
use ratchet::stats::sequential::Sequential;
use ratchet::stats::{Procedure, Verdict};
use ratchet_lab::simulate::{cell_positions, probe_trial, scenarios, ProbeTrial, Scenario};
use std::collections::BTreeMap;

fn main() {
    let kv = args::Args::from_env();
    let want = kv.get("model").expect("model=NAME or model=all");
    let mut params = DecisionConfig::earlier().params(None);
    if let Some(j) = kv.get("levels") {
        let mut all = serde_json::to_value(params.levels).unwrap();
        let over: serde_json::Value = serde_json::from_str(j).unwrap();
        for (k, v) in over.as_object().unwrap() {
            all[k] = v.clone();
        }
        params.levels = serde_json::from_value(all).unwrap();
    }
    let seq = Sequential::new(params);
    let positions = cell_positions(&seq);
    let (gain, trials, seed) = (kv.num("gain", 0.03), kv.num("trials", 1000.0) as usize, kv.num("seed", 20260522.0) as u64);
    // The calibration's pairs where a model does not fix its own (0: the simulator's default).
    let hp = kv.num("history_pairs", 0.0) as usize;
    let with_pairs = |s: Scenario| s.with_history_pairs(hp);
    if want == "all" {
        println!("| model | gain | trials | likelihood ratio | two phases (history saw an outlier) | two phases (after a wild pair) | two phases (no history) | rescue | kept |");
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        for s in scenarios().into_iter().map(with_pairs) {
            let mut n = [0usize; 6];
            for t in 0..trials {
                let ProbeTrial { decision: d, borrowed, .. } = probe_trial(&seq, &s, positions, gain, seed, t);
                let wild = d.reason.starts_with("pair ");
                let k = match (d.procedure, borrowed.is_some(), wild) {
                    (Procedure::LikelihoodRatio, ..) => 0,
                    (Procedure::Rescue, ..) => 4,
                    (_, true, false) => 1,
                    (_, true, true) => 2,
                    (_, false, _) => 3,
                };
                n[k] += 1;
                n[5] += (d.verdict == Verdict::Keep) as usize;
            }
            let pct = |k: usize| format!("{:.1}%", 100.0 * n[k] as f64 / trials as f64);
            println!(
                "| {} | {:+.0}% | {trials} | {} | {} | {} | {} | {} | {} |",
                s.name,
                100.0 * gain,
                pct(0),
                pct(1),
                pct(2),
                pct(3),
                pct(4),
                pct(5)
            );
        }
        return;
    }
    let s = scenarios().into_iter().find(|s| s.name == *want).map(with_pairs).unwrap_or_else(|| panic!("no model {want:?}"));
    let width = kv.num("width", 70.0) as usize;
    let mut tally = BTreeMap::<String, usize>::new();
    for t in 0..trials {
        let ProbeTrial { decision: d, borrowed, .. } = probe_trial(&seq, &s, positions, gain, seed, t);
        let reason: String = d.reason.chars().take(width).collect();
        let sd = borrowed.map_or("-".into(), |b| format!("{:.0}", 100.0 * b.scale.sd));
        let key = format!("{:?} {:?} sd {sd}: {reason}", d.verdict, d.procedure);
        *tally.entry(key).or_default() += 1;
    }
    let mut v: Vec<_> = tally.into_iter().collect();
    v.sort_by_key(|b| std::cmp::Reverse(b.1));
    for (k, n) in v.iter().take(kv.num("show", 25.0) as usize) {
        println!("{n:5} {k}");
    }
}
