//! One look's test of a batch: which pairs it reads (gross outliers set aside and replaced),
//! and which test reads them: the pairs' own t-test without history ([`super::own`]), the
//! borrowed scale with its guard with history ([`super::with_history`]).

use super::own::Kept;
#[cfg(test)]
use crate::stats::sequential::levels::GUARD;
use crate::stats::sequential::levels::ROBUST_BAND_PAIRS;
use crate::stats::sequential::plan::allowed_outliers;
use crate::stats::sequential::sample::{mean_sd, median, outlier_band};
use crate::stats::sequential::stat::{Batch, Prior, Test};
use crate::stats::sequential::Sequential;

impl Sequential {
    /// The pairs of `d` kept for a test: all of them, or with a borrowed scale those within
    /// `outlier_k` sds of the median (the history's sd, or the batch's 1.4826 MAD when larger;
    /// when at most `allowed_outliers` fall outside).
    pub(super) fn kept(&self, d: &[f64]) -> Vec<f64> {
        self.kept_idx(d).into_iter().map(|i| d[i]).collect()
    }

    /// [`Sequential::kept`] as indices into `d` (in order).
    pub(in crate::stats::sequential) fn kept_idx(&self, d: &[f64]) -> Vec<usize> {
        let all = (0..d.len()).collect();
        let Some(b) = &self.borrowed else { return all };
        // From 3 pairs in the batch's own robust sd when larger: under a jump the spread left
        // would otherwise understate the noise (the own t-test then rejects too often).
        let band = outlier_band(b.outlier_k, b.scale.sd, d);
        if d.len() < ROBUST_BAND_PAIRS {
            // Two pairs further apart than twice the band: one is an outlier, but which one
            // only a third pair can tell (the caller measures it).
            return if d.len() == 2 && (d[0] - d[1]).abs() > 2.0 * band { vec![] } else { all };
        }
        let med = median(d);
        let kept: Vec<usize> = (0..d.len()).filter(|&i| (d[i] - med).abs() <= band).collect();
        if d.len() - kept.len() > allowed_outliers(d.len()) {
            all
        } else {
            kept
        }
    }

    /// The own spread a batch hands to the next one (the confirmation): its kept pairs'
    /// residual sum of squares and df, and (with the history's sum spread) the guard's
    /// statistic of its sums in units of the history's variance.
    pub(in crate::stats::sequential) fn prior_of(&self, d: &[f64], s: &[f64]) -> Prior {
        let idx = self.kept_idx(d);
        let kept: Vec<f64> = idx.iter().map(|&i| d[i]).collect();
        let (_, sd) = mean_sd(&kept);
        let df = kept.len().saturating_sub(1) as f64;
        let mut prior = Prior { ss: sd * sd * df, df, ..Prior::default() };
        if let Some((b, hs)) = self.borrowed.as_ref().and_then(|b| b.sums.map(|hs| (b, hs))) {
            if s.len() >= d.len() {
                let v: Vec<f64> = idx.iter().map(|&i| s[i]).collect();
                let (ss, df) = b.first_phase_sum_spread(&v);
                prior.sum_q = ss / (hs.sd * hs.sd);
                prior.sum_df = df;
            }
        }
        prior
    }

    /// The test of a look at `n` pairs of a batch `d`: `None` when more pairs must be measured.
    /// With a borrowed scale, the shortest prefix whose kept pairs number `n` (or the capped
    /// prefix) is tested with the history's sd times the safety factor, unless its own variance
    /// is significantly above the history's (the guard): then, as without history, with its own
    /// t-test.
    #[cfg(test)]
    pub(in crate::stats::sequential) fn test(&self, d: &[f64], n: usize, prior: (f64, f64)) -> Option<Test> {
        let prior = Prior { ss: prior.0, df: prior.1, ..Prior::default() };
        self.test_at(Batch { d, s: &[] }, n, prior, self.borrowed.as_ref().map_or(GUARD, |b| b.guard))
    }

    /// [`Sequential::test`] with the variance guard at F level `guard` (with history).
    pub(in crate::stats::sequential) fn test_at(&self, batch: Batch, n: usize, prior: Prior, guard: f64) -> Option<Test> {
        let (idx, m) = self.select(batch.d, n)?;
        let v: Vec<f64> = idx.iter().map(|&i| batch.d[i]).collect();
        let kept = Kept::of(&v, m);
        Some(match &self.borrowed {
            None => kept.own_test(),
            Some(b) => self.borrowed_test(b, batch, &idx, &kept, prior, guard),
        })
    }

    /// The pairs a look at `n` pairs reads: the shortest prefix of `d` whose kept pairs number
    /// `n` (or the capped prefix), as indices, and that prefix's length; `None` when more pairs
    /// must be measured.
    fn select(&self, d: &[f64], n: usize) -> Option<(Vec<usize>, usize)> {
        let cap = self.cap(n);
        let mut m = n;
        loop {
            if d.len() < m {
                return None;
            }
            let k = self.kept_idx(&d[..m]);
            if k.len() >= n || m >= cap {
                return Some((k, m));
            }
            m += 1;
        }
    }
}
