//! The two phases: a group-sequential one-sided t-test of the pairs' mean log-ratio, then a
//! confirmation batch in the complementary order. This file is the first phase, each look in
//! turn (keep-worthy, futile, out of budget or on to the next); `look` picks the pairs a look
//! reads, `own` tests them without history, `with_history` on the borrowed scale with its
//! guards, `confirm` decides a promising first phase.
//!
//! Why this method. Each look tests the pairs so far with a one-sided test at the increment of
//! an alpha-spending function (Lan & DeMets 1983, Biometrika 70(3):659-663; Pocock- or
//! O'Brien-Fleming-type). Testing each look at its own increment bounds the false-keep
//! probability across all looks by the union bound (Bonferroni): the sum of the increments,
//! `alpha`, whatever the correlation between looks or the stopping; slightly conservative and
//! exactly valid. Futility stops never raise the false-keep rate (they only revert). The keep
//! must then survive an independent batch in the complementary order, tested alone at
//! `confirm_alpha`: under no gain the two phases are independent, so a false keep has
//! probability at most `alpha * confirm_alpha` (the rescue's share of the bound: `super`).
//!
//! Without history every look is the pairs' own t-test. With a noise scale borrowed from history
//! ([`Borrowed`](super::Borrowed)) a look uses the history's sd pooled with the pairs' own residuals,
//! times a safety factor, so the first look can come after 2 pairs; a variance guard hands a
//! look whose pairs are noisier than history to their own t-test (its critical mean never below
//! the borrowed one, so the guard adds no false keeps), and gross outliers are set aside and
//! replaced. The guard reads the pairs' log-sums beside their log-ratios (each against its own
//! history): under independent runs they carry n - 1 more df about the current noise, twice
//! what the first looks have otherwise. The confirmation's guard pools the first phase's spread
//! with its own, for a second chance to see a jump the first phase missed, but its own t-test
//! reads its own pairs alone (the first phase stopped because its pairs, spread included, looked
//! good); when the confirmation finds the noise well above history, the first phase's deciding
//! look must also hold on that scale. The first look, with the fewest df to check the scale on,
//! spends a fifth of its alpha increment, and the outlier band widens with the batch's own
//! robust sd, so that a jump is not trimmed away as outliers. The
//! argument, its assumptions and the measured cost when they fail are in docs/decisions.md.

mod confirm;
mod look;
mod own;
mod with_history;

use super::levels::{FUTILITY_TRIM, GUARD};
use super::stat::{Batch, Prior, Test};
use super::{fmt_p, pct, Decision, Next, Phase, Procedure, Sequential, Verdict};

/// What one look of the first phase concluded.
pub(super) enum LookOutcome {
    Promising,
    Futile(String),
    Continue,
    Exhausted(String),
}

impl Sequential {
    /// What the first phase and the confirmation do next, or decide.
    pub(super) fn two_phases(&self, main: &[f64], confirm: &[f64], main_s: &[f64], confirm_s: &[f64]) -> Next {
        let guard = self.borrowed.as_ref().map_or(GUARD, |b| b.guard);
        let p = self.main_params();
        let looks = p.looks();
        let alphas = self.main_alphas(&p);
        let min_log = (1.0 + p.min_effect_pct / 100.0).ln();
        let mut trail = Vec::new();
        for (k, (&n, &a_k)) in looks.iter().zip(&alphas).enumerate() {
            let Some(t) = self.test_at(Batch { d: main, s: main_s }, n, Prior::default(), guard) else {
                return Next::Measure { phase: Phase::Main, pairs: (n.max(main.len() + 1)) - main.len() };
            };
            let last = k + 1 == looks.len();
            trail.push(self.look_record(&t, k + 1, a_k, min_log, self.futility_level(&t, last)));
            let outcome = self.look(&t, a_k, min_log, k + 1, last, &main[..t.measured]);
            let q = self.tq(1.0 - p.alpha, t.df);
            let pv = self.p_value(&t);
            let base = |verdict, reason: String| Decision {
                verdict,
                procedure: if p.confirm || looks.len() > 1 { Procedure::TwoPhases } else { Procedure::Fixed },
                effect_pct: pct(t.mean),
                ci_low_pct: pct(t.mean - q * t.se),
                ci_high_pct: pct(t.mean + q * t.se),
                ci_level: 1.0 - 2.0 * p.alpha,
                p_value: pv,
                pairs: t.measured,
                looks: k + 1,
                p_threshold: a_k,
                p_adjusted: (pv * p.alpha / a_k).min(1.0),
                scale: t.scale_name().to_string(),
                noise_sd_pct: t.sd_pct(),
                excluded: t.excluded,
                confirmation: None,
                rescue: None,
                trail: trail.clone(),
                borrowed: self.borrowed.as_ref().map(|b| Box::new(b.record())),
                reason: if t.excluded > 0 {
                    format!("{reason} ({} gross outlier pair{} set aside and replaced)", t.excluded, if t.excluded == 1 { "" } else { "s" })
                } else {
                    reason
                },
            };
            match outcome {
                LookOutcome::Continue => continue,
                LookOutcome::Futile(why) => return Next::Done(base(Verdict::Revert, why)),
                LookOutcome::Exhausted(why) => return Next::Done(base(Verdict::Inconclusive, why)),
                LookOutcome::Promising => {
                    let gain = format!(
                        "the test's mean gain {:+.2}% is significant at look {} of {} (p = {} <= {}, {} scale) and at least the minimum effect {}%",
                        pct(t.mean),
                        k + 1,
                        looks.len(),
                        fmt_p(pv),
                        fmt_p(a_k),
                        t.scale_name(),
                        p.min_effect_pct
                    );
                    let dec = base(Verdict::Keep, gain);
                    if !p.confirm {
                        return Next::Done(dec);
                    }
                    let kept_main = self.kept(&main[..t.measured]);
                    let prior = self.prior_of(&main[..t.measured], main_s);
                    return self.confirmation(&kept_main, prior, Batch { d: confirm, s: confirm_s }, dec);
                }
            }
        }
        unreachable!("the last look always ends the first phase")
    }

    /// One look's outcome; `measured` is the prefix of the batch the look read (its kept pairs
    /// are read again only for a futility stop's second reading).
    pub(super) fn look(&self, t: &Test, a_k: f64, min_log: f64, look: usize, last: bool, measured: &[f64]) -> LookOutcome {
        let p = &self.params;
        let effect = pct(t.mean);
        let significant = t.t() >= self.tq(1.0 - a_k, t.df);
        if significant && t.mean >= min_log {
            return LookOutcome::Promising;
        }
        // The one-sided upper bound of the gain: below the minimum effect, a worthwhile gain has
        // become unlikely. At the last look a plain (1 - alpha) bound decides revert vs
        // inconclusive even without early futility stops.
        if let Some(beta) = self.futility_level(t, last) {
            let margin = self.tq(1.0 - beta, t.df) * t.se;
            let upper = t.mean + margin;
            // Read twice: a worthwhile gain must be implausible by the mean and by the trimmed
            // mean (the futility stop only reverts, so reading it twice adds no false keep).
            let kept = self.kept(measured);
            let trim = FUTILITY_TRIM.max((p.levels.futility_trim_share * kept.len() as f64) as usize);
            if upper < min_log && trimmed_mean(&kept, trim).is_none_or(|m| m + margin < min_log) {
                return LookOutcome::Futile(format!(
                    "no worthwhile gain: the test's mean {effect:+.2}% with a {:.0}% upper bound {:+.2}% below the minimum effect {}% (look {look}, {} pairs, {} scale)",
                    (1.0 - beta) * 100.0,
                    pct(upper),
                    p.min_effect_pct,
                    t.measured,
                    t.scale_name()
                ));
            }
        }
        if last {
            let why = if significant {
                format!(
                    "the test's mean gain {effect:+.2}% is significant but below the minimum effect {}%, and a gain of that size is still plausible",
                    p.min_effect_pct
                )
            } else {
                format!(
                    "no significant gain after the budget of {} pairs (p = {} > {}), but a gain of {}% is still plausible",
                    t.measured,
                    fmt_p(self.p_value(t)),
                    fmt_p(a_k),
                    p.min_effect_pct
                )
            };
            return LookOutcome::Exhausted(format!("{why}; rerun with more pairs to settle it"));
        }
        LookOutcome::Continue
    }
}

/// The mean of `v` without its `trim` lowest and `trim` highest values; `None` when that leaves
/// fewer than two (or `trim` is 0). A machine whose runs are now and then slow gives a pair a
/// large log-ratio of either sign: one such pair moves a few pairs' mean by a whole gain, their
/// trimmed mean hardly.
fn trimmed_mean(v: &[f64], trim: usize) -> Option<f64> {
    if trim == 0 || v.len() < 2 * trim + 2 {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let mid = &s[trim..s.len() - trim];
    Some(mid.iter().sum::<f64>() / mid.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::trimmed_mean;

    #[test]
    fn the_trimmed_mean_drops_each_end_and_needs_two_values_left() {
        assert_eq!(trimmed_mean(&[0.03, -0.05, 0.02, 0.04], 1), Some(0.025));
        assert_eq!(trimmed_mean(&[0.03, -0.05, 0.02], 1), None);
        assert_eq!(trimmed_mean(&[0.03, -0.05, 0.02, 0.04], 0), None);
        assert_eq!(trimmed_mean(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 2), Some(3.5));
    }
}
