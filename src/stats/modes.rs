//! Whether a session's runs fall in two modes (per-process modes: a share of the benchmark's
//! processes run a few percent slower, from memory placement, clocks or code layout), read from
//! the pairs a history entry records. The likelihood ratio keeps at a lower level only where the
//! history shows one mode (lab/notes/decisions-history.md, "One mode or two").

use super::sequential::likelihood::log_mix;
use super::sequential::{median, MODES_AT, MODES_MIN_PAIRS};

/// The mixture weights and the shares of the variance between the modes that
/// [`two_modes_llr`] tries: a coarse grid (the statistic is a screen, and a simulated decision
/// computes it once per calibration).
const WEIGHTS: [f64; 9] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9];
const BETWEEN: [f64; 4] = [0.6, 0.8, 0.9, 0.95];

/// The log-likelihood ratio (nats) of two normal modes of one sd against one normal, over `x`,
/// at the best point of a grid: for weight w of the second mode and a share f of the variance
/// between the modes, the mixture keeps the sample's mean and variance v (modes sqrt(f v /
/// (w (1 - w))) apart, each of variance (1 - f) v), and the one normal is the sample's own fit.
/// At 0 for fewer than 3 values or no spread. Under one normal mode it exceeds [`MODES_AT`] in
/// about 1% of sessions of 8 to 30 pairs (`two_modes_rarely_seen_in_one_normal_mode`).
pub fn two_modes_llr(x: &[f64]) -> f64 {
    let n = x.len() as f64;
    if x.len() < 3 {
        return 0.0;
    }
    let m = x.iter().sum::<f64>() / n;
    let v = x.iter().map(|a| (a - m).powi(2)).sum::<f64>() / n;
    if v <= 0.0 || !v.is_finite() {
        return 0.0;
    }
    let one = -0.5 * n * (2.0 * std::f64::consts::PI * v).ln() - 0.5 * n;
    let mut best = f64::NEG_INFINITY;
    for &w in &WEIGHTS {
        for &f in &BETWEEN {
            let s2 = (1.0 - f) * v;
            let d = (f * v / (w * (1.0 - w))).sqrt();
            let lo = m - w * d;
            let c = -0.5 * (2.0 * std::f64::consts::PI * s2).ln();
            let (lw0, lw1) = ((1.0 - w).ln(), w.ln());
            let ll: f64 = x
                .iter()
                .map(|a| c + log_mix([lw0 - (a - lo).powi(2) / (2.0 * s2), lw1 - (a - lo - d).powi(2) / (2.0 * s2)].into_iter()))
                .sum();
            best = best.max(ll);
        }
    }
    (best - one).max(0.0)
}

/// A batch's runs from its pairs (log-ratio, log-sum): each pair's two runs, (sum +- (log-ratio -
/// m)) / 2, with m the batch's median log-ratio, so that a gain between the sides is no mode.
/// The median, not the mean: most pairs have both runs in one mode, so the median lies in the
/// log-ratio of equal modes, where a mean (or each side's own median) moves with how many runs
/// the other mode took and blurs or splits the modes. No trend is taken out either: a line fitted
/// to runs in two modes is as unsure as the modes are far apart.
pub fn batch_runs(ratios: &[f64], sums: &[f64]) -> Vec<f64> {
    let n = ratios.len().min(sums.len());
    if n == 0 {
        return vec![];
    }
    let m = median(&ratios[..n]);
    (0..n).flat_map(|i| [(sums[i] + ratios[i] - m) / 2.0, (sums[i] - ratios[i] + m) / 2.0]).collect()
}

/// A session's statistic from its batches' runs ([`batch_runs`] of each, one after another):
/// `None` below [`MODES_MIN_PAIRS`] pairs, where one mode cannot be told from two.
pub fn session_llr(runs: &[f64]) -> Option<f64> {
    (runs.len() >= 2 * MODES_MIN_PAIRS).then(|| two_modes_llr(runs))
}

/// Whether a session's statistic shows two modes.
pub fn shows_two(llr: f64) -> bool {
    llr > MODES_AT
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::rng::Rng;

    fn pairs(rng: &mut Rng, n: usize, run: &mut dyn FnMut(&mut Rng, usize) -> f64) -> (Vec<f64>, Vec<f64>) {
        (0..n)
            .map(|i| {
                let (a, b) = (run(rng, 2 * i), run(rng, 2 * i + 1));
                (a - b, a + b)
            })
            .unzip()
    }

    fn share_seen(n: usize, sessions: usize, mut run: impl FnMut(&mut Rng, usize) -> f64) -> f64 {
        let mut rng = Rng::new(17);
        let seen = (0..sessions)
            .filter(|_| {
                let (r, s) = pairs(&mut rng, n, &mut run);
                session_llr(&batch_runs(&r, &s)).is_some_and(shows_two)
            })
            .count();
        seen as f64 / sessions as f64
    }

    #[test]
    fn two_modes_rarely_seen_in_one_normal_mode() {
        for n in [8, 16, 30] {
            let share = share_seen(n, 2000, |r, _| 0.01 * r.normal());
            assert!(share < 0.02, "{n} pairs: {share}");
        }
    }

    #[test]
    fn per_process_modes_are_seen_and_a_slow_drift_is_not() {
        // 30% of processes 4% slower at 0.5% noise: the simulator's binding machine.
        let modes = share_seen(16, 500, |r, _| 0.005 * r.normal() + if r.uniform() < 0.3 { 0.04 } else { 0.0 });
        assert!(modes > 0.97, "{modes}");
        // A throttling trend of 0.3% a run spreads 32 runs 10% without modes.
        let trend = share_seen(16, 1000, |r, t| 0.01 * r.normal() + 0.003 * t as f64);
        assert!(trend < 0.05, "{trend}");
    }

    #[test]
    fn a_gain_between_the_sides_is_no_mode() {
        // Every candidate run (the second of a pair) 10% faster: the log-ratios move, the runs
        // keep one mode once the batch's median log-ratio is taken out; read as they are, the
        // two sides are two modes.
        let gain = share_seen(16, 1000, |r, t| 0.01 * r.normal() - if t % 2 == 1 { 0.1 } else { 0.0 });
        assert!(gain < 0.02, "{gain}");
        let mut rng = Rng::new(3);
        let apart: Vec<f64> = (0..32).map(|t| 0.01 * rng.normal() - if t % 2 == 1 { 0.1 } else { 0.0 }).collect();
        assert!(shows_two(two_modes_llr(&apart)));
    }

    #[test]
    fn too_few_pairs_tell_nothing() {
        let runs = batch_runs(&[0.01; 7], &[0.0; 7]);
        assert_eq!(session_llr(&runs), None);
        assert!(session_llr(&[runs.clone(), runs].concat()).is_some());
        assert_eq!(two_modes_llr(&[1.0, 1.0, 1.0]), 0.0);
    }
}
