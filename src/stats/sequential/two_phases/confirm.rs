//! The confirmation: an independent batch in the complementary order that a promising first
//! phase must pass before it is kept (re-reading the first phase when the noise jumped).

use crate::stats::sequential::levels::GUARD;
use crate::stats::sequential::sample::mean_sd;
use crate::stats::sequential::stat::{Batch, Prior};
use crate::stats::sequential::{fmt_p, pct, Confirmation, Decision, Next, Phase, Sequential, Verdict};

impl Sequential {
    /// The confirmation decides whether a promising first phase becomes a keep: the batch
    /// itself must show a gain (> 0) at `confirm_alpha` (spent over its looks when sequential).
    /// A failed confirmation is `unconfirmed`. The reported estimate pools both batches (the
    /// first phase alone overestimates after an early stop); the batch's own estimate and CI,
    /// free of that selection, are reported beside it.
    pub(super) fn confirmation(&self, main: &[f64], prior: Prior, batch: Batch, mut first: Decision) -> Next {
        let confirm = batch.d;
        let p = &self.params;
        let (clooks, calphas) = self.confirm_plan();
        for (j, (&n, &a_j)) in clooks.iter().zip(&calphas).enumerate() {
            let guard = self.borrowed.as_ref().map_or(GUARD, |b| b.confirm_guard);
            let Some(t) = self.test_at(batch, n, prior, guard) else {
                return Next::Measure { phase: Phase::Confirm, pairs: (n.max(confirm.len() + 1)) - confirm.len() };
            };
            let mut passed = t.t() >= self.tq(1.0 - a_j, t.df) && t.mean > 0.0;
            if passed && self.jumped(&t) {
                // The noise is above the history's: the first phase's deciding look, passed on
                // the borrowed scale, must also hold on the scale this look found (the pairs'
                // own, from both phases' log-ratios and sums), at its own level and df.
                let (m1, _) = mean_sd(main);
                let sd = t.se * (t.n as f64).sqrt();
                passed = m1 >= self.tq(1.0 - first.p_threshold, t.df) * sd / (main.len() as f64).sqrt();
            }
            // With a borrowed scale the batch may also fail early: when even its (1 - beta)
            // upper bound is below the minimum effect, a worthwhile gain is not there.
            let futile = match &self.borrowed {
                Some(b) => t.mean + self.tq(1.0 - b.confirm_beta, t.df) * t.se < (1.0 + p.min_effect_pct / 100.0).ln(),
                None => false,
            };
            let last = j + 1 == clooks.len() || futile;
            let min_log = (1.0 + p.min_effect_pct / 100.0).ln();
            first.trail.push(self.confirm_look_record(&t, j + 1, a_j, min_log, j + 1 == clooks.len()));
            if !passed && !last {
                continue;
            }
            let batch = self.kept(&confirm[..t.measured]);
            let q = self.tq(1.0 - p.alpha, t.df);
            let bp = self.p_value(&t);
            let all: Vec<f64> = main.iter().chain(&batch).copied().collect();
            let (mean, sd) = mean_sd(&all);
            // The pooled interval uses the scale the confirmation was tested with.
            let se = if t.borrowed { t.se * (t.n as f64 / all.len() as f64).sqrt() } else { sd / (all.len() as f64).sqrt() };
            let qa = if t.borrowed { q } else { self.tq(1.0 - p.alpha, (all.len() - 1) as f64) };
            first.effect_pct = pct(mean);
            first.ci_low_pct = pct(mean - qa * se);
            first.ci_high_pct = pct(mean + qa * se);
            first.confirmation = Some(Confirmation {
                pairs: t.measured,
                effect_pct: pct(t.mean),
                ci_low_pct: pct(t.mean - q * t.se),
                ci_high_pct: pct(t.mean + q * t.se),
                p_value: bp,
                alpha: a_j,
                looks: j + 1,
                passed,
            });
            if passed {
                first.reason = format!(
                    "{}; confirmed by {} pairs in the complementary order ({:+.2}%, p = {} <= {})",
                    first.reason,
                    t.measured,
                    pct(t.mean),
                    fmt_p(bp),
                    fmt_p(a_j)
                );
            } else {
                first.verdict = Verdict::Unconfirmed;
                first.reason = format!(
                    "unconfirmed: the first {} pairs showed {:+.2}%, but {} pairs in the complementary order gave {:+.2}% (p = {} > {}); rerun it with more pairs (e.g. --pairs {}) to settle it",
                    main.len(),
                    pct(main.iter().sum::<f64>() / main.len() as f64),
                    t.measured,
                    pct(t.mean),
                    fmt_p(bp),
                    fmt_p(a_j),
                    2 * p.max_pairs
                );
            }
            return Next::Done(first);
        }
        unreachable!("the last confirmation look always decides")
    }
}
