//! The test with history: the borrowed scale (the history's sd pooled with the pairs' own
//! residuals, times the safety factor), the variance guard that hands a noisier batch to its own
//! t-test (never looser than the borrowed look), and the confirmation's re-read on a jump.

use super::own::{spread_sd, Kept};
use crate::stats::sequential::borrowed::{sum_spread, Borrowed};
use crate::stats::sequential::stat::{Batch, Prior, Test};
use crate::stats::sequential::Sequential;

impl Sequential {
    /// The look on a borrowed scale of the pairs `idx` of `batch` (summarized in `kept`), with
    /// `prior` the spread of the batch before it (the first phase's, in the confirmation) and
    /// the variance guard at F level `guard`. With the history's sum spread and the batch's
    /// sums, the guard tests the log-ratios' and the sums' spread together (each in units of its
    /// history's variance): twice the df at the first looks.
    pub(super) fn borrowed_test(&self, b: &Borrowed, batch: Batch, idx: &[usize], kept: &Kept, prior: Prior, guard: f64) -> Test {
        let (k, m) = (kept.n, kept.measured);
        let (batch_ss, batch_df) = (kept.ss, kept.df);
        // The experiment's own spread: this batch's residuals pooled with `prior`.
        let (ss, df) = (batch_ss + prior.ss, batch_df + prior.df);
        let own_sd = spread_sd(ss, df, kept.mean);
        let h = b.scale.sd;
        // A confirmation look: `prior` holds the first phase's spread.
        let confirming = prior.df > 0.0 || prior.sum_df > 0.0;
        let sums = b.sums.filter(|_| batch.s.len() >= m && h > 0.0).map(|hs| {
            let v: Vec<f64> = idx.iter().map(|&i| batch.s[i]).collect();
            // Only the first phase starts cold.
            let (sss, sdf) = if confirming { sum_spread(&v) } else { b.first_phase_sum_spread(&v) };
            (hs, sss / (hs.sd * hs.sd), sdf)
        });
        // The history's variance pooled with the experiment's own residuals (independent of the
        // batch mean under normal noise, so the t distribution with the summed df holds).
        let pooled = ((b.scale.df * h * h + ss) / (b.scale.df + df)).sqrt();
        let borrowed_look =
            |df: f64, ratio| Test { se: b.safety * pooled / (k as f64).sqrt(), df, borrowed: true, ratio, ..kept.test(0.0, 1.0) };
        let Some((hs, bsum_q, bsum_df)) = sums else {
            let noisier = df >= 1.0 && own_sd * own_sd > h * h * self.fq(guard, df, b.scale.df);
            if noisier {
                // The pairs' own t-test, its scale never below the borrowed one: at fewer df, every
                // rejection of it is one of the borrowed look too. In the confirmation from its own
                // pairs alone (see below).
                let (osd, odf) = if confirming { ((batch_ss / batch_df.max(1.0)).sqrt(), batch_df) } else { (own_sd, df) };
                return Test { ratio: Some((own_sd * own_sd / (h * h), df, b.scale.df)), ..kept.test(osd.max(b.safety * pooled), odf) };
            }
            return borrowed_look(b.scale.df + df, (df >= 1.0).then_some((own_sd * own_sd / (h * h), df, b.scale.df)));
        };
        // The log-ratios' and the sums' spread, each in units of its history's variance.
        let q = ss / (h * h) + bsum_q + prior.sum_q;
        let qdf = df + bsum_df + prior.sum_df;
        // The batch alone (no prior): free of the first phase's selection.
        let bq = batch_ss / (h * h) + bsum_q;
        let bqdf = batch_df + bsum_df;
        let pdf = b.scale.df + df;
        let hdf = b.scale.df.min(hs.df);
        let noisier = qdf >= 1.0 && q / qdf > self.fq(guard, qdf, hdf);
        let ratio = (qdf >= 1.0).then_some((q / qdf, qdf, hdf));
        if noisier {
            // The pairs' own scale from both spreads, never below the borrowed one and at no more
            // df: every rejection of this look is one of the borrowed look too, so the guard
            // adds no false keeps. In the confirmation, from its own pairs alone: the first phase
            // stopped because its pairs looked good, their spread included (a first phase passed
            // on the borrowed scale had a spread the guard let through), so pooling it would
            // make this test's scale too small exactly when the noise has jumped.
            let (oq, odf) = if confirming { (bq, bqdf) } else { (q, qdf) };
            let sd = (h * h * oq / odf.max(1.0)).sqrt().max(b.safety * pooled);
            return Test { ratio, ..kept.test(sd, odf.min(pdf)) };
        }
        borrowed_look(pdf, ratio)
    }

    /// Whether a confirmation look's own spread shows the noise above the history's at the
    /// `retest_guard` F level.
    pub(super) fn jumped(&self, t: &Test) -> bool {
        match (&self.borrowed, t.ratio) {
            (Some(b), Some((r, d1, d2))) if b.retest_guard > 0.0 => r > self.fq(b.retest_guard, d1, d2),
            _ => false,
        }
    }
}
