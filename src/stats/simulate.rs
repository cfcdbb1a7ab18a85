//! `ratchet simulate`: the decision procedure, unchanged, against synthetic benchmarks with
//! known true effects, and the benchstat-style baseline (a fixed 10 + 10 two-sided Mann-Whitney
//! U test at alpha 0.05) on the same draws. Seeded and deterministic.
//!
//! A synthetic run's latency is `base / (1 + effect if candidate) * exp(cv * z) * drift(i) *
//! spike * mode`, where `i` is the run's position in the session: the drift, spikes and modes
//! belong to the machine, not to the side, exactly as on real hardware. Each trial draws one
//! sequence of machine states by position; the procedure runs its interleaved pairs on it, the
//! baseline runs 10 incumbent runs then 10 candidate runs on the same positions (two blocks, as
//! `benchstat old.txt new.txt` compares them).

use super::mannwhitney::mann_whitney_u;
use super::rng::Rng;
use super::sequential::{incumbent_first, run_to_decision, Phase, Sequential};
use super::Verdict;

/// A synthetic benchmark's noise model.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: &'static str,
    /// Run-to-run coefficient of variation (log-normal), as a fraction.
    pub cv: f64,
    /// Linear drift of the latency per run, as a fraction (positive: the machine slows down).
    pub drift_per_run: f64,
    /// A warm-up clock ramp: the first run is this much slower, decaying with `ramp_runs`.
    pub ramp: f64,
    pub ramp_runs: f64,
    /// Probability that a run is hit by a spike, and the spike's slowdown (fraction).
    pub spike_prob: f64,
    pub spike: f64,
    /// Probability that a run lands in the slow mode, and how much slower that mode is.
    pub slow_mode_prob: f64,
    pub slow_mode: f64,
}

impl Scenario {
    const fn quiet(name: &'static str, cv: f64) -> Scenario {
        Scenario {
            name,
            cv,
            drift_per_run: 0.0,
            ramp: 0.0,
            ramp_runs: 1.0,
            spike_prob: 0.0,
            spike: 0.0,
            slow_mode_prob: 0.0,
            slow_mode: 0.0,
        }
    }
}

/// The scenarios of the table in docs/decisions.md.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::quiet("cv 0.5%", 0.005),
        Scenario::quiet("cv 1%", 0.01),
        Scenario::quiet("cv 2%", 0.02),
        Scenario::quiet("cv 3%", 0.03),
        // A 12% clock ramp over the first runs (the documented GPU case) and 0.1%/run thermal drift.
        Scenario { drift_per_run: 0.001, ramp: 0.12, ramp_runs: 4.0, ..Scenario::quiet("cv 1% + drift", 0.01) },
        // One run in 25 is 25% slower (a neighbour's job, a GC pause).
        Scenario { spike_prob: 0.04, spike: 0.25, ..Scenario::quiet("cv 1% + spikes", 0.01) },
        // Two modes 4% apart, 30% of runs in the slow one (e.g. memory placement per process).
        Scenario { slow_mode_prob: 0.3, slow_mode: 0.04, ..Scenario::quiet("cv 0.5% bimodal", 0.005) },
    ]
}

/// The true gains simulated, as fractions.
pub const EFFECTS: [f64; 4] = [0.0, 0.01, 0.03, 0.10];

/// One run's machine state at one position: multiply the side's latency by it.
fn machine(s: &Scenario, i: usize, rng: &mut Rng) -> f64 {
    let mut f = (s.cv * rng.normal()).exp();
    f *= 1.0 + s.drift_per_run * i as f64 + s.ramp * (-(i as f64) / s.ramp_runs).exp();
    let (u1, u2) = (rng.uniform(), rng.uniform());
    if u1 < s.spike_prob {
        f *= 1.0 + s.spike;
    }
    if u2 < s.slow_mode_prob {
        f *= 1.0 + s.slow_mode;
    }
    f
}

/// Tallies of one (scenario, effect) cell.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cell {
    pub trials: usize,
    pub keeps: usize,
    pub inconclusive: usize,
    pub total_runs: usize,
    pub max_runs: usize,
    pub baseline_keeps: usize,
}

impl Cell {
    pub fn keep_rate(&self) -> f64 {
        self.keeps as f64 / self.trials as f64
    }
    pub fn baseline_rate(&self) -> f64 {
        self.baseline_keeps as f64 / self.trials as f64
    }
    pub fn mean_runs(&self) -> f64 {
        self.total_runs as f64 / self.trials as f64
    }
}

/// Runs per side of the baseline, as in `benchstat -count 10`.
pub const BASELINE_RUNS: usize = 10;

/// Simulate `trials` decisions of one cell, seeded by `seed`.
pub fn simulate_cell(seq: &Sequential, s: &Scenario, effect: f64, trials: usize, seed: u64) -> Cell {
    let mut cell = Cell { trials, ..Default::default() };
    let positions = (2 * seq.params.max_total_pairs()).max(2 * BASELINE_RUNS);
    for t in 0..trials {
        let mut rng = Rng::new(seed ^ (t as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let states: Vec<f64> = (0..positions).map(|i| machine(s, i, &mut rng)).collect();
        let cand = 1.0 / (1.0 + effect);
        // The procedure: pairs in its order, on consecutive positions of the session.
        let mut pos = 0;
        let d = run_to_decision(seq, |phase: Phase, i| {
            let (a, b) = (states[pos], states[pos + 1]);
            pos += 2;
            let (inc, cnd) = if incumbent_first(phase, i) { (a, b * cand) } else { (b, a * cand) };
            (inc / cnd).ln()
        });
        cell.total_runs += pos;
        cell.max_runs = cell.max_runs.max(pos);
        match d.verdict {
            Verdict::Keep => cell.keeps += 1,
            Verdict::Inconclusive => cell.inconclusive += 1,
            Verdict::Revert => {}
        }
        // The baseline on the same positions: incumbent block, then candidate block.
        let inc: Vec<f64> = states[..BASELINE_RUNS].to_vec();
        let cnd: Vec<f64> = states[BASELINE_RUNS..2 * BASELINE_RUNS].iter().map(|x| x * cand).collect();
        let (u, p) = mann_whitney_u(&cnd, &inc);
        // U of the candidate below n1 n2 / 2: its latencies rank lower, i.e. it is faster.
        if p < 0.05 && u < (BASELINE_RUNS * BASELINE_RUNS) as f64 / 2.0 {
            cell.baseline_keeps += 1;
        }
    }
    cell
}

/// One-sided 95% upper bound of a rate with `k` events in `n` trials (Clopper-Pearson).
pub fn upper_bound(k: usize, n: usize) -> f64 {
    use statrs::distribution::{Beta, ContinuousCDF};
    if k >= n {
        return 1.0;
    }
    if k == 0 {
        return 1.0 - 0.05f64.powf(1.0 / n as f64);
    }
    Beta::new(k as f64 + 1.0, (n - k) as f64).expect("valid beta").inverse_cdf(0.95)
}

/// The whole table as Markdown.
pub fn table(seq: &Sequential, trials: usize, seed: u64) -> String {
    let mut out = String::new();
    out.push_str(
        "| scenario | true gain | ratchet keeps | (95% upper) | inconclusive | mean runs | max runs | MWU 10+10 keeps | MWU runs |\n",
    );
    out.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    let mut sum_runs = 0.0;
    let mut cells = 0.0;
    for (si, s) in scenarios().iter().enumerate() {
        for (ei, &e) in EFFECTS.iter().enumerate() {
            let c = simulate_cell(seq, s, e, trials, seed.wrapping_add((si * 16 + ei) as u64 * 0x1000_0001));
            sum_runs += c.mean_runs();
            cells += 1.0;
            let ub = if e == 0.0 { format!("≤ {:.2}%", upper_bound(c.keeps, c.trials) * 100.0) } else { String::new() };
            out.push_str(&format!(
                "| {} | {:+.0}% | {:.2}% | {} | {:.1}% | {:.1} | {} | {:.2}% | {} |\n",
                s.name,
                e * 100.0,
                c.keep_rate() * 100.0,
                ub,
                c.inconclusive as f64 / c.trials as f64 * 100.0,
                c.mean_runs(),
                c.max_runs,
                c.baseline_rate() * 100.0,
                2 * BASELINE_RUNS
            ));
        }
    }
    out.push_str(&format!("\nmean runs per decision over all cells: {:.1} (baseline: {})\n", sum_runs / cells, 2 * BASELINE_RUNS));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::sequential::{Params, Spending};

    fn seq() -> Sequential {
        Sequential::new(Params {
            min_pairs: 4,
            max_pairs: 16,
            look_every: 2,
            alpha: 0.05,
            spending: Spending::Pocock,
            min_effect_pct: 1.0,
            futility_beta: Some(0.2),
            confirm: true,
            confirm_pairs: 6,
            confirm_alpha: 0.02,
        })
    }

    #[test]
    fn deterministic_and_sane_on_a_small_run() {
        let s = &scenarios()[1];
        let a = simulate_cell(&seq(), s, 0.10, 200, 1);
        assert_eq!(a, simulate_cell(&seq(), s, 0.10, 200, 1), "seeded");
        assert!(a.keep_rate() > 0.95, "{a:?}");
        let null = simulate_cell(&seq(), s, 0.0, 500, 2);
        assert!(null.keeps <= 1, "{null:?}");
        assert!(null.mean_runs() < 20.0, "{null:?}");
    }

    #[test]
    fn drift_fools_the_block_baseline_not_the_procedure() {
        let s = scenarios().into_iter().find(|s| s.name.contains("drift")).unwrap();
        let c = simulate_cell(&seq(), &s, 0.0, 300, 3);
        assert_eq!(c.keeps, 0, "{c:?}");
        // The incumbent block sits on the ramp: the candidate block looks faster.
        assert!(c.baseline_rate() > 0.2, "{c:?}");
    }

    #[test]
    fn upper_bound_of_a_rate() {
        // Rule of three: 0 events in n trials -> 1 - 0.05^(1/n) ~ 3/n.
        assert!((upper_bound(0, 3000) - 0.000998).abs() < 1e-5);
        // scipy.stats.beta.ppf(0.95, 3, 998) = 0.006282284546723426 (Clopper-Pearson, 2 of 1000).
        assert!((upper_bound(2, 1000) - 0.006282284546723426).abs() < 1e-7, "{}", upper_bound(2, 1000));
    }
}
