//! The test without history: the kept pairs' own one-sided t-test of their mean log-ratio, and
//! the summary of the kept pairs every test starts from.

use crate::stats::sequential::levels::NO_SPREAD;
use crate::stats::sequential::sample::mean_sd;
use crate::stats::sequential::stat::Test;

/// A look's kept pairs, summarized: their count and mean, their residual sum of squares and df,
/// and the measured prefix they come from.
#[derive(Debug, Clone, Copy)]
pub(super) struct Kept {
    pub(super) n: usize,
    pub(super) measured: usize,
    pub(super) mean: f64,
    pub(super) ss: f64,
    pub(super) df: f64,
}

impl Kept {
    /// The kept pairs' log-ratios `kept`, from the first `measured` pairs of their batch.
    pub(super) fn of(kept: &[f64], measured: usize) -> Kept {
        let (mean, sd) = mean_sd(kept);
        let k = kept.len();
        Kept { n: k, measured, mean, ss: sd * sd * (k - 1) as f64, df: (k - 1) as f64 }
    }

    /// A t-test of these pairs' mean at scale `sd` (of one pair) with `df` degrees of freedom
    /// (at least 1).
    pub(super) fn test(&self, sd: f64, df: f64) -> Test {
        Test {
            n: self.n,
            measured: self.measured,
            excluded: self.measured - self.n,
            mean: self.mean,
            se: sd / (self.n as f64).sqrt(),
            df: df.max(1.0),
            borrowed: false,
            ratio: None,
        }
    }

    /// The pairs' own t-test: their residual spread at their own df.
    pub(super) fn own_test(&self) -> Test {
        self.test(spread_sd(self.ss, self.df, self.mean), self.df)
    }
}

/// The sd from a residual sum of squares `ss` over `df`, or 0 without df or when it is no spread
/// next to the mean (identical log-ratios of a deterministic benchmark: the sign decides).
pub(super) fn spread_sd(ss: f64, df: f64, mean: f64) -> f64 {
    let sd = if df > 0.0 { (ss / df).sqrt() } else { 0.0 };
    if sd <= NO_SPREAD * mean.abs().max(1e-300) {
        0.0
    } else {
        sd
    }
}
