//! The keep/revert rule on the log-ratios (speed-up terms) of interleaved pairs: three
//! procedures applied in turn by [`Sequential::next_runs`]. Pure: the same code drives real
//! experiments (`experiment`), `ratchet-lab simulate` and the unit tests.
//!
//! What decides a keep, by file: [`Sequential::next_runs`] here applies the three procedures in
//! turn; [`likelihood`] is the likelihood ratio of whole pairs (with history), `two_phases` the
//! group-sequential t-test and its confirmation (without history, or after a wild pair), `rescue`
//! the t-test over a fixed number of pairs at an undecided end. Beside them: [`levels`] (every
//! deciding constant, and the levels a decision records), [`plan`] (the looks, their alpha, the
//! budget), [`borrowed`] (the noise scale borrowed from history), `record` (the looks' trail),
//! `stat` (what a look reads and what its test found: plain data every file names, so no two
//! files reach into each other) and [`sample`] (mean, median, robust sd).
//!
//! The bound: a false keep of the two phases has probability at most `alpha * confirm_alpha`,
//! the likelihood ratio keeps at a level read off simulation (`likelihood` says how), and the
//! rescue adds at most `rescue_alpha` by the union bound; by default 0.02 x 0.045 + 0.0001 =
//! 0.001. The argument, its assumptions and the measured cost when they fail are in
//! docs/decisions.md.

mod borrowed;
pub mod levels;
pub mod likelihood;
pub mod plan;
mod record;
mod rescue;
pub mod robust;
pub mod sample;
mod stat;
#[cfg(test)]
mod tests;
mod two_phases;

pub use borrowed::{sum_spread, Borrowed, NoiseScale, Warmup};
pub use levels::*;
pub use plan::{OnePhase, Params, Spending};
pub use robust::{RobustLevels, RobustRatio};
pub(crate) use sample::outlier_band;
pub use sample::{mean_sd, median, robust_sd};

use super::{fmt_p, pct, Confirmation, Decision, Look, LookPhase, Procedure, Verdict};
use stat::Test;
use statrs::distribution::{ContinuousCDF, FisherSnedecor, Normal, StudentsT};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// The two batches of an experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Pairs in the order BA, AB, AB, BA, ... (A = incumbent).
    Main,
    /// The confirmation batch, in the complementary order: AB, BA, BA, AB, ...
    Confirm,
}

impl Phase {
    /// As `runs.jsonl` records it.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Main => "main",
            Phase::Confirm => "confirmation",
        }
    }
}

/// Whether the incumbent runs first in pair `i` (0-based) of `phase`: BA, AB, AB, BA, BA, AB,
/// AB, BA, ... in the first phase, the complement in the confirmation. Orientations come in twos
/// after the first pair: with AB, BA, ... alternating, adjacent oriented log-ratios of a
/// serially correlated (AR(1)) machine are positively correlated, by rho (1 - rho)^2 sigma^2,
/// and the t-test's variance is too small; in twos the lag-1 covariances alternate in sign and
/// cancel. Every 2 pairs hold one AB and one BA with the incumbent in the middle (B A A B), so a
/// linear drift cancels at every even look, the first one included, and a warm-up ramp (convex,
/// decaying) counts against the candidate there, never for it: at 2 pairs of a 10% ramp over 3
/// runs, -0.7% where BA, BA gave -2.1% (a third of a +3% gain, enough for early futility).
pub fn incumbent_first(phase: Phase, i: usize) -> bool {
    (i % 4 == 1 || i % 4 == 2) == (phase == Phase::Main)
}

/// Quantiles by (kind, p, df1, df2) bits.
type Memo = HashMap<(u8, u64, u64, u64), f64>;

/// What the driver does next.
// `Done` is built once per decision; boxing it would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Measure this many more pairs of `phase`, then ask again.
    Measure {
        phase: Phase,
        pairs: usize,
    },
    Done(Decision),
}

/// The procedure: give it the log-ratios measured so far (positive = candidate better, in
/// speed-up terms), one per pair, of each phase; it says what to measure next or what it
/// decided. It replays every look from the data alone, so the decision is a function of the
/// samples (and of the borrowed noise scale, if any).
#[derive(Debug, Clone)]
pub struct Sequential {
    pub params: Params,
    /// The noise scale from history; `None`: every look is the experiment's own t-test.
    pub borrowed: Option<Borrowed>,
    /// Quantiles asked for so far (shared by clones: the simulation clones one per trial).
    memo: Rc<RefCell<Memo>>,
}

impl Sequential {
    pub fn new(params: Params) -> Self {
        Sequential { params, borrowed: None, memo: Rc::new(RefCell::new(HashMap::new())) }
    }

    /// The procedure with a noise scale borrowed from history (see [`Borrowed`]).
    pub fn with_history(mut self, borrowed: Option<Borrowed>) -> Self {
        self.borrowed = borrowed;
        self
    }

    /// What to do next, given the log-ratios of each phase (without the runs' sums: the guard
    /// sees the log-ratios alone). See [`Sequential::next_runs`].
    pub fn next(&self, main: &[f64], confirm: &[f64]) -> Next {
        self.next_runs(main, confirm, &[], &[])
    }

    /// What to do next, given each phase's log-ratios and the pairs' log-sums (ln incumbent +
    /// ln candidate, in speed-up terms: [`log_sums`]), one per pair; sums shorter than the
    /// log-ratios are not used. The rule, in the order it applies (the README's step 4):
    /// 1. With history whose sessions saw no gross outlier (`Params::deciding_ratio`), the
    ///    likelihood ratio of whole pairs decides ([`likelihood`]): keep, revert, or its budget.
    /// 2. Without history, or once one of the ratio's pairs lies over `OUTLIER_K` sds out
    ///    ([`likelihood::first_wild`]), the two phases decide on every pair (`two_phases`): a
    ///    group-sequential t-test whose keep a second batch in reversed order must confirm.
    /// 3. An end that is neither keep nor revert (unconfirmed, inconclusive) goes to the rescue
    ///    (`rescue`): one t-test over a fixed number of pairs, gross outliers set aside.
    ///
    /// Which of them decided is the decision's `procedure`.
    pub fn next_runs(&self, main: &[f64], confirm: &[f64], main_s: &[f64], confirm_s: &[f64]) -> Next {
        if let Some(levels) = self.params.robust {
            return self.robust_next(levels, main, main_s);
        }
        let mut handed = None;
        if let Some((b, test)) = self.likelihood_ratio() {
            match self.likelihood_ratio_next(b, &test, main, main_s) {
                // A ratio that ran its budget (the rescue's pairs) without a stop goes on to the
                // rescue as the two phases' undecided end does.
                Ok(next @ Next::Done(_)) if self.params.levels.ratio_rescued => return self.rescued(main, &[], next),
                Ok(next) => return next,
                Err(wild) => handed = Some(wild),
            }
        }
        let next = self.rescued(main, confirm, self.two_phases(main, confirm, main_s, confirm_s));
        match (handed, next) {
            (Some(w), Next::Done(mut d)) => {
                d.reason = format!("{}; {}", w.reason(), d.reason);
                Next::Done(d)
            }
            (_, next) => next,
        }
    }

    /// Quantile `p` of Student's t with `df` degrees of freedom (normal when infinite), memoized:
    /// the simulation asks for the same few millions of times.
    pub fn tq(&self, p: f64, df: f64) -> f64 {
        let key = (0u8, p.to_bits(), df.to_bits(), 0);
        if let Some(&q) = self.memo.borrow().get(&key) {
            return q;
        }
        let q = if df.is_finite() { super::t_quantile(p, df) } else { Normal::new(0.0, 1.0).expect("normal").inverse_cdf(p) };
        self.memo.borrow_mut().insert(key, q);
        q
    }

    /// Upper quantile `1 - a` of the F distribution with (d1, d2) degrees of freedom, memoized.
    fn fq(&self, a: f64, d1: f64, d2: f64) -> f64 {
        let key = (1u8, a.to_bits(), d1.to_bits(), d2.to_bits());
        if let Some(&q) = self.memo.borrow().get(&key) {
            return q;
        }
        let q = FisherSnedecor::new(d1, d2).expect("positive dfs").inverse_cdf(1.0 - a);
        self.memo.borrow_mut().insert(key, q);
        q
    }

    /// One-sided p-value of a test for "the candidate is better".
    fn p_value(&self, t: &Test) -> f64 {
        let z = t.t();
        if z.is_infinite() {
            return if z > 0.0 { 0.0 } else { 1.0 };
        }
        if t.df.is_finite() {
            1.0 - StudentsT::new(0.0, 1.0, t.df).expect("df > 0").cdf(z)
        } else {
            1.0 - Normal::new(0.0, 1.0).expect("normal").cdf(z)
        }
    }
}

/// Run the procedure to its decision against a source of pairs: `measure(phase, i)` returns the
/// log-ratio of pair `i` of `phase`. Used by the simulation and the tests; the experiment
/// drives [`Sequential::next`] itself because a measurement can fail.
pub fn run_to_decision(seq: &Sequential, mut measure: impl FnMut(Phase, usize) -> f64) -> Decision {
    run_pairs_to_decision(seq, |phase, i| (measure(phase, i), None))
}

/// [`run_to_decision`] with each pair's log-sum too (`None` where unknown): `measure(phase, i)`
/// returns the log-ratio and log-sum of pair `i` of `phase`.
pub fn run_pairs_to_decision(seq: &Sequential, mut measure: impl FnMut(Phase, usize) -> (f64, Option<f64>)) -> Decision {
    let (mut main, mut confirm) = ((vec![], vec![]), (vec![], vec![]));
    loop {
        match seq.next_runs(&main.0, &confirm.0, &main.1, &confirm.1) {
            Next::Done(d) => return d,
            Next::Measure { phase, pairs } => {
                let (d, s) = if phase == Phase::Main { &mut main } else { &mut confirm };
                for _ in 0..pairs {
                    let i = d.len();
                    let (x, y) = measure(phase, i);
                    d.push(x);
                    if let Some(y) = y {
                        s.push(y);
                    }
                }
            }
        }
    }
}

/// The pairs' log-sums in speed-up terms: (ln incumbent + ln candidate) / elasticity, the
/// sign making a slower session larger whatever the metric's direction (the guard uses only
/// their spread). `None` where a value is missing or not positive.
pub fn log_sums(pairs: &[(f64, f64)], direction: crate::stats::Direction, elasticity: f64) -> Vec<f64> {
    let sign = match direction {
        crate::stats::Direction::Lower => 1.0,
        crate::stats::Direction::Higher => -1.0,
    };
    pairs.iter().map(|&(a, b)| sign * (a.ln() + b.ln()) / elasticity).collect()
}
