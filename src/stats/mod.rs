//! The keep/revert decision and the statistics behind it: the sequential procedure of
//! [`sequential`] (with `Params::fixed` as the fixed-sample paired t-test), built on the
//! one-sided t-test of the paired log-ratios here, and the noise scale borrowed from [`history`].
//! Everything here is pure except `history`'s load/record of `.ratchet/noise.json`.

pub mod effect;
pub mod history;
pub mod modes;
pub mod noise;
pub mod rng;
pub mod sequential;

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// The metric that decides keep or revert.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    /// util x 100 / latency_ms (the article's fitness); higher is better.
    #[default]
    Score,
    /// Median latency in ms; lower is better.
    Latency,
    /// Achieved TFLOP/s; higher is better.
    Tflops,
}

impl Metric {
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::Score => "score",
            Metric::Latency => "latency",
            Metric::Tflops => "tflops",
        }
    }
    /// The one direction each metric gets better in; nothing else decides it.
    pub fn natural_direction(self) -> Direction {
        match self {
            Metric::Latency => Direction::Lower,
            Metric::Score | Metric::Tflops => Direction::Higher,
        }
    }

    /// Whether the metric a results row names (`metric` column) is better lower: the row's
    /// direction, read the same way by every view.
    pub fn lower_is_better(name: &str) -> bool {
        name.eq_ignore_ascii_case(Metric::Latency.as_str())
    }
}

/// Which way the deciding metric gets better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Higher,
    Lower,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Keep,
    Revert,
    /// The budget of pairs ran out while a worthwhile gain was still plausible: reverted, but
    /// worth a rerun.
    Inconclusive,
    /// The first phase showed a worthwhile gain but the confirmation did not: reverted, worth a
    /// rerun with more pairs.
    Unconfirmed,
}

impl Verdict {
    /// As `decisions.jsonl` and the results rows write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Keep => "keep",
            Verdict::Revert => "revert",
            Verdict::Inconclusive => "inconclusive",
            Verdict::Unconfirmed => "unconfirmed",
        }
    }
}

/// The independent batch, in the complementary order, that a keep must pass before the commit
/// stays.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Confirmation {
    /// Pairs measured (outliers set aside included).
    pub pairs: usize,
    /// The batch's own estimate, in percent speed-up (positive = better): free of the first
    /// phase's selection, so unbiased for a kept change.
    pub effect_pct: f64,
    /// The batch's own interval, at the decision's `ci_level`.
    #[serde(default)]
    pub ci_low_pct: f64,
    #[serde(default)]
    pub ci_high_pct: f64,
    /// One-sided p-value of the batch alone for "the candidate is better".
    pub p_value: f64,
    /// The level the deciding look of the batch was tested at.
    pub alpha: f64,
    /// Looks of the batch (1 unless the scale is borrowed from history).
    #[serde(default)]
    pub looks: usize,
    pub passed: bool,
}

/// The rescue of an unconfirmed or inconclusive decision: the one-sided t-test over all its
/// pairs (both phases and the pairs measured on to `rescue_pairs`) less gross outliers, at its
/// own level. Their
/// mean and interval are the decision's own `effect_pct` and interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rescue {
    /// Pairs read: every pair measured, in the order measured.
    pub pairs: usize,
    /// Of those, the gross outliers its t-test set aside (`Levels::rescue_outlier_k`).
    #[serde(default)]
    pub set_aside: usize,
    /// Which pairs those were (0-based, in the order measured): a rescue's keep shows the
    /// estimate and interval of the others. Empty in records written before it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set_aside_pairs: Vec<usize>,
    /// One-sided p-value of the t-test for "the candidate is better", and its level.
    pub p_value: f64,
    pub alpha: f64,
    /// Kept: significant at `alpha` with a mean of at least the minimum effect.
    pub passed: bool,
    /// The verdict of the two phases before it.
    pub before: Verdict,
}

/// Which procedure gave a decision its verdict (docs/decisions.md, "The rule").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Procedure {
    /// The group-sequential t-tests: a first phase of looks, then a confirmation batch.
    #[default]
    TwoPhases,
    /// One paired t-test after a fixed number of pairs (`method = "fixed"`, `ratchet gate`).
    Fixed,
    /// The one-phase likelihood ratio of whole pairs.
    LikelihoodRatio,
    /// The t-test of all pairs that kept a decision the phases or the ratio left without a keep.
    Rescue,
    /// The robust ratio (`method = "robust-ratio"`), its budget's t-test included.
    RobustRatio,
}

/// What the procedure concluded and the numbers behind it. Effects are speed-ups in percent
/// (the deciding metric's log-ratio divided by its elasticity to latency), signed so that
/// positive is better, whichever the metric and its direction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub verdict: Verdict,
    /// The procedure whose test gave the verdict. (Decisions recorded before it was kept read
    /// as `two-phases`.)
    #[serde(default)]
    pub procedure: Procedure,
    /// Estimated speed-up, in percent (positive = better).
    pub effect_pct: f64,
    pub ci_low_pct: f64,
    pub ci_high_pct: f64,
    /// Confidence level of the interval (1 - 2 alpha: its lower bound is the one-sided test).
    pub ci_level: f64,
    /// One-sided p-value for "the candidate is better".
    pub p_value: f64,
    /// Pairs measured before the decision (the confirmation batch not included).
    pub pairs: usize,
    /// Interim analyses done (1 for a fixed-sample test).
    #[serde(default)]
    pub looks: usize,
    /// The significance level the deciding look was tested at (the alpha spent at that look).
    #[serde(default)]
    pub p_threshold: f64,
    /// The p-value adjusted for the looks: `p_value * alpha / p_threshold` (capped at 1), the
    /// smallest first-phase level at which this look would have been significant.
    #[serde(default)]
    pub p_adjusted: f64,
    /// Which noise scale decided: `history` (borrowed) or `own` (the pairs' own t-test).
    #[serde(default)]
    pub scale: String,
    /// The sd of one pair's log-ratio behind the test, in percent (history's times the safety
    /// factor when borrowed).
    #[serde(default)]
    pub noise_sd_pct: f64,
    /// Gross outlier pairs of the first phase set aside (and replaced).
    #[serde(default)]
    pub excluded: usize,
    #[serde(default)]
    pub confirmation: Option<Confirmation>,
    /// The t-test over all pairs that an unconfirmed or inconclusive decision went on to (with
    /// it, `effect_pct` and the interval are those of all the pairs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rescue: Option<Rescue>,
    pub reason: String,
    /// Every look taken, in order, with the statistic and the boundaries it was held against
    /// (what `ratchet plot` draws). Empty for decisions recorded before it was kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trail: Vec<Look>,
    /// The noise scale borrowed from history (`None`: none was): with the runs, all a replay
    /// needs, kept with the decision because `noise.json` forgets old sessions. (Boxed: a
    /// decision travels in enums beside small variants.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrowed: Option<Box<BorrowedScale>>,
}

impl Decision {
    /// Pairs the rescue measured beyond the two phases' (0 without one).
    pub fn rescue_pairs(&self) -> usize {
        let phases = self.pairs + self.confirmation.as_ref().map_or(0, |c| c.pairs);
        self.rescue.as_ref().map_or(0, |r| r.pairs.saturating_sub(phases))
    }

    /// Every pair the decision read: the first phase's, the confirmation's and the rescue's.
    pub fn total_pairs(&self) -> usize {
        self.pairs + self.confirmation.as_ref().map_or(0, |c| c.pairs) + self.rescue_pairs()
    }
}

/// A decision's borrowed noise scale, as the results row records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BorrowedScale {
    /// The history's sd of one pair's log-ratio (speed-up terms, before the safety factor), in
    /// percent, and its df.
    pub sd_pct: f64,
    pub df: f64,
    /// The history's spread of the pairs' log-sums the guard read, when recorded.
    pub sums_sd_pct: Option<f64>,
    pub sums_df: Option<f64>,
    /// The noise-history sessions pooled into it, newest first (`source@time;...`).
    pub source: String,
}

/// Which batch a look belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LookPhase {
    /// The first phase: keep, revert or go on.
    Decision,
    /// The confirmation batch of a promising first phase.
    Confirmation,
    /// The t-test over all pairs of an unconfirmed or inconclusive decision.
    Rescue,
}

/// One look of the sequential test: the statistic (estimate / se, on the log-ratio scale) and
/// the boundaries it was compared with at that look, as the test applied them. A boundary is
/// `None` where that look could not stop that way (no futility stop at an interim look without
/// one) or where the statistic is unbounded (identical pairs: se = 0).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Look {
    pub phase: LookPhase,
    /// 1-based within its phase.
    pub look: usize,
    /// Pairs measured by this look (outliers set aside included) and pairs tested.
    pub pairs: usize,
    pub tested: usize,
    /// The estimate, in percent speed-up, and its standard error (log-ratio, in percent).
    pub estimate_pct: f64,
    pub se_pct: f64,
    /// estimate / se (log-ratio scale); `None` when se = 0.
    pub statistic: Option<f64>,
    /// At or above: keep (decision phase: significant at this look's level and at least the
    /// minimum effect) or confirmed (confirmation).
    pub keep_boundary: Option<f64>,
    /// Below: revert (futility) or, in the confirmation, unconfirmed.
    pub revert_boundary: Option<f64>,
    /// The significance level spent at this look, and the reference t's degrees of freedom.
    pub alpha: f64,
    pub df: f64,
    /// `history` (the borrowed noise scale) or `own` (the pairs' own t-test).
    pub scale: String,
}

/// Log-ratios oriented so that positive means the candidate is better.
pub fn log_ratios(pairs: &[(f64, f64)], direction: Direction) -> Vec<f64> {
    pairs
        .iter()
        .map(|&(inc, cand)| match direction {
            Direction::Higher => (cand / inc).ln(),
            Direction::Lower => (inc / cand).ln(),
        })
        .collect()
}

/// One-sample t statistics of `d` against 0: (mean, standard error, one-sided p for mean > 0).
pub fn t_test_greater(d: &[f64]) -> (f64, f64, f64) {
    let n = d.len() as f64;
    let mean = d.iter().sum::<f64>() / n;
    let var = d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let se = (var / n).sqrt();
    // Identical log-ratios: no spread to test against; the sign alone decides. A relative
    // tolerance keeps rounding noise in the mean from passing for a spread.
    if se <= 1e-12 * mean.abs().max(1e-300) || se == 0.0 {
        let p = if mean > 1e-12 { 0.0 } else { 1.0 };
        return (mean, 0.0, p);
    }
    let t = mean / se;
    let dist = StudentsT::new(0.0, 1.0, n - 1.0).expect("n >= 2 gives a valid t distribution");
    (mean, se, 1.0 - dist.cdf(t))
}

/// Student's t quantile with `df` degrees of freedom.
pub fn t_quantile(p: f64, df: f64) -> f64 {
    StudentsT::new(0.0, 1.0, df).expect("df > 0").inverse_cdf(p)
}

/// A p-value for people: three decimals, or scientific notation when tiny.
pub fn fmt_p(p: f64) -> String {
    if p > 0.0 && p < 0.001 {
        format!("{p:.1e}")
    } else {
        format!("{p:.3}")
    }
}

/// An interval's level in percent, rounded down to a tenth and without a trailing ".0" (96,
/// 87.5, 93.7 for 93.75): a level is never shown above what the interval has.
pub fn fmt_level(pct: f64) -> String {
    let tenths = (pct * 10.0 + 1e-9).floor();
    if tenths % 10.0 == 0.0 {
        format!("{:.0}", tenths / 10.0)
    } else {
        format!("{:.1}", tenths / 10.0)
    }
}

/// How many times a speed-up's log shows in the deciding metric's log-ratio: `score` = util x
/// 100 / latency, with util proportional to FLOPs / latency, goes as 1/latency^2 (2); latency
/// and TFLOP/s as 1/latency (1). The procedure divides log-ratios by it, so `min_effect_pct`
/// and every effect it reports are speed-ups, whatever the metric.
pub fn elasticity(metric: Metric) -> f64 {
    match metric {
        Metric::Score => 2.0,
        Metric::Latency | Metric::Tflops => 1.0,
    }
}

/// A speed-up in percent as the change of a metric of elasticity `e`, in percent.
pub fn metric_pct(speedup_pct: f64, e: f64) -> f64 {
    (((1.0 + speedup_pct / 100.0).ln() * e).exp() - 1.0) * 100.0
}

/// A mean log-ratio as a percent change.
pub fn pct(log_ratio: f64) -> f64 {
    (log_ratio.exp() - 1.0) * 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn an_interval_level_is_shown_rounded_down_never_above_what_it_has() {
        assert_eq!(fmt_level((1.0 - 2.0 * 0.02) * 100.0), "96");
        assert_eq!(fmt_level(87.5), "87.5");
        assert_eq!(fmt_level(93.75), "93.7");
        assert_eq!(fmt_level(50.0), "50");
        assert_eq!(fmt_level(96.875), "96.8");
    }

    #[test]
    fn t_test_matches_scipy() {
        // Expected: scipy 1.x, stats.ttest_1samp(np.log([1.05,1.02,1.04,1.03,1.06]), 0,
        // alternative='greater') -> statistic 5.754215754113783, pvalue 0.0022616686878626276.
        let d: Vec<f64> = [1.05f64, 1.02, 1.04, 1.03, 1.06].iter().map(|x| x.ln()).collect();
        let (mean, se, p) = t_test_greater(&d);
        assert!(close(mean / se, 5.754215754113783, 1e-9));
        assert!(close(p, 0.0022616686878626276, 1e-9), "{p}");
        // Expected: scipy stats.ttest_1samp([0.01,-0.02,0.015,0.003,0.005,-0.01], 0,
        // alternative='greater') -> statistic 0.09352195295828249, pvalue 0.4645604127755717.
        let (_, _, p) = t_test_greater(&[0.01, -0.02, 0.015, 0.003, 0.005, -0.01]);
        assert!(close(p, 0.4645604127755717, 1e-9), "{p}");
    }

    #[test]
    fn t_quantile_matches_tables() {
        // Student's t table: t(0.95, 4) = 2.1318 (scipy.stats.t.ppf(0.95, 4) = 2.1318467863266495).
        assert!(close(t_quantile(0.95, 4.0), 2.1318467863266495, 1e-6));
    }

    #[test]
    fn speed_ups_and_metric_changes_convert_both_ways() {
        use crate::config::Metric;
        // Half the latency: a 100% speed-up, 4x the score (score ~ 1/latency^2).
        assert!(close(metric_pct(100.0, elasticity(Metric::Score)), 300.0, 1e-9));
        assert!(close(metric_pct(1.0, elasticity(Metric::Score)), 2.01, 1e-9));
        assert!(close(metric_pct(7.0, elasticity(Metric::Latency)), 7.0, 1e-12));
        assert!(close(metric_pct(7.0, elasticity(Metric::Tflops)), 7.0, 1e-12));
    }

    #[test]
    fn zero_spread_is_decided_by_sign() {
        // Identical log-ratios (a deterministic benchmark): no spread to test, the sign decides.
        let (mean, se, p) = t_test_greater(&[2f64.ln(); 4]);
        assert!(close(pct(mean), 100.0, 1e-9) && se == 0.0 && p == 0.0);
        let (_, _, p) = t_test_greater(&[0.0; 4]);
        assert_eq!(p, 1.0);
    }
}
