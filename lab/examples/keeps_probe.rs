//! Where a model's false keeps come from (lab/notes/decisions-history.md, "The user whose calibration came out
//! low"): the do-nothing trials of one `ratchet-lab simulate` cell, drawn exactly as it draws them,
//! and for each one kept the route that kept it (the likelihood ratio, the two phases, the
//! rescue), the scale each deciding look read (history or own) and at which look, the gross
//! outliers set aside, and the calibration's sd against the truth.
//!
//! `cargo run --release -p ratchet-lab --example keeps_probe -- [key=value ...]`, keys: model (a name or part of
//! one; "cv 0.5% bimodal, calibration in its lowest" by default), method (auto), null (trials;
//! 100000), seed (20260522), show (keeps printed one per line; 20), ratios (1: each shown keep's
//! log-ratios too), history (pairs of the calibration in place of the model's), slow_p, slow and cv (the
//! machine's share of runs in a slow mode, how much slower, and its noise within a mode, in place of the model's), since (the decision
//! after this many do-nothing experiments since the calibration, each recorded in the history), rules (before-streak: as decided before the streak rules of
//! lab/notes/decisions-history.md, "A streak of a second population"; streak-five: before the ratio's first
//! keep waited 6 used pairs on two modes shown).

#[path = "common/args.rs"]
mod args;

use ratchet::config::{DecisionConfig, Method};
use ratchet::stats::sequential::Sequential;
use ratchet::stats::{LookPhase, Verdict};
use ratchet_lab::simulate::{cell_positions, probe_trial, scenarios, ProbeTrial};
use std::collections::BTreeMap;

fn main() {
    let kv = args::Args::from_env();
    let want = kv.get("model").map_or("cv 0.5% bimodal, calibration in its lowest", |s| s.as_str());
    let mut s = scenarios().into_iter().find(|s| s.name.contains(want)).unwrap_or_else(|| panic!("no model named like {want:?}"));
    if let Some(h) = kv.get("history") {
        // A calibration of this many pairs in place of the model's (its lowest tail redrawn).
        s.history_pairs = h.parse().unwrap_or_else(|e| panic!("history={h}: {e}"));
    }
    // The machine's shape in place of the model's: the share of runs in the slow mode, how much
    // slower, the noise within a mode (the two-mode machines a calibration cannot tell apart).
    if let Some(v) = kv.get("slow_p") {
        s.slow_mode_prob = v.parse().unwrap_or_else(|e| panic!("slow_p={v}: {e}"));
    }
    if let Some(v) = kv.get("slow") {
        s.slow_mode = v.parse().unwrap_or_else(|e| panic!("slow={v}: {e}"));
    }
    if let Some(v) = kv.get("since") {
        // The decision after this many do-nothing experiments since the calibration.
        s.experiments_since = v.parse().unwrap_or_else(|e| panic!("since={v}: {e}"));
    }
    if let Some(v) = kv.get("cv") {
        s.cv = v.parse().unwrap_or_else(|e| panic!("cv={v}: {e}"));
    }
    let method: Method = kv.get("method").map_or("auto", |s| s.as_str()).parse().unwrap_or_else(|e| panic!("{e}"));
    let (null, seed, show) = (kv.num("null", 100000.0) as usize, kv.num("seed", 20260522.0) as u64, kv.num("show", 20.0) as usize);
    let mut params = DecisionConfig { method, ..DecisionConfig::earlier() }.params(None);
    if kv.get("rules").is_some_and(|r| r == "streak-five") {
        // As decided before the ratio's first keep waited 6 used pairs where two modes were shown.
        params.levels.ratio_keep_from_two_modes_shown = 0;
    }
    if kv.get("rules").is_some_and(|r| r == "before-streak") {
        // As decided before the first look and the first keep waited out a streak of a second
        // population of runs (the switches `outlier_first_look` and `likelihood_ratio_streak` off).
        let switches =
            ratchet::stats::sequential::Switches { outlier_first_look: false, streak: false, ..ratchet::stats::sequential::Switches::ALL };
        params.levels = ratchet::stats::sequential::Levels::from_switches(switches);
    }
    let seq = Sequential::new(params);
    let positions = cell_positions(&seq);
    let truth = std::f64::consts::SQRT_2 * s.run_sd();
    let (mut keeps, mut routes) = (0usize, BTreeMap::<String, usize>::new());
    let (mut one_mode, mut second, mut borrowed_n) = (0usize, 0usize, 0usize);
    println!(
        "{} ({method:?}; cv {:.2}%, {:.0}% of runs {:.1}% slower), {null} do-nothing trials, seed {seed}; truth sd {:.3}%",
        s.name,
        100.0 * s.cv,
        100.0 * s.slow_mode_prob,
        100.0 * s.slow_mode,
        100.0 * truth
    );
    for t in 0..null {
        let ProbeTrial { decision: d, runs, ratios, borrowed } = probe_trial(&seq, &s, positions, 0.0, seed, t);
        if let Some(b) = &borrowed {
            borrowed_n += 1;
            one_mode += b.one_mode() as usize;
            second += b.second_population() as usize;
        }
        let cal = borrowed.map(|b| (b.scale.sd / truth, b.outliers, b.modes));
        if d.verdict != Verdict::Keep {
            continue;
        }
        keeps += 1;
        // The deciding look of each phase: the last of its phase in the trail.
        let last = |ph: LookPhase| d.trail.iter().rev().find(|l| l.phase == ph);
        let route = match (&d.rescue, &d.confirmation, last(LookPhase::Decision)) {
            (Some(_), _, _) => "rescue".to_string(),
            (None, None, Some(l)) => format!("one phase ({} look {})", l.scale, l.look),
            (None, Some(_), Some(l)) => {
                let c = last(LookPhase::Confirmation);
                format!(
                    "two phases (first {} look {}; confirmation {})",
                    l.scale,
                    l.look,
                    c.map_or("-".into(), |c| format!("{} look {}", c.scale, c.look))
                )
            }
            _ => "other".to_string(),
        };
        *routes.entry(route.clone()).or_default() += 1;
        if keeps <= show {
            let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
            println!(
                "  trial {t}: {route}; {runs} runs, mean {:+.2}%, excluded {}, calibration {:?}; {}",
                100.0 * mean,
                d.excluded,
                cal.map(|(r, o, m)| format!("{r:.3}x, outliers {o}, modes {m:?}")),
                d.reason
            );
            if kv.num("ratios", 0.0) > 0.0 {
                println!("    pairs (%): {}", ratios.iter().map(|r| format!("{:+.2}", 100.0 * r)).collect::<Vec<_>>().join(" "));
            }
        }
    }
    println!("kept {keeps} of {null} ({:.3}%)", 100.0 * keeps as f64 / null as f64);
    println!("histories: {borrowed_n} lent a scale, {one_mode} showed one mode, {second} a second population");
    for (r, n) in routes {
        println!("  {n:6}  {r}");
    }
}
