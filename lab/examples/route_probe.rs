//! Where one cell's decisions end: for each trial of a `ratchet-lab simulate` cell, drawn as it
//! draws them, the verdict, the procedure and the start of its reason, tallied.
//! `cargo run --release -p ratchet-lab --example route_probe -- model=NAME gain=0.03 trials=1000 levels=JSON`

#[path = "common/args.rs"]
mod args;

use ratchet::config::DecisionConfig;
use ratchet::stats::sequential::Sequential;
use ratchet_lab::simulate::{cell_positions, probe_trial, scenarios, ProbeTrial};
use std::collections::BTreeMap;

fn main() {
    let kv = args::Args::from_env();
    let want = kv.get("model").expect("model=NAME");
    let s = scenarios().into_iter().find(|s| s.name == *want).unwrap_or_else(|| panic!("no model {want:?}"));
    let mut params = DecisionConfig::default().params(None);
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
