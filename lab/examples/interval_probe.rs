//! The probe of the row's interval under the stop (lab/notes/decisions-history.md, "Intervals that account
//! for the stop" and "Intervals with the stop's side"): on `ratchet-lab simulate`'s own cells, how
//! often an interval over all pairs at 96% covers the true gain: equal-tailed (the row's until
//! 2026-11-27), with the lower end carrying `lower` of the miss (the row's since, by
//! `effect::decision_interval`), and as a Bonferroni interval over the procedure's looks would
//! (each look's interval at 1 - 0.04 / K, K the looks a decision can stop at: by the union bound
//! it covers at whatever look the decision stops), with the last two's widths against the first's,
//! and as the row shows it (`effect::shown_interval`: a keep's split; on a row without a keep each
//! end at the lower end's share, and on the likelihood ratio's such rows the lower end at most no
//! gain), with its width against the equal-tailed one's.
//!
//! `cargo run --release -p ratchet-lab --example interval_probe -- [key=value ...]`, keys: seed, trials (per
//! cell), null (per do-nothing cell), looks (K; 12 by default: 8 first-phase looks, 3
//! confirmation looks and the rescue), method (the `[decision] method`, as the config spells
//! it; the default's unless given), lower (the lower end's share of the miss;
//! `effect::DECISION_LOWER_SHARE` by default), only (models whose names contain one of these,
//! split by '|'), gains (true gains in percent, split by '|'; 0|3|10 by default), threads.

#[path = "common/args.rs"]
mod args;

use ratchet::config::DecisionConfig;
use ratchet::stats::effect::{hodges_lehmann, hodges_lehmann_tails, shown_interval, DECISION_LOWER_SHARE};
use ratchet::stats::sequential::Sequential;
use ratchet_lab::simulate::{cell_positions, probe_trial, scenarios, Scenario};

/// Coverage tallies of one cell: trials with a 96% interval, of them covered; the same for the
/// Bonferroni interval (among the trials with enough pairs for the 96% one, so that the two
/// shares are of the same decisions), and the sum of the width ratios.
#[derive(Default)]
struct Tally {
    with: usize,
    covered: usize,
    /// Of the row's misses, those whose interval lies wholly above the true gain (the rest lie
    /// below it).
    above: usize,
    bonferroni_covered: usize,
    ratio_sum: f64,
    /// The interval with the lower end's share: covered, and the sum of its width ratios.
    split_covered: usize,
    split_ratio_sum: f64,
    /// The row's interval as shown (`effect::shown_interval`).
    shown_covered: usize,
    /// The sum of its width ratios to the equal-tailed interval's.
    shown_ratio_sum: f64,
    /// Every trial, whatever its pairs: the Bonferroni interval's coverage over all of them.
    all: usize,
    all_covered: usize,
}

fn cell(seq: &Sequential, s: &Scenario, effect: f64, trials: usize, seed: u64, looks: f64, lower: f64) -> Tally {
    let level = 1.0 - 2.0 * seq.params.alpha;
    let wide = 1.0 - (1.0 - level) / looks;
    let truth = (1.0 + effect).ln();
    let positions = cell_positions(seq);
    let mut t = Tally::default();
    for i in 0..trials {
        let pt = probe_trial(seq, s, positions, effect, seed, i);
        let shown = shown_interval(&pt.ratios, &pt.decision);
        let ratios = pt.ratios;
        let (Some(e), Some(b)) = (hodges_lehmann(&ratios, level), hodges_lehmann(&ratios, wide)) else { continue };
        t.all += 1;
        t.all_covered += (b.low <= truth && truth <= b.high) as usize;
        if e.coverage < level - 1e-9 {
            continue;
        }
        t.with += 1;
        t.covered += (e.low <= truth && truth <= e.high) as usize;
        t.above += (e.low > truth) as usize;
        t.bonferroni_covered += (b.low <= truth && truth <= b.high) as usize;
        t.ratio_sum += (b.high - b.low) / (e.high - e.low).max(1e-12);
        let sp = hodges_lehmann_tails(&ratios, level, lower).expect("finite ratios");
        t.split_covered += (sp.low <= truth && truth <= sp.high) as usize;
        let shown = shown.expect("finite ratios");
        t.shown_covered += (shown.low <= truth && truth <= shown.high) as usize;
        t.shown_ratio_sum += (shown.high - shown.low) / (e.high - e.low).max(1e-12);
        t.split_ratio_sum += (sp.high - sp.low) / (e.high - e.low).max(1e-12);
    }
    t
}

fn main() {
    let kv = args::Args::from_env();
    let num = |k: &str, d: f64| kv.num(k, d);
    let seed = num("seed", 20260522.0) as u64;
    let (trials, null) = (num("trials", 2000.0) as usize, num("null", 20000.0) as usize);
    let looks = num("looks", 12.0);
    let lower = num("lower", DECISION_LOWER_SHARE);
    // The row's interval is at 1 - 2 alpha: this much miss, in percent, to split.
    let miss = 2.0 * DecisionConfig::earlier().alpha * 100.0;
    let threads = num("threads", 2.0) as usize;
    let config = DecisionConfig {
        method: kv.get("method").map_or(Ok(DecisionConfig::earlier().method), |m| m.parse()).unwrap_or_else(|e| panic!("method={e}")),
        ..DecisionConfig::earlier()
    };
    let gains: Vec<f64> = kv
        .get("gains")
        .map_or(vec![0.0, 3.0, 10.0], |g| {
            g.split('|').map(|x| x.parse().unwrap_or_else(|_| panic!("gains={g}: percents split by '|'"))).collect()
        })
        .into_iter()
        .map(|pct: f64| pct / 100.0)
        .collect();
    let only: Option<Vec<String>> = kv.get("only").map(|s| s.to_lowercase().split('|').map(str::to_string).collect());
    let models: Vec<Scenario> = scenarios()
        .into_iter()
        .filter(|s| only.as_ref().is_none_or(|o| o.iter().any(|o| s.name.to_lowercase().contains(o.as_str()))))
        .collect();
    let jobs: Vec<(usize, Scenario, f64)> =
        models.iter().flat_map(|s| gains.iter().map(move |&e| (s.clone(), e))).enumerate().map(|(i, (s, e))| (i, s, e)).collect();
    println!(
        "| model | gain | trials with a 96% interval | equal-tailed covers | its misses above the truth | {}% below, {}% above covers | its width / the equal-tailed one's | Bonferroni over {looks} looks covers | its width | Bonferroni, every trial | as the row shows it (a keep's split; without a keep each end {}%, the ratio's lower end at most no gain) | its width |",
        lower * miss,
        (1.0 - lower) * miss,
        DECISION_LOWER_SHARE * miss
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut rows: Vec<(usize, String)> = std::thread::scope(|sc| {
        let config = &config;
        let handles: Vec<_> = (0..threads)
            .map(|th| {
                let mine: Vec<_> = jobs.iter().filter(|(i, _, _)| i % threads == th).cloned().collect();
                sc.spawn(move || {
                    let seq = Sequential::new(config.params(None));
                    mine.into_iter()
                        .map(|(i, s, e)| {
                            let n = if e == 0.0 { null } else { trials };
                            let t = cell(&seq, &s, e, n, seed ^ (i as u64).wrapping_mul(0x2545_F491_4F6C_DD1D), looks, lower);
                            let share = |k: usize, of: usize| {
                                if of == 0 {
                                    "-".to_string()
                                } else {
                                    format!("{:.1}%", 100.0 * k as f64 / of as f64)
                                }
                            };
                            let ratio = |sum: f64| if t.with == 0 { "-".to_string() } else { format!("{:.2}x", sum / t.with as f64) };
                            let line = format!(
                                "| {} | {:+}% | {} of {n} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                                s.name,
                                (e * 1000.0).round() / 10.0,
                                t.with,
                                share(t.covered, t.with),
                                share(t.above, t.with - t.covered),
                                share(t.split_covered, t.with),
                                ratio(t.split_ratio_sum),
                                share(t.bonferroni_covered, t.with),
                                ratio(t.ratio_sum),
                                share(t.all_covered, t.all),
                                share(t.shown_covered, t.with),
                                ratio(t.shown_ratio_sum)
                            );
                            (i, line)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    rows.sort();
    for (_, l) in rows {
        println!("{l}");
    }
}
