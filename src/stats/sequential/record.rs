//! The look records of a decision's trail ([`Look`]): each boundary on the statistic's scale
//! (estimate / se), as the first phase and the confirmation apply it.

use super::stat::Test;
use super::{pct, Look, LookPhase, Sequential};

impl Sequential {
    pub(super) fn record(&self, t: &Test, phase: LookPhase, look: usize, alpha: f64, keep: f64, revert: Option<f64>) -> Look {
        let finite = |x: f64| x.is_finite().then_some(x);
        Look {
            phase,
            look,
            pairs: t.measured,
            tested: t.n,
            estimate_pct: pct(t.mean),
            se_pct: t.se * 100.0,
            statistic: finite(t.t()),
            keep_boundary: finite(keep),
            revert_boundary: revert.and_then(finite),
            alpha,
            df: t.df,
            scale: t.scale_name().to_string(),
        }
    }

    /// A first-phase look: keep when t >= the look's critical value and the mean >= the minimum
    /// effect (t >= min_log / se); revert when the (1 - beta) upper bound is below the minimum
    /// effect (t < min_log / se - q(1 - beta)).
    pub(super) fn look_record(&self, t: &Test, look: usize, a_k: f64, min_log: f64, beta: Option<f64>) -> Look {
        let keep = self.tq(1.0 - a_k, t.df).max(min_log / t.se);
        let revert = beta.map(|b| min_log / t.se - self.tq(1.0 - b, t.df));
        self.record(t, LookPhase::Decision, look, a_k, keep, revert)
    }

    /// A confirmation look: confirmed at t >= q(1 - a_j) (with a gain > 0); unconfirmed below it
    /// at the batch's last look, and before that (borrowed scale) when the (1 - early_beta) upper
    /// bound is also below the minimum effect.
    pub(super) fn confirm_look_record(&self, t: &Test, look: usize, a_j: f64, min_log: f64, final_look: bool) -> Look {
        let keep = self.tq(1.0 - a_j, t.df);
        let futile = self.borrowed.as_ref().map(|b| min_log / t.se - self.tq(1.0 - b.confirm_beta, t.df));
        let revert = if final_look { Some(keep) } else { futile.map(|f| f.min(keep)) };
        self.record(t, LookPhase::Confirmation, look, a_j, keep, revert)
    }
}
