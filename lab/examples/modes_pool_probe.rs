//! Can short sessions, pooled, tell two modes from one (lab/notes/decisions-history.md, "Two-mode machines of
//! every shape")? Each machine's sessions (2, 2, 3, 3, 4 and 7 pairs in turn, each at its own
//! level, as experiments of a sweep come) are pooled until they hold `total` pairs, and three
//! statistics read the pool: the mode screen's (`modes::two_modes_llr`) on each session's runs
//! less their median or less their mean, and a symmetric three-mode mixture on the log-ratios
//! less each session's median (no level needed). Prints, per machine, the share of 2000 pools
//! over 3, 5 (`MODES_AT`), 7 and 9 nats.
//!
//! `cargo run --release -p ratchet-lab --example modes_pool_probe -- [TOTAL_PAIRS]` (60 by default).
use ratchet::stats::modes::{batch_runs, two_modes_llr};
use ratchet::stats::rng::Rng;
use ratchet::stats::sequential::median;

/// One session of `k` pairs at a level of its own: (log-ratios, log-sums).
fn session(rng: &mut Rng, k: usize, w: f64, gap: f64, cv: f64, gain: f64) -> (Vec<f64>, Vec<f64>) {
    let lvl = 0.05 * rng.normal();
    (0..k)
        .map(|_| {
            let run = |r: &mut Rng| lvl + cv * r.normal() + if r.uniform() < w { gap } else { 0.0 };
            let (a, b) = (run(rng), run(rng) - gain);
            (a - b, a + b)
        })
        .unzip()
}

/// The log-likelihood ratio of a symmetric three-mode mixture (weights q, 1 - 2q, q; one sd)
/// against one normal, at the best point of a grid, the mixture keeping the sample's mean and
/// variance as `two_modes_llr`'s does.
fn three_llr(x: &[f64]) -> f64 {
    let n = x.len() as f64;
    let m = x.iter().sum::<f64>() / n;
    let v = x.iter().map(|a| (a - m).powi(2)).sum::<f64>() / n;
    let one = -0.5 * n * (2.0 * std::f64::consts::PI * v).ln() - 0.5 * n;
    let mut best = f64::NEG_INFINITY;
    for q in [0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45] {
        for f in [0.4, 0.6, 0.8, 0.9, 0.95] {
            let s2 = (1.0 - f) * v;
            let d = (f * v / (2.0 * q)).sqrt();
            let c = -0.5 * (2.0 * std::f64::consts::PI * s2).ln();
            let ll: f64 = x
                .iter()
                .map(|a| {
                    let z = |mu: f64| (-(a - mu).powi(2) / (2.0 * s2)).exp();
                    c + (q * z(m - d) + (1.0 - 2.0 * q) * z(m) + q * z(m + d)).max(1e-300).ln()
                })
                .sum();
            best = best.max(ll);
        }
    }
    (best - one).max(0.0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let total: usize = args.get(1).map_or(60, |s| s.parse().unwrap());
    let reps = 2000;
    let lens = [2usize, 2, 3, 3, 4, 7];
    for (name, w, gap, cv, varsd) in [
        ("normal cv1", 0.0, 0.0, 0.01, false),
        ("normal cv 0.7-1.5 by session", 0.0, 0.0, 0.01, true),
        ("50/50 3% cv1", 0.5, 0.03, 0.01, false),
        ("30% 4% cv0.5", 0.3, 0.04, 0.005, false),
        ("10% 5% cv1", 0.1, 0.05, 0.01, false),
        ("50% 2.5% cv1.2", 0.5, 0.025, 0.012, false),
    ] {
        let mut rng = Rng::new(7);
        let mut hits = [[0usize; 4]; 3];
        for _ in 0..reps {
            let (mut a_med, mut a_mean, mut b) = (vec![], vec![], vec![]);
            let mut pairs = 0;
            let mut li = 0;
            while pairs < total {
                let k = lens[li % lens.len()];
                li += 1;
                let cvs = if varsd { cv * (0.7 + 0.8 * rng.uniform()) } else { cv };
                let (r, s) = session(&mut rng, k, w, gap, cvs, 0.0);
                pairs += k;
                let runs = batch_runs(&r, &s);
                let med = median(&runs);
                let mean = runs.iter().sum::<f64>() / runs.len() as f64;
                a_med.extend(runs.iter().map(|x| x - med));
                a_mean.extend(runs.iter().map(|x| x - mean));
                let mr = median(&r);
                b.extend(r.iter().map(|x| x - mr));
            }
            let stats = [two_modes_llr(&a_med), two_modes_llr(&a_mean), three_llr(&b)];
            for (i, s) in stats.iter().enumerate() {
                for (j, at) in [3.0, 5.0, 7.0, 9.0].iter().enumerate() {
                    hits[i][j] += (*s > *at) as usize;
                }
            }
        }
        let pct = |h: usize| 100.0 * h as f64 / reps as f64;
        println!(
            "{name:32} runs-median {:>5.1} {:>5.1} {:>5.1} {:>5.1} | runs-mean {:>5.1} {:>5.1} {:>5.1} {:>5.1} | ratios3 {:>5.1} {:>5.1} {:>5.1} {:>5.1}",
            pct(hits[0][0]), pct(hits[0][1]), pct(hits[0][2]), pct(hits[0][3]),
            pct(hits[1][0]), pct(hits[1][1]), pct(hits[1][2]), pct(hits[1][3]),
            pct(hits[2][0]), pct(hits[2][1]), pct(hits[2][2]), pct(hits[2][3])
        );
    }
}
