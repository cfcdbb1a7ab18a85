//! What one look reads and what its test found: a batch's pairs ([`Batch`]), the spread an
//! earlier batch carries into it ([`Prior`]) and the test's figures ([`Test`]). Plain data, so
//! that every file of the procedure can name them without reaching back into another.

/// One look's test of a batch's (kept) pairs.
#[derive(Debug, Clone)]
pub(super) struct Test {
    /// Pairs tested, pairs measured (the prefix the kept ones come from), and set aside.
    pub(super) n: usize,
    pub(super) measured: usize,
    pub(super) excluded: usize,
    pub(super) mean: f64,
    pub(super) se: f64,
    /// Degrees of freedom of the reference t distribution (the history's when borrowed).
    pub(super) df: f64,
    pub(super) borrowed: bool,
    /// With a borrowed scale: the own variance over the history's (log-ratios and sums
    /// together), its df, and the history's df (the guard's F statistic).
    pub(super) ratio: Option<(f64, f64, f64)>,
}

impl Test {
    /// The noise sd behind the test, as a percent of one pair's log-ratio.
    pub(super) fn sd_pct(&self) -> f64 {
        self.se * (self.n as f64).sqrt() * 100.0
    }
    pub(super) fn t(&self) -> f64 {
        if self.se > 0.0 {
            self.mean / self.se
        } else if self.mean > 1e-12 {
            f64::INFINITY
        } else {
            f64::NEG_INFINITY
        }
    }
    pub(super) fn scale_name(&self) -> &'static str {
        if self.borrowed {
            "history"
        } else {
            "own"
        }
    }
}

/// What a batch's own spread carries into the next batch's tests (see [`super::Sequential::prior_of`]).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Prior {
    /// Residual sum of squares of the log-ratios and its df.
    pub(super) ss: f64,
    pub(super) df: f64,
    /// The sums' successive-difference sum of squares over the history's sum variance, and df.
    pub(super) sum_q: f64,
    pub(super) sum_df: f64,
}

/// One batch's pairs: log-ratios `d` and log-sums `s` (empty when not known).
#[derive(Debug, Clone, Copy)]
pub(super) struct Batch<'a> {
    pub(super) d: &'a [f64],
    pub(super) s: &'a [f64],
}
