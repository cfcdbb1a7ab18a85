//! The rescue: a decision the two phases left unconfirmed or inconclusive measures on to a fixed
//! number of pairs in all (the likelihood ratio's inconclusive end has measured them), and is
//! kept when the one-sided t-test over those pairs, gross outliers set aside, passes at its own
//! small level with an estimate of at least the minimum effect.
//!
//! Why it is sound. The test reads the first `rescue_total` pairs measured, a number fixed by the
//! rule, so the event "the rescue keeps" lies inside the event "the fixed-sample t-test of those
//! pairs rejects at `rescue_alpha`", whatever the phases decided before: by the union bound the
//! false keeps are at most `alpha x confirm_alpha + rescue_alpha`. The t-test reads the pairs'
//! own spread, so no borrowed scale and no noise jump moves its level. Why it is needed: the two
//! phases test their pairs apart, and on a machine whose runs are sometimes slow (a second mode)
//! a real gain fails one of them far more often than a test of all the pairs would
//! (lab/notes/decisions-history.md, "Where the bimodal machine's power goes").

use super::levels::ROBUST_BAND_PAIRS;
use super::sample::{mean_sd, outlier_band};
use super::stat::Test;
use super::{fmt_p, median, pct, Decision, Next, Phase, Procedure, Sequential, Verdict};
use crate::stats::{LookPhase, Rescue};

impl Sequential {
    /// The two phases' `next` carried through the rescue: an unconfirmed or inconclusive
    /// decision asks for the confirmation batch's pairs up to the rescue's total, then is decided
    /// again by the t-test over all of them; anything else passes as it is.
    pub(super) fn rescued(&self, main: &[f64], confirm: &[f64], next: Next) -> Next {
        let total = self.rescue_total();
        let d = match next {
            Next::Done(d) if total > 0 && matches!(d.verdict, Verdict::Unconfirmed | Verdict::Inconclusive) => d,
            other => return other,
        };
        let have = main.len() + confirm.len();
        if have < total {
            return Next::Measure { phase: Phase::Confirm, pairs: total - have };
        }
        // The first `total` pairs measured: the first phase's, then the confirmation's.
        let all: Vec<f64> = main.iter().chain(confirm).take(total).copied().collect();
        Next::Done(self.rescue(&all, d))
    }

    /// Whether the pairs the procedure asks for next are the rescue's: the two phases have
    /// decided, and not to keep.
    pub fn in_rescue(&self, main: &[f64], confirm: &[f64], main_s: &[f64], confirm_s: &[f64]) -> bool {
        self.rescue_total() > 0 && matches!(self.two_phases(main, confirm, main_s, confirm_s), Next::Done(_))
    }

    /// The t-test over `all` pairs less their gross outliers, deciding `d` again: kept when
    /// significant at `rescue_alpha` with a mean of at least the minimum effect; else `d`'s
    /// verdict stands. Either way the
    /// estimate and interval become those of the pairs it read (the two phases' estimate after
    /// an early stop is the selected one).
    fn rescue(&self, all: &[f64], mut d: Decision) -> Decision {
        let p = &self.params;
        let set_aside = self.rescue_set_aside(all);
        let read: Vec<f64> = all.iter().enumerate().filter(|(i, _)| !set_aside.contains(i)).map(|(_, &x)| x).collect();
        let (n, excluded) = (read.len(), set_aside.len());
        let (mean, sd) = mean_sd(&read);
        let df = n.saturating_sub(1).max(1) as f64;
        let t = Test { n, measured: all.len(), excluded, mean, se: sd / (n as f64).sqrt(), df, borrowed: false, ratio: None };
        let level = p.rescue_alpha;
        let min_log = (1.0 + p.min_effect_pct / 100.0).ln();
        let crit = self.tq(1.0 - level, df);
        let significant = t.t() >= crit;
        let passed = significant && mean >= min_log;
        let keep_at = crit.max(min_log / t.se);
        let pv = self.p_value(&t);
        let q = self.tq(1.0 - p.alpha, df);
        let (low, high) = (pct(mean - q * t.se), pct(mean + q * t.se));
        d.trail.push(self.record(&t, LookPhase::Rescue, 1, level, keep_at, Some(keep_at)));
        let before = d.verdict;
        d.rescue =
            Some(Rescue { pairs: all.len(), set_aside: excluded, set_aside_pairs: set_aside, p_value: pv, alpha: level, passed, before });
        d.effect_pct = pct(mean);
        d.ci_low_pct = low;
        d.ci_high_pct = high;
        let over = match excluded {
            0 => format!("all {n} pairs"),
            k => {
                let sds = if p.levels.rescue_band_floor > 0.0 { "sds" } else { "of their robust sds" };
                format!("{n} of {} pairs ({k} set aside, over {} {sds} from their median)", all.len(), p.levels.rescue_outlier_k)
            }
        };
        let test = format!("the t-test over {over} gives {:+.2}% (p = {}", pct(mean), fmt_p(pv));
        let by = if d.procedure == Procedure::LikelihoodRatio { "the likelihood ratio" } else { "the two phases" };
        if passed {
            d.verdict = Verdict::Keep;
            d.procedure = Procedure::Rescue;
            d.p_value = pv;
            d.p_threshold = level;
            d.p_adjusted = (pv * p.alpha / level).min(1.0);
            d.scale = t.scale_name().to_string();
            d.noise_sd_pct = t.sd_pct();
            d.reason = format!(
                "kept by the rescue: {test} <= {}, at least the minimum effect {}%), after {} left it {}: {}",
                fmt_p(level),
                p.min_effect_pct,
                by,
                before.as_str(),
                d.reason
            );
        } else {
            let why = if significant {
                format!("{test}), below the minimum effect {}%", p.min_effect_pct)
            } else {
                format!("{test} > {})", fmt_p(level))
            };
            d.reason = format!("{}; {why}, so the rescue does not keep it either", d.reason);
        }
        d
    }

    /// The pairs the rescue's t-test sets aside (indices into `all`): those further than
    /// `rescue_outlier_k` of their robust sds from their median (never nearer than
    /// `rescue_band_floor` of the history's sds). The band is symmetric about the median, so
    /// under no gain it sets aside as many pairs on each side in expectation.
    fn rescue_set_aside(&self, all: &[f64]) -> Vec<usize> {
        let l = &self.params.levels;
        let k = l.rescue_outlier_k;
        if k <= 0.0 || all.len() < ROBUST_BAND_PAIRS {
            return vec![];
        }
        let floor = l.rescue_band_floor * self.borrowed.as_ref().map_or(0.0, |b| b.scale.sd);
        let band = outlier_band(k, floor, all);
        let m = median(all);
        (0..all.len()).filter(|&i| (all[i] - m).abs() > band).collect()
    }
}
