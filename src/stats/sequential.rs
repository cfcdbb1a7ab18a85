//! The sequential keep/revert procedure: a group-sequential one-sided paired t-test on the
//! log-ratios of interleaved pairs, with alpha spent across looks, a futility stop, a minimum
//! effect, and a confirmation batch in reversed order. Pure: the same code drives real
//! experiments (`experiment`), `ratchet simulate` and the unit tests.
//!
//! Why this method. Each look tests the pairs so far with a one-sided paired t-test at the
//! increment of an alpha-spending function (Lan & DeMets 1983, Biometrika 70(3):659-663; Pocock-
//! or O'Brien-Fleming-type). The exact group-sequential boundaries need the joint law of the
//! looks' statistics (numerical integration, and only approximately right for a t statistic
//! with an estimated variance at 4 to 20 pairs). Testing each look at its own increment instead
//! bounds the false-keep probability across all looks by the union bound (Bonferroni): the sum
//! of the increments, `alpha`, whatever the correlation between looks, the number of pairs,
//! or the stopping. It is slightly conservative and exactly valid, which matters more here than
//! the last bit of power. Futility stops never raise the false-keep rate (they only revert).
//! The keep must then survive an independent batch in reversed order (BA, AB, ...), tested
//! alone at `confirm_alpha`: under no gain the two tests are independent, so a false keep has
//! probability at most `alpha * confirm_alpha` (0.02 x 0.05 = 0.001 by default). Reversing the
//! order also flips the sign of any bias a warm-up ramp leaves in the first batch.

use super::{fmt_p, pct, t_quantile, t_test_greater, Confirmation, Decision, Verdict};
use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal};

/// How the overall `alpha` is spread over the looks (Lan & DeMets 1983 spending functions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Spending {
    /// `alpha * ln(1 + (e - 1) t)`: spends early, for early keeps of large gains.
    #[default]
    Pocock,
    /// `2 - 2 Phi(z_{1 - alpha/2} / sqrt(t))`: keeps almost all of alpha for the last look.
    OBrienFleming,
}

impl Spending {
    /// The alpha spent by information fraction `t` (pairs so far / maximum pairs), in [0, alpha].
    pub fn spent(self, alpha: f64, t: f64) -> f64 {
        let t = t.clamp(0.0, 1.0);
        if t == 0.0 {
            return 0.0;
        }
        match self {
            Spending::Pocock => alpha * (1.0 + (std::f64::consts::E - 1.0) * t).ln(),
            Spending::OBrienFleming => {
                let n = Normal::new(0.0, 1.0).expect("standard normal");
                2.0 - 2.0 * n.cdf(n.inverse_cdf(1.0 - alpha / 2.0) / t.sqrt())
            }
        }
    }
}

/// The procedure's parameters (from `[decision]`).
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// Pairs before the first look.
    pub min_pairs: usize,
    /// Pairs at the last look: the budget.
    pub max_pairs: usize,
    /// Pairs between looks.
    pub look_every: usize,
    /// One-sided false-keep level of the first phase, across all its looks.
    pub alpha: f64,
    pub spending: Spending,
    /// The smallest gain worth keeping, in percent.
    pub min_effect_pct: f64,
    /// Stop for futility when the one-sided (1 - beta) upper bound of the gain is below the
    /// minimum effect. `None`: never stop early for futility.
    pub futility_beta: Option<f64>,
    /// Whether a keep must be confirmed by an independent batch in reversed order.
    pub confirm: bool,
    pub confirm_pairs: usize,
    pub confirm_alpha: f64,
}

impl Params {
    /// A single look at `pairs` pairs with the whole alpha: the fixed-sample t-test.
    pub fn fixed(pairs: usize, alpha: f64, min_effect_pct: f64) -> Params {
        Params {
            min_pairs: pairs,
            max_pairs: pairs,
            look_every: 1,
            alpha,
            spending: Spending::Pocock,
            min_effect_pct,
            futility_beta: None,
            confirm: false,
            confirm_pairs: 0,
            confirm_alpha: alpha,
        }
    }

    /// The pair counts at which the procedure looks: min_pairs, min_pairs + look_every, ...,
    /// and always max_pairs last.
    pub fn looks(&self) -> Vec<usize> {
        let mut v = vec![];
        let mut n = self.min_pairs.min(self.max_pairs);
        while n < self.max_pairs {
            v.push(n);
            n += self.look_every.max(1);
        }
        v.push(self.max_pairs);
        v
    }

    /// The significance level of each look: the increments of the spending function.
    pub fn look_alphas(&self) -> Vec<f64> {
        let looks = self.looks();
        let mut prev = 0.0;
        looks
            .iter()
            .map(|&n| {
                let cum = self.spending.spent(self.alpha, n as f64 / self.max_pairs as f64);
                let a = (cum - prev).max(0.0);
                prev = cum;
                a
            })
            .collect()
    }

    /// Most pairs a decision can take, confirmation included.
    pub fn max_total_pairs(&self) -> usize {
        self.max_pairs + if self.confirm { self.confirm_pairs } else { 0 }
    }
}

/// The two batches of an experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Pairs in the order AB, BA, AB, ... (A = incumbent).
    Main,
    /// The confirmation batch, in reversed order: BA, AB, BA, ...
    Confirm,
}

/// Whether the incumbent runs first in pair `i` (0-based) of `phase`.
pub fn incumbent_first(phase: Phase, i: usize) -> bool {
    (i % 2 == 0) == (phase == Phase::Main)
}

/// What the driver does next.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Measure this many more pairs of `phase`, then ask again.
    Measure {
        phase: Phase,
        pairs: usize,
    },
    Done(Decision),
}

/// The procedure: give it the log-ratios measured so far (positive = candidate better), one
/// per pair, of each phase; it says what to measure next or what it decided. It replays every
/// look from the data alone, so the decision is a function of the samples.
#[derive(Debug, Clone)]
pub struct Sequential {
    pub params: Params,
}

/// What one look of the first phase concluded.
enum LookOutcome {
    Promising,
    Futile(String),
    Continue,
    Exhausted(String),
}

impl Sequential {
    pub fn new(params: Params) -> Self {
        Sequential { params }
    }

    pub fn next(&self, main: &[f64], confirm: &[f64]) -> Next {
        let p = &self.params;
        let looks = p.looks();
        let alphas = p.look_alphas();
        for (k, (&n, &a_k)) in looks.iter().zip(&alphas).enumerate() {
            if main.len() < n {
                return Next::Measure { phase: Phase::Main, pairs: n - main.len() };
            }
            let d = &main[..n];
            let (mean, se, pv) = t_test_greater(d);
            let outcome = self.look(mean, se, pv, a_k, n, k + 1 == looks.len());
            let base = |verdict, reason: String| Decision {
                verdict,
                effect_pct: pct(mean),
                ci_low_pct: pct(mean - t_quantile(1.0 - p.alpha, (n - 1) as f64) * se),
                ci_high_pct: pct(mean + t_quantile(1.0 - p.alpha, (n - 1) as f64) * se),
                ci_level: 1.0 - 2.0 * p.alpha,
                p_value: pv,
                pairs: n,
                looks: k + 1,
                p_threshold: a_k,
                confirmation: None,
                reason,
            };
            match outcome {
                LookOutcome::Continue => continue,
                LookOutcome::Futile(why) => return Next::Done(base(Verdict::Revert, why)),
                LookOutcome::Exhausted(why) => return Next::Done(base(Verdict::Inconclusive, why)),
                LookOutcome::Promising => {
                    let gain = format!(
                        "gain {:+.2}% is significant at look {} of {} (p = {} <= {}) and at least the minimum effect {}%",
                        pct(mean),
                        k + 1,
                        looks.len(),
                        fmt_p(pv),
                        fmt_p(a_k),
                        p.min_effect_pct
                    );
                    if !p.confirm {
                        return Next::Done(base(Verdict::Keep, gain));
                    }
                    if confirm.len() < p.confirm_pairs {
                        return Next::Measure { phase: Phase::Confirm, pairs: p.confirm_pairs - confirm.len() };
                    }
                    return Next::Done(self.confirmed(d, &confirm[..p.confirm_pairs], base(Verdict::Keep, gain)));
                }
            }
        }
        unreachable!("the last look always ends the first phase")
    }

    fn look(&self, mean: f64, se: f64, pv: f64, a_k: f64, n: usize, last: bool) -> LookOutcome {
        let p = &self.params;
        let effect = pct(mean);
        if pv <= a_k && effect >= p.min_effect_pct {
            return LookOutcome::Promising;
        }
        // The one-sided upper bound of the gain: below the minimum effect, a worthwhile gain has
        // become unlikely. At the last look a plain (1 - alpha) bound decides revert vs
        // inconclusive even without early futility stops.
        let beta = match (p.futility_beta, last) {
            (Some(b), _) => Some(b),
            (None, true) => Some(p.alpha),
            (None, false) => None,
        };
        if let Some(beta) = beta {
            let upper = mean + t_quantile(1.0 - beta, (n - 1) as f64) * se;
            if pct(upper) < p.min_effect_pct {
                return LookOutcome::Futile(format!(
                    "no worthwhile gain: {effect:+.2}% with a {:.0}% upper bound {:+.2}% below the minimum effect {}% (look {}, {n} pairs)",
                    (1.0 - beta) * 100.0,
                    pct(upper),
                    p.min_effect_pct,
                    self.params.looks().iter().position(|&l| l == n).map_or(1, |i| i + 1)
                ));
            }
        }
        if last {
            let why = if pv <= a_k {
                format!(
                    "gain {effect:+.2}% is significant but below the minimum effect {}%, and a gain of that size is still plausible",
                    p.min_effect_pct
                )
            } else {
                format!(
                    "no significant gain after the budget of {n} pairs (p = {} > {}), but a gain of {}% is still plausible",
                    fmt_p(pv),
                    fmt_p(a_k),
                    p.min_effect_pct
                )
            };
            return LookOutcome::Exhausted(format!("{why}; rerun with more pairs to settle it"));
        }
        LookOutcome::Continue
    }

    /// The confirmation batch decides whether a promising first phase becomes a keep. The
    /// reported estimate pools both batches (the first phase alone overestimates after an early
    /// stop); the batch itself must show a gain at `confirm_alpha`.
    fn confirmed(&self, main: &[f64], batch: &[f64], mut first: Decision) -> Decision {
        let p = &self.params;
        let (bmean, _, bp) = t_test_greater(batch);
        let passed = bp <= p.confirm_alpha && bmean > 0.0;
        let all: Vec<f64> = main.iter().chain(batch).copied().collect();
        let (mean, se, _) = t_test_greater(&all);
        let q = t_quantile(1.0 - p.alpha, (all.len() - 1) as f64);
        first.effect_pct = pct(mean);
        first.ci_low_pct = pct(mean - q * se);
        first.ci_high_pct = pct(mean + q * se);
        first.confirmation = Some(Confirmation { pairs: batch.len(), effect_pct: pct(bmean), p_value: bp, alpha: p.confirm_alpha, passed });
        if passed {
            first.reason = format!(
                "{}; confirmed by {} pairs in reversed order ({:+.2}%, p = {} <= {})",
                first.reason,
                batch.len(),
                pct(bmean),
                fmt_p(bp),
                fmt_p(p.confirm_alpha)
            );
        } else {
            first.verdict = Verdict::Revert;
            first.reason = format!(
                "not confirmed: the first {} pairs showed a gain, but {} pairs in reversed order gave {:+.2}% (p = {} > {})",
                main.len(),
                batch.len(),
                pct(bmean),
                fmt_p(bp),
                fmt_p(p.confirm_alpha)
            );
        }
        first
    }
}

/// Run the procedure to its decision against a source of pairs: `measure(phase, i)` returns the
/// log-ratio of pair `i` of `phase`. Used by the simulation and the tests; the experiment
/// drives [`Sequential::next`] itself because a measurement can fail.
pub fn run_to_decision(seq: &Sequential, mut measure: impl FnMut(Phase, usize) -> f64) -> Decision {
    let (mut main, mut confirm) = (vec![], vec![]);
    loop {
        match seq.next(&main, &confirm) {
            Next::Done(d) => return d,
            Next::Measure { phase, pairs } => {
                let v = if phase == Phase::Main { &mut main } else { &mut confirm };
                for _ in 0..pairs {
                    let i = v.len();
                    v.push(measure(phase, i));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> Params {
        Params {
            min_pairs: 4,
            max_pairs: 12,
            look_every: 2,
            alpha: 0.05,
            spending: Spending::Pocock,
            min_effect_pct: 1.0,
            futility_beta: Some(0.2),
            confirm: true,
            confirm_pairs: 6,
            confirm_alpha: 0.02,
        }
    }

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    /// Log-ratios of `gain` (a fraction) with a deterministic +-`wiggle` pattern.
    fn ratios(gain: f64, wiggle: f64, n: usize) -> Vec<f64> {
        let w = [1.0, -0.5, 0.3, -0.8, 0.6, -0.2, 0.9, -0.4];
        (0..n).map(|i| (1.0 + gain).ln() + wiggle * w[i % w.len()]).collect()
    }

    #[test]
    fn spending_functions_match_their_formulas() {
        // Pocock-type: 0.05 * ln(1 + (e - 1) * 0.5) = 0.05 * 0.6201145069582774 (math.log).
        assert!(close(Spending::Pocock.spent(0.05, 0.5), 0.05 * 0.6201145069582774, 1e-12));
        // O'Brien-Fleming-type at t = 0.5: 2 - 2 * scipy.stats.norm.cdf(norm.ppf(0.975) / sqrt(0.5))
        // = 0.005574596680784305.
        assert!(close(Spending::OBrienFleming.spent(0.05, 0.5), 0.005574596680784305, 1e-9));
        for s in [Spending::Pocock, Spending::OBrienFleming] {
            assert!(close(s.spent(0.05, 1.0), 0.05, 1e-9));
            assert_eq!(s.spent(0.05, 0.0), 0.0);
        }
    }

    #[test]
    fn looks_and_their_alphas_sum_to_alpha() {
        let p = params();
        assert_eq!(p.looks(), vec![4, 6, 8, 10, 12]);
        let a = p.look_alphas();
        assert!(close(a.iter().sum::<f64>(), 0.05, 1e-12));
        assert!(a.iter().all(|&x| x > 0.0));
        let p = Params { max_pairs: 11, ..params() };
        assert_eq!(p.looks(), vec![4, 6, 8, 10, 11]);
        assert_eq!(Params::fixed(5, 0.05, 1.0).looks(), vec![5]);
    }

    #[test]
    fn orders_alternate_and_confirmation_is_reversed() {
        let main: Vec<bool> = (0..4).map(|i| incumbent_first(Phase::Main, i)).collect();
        let conf: Vec<bool> = (0..4).map(|i| incumbent_first(Phase::Confirm, i)).collect();
        assert_eq!(main, [true, false, true, false]);
        assert_eq!(conf, [false, true, false, true]);
    }

    #[test]
    fn asks_for_the_first_look_then_the_next() {
        let s = Sequential::new(params());
        assert_eq!(s.next(&[], &[]), Next::Measure { phase: Phase::Main, pairs: 4 });
        // A small noisy gain: neither clear nor futile at 4 pairs.
        let d = ratios(0.01, 0.01, 4);
        assert_eq!(s.next(&d, &[]), Next::Measure { phase: Phase::Main, pairs: 2 });
    }

    #[test]
    fn big_gain_stops_early_and_is_confirmed() {
        let s = Sequential::new(params());
        let d = ratios(0.10, 0.005, 4);
        assert_eq!(s.next(&d, &[]), Next::Measure { phase: Phase::Confirm, pairs: 6 });
        let Next::Done(dec) = s.next(&d, &ratios(0.10, 0.005, 6)) else { panic!("decided") };
        assert_eq!(dec.verdict, Verdict::Keep, "{}", dec.reason);
        assert_eq!((dec.pairs, dec.looks), (4, 1));
        let c = dec.confirmation.unwrap();
        assert!(c.passed && c.pairs == 6 && c.p_value < 0.02);
        assert!(dec.ci_low_pct < dec.effect_pct && dec.effect_pct < dec.ci_high_pct);
        assert!(close(dec.effect_pct, 10.0, 0.5), "{}", dec.effect_pct);
    }

    #[test]
    fn failed_confirmation_reverts() {
        let s = Sequential::new(params());
        let d = ratios(0.10, 0.005, 4);
        let Next::Done(dec) = s.next(&d, &ratios(0.0, 0.005, 6)) else { panic!("decided") };
        assert_eq!(dec.verdict, Verdict::Revert);
        assert!(dec.reason.contains("not confirmed"), "{}", dec.reason);
        assert!(!dec.confirmation.unwrap().passed);
    }

    #[test]
    fn no_gain_stops_for_futility() {
        let s = Sequential::new(params());
        let Next::Done(dec) = s.next(&ratios(-0.02, 0.003, 4), &[]) else { panic!("decided") };
        assert_eq!(dec.verdict, Verdict::Revert);
        assert!(dec.reason.contains("no worthwhile gain"), "{}", dec.reason);
        assert_eq!(dec.looks, 1);
    }

    #[test]
    fn budget_running_out_is_inconclusive() {
        // A gain around the minimum effect with wide noise: never clear, never futile.
        let s = Sequential::new(params());
        let d = ratios(0.012, 0.03, 12);
        let dec = run_to_decision(&s, |_, i| d[i]);
        assert_eq!(dec.verdict, Verdict::Inconclusive, "{}", dec.reason);
        assert_eq!((dec.pairs, dec.looks), (12, 5));
    }

    #[test]
    fn significant_but_small_gain_is_not_kept() {
        let s = Sequential::new(Params { futility_beta: None, confirm: false, ..params() });
        let d = ratios(0.004, 0.0005, 12);
        let dec = run_to_decision(&s, |_, i| d[i]);
        assert_ne!(dec.verdict, Verdict::Keep);
        assert!(dec.p_value < 1e-6);
    }

    #[test]
    fn fixed_params_reproduce_the_fixed_t_test() {
        let pairs: Vec<(f64, f64)> = [1.05, 1.02, 1.04, 1.03, 1.06].iter().map(|r| (100.0, 100.0 * r)).collect();
        let d: Vec<f64> = crate::stats::log_ratios(&pairs, crate::config::Direction::Higher);
        let seq = run_to_decision(&Sequential::new(Params::fixed(5, 0.05, 1.0)), |_, i| d[i]);
        // One look at 5 pairs with the whole alpha is the plain one-sided t-test.
        let (mean, _, p) = crate::stats::t_test_greater(&d);
        assert_eq!(seq.verdict, Verdict::Keep);
        assert_eq!(seq.looks, 1);
        assert!(close(seq.p_value, p, 1e-15) && close(seq.effect_pct, pct(mean), 1e-12));
    }
}
