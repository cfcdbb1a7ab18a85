//! The noise floor from A/A runs (`ratchet calibrate`): run-to-run CV, drift over the session,
//! and the smallest gain the configured budget can detect. Pure functions of the run values.

use super::rng::Rng;
use super::sequential::likelihood::{Stop, WholePairLr};
use super::sequential::{Borrowed, Params};
use super::t_quantile;
use serde::Serialize;

/// What the A/A runs say about this benchmark on this machine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NoiseFloor {
    pub runs: usize,
    pub pairs: usize,
    /// Coefficient of variation of one run, in percent, from the pairs' log-ratios
    /// (sd / sqrt 2): what interleaving leaves, drift mostly cancelled.
    pub pair_cv_pct: f64,
    /// Degrees of freedom behind `pair_cv_pct` (pairs - 1).
    pub df: usize,
    /// 90% interval of `pair_cv_pct` (chi-square on `df`); None below 2 pairs. A few pairs give
    /// a CV that can be off severalfold, and the user reads it as the machine's noise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pair_cv_interval_pct: Option<[f64; 2]>,
    /// CV of all runs' values around their mean, in percent (drift included).
    pub run_cv_pct: f64,
    /// Least-squares slope of ln(value) over the run index, in percent per run.
    pub drift_pct_per_run: f64,
    /// A/A mean log-ratio as a percent: should be near 0 (both sides are the same code).
    pub aa_effect_pct: f64,
    /// The smallest true gain the configured budget keeps with about 95% probability.
    pub detectable_pct: f64,
    /// The rule that budget is the budget of: the likelihood ratio where the history the
    /// calibration joins lets it decide, else the two phases.
    pub detectable_by: Rule,
    /// Where the likelihood ratio decides, its keep level (ln of the odds), which the history's
    /// modes set (`Params::deciding_ratio`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep_at: Option<f64>,
    /// A minimum effect that the budget can actually see: the detectable gain, rounded up.
    pub suggested_min_effect_pct: f64,
    /// The sd of one pair's log-ratio (speed-up terms, percent) behind the detectable gain and
    /// the suggestion: the scale decisions use (the history's, gross outliers set aside), not
    /// the plain sd of these pairs, which one 3x run can multiply.
    pub deciding_sd_pct: f64,
}

/// Least-squares slope of `y` over 0, 1, 2, ...
pub fn slope(y: &[f64]) -> f64 {
    let n = y.len() as f64;
    if y.len() < 2 {
        return 0.0;
    }
    let mx = (n - 1.0) / 2.0;
    let my = y.iter().sum::<f64>() / n;
    let sxy: f64 = y.iter().enumerate().map(|(i, v)| (i as f64 - mx) * (v - my)).sum();
    let sxx: f64 = (0..y.len()).map(|i| (i as f64 - mx).powi(2)).sum();
    sxy / sxx
}

/// The rule whose budget a detectable gain is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    TwoPhases,
    LikelihoodRatio,
    RobustRatio,
}

/// The smallest true gain (percent) kept with probability about `power` by the rule that
/// decides: `ratio` where the likelihood ratio does ([`ratio_detectable_pct`]), else the two
/// phases ([`two_phases_detectable_pct`]).
pub fn detectable_pct(params: &Params, sd: f64, power: f64, ratio: Option<&WholePairLr>) -> f64 {
    if let Some(levels) = params.robust {
        return robust_detectable_pct(params, levels, sd, power);
    }
    match ratio {
        Some(test) => ratio_detectable_pct(test, sd, power),
        None => two_phases_detectable_pct(params, sd, power),
    }
}

/// The budget a detectable gain is the budget of, in the words `ratchet calibrate` prints: the
/// likelihood ratio's where it decides at the keep level `ratio_keep_at`, else the two phases'.
pub fn budget_words(params: &Params, ratio_keep_at: Option<f64>) -> String {
    if let Some(l) = params.robust {
        return format!(
            "the robust ratio, up to {} pairs, then their t-test at {}, min_effect_pct {}",
            l.pairs, l.rescue_alpha, params.min_effect_pct
        );
    }
    match ratio_keep_at {
        Some(keep_at) => format!(
            "the likelihood ratio of whole pairs, up to {} pairs, keeping at a ratio of e^{keep_at}, min_effect_pct {}",
            params.max_total_pairs(),
            params.min_effect_pct
        ),
        None => format!(
            "max_pairs {}, alpha {}, min_effect_pct {}{}",
            params.max_pairs,
            params.alpha,
            params.min_effect_pct,
            if params.confirm {
                format!(", confirmed by {} pairs at {}", params.confirm_pairs, params.confirm_alpha)
            } else {
                String::new()
            }
        ),
    }
}

/// Simulated decisions behind [`ratio_detectable_pct`]: enough that the share's standard error
/// at 95% is about half a point, few enough for an experiment's start (tens of milliseconds).
pub const RATIO_TRIALS: usize = 1000;

/// The seed of those decisions: the same pairs at every gain (common random numbers), so the
/// share kept rises with the gain and the figure is the same on every machine.
const RATIO_SEED: u64 = 0x5EED_DE7E_C7AB_1E00;

/// The share of [`RATIO_TRIALS`] decisions of `test` that keep a true mean log-ratio `mean`,
/// on normal pairs of sd `sd` with the calibration at the truth (log-sums of the same sd).
pub fn ratio_keep_share(test: &WholePairLr, sd: f64, mean: f64) -> f64 {
    let kept = (0..RATIO_TRIALS)
        .filter(|&i| {
            let mut rng = Rng::new(RATIO_SEED.wrapping_add(i as u64));
            test.decide(sd, false, |_| (mean + sd * rng.normal(), sd * rng.normal())).0 == Stop::Keep
        })
        .count();
    kept as f64 / RATIO_TRIALS as f64
}

/// The smallest true gain (percent) the likelihood ratio `test` keeps with probability about
/// `power` on pairs of sd `sd`: no closed form (a mixture over gains and scales with a futility
/// stop), so read off simulated decisions, bisecting the mean log-ratio to 0.2% of it.
/// Infinite where even a 100x gain is not kept that often.
pub fn ratio_detectable_pct(test: &WholePairLr, sd: f64, power: f64) -> f64 {
    let mut hi = test.min_mean.max(sd).max(1e-4);
    while ratio_keep_share(test, sd, hi) < power {
        hi *= 2.0;
        if hi > 100f64.ln() {
            return f64::INFINITY;
        }
    }
    let mut lo = 0.0;
    while hi - lo > 2e-3 * hi {
        let mid = 0.5 * (lo + hi);
        if ratio_keep_share(test, sd, mid) >= power {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi.exp_m1() * 100.0
}

/// The smallest true gain (percent) the robust ratio keeps with probability about `power` on
/// pairs of sd `sd`: what its budget's t-test alone keeps (significance at `rescue_alpha` over
/// all the pairs, and an estimate above the minimum effect), in the normal approximation with t
/// quantiles. The ratio's looks before the budget only add chances, so this errs on the large
/// side, and it needs no simulation at an experiment's start.
pub fn robust_detectable_pct(params: &Params, levels: crate::stats::sequential::RobustLevels, sd: f64, power: f64) -> f64 {
    let n = levels.pairs as f64;
    let df = (n - 1.0).max(1.0);
    let se = sd / n.sqrt();
    let zb = t_quantile(power, df);
    let significance = (t_quantile(1.0 - levels.rescue_alpha, df) + zb) * se;
    let min_effect = (1.0 + params.min_effect_pct / 100.0).ln() + zb * se;
    significance.max(min_effect).exp_m1() * 100.0
}

/// The smallest true gain (percent) the two phases keep with probability about `power`, for
/// pairs whose log-ratios have standard deviation `sd`: the first phase must reach significance
/// at its last look's alpha and an estimate above the minimum effect, and the confirmation batch
/// significance at its own level. Normal approximation with t quantiles; earlier looks and the
/// rescue (a t-test of all the pairs when the two phases do not keep) only add chances, so this
/// errs on the large side.
pub fn two_phases_detectable_pct(params: &Params, sd: f64, power: f64) -> f64 {
    let n = params.max_pairs as f64;
    let last_alpha = *params.look_alphas().last().expect("at least one look");
    let df = (n - 1.0).max(1.0);
    let se = sd / n.sqrt();
    let zb = t_quantile(power, df);
    let significance = (t_quantile(1.0 - last_alpha, df) + zb) * se;
    let min_effect = (1.0 + params.min_effect_pct / 100.0).ln() + zb * se;
    let mut need = significance.max(min_effect);
    if params.confirm {
        let m = params.confirm_pairs as f64;
        let dfc = (m - 1.0).max(1.0);
        need = need.max((t_quantile(1.0 - params.confirm_alpha, dfc) + t_quantile(power, dfc)) * sd / m.sqrt());
    }
    (need.exp() - 1.0) * 100.0
}

/// The warning a noisy machine deserves, or `None` when the budget can see the minimum effect:
/// with `sd` the measured sd of one pair's log-ratio (speed-up terms) and `source` where it
/// was measured, the smallest gain the budget keeps with 95% probability is more than twice
/// the minimum effect. Says what it costs and what to do, in words a person acts on.
/// `ratio`: the likelihood ratio where it decides ([`Params::deciding_ratio`]), else the two phases.
pub fn alarm(params: &Params, sd: f64, source: &str, ratio: Option<&WholePairLr>, knob: &str) -> Option<String> {
    let min = params.min_effect_pct;
    let quiet_at = 2.0 * min.max(0.1);
    // The ratio's figure is simulated: ask first whether it keeps twice the minimum effect.
    if ratio.is_some_and(|t| ratio_keep_share(t, sd, (quiet_at / 100.0).ln_1p()) >= 0.95) {
        return None;
    }
    let d = detectable_pct(params, sd, 0.95, ratio);
    if d.is_nan() || d <= quiet_at {
        return None;
    }
    // One figure in both lines: the detectable gain rounded up to the suggestion's tenth.
    let up = (d * 10.0).ceil() / 10.0;
    let gains = if d.is_finite() { format!("under {up:.1}%") } else { "under 100x".to_string() };
    let suggest = if d.is_finite() { format!("[decision] min_effect_pct = {up:.1}") } else { "a larger [decision] min_effect_pct".into() };
    // Two lines: what it costs, then what to do.
    Some(format!(
        "noisy machine: pairs vary {:.1}% ({source}), so gains {gains} end inconclusive\n\
         fix: quiet the machine, raise [benchmark] {knob}, or set {suggest}",
        sd * 100.0,
    ))
}

/// Pairs after which an experiment without a noise history measures its own noise for the
/// alarm (ours: the fewest whose robust spread a single wild run cannot carry).
pub const OWN_ALARM_PAIRS: usize = 4;

/// [`alarm`] for an experiment with no noise history, from its own first pairs' log-ratios (speed-up
/// terms): their robust sd (1.4826 MAD about the median, so one wild run does not raise it), or
/// `None` when that budget can see the minimum effect. A true gain moves every pair alike and
/// leaves the spread alone.
pub fn own_alarm(params: &Params, log_ratios: &[f64], knob: &str) -> Option<String> {
    let finite: Vec<f64> = log_ratios.iter().copied().filter(|x| x.is_finite()).collect();
    if finite.len() < OWN_ALARM_PAIRS {
        return None;
    }
    let sd = crate::stats::sequential::robust_sd(&finite);
    // Without history the two phases decide.
    alarm(params, sd, &format!("{} pairs, no history", finite.len()), None, knob)
}

/// A `level` interval for a standard deviation estimated with `df` degrees of freedom:
/// sd x sqrt(df / chi2 quantiles) (the usual chi-square interval for a normal sample's sd).
pub fn sd_interval(sd: f64, df: usize, level: f64) -> Option<[f64; 2]> {
    use statrs::distribution::{ChiSquared, ContinuousCDF};
    if df == 0 || !sd.is_finite() {
        return None;
    }
    let chi = ChiSquared::new(df as f64).ok()?;
    let tail = (1.0 - level) / 2.0;
    let k = df as f64;
    Some([sd * (k / chi.inverse_cdf(1.0 - tail)).sqrt(), sd * (k / chi.inverse_cdf(tail)).sqrt()])
}

/// The noise floor from A/A values in run order, with pairs as (incumbent-side, candidate-side);
/// `history`: the history this calibration joins (`None`: too little to borrow), whose gross
/// outliers and modes with `params` say the rule that decides next ([`Params::deciding_ratio`]).
/// The detectable gain and the suggestion are at the scale decisions use: the history's sd, or
/// without one the pairs' own with gross outliers set aside (`trimmed_sd`).
pub fn noise_floor(
    run_values: &[f64],
    pairs: &[(f64, f64)],
    params: &Params,
    history: Option<&Borrowed>,
    trimmed_sd: Option<f64>,
) -> NoiseFloor {
    let logs: Vec<f64> = run_values.iter().map(|v| v.ln()).collect();
    let d: Vec<f64> = pairs.iter().map(|(a, b)| (b / a).ln()).collect();
    let (dm, dsd) = crate::stats::sequential::mean_sd(&d);
    let (m, sd) = crate::stats::sequential::mean_sd(run_values);
    let deciding = history.map(|b| b.scale.sd).or(trimmed_sd).unwrap_or(dsd);
    let ratio = params.deciding_ratio(history);
    let with_min = Params { min_effect_pct: 0.0, ..params.clone() };
    let floor_ratio = with_min.deciding_ratio(history);
    let floor = detectable_pct(&with_min, deciding, 0.95, floor_ratio.as_ref());
    NoiseFloor {
        runs: run_values.len(),
        pairs: pairs.len(),
        pair_cv_pct: dsd / 2f64.sqrt() * 100.0,
        df: pairs.len().saturating_sub(1),
        pair_cv_interval_pct: sd_interval(dsd / 2f64.sqrt() * 100.0, pairs.len().saturating_sub(1), 0.90),
        run_cv_pct: sd / m * 100.0,
        drift_pct_per_run: slope(&logs) * 100.0,
        aa_effect_pct: (dm.exp() - 1.0) * 100.0,
        detectable_pct: detectable_pct(params, deciding, 0.95, ratio.as_ref()),
        detectable_by: match (params.robust, &ratio) {
            (Some(_), _) => Rule::RobustRatio,
            (None, Some(_)) => Rule::LikelihoodRatio,
            (None, None) => Rule::TwoPhases,
        },
        keep_at: ratio.map(|r| r.keep_at),
        suggested_min_effect_pct: (floor * 10.0).ceil() / 10.0,
        deciding_sd_pct: deciding * 100.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::sequential::NoiseScale;

    #[test]
    fn the_sd_interval_is_the_chi_square_one_and_narrows_with_df() {
        // df = 9, 90%: chi2 quantiles 3.325 and 16.919, so sd x [0.729, 1.645].
        let [lo, hi] = sd_interval(1.0, 9, 0.90).unwrap();
        assert!((lo - (9.0f64 / 16.919).sqrt()).abs() < 1e-3 && (hi - (9.0f64 / 3.325).sqrt()).abs() < 1e-3, "{lo} {hi}");
        // One df: the upper end is about 16x the estimate.
        let [_, hi1] = sd_interval(1.0, 1, 0.90).unwrap();
        assert!(hi1 > 15.0, "{hi1}");
        assert!(sd_interval(1.0, 0, 0.90).is_none());
    }

    fn params() -> Params {
        Params::for_tests(16)
    }

    #[test]
    fn slope_of_a_line_is_exact() {
        // y = 3 + 0.5 i: numpy.polyfit(range(5), y, 1)[0] = 0.5.
        assert!((slope(&[3.0, 3.5, 4.0, 4.5, 5.0]) - 0.5).abs() < 1e-12);
        assert_eq!(slope(&[1.0]), 0.0);
    }

    #[test]
    fn figures_of_a_drifting_noisy_series() {
        // Values rising 1% per run, pairs alternating around a 0.5% spread.
        let vals: Vec<f64> = (0..16).map(|i| 10.0 * (0.01 * i as f64).exp() * if i % 3 == 0 { 1.005 } else { 0.995 }).collect();
        let pairs: Vec<(f64, f64)> = vals.chunks(2).map(|c| (c[0], c[1])).collect();
        let f = noise_floor(&vals, &pairs, &params(), None, None);
        assert!((f.drift_pct_per_run - 1.0).abs() < 0.1, "{}", f.drift_pct_per_run);
        assert!(f.run_cv_pct > f.pair_cv_pct, "drift inflates the plain CV: {f:?}");
        assert!(f.detectable_pct >= 1.0 && f.suggested_min_effect_pct > 0.0, "{f:?}");
    }

    #[test]
    fn a_noisy_machine_raises_the_alarm_and_a_quiet_one_does_not() {
        let p = params();
        assert_eq!(alarm(&p, 0.005, "history", None, "iters"), None);
        // 45% per pair (the noisy night): only very large gains are kept reliably.
        let text = alarm(&p, 0.45, "from 3 sessions of history", None, "profile_iters").unwrap();
        let d = detectable_pct(&p, 0.45, 0.95, None);
        assert!(d > 2.0, "{d}");
        // One figure in both lines, rounded up to the suggestion's tenth.
        let up = (d * 10.0).ceil() / 10.0;
        assert!(text.contains(&format!("gains under {up:.1}%")) && text.contains("quiet the machine"), "{text}");
        assert!(text.contains(&format!("min_effect_pct = {up:.1}")), "{text}");
        // The knob named is the one whose calls make a run's time.
        assert!(text.contains("raise [benchmark] profile_iters,"), "{text}");
    }

    #[test]
    fn detectable_gain_grows_with_noise_and_shrinks_with_budget() {
        let p = params();
        let a = detectable_pct(&p, 0.01, 0.95, None);
        let b = detectable_pct(&p, 0.03, 0.95, None);
        let c = detectable_pct(&Params { max_pairs: 40, confirm_pairs: 20, ..p.clone() }, 0.03, 0.95, None);
        assert!(a < b && c < b, "{a} {b} {c}");
        // Quiet noise: the minimum effect dominates (1% plus a little).
        assert!(a > 1.0 && a < 2.5, "{a}");
    }

    /// The default rule's parameters (`method = "auto"`).
    use crate::stats::sequential::{Levels, Switches};

    /// Every switch a rule recorded before its levels were numbers, on.
    fn recorded(s: Switches) -> Levels {
        Levels::from_switches(s)
    }

    #[test]
    fn every_switch_on_means_the_current_levels() {
        // Records from before the pairs' correlation and the rescue's outliers read them as absent.
        assert_eq!(Levels::from_switches(Switches::ALL), Levels::before_correlations());
        assert_eq!(Levels::from_switches(Switches::default()), Levels::first());
    }

    fn auto() -> Params {
        crate::config::DecisionConfig::earlier().params(None)
    }

    #[test]
    fn the_robust_ratios_detectable_gain_is_its_budgets_t_test() {
        let p = crate::config::DecisionConfig::default().params(None);
        let l = p.robust.expect("the default is the robust ratio");
        // At 30 pairs: (t(0.9999, 29) + t(0.95, 29)) sd / sqrt(30), about 1.1 sd.
        let sd = 0.0141;
        let want = ((t_quantile(1.0 - l.rescue_alpha, 29.0) + t_quantile(0.95, 29.0)) * sd / 30f64.sqrt()).exp_m1() * 100.0;
        assert!((detectable_pct(&p, sd, 0.95, None) - want).abs() < 1e-12);
        assert!((1.5..1.7).contains(&want), "{want}");
        // A quiet machine: the minimum effect sets it.
        assert!((detectable_pct(&p, 0.001, 0.95, None) - 1.03).abs() < 0.01);
        assert!(budget_words(&p, None).starts_with("the robust ratio, up to 30 pairs"), "{}", budget_words(&p, None));
        // The alarm reads the same figure: quiet at 1% a pair, loud at 5%.
        assert_eq!(alarm(&p, 0.01, "history", None, "iters"), None);
        let text = alarm(&p, 0.05, "history", None, "iters").expect("a noisy machine");
        assert!(text.contains("min_effect_pct = 5.6"), "{text}");
    }

    #[test]
    fn the_ratio_decides_only_with_a_history_free_of_gross_outliers_and_keeps_lower_in_one_mode() {
        let p = auto();
        use crate::stats::sequential::{LR_EARLY_SDS, ONE_MODE_TOLD_PAIRS};
        // One mode shown on enough pairs to tell (a calibration of 60 pairs, or sessions that add
        // up to it).
        let h = |outliers: usize, modes: Option<usize>| Borrowed {
            outliers,
            modes,
            modes_pairs: ONE_MODE_TOLD_PAIRS,
            ..Borrowed::new(NoiseScale { sd: 0.01, df: 59.0 })
        };
        assert_eq!(p.deciding_ratio(None), None, "no history: the two phases");
        let unchecked = p.deciding_ratio(Some(&h(0, None))).unwrap();
        assert_eq!(unchecked, p.likelihood_ratio_test(0.01).for_history(false, 0));
        assert_eq!(unchecked.keep_at, crate::stats::sequential::LR_KEEP_AT, "no session could tell one mode from two");
        let two = p.deciding_ratio(Some(&h(0, Some(1)))).unwrap();
        assert_eq!(two.keep_at, crate::stats::sequential::LR_KEEP_AT, "two modes seen");
        // Two modes shown: the first keep waits longer than where no session could tell.
        use crate::stats::sequential::{LR_KEEP_FROM_TWO_MODES, LR_KEEP_FROM_TWO_MODES_SHOWN};
        const { assert!(LR_KEEP_FROM_TWO_MODES_SHOWN > LR_KEEP_FROM_TWO_MODES) };
        assert_eq!((unchecked.keep_from, two.keep_from), (LR_KEEP_FROM_TWO_MODES, LR_KEEP_FROM_TWO_MODES_SHOWN));
        assert_eq!(two, WholePairLr { keep_from: LR_KEEP_FROM_TWO_MODES_SHOWN, ..unchecked }, "only the first keep moves");
        // Rules recorded before it waited as long on both.
        let streak_five = Params { levels: Levels { ratio_keep_from_two_modes_shown: 0, ..p.levels }, ..p.clone() };
        assert_eq!(streak_five.deciding_ratio(Some(&h(0, Some(1)))).unwrap().keep_from, LR_KEEP_FROM_TWO_MODES);
        let one = p.deciding_ratio(Some(&h(0, Some(0)))).unwrap();
        assert_eq!(one.keep_at, crate::stats::sequential::LR_KEEP_AT_ONE_MODE);
        assert_eq!(
            one,
            WholePairLr { keep_at: one.keep_at, keep_from: 0, early_sds: 0.0, ..unchecked },
            "only the level and the first keep move"
        );
        // One mode shown on a 16-pair calibration alone: the level of two modes, from the second
        // pair, an early keep needing a mean of LR_EARLY_SDS calibrated sds.
        let short = p.deciding_ratio(Some(&Borrowed { modes_pairs: 16, ..h(0, Some(0)) })).unwrap();
        assert_eq!((short.keep_at, short.keep_from, short.early_sds), (crate::stats::sequential::LR_KEEP_AT, 0, LR_EARLY_SDS));
        assert_eq!(p.deciding_ratio(Some(&Borrowed { modes_pairs: ONE_MODE_TOLD_PAIRS - 1, ..h(0, Some(0)) })).unwrap(), short);
        assert_eq!(
            (one.keep_from, unchecked.keep_from),
            (0, crate::stats::sequential::LR_KEEP_FROM_TWO_MODES),
            "a streak of two modes' pairs"
        );
        assert_eq!(p.deciding_ratio(Some(&h(1, Some(0)))), None, "a gross outlier pooled: the two phases");
        let sequential = Params { likelihood_ratio: crate::stats::sequential::OnePhase::Never, ..p.clone() };
        assert_eq!(sequential.deciding_ratio(Some(&h(0, Some(0)))), None);
        let recorded_before = Params { levels: recorded(Switches { one_mode: false, streak: false, ..Switches::ALL }), ..p.clone() };
        let before = crate::stats::sequential::LR_KEEP_AT_BEFORE_STREAK;
        assert_eq!(recorded_before.deciding_ratio(Some(&h(0, Some(0)))).unwrap().keep_at, before);
        assert_eq!(recorded_before.deciding_ratio(Some(&h(0, None))).unwrap().keep_from, 0);
        // Recorded between the one-mode level and the streak rule: one mode at its level, the rest
        // at the level before the streak rule, from the second pair.
        let one_mode_only = Params { levels: recorded(Switches { streak: false, ..Switches::ALL }), ..p };
        let two = one_mode_only.deciding_ratio(Some(&h(0, Some(1)))).unwrap();
        assert_eq!((two.keep_at, two.keep_from), (before, 0));
        assert_eq!(one_mode_only.deciding_ratio(Some(&h(0, Some(0)))).unwrap().keep_at, crate::stats::sequential::LR_KEEP_AT_ONE_MODE);
        // Recorded before one mode needed enough pairs: a 16-pair calibration's one mode at its
        // level, no early keep's mean.
        let untold = Params { levels: recorded(Switches { told: false, ..Switches::ALL }), ..auto() };
        let short = untold.deciding_ratio(Some(&Borrowed { modes_pairs: 16, ..h(0, Some(0)) })).unwrap();
        assert_eq!((short.keep_at, short.early_sds), (crate::stats::sequential::LR_KEEP_AT_ONE_MODE, 0.0));
    }

    #[test]
    fn the_ratios_detectable_gain_is_where_independent_decisions_keep_95_percent() {
        let p = auto();
        let sd = 0.01;
        let test = p.likelihood_ratio_test(sd);
        let d = detectable_pct(&p, sd, 0.95, Some(&test));
        // Other pairs than the figure's own (another generator seed): at the figure about 95%
        // keep, at two thirds of it clearly fewer.
        let share = |gain_pct: f64| {
            let mean = (gain_pct / 100.0).ln_1p();
            let mut rng = Rng::new(7);
            let n = 4000;
            let kept = (0..n).filter(|_| test.decide(sd, false, |_| (mean + sd * rng.normal(), sd * rng.normal())).0 == Stop::Keep).count();
            kept as f64 / n as f64
        };
        let at = share(d);
        assert!((0.93..=0.97).contains(&at), "{d}% kept {at}");
        assert!(share(d * 2.0 / 3.0) < 0.9, "{d}");
        // More noise, a larger figure; and it is not the two phases' figure.
        assert!(detectable_pct(&p, 0.03, 0.95, Some(&p.likelihood_ratio_test(0.03))) > d);
        assert!((d - detectable_pct(&p, sd, 0.95, None)).abs() > 0.01, "{d}");
    }

    #[test]
    fn the_alarm_names_the_rule_that_decides() {
        let p = auto();
        assert_eq!(alarm(&p, 0.005, "history", Some(&p.likelihood_ratio_test(0.005)), "iters"), None);
        let test = p.likelihood_ratio_test(0.2);
        let text = alarm(&p, 0.2, "history", Some(&test), "iters").unwrap();
        let d = detectable_pct(&p, 0.2, 0.95, Some(&test));
        // The ratio's budget, not the two phases'.
        assert!(text.contains(&format!("gains under {:.1}%", (d * 10.0).ceil() / 10.0)), "{text}");
        assert!(
            budget_words(&p, Some(5.7)).contains("likelihood ratio of whole pairs, up to 30 pairs, keeping at a ratio of e^5.7")
                && budget_words(&p, None).contains("max_pairs")
        );
    }
}
