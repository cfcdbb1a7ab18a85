//! Gains between the minimum effect and +3% on quiet machines (lab/notes/decisions-history.md, "A grid for
//! quiet machines"): on `ratchet-lab simulate`'s quiet normal machine at other CVs, with its own
//! 16-pair calibration per trial, the share kept and the runs a decision takes, for the methods
//! asked for.
//!
//! `cargo run --release -p ratchet-lab --example small_gain_probe -- [key=value ...]`, keys: cvs (percent, split
//! by ','; 0.23,0.5,1 by default), gains (percent, split by ','; 0,1.25,1.5,2,3,10), methods
//! (split by ','; auto,sequential), trials (per cell with a gain; 2000), null (per cell without;
//! 20000), seed.

#[path = "common/args.rs"]
mod args;

use ratchet::config::{DecisionConfig, Method};
use ratchet::stats::sequential::Sequential;
use ratchet_lab::simulate::{scenarios, simulate_cell, Scenario};

fn list(kv: &args::Args, key: &str, default: &str) -> Vec<String> {
    kv.get(key).map_or(default, |v| v.as_str()).split(',').map(|s| s.trim().to_string()).collect()
}

fn main() {
    let kv = args::Args::from_env();
    let seed = kv.num("seed", 20260522.0) as u64;
    let (trials, null) = (kv.num("trials", 2000.0) as usize, kv.num("null", 20000.0) as usize);
    let quiet = scenarios().into_iter().find(|s| s.name == "cv 0.5%").expect("the quiet machine");
    println!("| CV | method | true gain | trials | kept | mean runs |\n|---:|---|---:|---:|---:|---:|");
    for cv in list(&kv, "cvs", "0.23,0.5,1") {
        let s = Scenario { cv: cv.parse::<f64>().expect("a CV in percent") / 100.0, ..quiet.clone() };
        for m in list(&kv, "methods", "auto,sequential") {
            let method: Method = m.parse().unwrap_or_else(|e| panic!("{m}: {e}"));
            let seq = Sequential::new(DecisionConfig { method, ..DecisionConfig::earlier() }.params(None));
            for g in list(&kv, "gains", "0,1.25,1.5,2,3,10") {
                let gain = g.parse::<f64>().expect("a gain in percent") / 100.0;
                let n = if gain == 0.0 { null } else { trials };
                let c = simulate_cell(&seq, &s, gain, n, seed, true);
                println!(
                    "| {cv}% | {m} | +{g}% | {n} | {} ({:.3}%) | {:.1} |",
                    c.keeps,
                    100.0 * c.keeps as f64 / n as f64,
                    c.total_runs as f64 / n as f64
                );
            }
        }
    }
}
