//! The probe of the floor (docs/decisions.md, "The floor"): the scale-free sequential test of
//! `stats::floor` on every noise model of `ratchet simulate`, beside the procedure's own cell when
//! asked, with the information bound it is measured against.
//!
//! `cargo run --release --example floor_probe -- [key=value ...]`, keys: seed, trials (per gain
//! cell), null (per do-nothing cell), alpha (its false-keep level), beta (its futility level),
//! pairs (its budget; the procedure's 16 + 6 by default), only (models whose names contain one of these, split by '|'),
//! ratchet (1: also the procedure's cell, with history, on as many trials), threads.

use ratchet::config::DecisionConfig;
use ratchet::stats::floor::{jump_safe_pairs, sprt_pairs, ScaleFree, FREE_BETA, MAX_JUMP};
use ratchet::stats::sequential::Sequential;
use ratchet::stats::simulate::{cp_interval, scale_free_cell, scenarios, simulate_cell, Scenario, EXTRA_EFFECTS};
use std::collections::HashMap;

fn main() {
    let kv: HashMap<String, String> =
        std::env::args().skip(1).filter_map(|a| a.split_once('=').map(|(k, v)| (k.to_string(), v.to_string()))).collect();
    let num = |k: &str, d: f64| kv.get(k).map_or(d, |v| v.parse().unwrap_or_else(|_| panic!("{k}={v}: not a number")));
    let seed = num("seed", 1.0) as u64;
    let (trials, null) = (num("trials", 4000.0) as usize, num("null", 20000.0) as usize);
    let (alpha, beta) = (num("alpha", 0.001), num("beta", FREE_BETA));
    let pairs = num("pairs", 22.0) as usize;
    let with_ratchet = num("ratchet", 0.0) != 0.0;
    let threads = num("threads", 2.0) as usize;
    let only: Option<Vec<String>> = kv.get("only").map(|s| s.to_lowercase().split('|').map(str::to_string).collect());

    let (mu1, sd) = (1.03f64.ln(), std::f64::consts::SQRT_2 * 0.01);
    let bound = |mu: f64| 2.0 * jump_safe_pairs(mu, sd, 0.001, 0.05, MAX_JUMP).pairs;
    println!(
        "floor at CV 1%, false keeps 0.1% at every noise level up to {MAX_JUMP}x, power 95%: {:.1} runs under no gain, {:.1} at +3% (its least favourable noise {:.2}x), {:.1} at +10%",
        2.0 * sprt_pairs(0.0, mu1, sd, 0.001, 0.05),
        bound(mu1),
        jump_safe_pairs(mu1, sd, 0.001, 0.05, MAX_JUMP).jump,
        bound(1.1f64.ln())
    );
    println!("scale-free test: keeps at ln(1/{alpha}), futility at ln {beta}, at most {pairs} pairs, powered for +3%\n");

    let test = ScaleFree::new(mu1, sd, alpha, beta, pairs);
    let models: Vec<Scenario> = scenarios()
        .into_iter()
        .filter(|s| only.as_ref().is_none_or(|o| o.iter().any(|o| s.name.to_lowercase().contains(o.as_str()))))
        .collect();
    let jobs: Vec<(usize, Scenario, f64)> =
        models.iter().flat_map(|s| EXTRA_EFFECTS.iter().map(move |&e| (s.clone(), e))).enumerate().map(|(i, (s, e))| (i, s, e)).collect();
    let started = std::time::Instant::now();
    let mut rows: Vec<(usize, String)> = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let mine: Vec<_> = jobs.iter().filter(|(i, _, _)| i % threads == t).cloned().collect();
                sc.spawn(move || {
                    let seq = Sequential::new(DecisionConfig::default().params(None));
                    mine.into_iter()
                        .map(|(i, s, e)| {
                            let n = if e == 0.0 { null } else { trials };
                            let cell_seed = seed.wrapping_mul(1_000_003).wrapping_add(i as u64 * 7919);
                            let c = scale_free_cell(&s, e, n, cell_seed, &test);
                            let mut row = format!(
                                "| {} | {:+.0}% | {} | {} | {:.1} |",
                                s.name,
                                e * 100.0,
                                pct(c.keeps, n, e),
                                cp_interval(c.keeps, n),
                                c.mean_runs()
                            );
                            if with_ratchet {
                                let r = simulate_cell(&seq, &s, e, n, cell_seed, true);
                                row.push_str(&format!(" {} | {} | {:.1} |", pct(r.keeps, n, e), cp_interval(r.keeps, n), r.mean_runs()));
                            }
                            (i, row)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("thread")).collect()
    });
    rows.sort_by_key(|r| r.0);
    print!("| model | gain | scale-free keeps | 95% CP | runs |");
    println!("{}", if with_ratchet { " ratchet keeps | 95% CP | runs |" } else { "" });
    println!("|---|---:|---:|---:|---:|{}", if with_ratchet { "---:|---:|---:|" } else { "" });
    for (_, r) in rows {
        println!("{r}");
    }
    eprintln!("{:.1} s", started.elapsed().as_secs_f64());
}

/// A keep rate in percent: three decimals under no gain, where the 0.1% bound is read.
fn pct(k: usize, n: usize, effect: f64) -> String {
    let p = k as f64 / n as f64 * 100.0;
    if effect == 0.0 {
        format!("{p:.3}%")
    } else {
        format!("{p:.2}%")
    }
}
