//! The one-phase likelihood ratio of whole pairs (`[decision] method = "likelihood-ratio"` with
//! history, or `"auto"` where the history shows no gross outlier): after each pair, the pairs'
//! likelihood under a gain against their best under no gain; kept at a level, reverted once a gain
//! has become unlikely. lab/notes/decisions-history.md, "The likelihood ratio as a method".

use super::levels::{
    LR_EARLY_SDS, LR_EARLY_UNTIL, LR_FUTILE_AT, LR_KEEP_AT, LR_KEEP_AT_ONE_MODE, LR_KEEP_FROM_TWO_MODES, LR_NULL_RHO_MAX,
    LR_POWERED_FOR_PCT, LR_RATIO_DF, LR_RHOS, LR_SCALES, LR_SKIP, LR_SUM_DF, LR_WIDE_SD, LR_WIDE_WEIGHT, MIXTURE, ONE_MODE_TOLD_PAIRS,
    OUTLIER_K,
};
use super::plan::OnePhase;
use super::{fmt_p, median, outlier_band, pct, Borrowed, Decision, Look, LookPhase, Next, Phase, Sequential, Verdict};

/// How a decision of one of the one-phase tests ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    Keep,
    Futile,
    /// `max_pairs` measured with neither.
    Budget,
}

/// The test. After each pair it weighs the pairs under a gain (a mixture over `scales` of the
/// calibrated sd, and within each over [`MIXTURE`]'s multiples of `mu1`, of the log-ratios' and
/// each log-sum's contrast with the sums before it; each sd pooled with the pairs before it, at
/// `ratio_df` and `sum_df`) against their largest likelihood under no gain (a mean log-ratio of at most 0, and one sd for
/// log-ratios and sums, the one that fits them best: under independent runs a pair's log-ratio
/// and log-sum share a variance). The log-sums enter through their deviations only, so a
/// machine's level never counts. For each fixed true sd the ratio against no gain at that sd is
/// a nonnegative martingale under no gain, so with `keep_at` = ln(1/alpha) Ville's inequality
/// bounds its false keeps by alpha at every noise level and calibration; a lower `keep_at` is a
/// level read off simulation over the noise's ratio to the calibration. A keep also needs a mean
/// of at least `min_mean` (only fewer keeps). It stops for futility when the gain is at most
/// `exp(futile_at)` (`futile_at` negative) times as likely as no gain, both weighed over the same
/// scales; a futility stop only reverts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WholePairLr {
    pub mu1: f64,
    pub keep_at: f64,
    pub futile_at: f64,
    pub max_pairs: usize,
    /// The keep level where the history shows its runs in one mode ([`Borrowed::one_mode`];
    /// [`WholePairLr::for_history`] puts it in `keep_at`).
    pub keep_at_one_mode: f64,
    /// The smallest mean log-ratio a keep may have (the minimum effect; -inf: none).
    pub min_mean: f64,
    /// The gain side's scales, as multiples of the calibrated sd (each pooled with the pairs),
    /// with their prior weights (0: not read): a noise jump since the calibration is a scale
    /// the gain side has weighed from the first pair.
    pub scales: [(f64, f64); LR_SCALES.len()],
    /// df the calibrated sd counts for in the gain side's sd of the log-ratios and of the
    /// log-sums, pooled with the pairs before each one (infinite: the calibrated sd as it is).
    pub ratio_df: f64,
    pub sum_df: f64,
    /// Pairs left out at the start where the history shows a warm-up.
    pub skip: usize,
    /// No keep before this many used pairs.
    pub keep_from: usize,
    /// No keep before this many used pairs where the history does not show its runs in one
    /// mode ([`WholePairLr::for_history`] puts it in `keep_from`).
    pub keep_from_two_modes: usize,
    /// Unless the history shows one mode on `one_mode_told_pairs` pairs, a keep before
    /// `early_until` used pairs also needs a mean of at least this many calibrated sds of one
    /// pair (0: none).
    pub early_sds: f64,
    /// Used pairs from which `early_sds` no longer applies.
    pub early_until: usize,
    /// Pairs the sessions that showed one mode must hold for `keep_at_one_mode` (0: any).
    pub one_mode_told_pairs: usize,
    /// The wide component's weight beside the grid's gains (0: none, the rule recorded before
    /// it).
    pub wide: f64,
    /// The grid: multiples of `mu1` and their prior weights ([`MIXTURE`]; a probe knob).
    pub mixture: [(f64, f64); MIXTURE.len()],
    /// No gain's best fit lets a pair's log-ratio and log-sum correlate up to this (0: not at
    /// all): a candidate noisier than the incumbent correlates them, and a fit that cannot reads
    /// too little noise.
    pub null_rho_max: f64,
    /// The gain side's correlations of a log-ratio with its log-sum, with their prior weights
    /// (0: not read; the weights of the rest are as given).
    pub rhos: [(f64, f64); LR_RHOS.len()],
}

/// What the test read after one pair it used.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LrLook {
    /// Pairs measured so far (set aside included) and pairs used.
    pub measured: usize,
    pub used: usize,
    /// The used pairs' mean log-ratio, and the gain side's sd of one log-ratio at this pair.
    pub mean: f64,
    pub sd: f64,
    /// ln(gain's likelihood / no gain's best): keep at `keep_at`.
    pub log_lr: f64,
    /// ln(gain's likelihood / no gain's, both over the gain side's scales): futile at
    /// `futile_at`. No gain at the calibrated sd alone fits a warming or jumped machine so badly
    /// that a do-nothing change would run long.
    pub log_lr_futility: f64,
    /// The calibrated sd of one pair the test was given.
    pub calibrated_sd: f64,
}

impl WholePairLr {
    /// The decision rule's test for a minimum effect of `min_effect_pct` and a budget of
    /// `max_pairs`, with the levels of [`super::levels`]: powered for the larger of
    /// [`LR_POWERED_FOR_PCT`] and the minimum effect.
    pub fn new(min_effect_pct: f64, max_pairs: usize) -> WholePairLr {
        let min_mean = (min_effect_pct / 100.0).ln_1p();
        WholePairLr {
            mu1: (LR_POWERED_FOR_PCT / 100.0).ln_1p().max(min_mean),
            keep_at: LR_KEEP_AT,
            keep_at_one_mode: LR_KEEP_AT_ONE_MODE,
            futile_at: LR_FUTILE_AT,
            max_pairs,
            min_mean,
            scales: LR_SCALES,
            ratio_df: LR_RATIO_DF,
            sum_df: LR_SUM_DF,
            skip: LR_SKIP,
            keep_from: 0,
            keep_from_two_modes: LR_KEEP_FROM_TWO_MODES,
            early_sds: LR_EARLY_SDS,
            early_until: LR_EARLY_UNTIL,
            one_mode_told_pairs: ONE_MODE_TOLD_PAIRS,
            wide: LR_WIDE_WEIGHT,
            mixture: MIXTURE,
            null_rho_max: LR_NULL_RHO_MAX,
            rhos: LR_RHOS,
        }
    }

    /// The test as it decides after a history that does (`one_mode`) or does not show its runs
    /// in one mode, on `modes_pairs` pairs of sessions that could tell: at `keep_at_one_mode`
    /// where one mode is shown on `one_mode_told_pairs`; elsewhere (a second population not
    /// ruled out) at `keep_at`, a keep before `early_until` used pairs needing `early_sds`, and
    /// where one mode is not shown at all, none before `keep_from_two_modes` used pairs.
    pub fn for_history(&self, one_mode: bool, modes_pairs: usize) -> WholePairLr {
        match (one_mode, modes_pairs >= self.one_mode_told_pairs) {
            (true, true) => WholePairLr { keep_at: self.keep_at_one_mode, early_sds: 0.0, ..*self },
            (true, false) => *self,
            (false, _) => WholePairLr { keep_from: self.keep_from.max(self.keep_from_two_modes), ..*self },
        }
    }

    /// How a look ends the decision, if it does.
    pub fn stop(&self, look: &LrLook) -> Option<Stop> {
        let early = self.early_sds > 0.0 && look.used < self.early_until && look.mean < self.early_sds * look.calibrated_sd;
        if look.log_lr >= self.keep_at && look.mean >= self.min_mean && look.used >= self.keep_from && !early {
            Some(Stop::Keep)
        } else if look.log_lr_futility <= self.futile_at {
            Some(Stop::Futile)
        } else {
            None
        }
    }

    /// Every look on `pairs` (oriented log-ratio, log-sum or `None` where the runs gave none) at
    /// the calibrated sd `sd` of one pair, up to and including the first that stops; `warm`: the
    /// history shows a warm-up (the first `skip` pairs are set aside). The sums are read only
    /// when every pair has one.
    pub fn looks(&self, sd: f64, warm: bool, pairs: &[(f64, Option<f64>)]) -> (Vec<LrLook>, Option<Stop>) {
        let with_sums = pairs.iter().all(|p| p.1.is_some());
        let mut run = Running::new(self, sd, warm, with_sums);
        let mut looks = vec![];
        for &(r, s) in pairs.iter().take(self.max_pairs) {
            if let Some(look) = run.push(r, s.unwrap_or(0.0)) {
                looks.push(look);
                if let Some(stop) = self.stop(&look) {
                    return (looks, Some(stop));
                }
            }
        }
        let out = (pairs.len() >= self.max_pairs).then_some(Stop::Budget);
        (looks, out)
    }

    /// Decide on the pairs (`pair(i)`: oriented log-ratio, log-sum) drawn one at a time, at the
    /// calibrated sd of one pair: how it ended and the pairs it took.
    pub fn decide(&self, sd: f64, warm: bool, mut pair: impl FnMut(usize) -> (f64, f64)) -> (Stop, usize) {
        let mut run = Running::new(self, sd, warm, true);
        for i in 0..self.max_pairs {
            let (r, s) = pair(i);
            if let Some(stop) = run.push(r, s).and_then(|look| self.stop(&look)) {
                return (stop, i + 1);
            }
        }
        (Stop::Budget, self.max_pairs)
    }
}

/// The test's running sums over the pairs pushed so far.
struct Running<'a> {
    test: &'a WholePairLr,
    sd: f64,
    skip: usize,
    with_sums: bool,
    measured: usize,
    /// Per scale of [`WholePairLr::scales`]: each gain's log-likelihood of the log-ratios, and
    /// the sums' contrasts'.
    gains: [[[f64; MIXTURE.len()]; LR_RHOS.len()]; LR_SCALES.len()],
    sums_ll: [f64; LR_SCALES.len()],
    /// Per scale: no gain's log-likelihood of the log-ratios (mean 0, the gain side's sd).
    none_ll: [[f64; LR_RHOS.len()]; LR_SCALES.len()],
    /// Per scale: the wide component's log-likelihood of the log-ratios (each pair's predictive
    /// density given the pairs before it) and its posterior mean and variance of the mean.
    wide: [[(f64, f64, f64); LR_RHOS.len()]; LR_SCALES.len()],
    /// The used log-ratios' running mean and squared deviations (Welford), the sums' likewise.
    mr: f64,
    qr: f64,
    ms: f64,
    qs: f64,
    /// The used log-ratios' and log-sums' co-moment about their means.
    crs: f64,
    /// Pairs used so far.
    used: usize,
}

impl<'a> Running<'a> {
    fn new(test: &'a WholePairLr, sd: f64, warm: bool, with_sums: bool) -> Running<'a> {
        Running {
            test,
            sd,
            skip: if warm { test.skip } else { 0 },
            with_sums,
            measured: 0,
            gains: [[[0.0; MIXTURE.len()]; LR_RHOS.len()]; LR_SCALES.len()],
            sums_ll: [0.0; LR_SCALES.len()],
            none_ll: [[0.0; LR_RHOS.len()]; LR_SCALES.len()],
            wide: [[(0.0, 0.0, LR_WIDE_SD * LR_WIDE_SD); LR_RHOS.len()]; LR_SCALES.len()],
            mr: 0.0,
            qr: 0.0,
            ms: 0.0,
            qs: 0.0,
            crs: 0.0,
            used: 0,
        }
    }

    /// The gain side's sd from `df` of the calibration (its sd times `c`) pooled with `ss` over
    /// `k` df.
    fn pooled(&self, c: f64, df: f64, ss: f64, k: f64) -> f64 {
        let sd = c * self.sd;
        if df.is_finite() {
            ((df * sd * sd + ss) / (df + k)).sqrt()
        } else {
            sd
        }
    }

    /// Read one more pair; the look after it, or `None` where it was set aside or is the first
    /// used (one pair has no spread to fit).
    fn push(&mut self, r: f64, s: f64) -> Option<LrLook> {
        let t = self.test;
        self.measured += 1;
        if self.measured <= self.skip {
            return None;
        }
        let s = if self.with_sums { s } else { 0.0 };
        // A failed run leaves no pair to read.
        if !r.is_finite() || !s.is_finite() {
            return None;
        }
        self.used += 1;
        let k = (self.used - 1) as f64;
        let n = k + 1.0;
        for (j, &(c, _)) in t.scales.iter().enumerate() {
            let sd_r = self.pooled(c, t.ratio_df, self.qr, (k - 1.0).max(0.0));
            let sd_s = self.pooled(c, t.sum_df, self.qs, (k - 1.0).max(0.0));
            // The sum's contrast with the sums before it (Helmert): variance sd^2 n / k.
            let d = s - self.ms;
            let with_d = k > 0.0 && self.with_sums;
            for (q, &(rho, _)) in t.rhos.iter().enumerate() {
                // Each correlation reads the log-ratio given the sum's contrast: shifted by its
                // regression on it, with the variance it leaves.
                let (shift, share) = if with_d { (rho * sd_r / sd_s * k / n * d, 1.0 - rho * rho * k / n) } else { (0.0, 1.0) };
                let (r, sd_r) = (r - shift, sd_r * share.sqrt());
                for (g, (times, _)) in self.gains[j][q].iter_mut().zip(t.mixture) {
                    *g += -(r - times * t.mu1).powi(2) / (2.0 * sd_r * sd_r) - sd_r.ln();
                }
                self.none_ll[j][q] += -r * r / (2.0 * sd_r * sd_r) - sd_r.ln();
                // The wide component: a normal prior over the mean, updated pair by pair, so that
                // its product of predictive densities is a joint density of the pairs.
                let (ll, m, v) = &mut self.wide[j][q];
                let pv = sd_r * sd_r + *v;
                *ll += -(r - *m).powi(2) / (2.0 * pv) - 0.5 * pv.ln();
                let post = 1.0 / (1.0 / *v + 1.0 / (sd_r * sd_r));
                *m = post * (*m / *v + r / (sd_r * sd_r));
                *v = post;
            }
            if with_d {
                self.sums_ll[j] += -d * d * k / (n * 2.0 * sd_s * sd_s) - sd_s.ln();
            }
        }
        let dr = r - self.mr;
        self.mr += dr / n;
        self.qr += dr * (r - self.mr);
        let ds = s - self.ms;
        self.ms += ds / n;
        self.qs += ds * (s - self.ms);
        self.crs += dr * (s - self.ms);
        if k == 0.0 {
            return None;
        }
        // No gain: the log-ratios' mean at most 0, one sd for the log-ratios and the sums'
        // contrasts (m values in all).
        let mean = self.mr;
        // The log-ratios' squares about their best mean of at most 0.
        let ratios = if mean < 0.0 { self.qr } else { self.qr + n * mean * mean };
        let m = if self.with_sums { 2.0 * n - 1.0 } else { n };
        // The gain side: the mixture over the scales (each with its own sums) of the mixture over
        // the gains, a joint density of the pairs whatever its weights.
        let gain = log_mix((0..t.scales.len()).map(|j| {
            let rhos = log_mix((0..t.rhos.len()).map(|q| {
                let grid = (1.0 - t.wide).ln() + log_mix(t.mixture.iter().zip(self.gains[j][q]).map(|(&(_, w), g)| w.ln() + g));
                // The prior is the half of N(0, LR_WIDE_SD^2) above no gain: its marginal is the
                // whole normal's times P(mean > 0 | pairs) / P(mean > 0), with the posterior
                // normal.
                let (ll, m, v) = self.wide[j][q];
                let wide = ll + ln_normal_cdf(m / v.sqrt()) + std::f64::consts::LN_2;
                t.rhos[q].1.ln() + log_mix([grid, t.wide.ln() + wide].into_iter())
            }));
            t.scales[j].1.ln() + rhos + self.sums_ll[j]
        }));
        let none_mixed = log_mix((0..t.scales.len()).map(|j| {
            let rhos = log_mix((0..t.rhos.len()).map(|q| t.rhos[q].1.ln() + self.none_ll[j][q]));
            t.scales[j].1.ln() + rhos + self.sums_ll[j]
        }));
        let none = if self.with_sums && t.null_rho_max > 0.0 {
            none_correlated(ratios - self.qr, self.qr, self.qs, self.crs, n, t.null_rho_max)
        } else {
            -0.5 * m * ((ratios + self.qs) / m).ln() - 0.5 * m
        };
        Some(LrLook {
            measured: self.measured,
            used: self.used,
            mean,
            sd: self.pooled(1.0, t.ratio_df, self.qr, k),
            log_lr: gain - none,
            log_lr_futility: gain - none_mixed,
            calibrated_sd: self.sd,
        })
    }
}

/// No gain's largest log-likelihood (up to a constant) of `n` pairs whose log-ratios lie `qr`
/// (squares), log-sums `qs` and `crs` (cross products) about their means, with `z2` = n times
/// the squared distance of the log-ratios' mean above no gain: one sd `tau` for a log-ratio and a
/// log-sum and any correlation `rho` between them. Under independent runs the two share a
/// variance whatever each side's noise, and correlate by (cand - inc variance) / their sum, so
/// this family holds every such pair of sides. For fixed `rho` the best `tau^2` is `c(rho) / m`
/// with m = 2n - 1 values; the profile in `rho` is maximized by a grid and golden-section steps.
fn none_correlated(z2: f64, qr: f64, qs: f64, crs: f64, n: f64, rho_max: f64) -> f64 {
    let m = 2.0 * n - 1.0;
    let profile = |rho: f64| {
        let one = 1.0 - rho * rho;
        let c = (qr + qs - 2.0 * rho * crs) / one + z2;
        -0.5 * m * (c / m).ln() - 0.5 * (n - 1.0) * one.ln() - 0.5 * m
    };
    let edge = rho_max.min(1.0 - 1e-9);
    let steps = 40;
    let (mut best, mut at) = (profile(0.0), 0.0);
    for i in 0..=steps {
        let rho = -edge + 2.0 * edge * i as f64 / steps as f64;
        let v = profile(rho);
        if v > best {
            (best, at) = (v, rho);
        }
    }
    let h = 2.0 * edge / steps as f64;
    let (mut lo, mut hi) = ((at - h).max(-edge), (at + h).min(edge));
    let g = (5f64.sqrt() - 1.0) / 2.0;
    for _ in 0..40 {
        let (a, b) = (hi - g * (hi - lo), lo + g * (hi - lo));
        if profile(a) > profile(b) {
            hi = b;
        } else {
            lo = a;
        }
    }
    best.max(profile(0.5 * (lo + hi)))
}

impl super::Params {
    /// The likelihood ratio these parameters decide by where it decides, at a calibrated sd of
    /// one pair `sd`: the minimum effect, the budget of [`super::Params::max_total_pairs`], the
    /// wide component and the grid's scaling to the noise as recorded.
    pub fn likelihood_ratio_test(&self, sd: f64) -> WholePairLr {
        let test = WholePairLr::new(self.min_effect_pct, self.max_total_pairs());
        let l = &self.levels;
        let mu1 = if l.ratio_powered_for_sds > 0.0 && sd.is_finite() {
            (l.ratio_powered_for_sds * sd).clamp(test.min_mean, test.mu1)
        } else {
            test.mu1
        };
        WholePairLr {
            wide: l.ratio_wide,
            mu1,
            keep_at: l.ratio_keep_at,
            keep_at_one_mode: l.ratio_keep_at_one_mode,
            keep_from_two_modes: l.ratio_keep_from_two_modes,
            early_sds: l.ratio_early_sds,
            one_mode_told_pairs: l.ratio_one_mode_told_pairs,
            null_rho_max: l.ratio_null_rho_max,
            rhos: l.ratio_rhos,
            ..test
        }
    }

    /// The likelihood ratio that decides with the history `history` (`None`: none to borrow, so
    /// the two phases decide): where its pooled sessions saw no gross outlier (as
    /// [`OnePhase::decides`] says), at its calibrated sd of one pair, at the keep level its modes
    /// call for. The one routing of the decision, calibrate's figure and the warning.
    pub fn deciding_ratio(&self, history: Option<&Borrowed>) -> Option<WholePairLr> {
        let b = history.filter(|b| self.likelihood_ratio.decides(b.outliers))?;
        let test = self.likelihood_ratio_test(b.scale.sd).for_history(b.one_mode(), b.modes_pairs);
        Some(if b.waits_longer() {
            WholePairLr { keep_from: test.keep_from.max(self.levels.ratio_keep_from_two_modes_shown), ..test }
        } else {
            test
        })
    }
}

impl Sequential {
    /// Whether this rule decides by [`WholePairLr`]: with a borrowed scale (its gain side needs
    /// the calibrated sd; without history the two phases decide) where `Params::likelihood_ratio`
    /// says so.
    pub fn likelihood_ratio(&self) -> Option<(&Borrowed, WholePairLr)> {
        let b = self.borrowed.as_ref()?;
        Some((b, self.params.deciding_ratio(Some(b))?))
    }

    /// What the likelihood ratio does next on the first phase's pairs (log-ratios, log-sums), or
    /// (`OnePhase::UntilOutlier`) the gross outlier among them before its stop that hands the
    /// decision to the two phases.
    pub(super) fn likelihood_ratio_next(&self, b: &Borrowed, test: &WholePairLr, main: &[f64], main_s: &[f64]) -> Result<Next, Wild> {
        let warm = b.shows_warmup();
        let sums = main_s.len() >= main.len();
        let pairs: Vec<(f64, Option<f64>)> = main.iter().enumerate().map(|(i, &r)| (r, sums.then(|| main_s[i]))).collect();
        let (looks, stop) = test.looks(b.scale.sd, warm, &pairs);
        // The pairs the ratio read up to its stop, or all of them: a wild one among them ends it.
        let read = match (stop, looks.last()) {
            (Some(Stop::Keep | Stop::Futile), Some(l)) => l.measured,
            _ => main.len(),
        };
        if self.params.likelihood_ratio == OnePhase::UntilOutlier {
            // Not the warm-up's pairs the ratio sets aside (a ramp's first pair is meant to be
            // off), and only within the two phases' first phase, which then reads the wild pair.
            let to = read.min(main.len()).min(self.params.max_pairs);
            let from = if warm { test.skip.min(to) } else { 0 };
            if let Some(w) = first_wild(b.scale.sd, &main[from..to]) {
                return Err(Wild { pair: w.pair + from, ..w });
            }
        }
        let Some(stop) = stop else {
            return Ok(Next::Measure { phase: Phase::Main, pairs: 1 });
        };
        let p = &self.params;
        let threshold = (-test.keep_at).exp();
        let pv = looks.iter().map(|l| (-l.log_lr).exp()).fold(1.0, f64::min);
        let last = looks.last();
        let (mean, sd, used) = last.map_or((0.0, b.scale.sd, 0), |l| (l.mean, l.sd, l.used));
        let df = test.ratio_df + used.saturating_sub(1) as f64;
        let se = sd / (used.max(1) as f64).sqrt();
        let q = self.tq(1.0 - p.alpha, df);
        let ratio = last.map_or(f64::NEG_INFINITY, |l| l.log_lr);
        let (verdict, reason) = match stop {
            Stop::Keep => (
                Verdict::Keep,
                format!(
                    "a gain is {:.0} times as likely as no gain after {} pairs (p = {} <= {}, likelihood ratio of whole pairs), with a mean gain {:+.2}% of at least the minimum effect {}%",
                    ratio.exp(),
                    test_pairs(last),
                    fmt_p(pv),
                    fmt_p(threshold),
                    pct(mean),
                    p.min_effect_pct
                ),
            ),
            Stop::Futile => (
                Verdict::Revert,
                format!(
                    "no worthwhile gain: a +{}% gain is at most {:.2} times as likely as no gain (both weighed over the history's noise and above it) after {} pairs (mean {:+.2}%)",
                    (pct(test.mu1) * 10.0).round() / 10.0,
                    test.futile_at.exp(),
                    test_pairs(last),
                    pct(mean)
                ),
            ),
            Stop::Budget => (Verdict::Inconclusive, budget_reason(test.max_pairs, pv, threshold, mean, p.min_effect_pct)),
        };
        let trail = ratio_trail(&looks, (test.keep_at, test.futile_at), threshold, test.ratio_df, SCALE);
        Ok(Next::Done(Decision {
            verdict,
            procedure: super::Procedure::LikelihoodRatio,
            effect_pct: pct(mean),
            ci_low_pct: pct(mean - q * se),
            ci_high_pct: pct(mean + q * se),
            ci_level: 1.0 - 2.0 * p.alpha,
            p_value: pv,
            // The pairs the deciding look read (a caller may have measured more).
            pairs: match (stop, last) {
                (Stop::Keep | Stop::Futile, Some(l)) => l.measured,
                _ => main.len().min(test.max_pairs),
            },
            looks: looks.len(),
            p_threshold: threshold,
            // At least p: the smallest first-phase level at which its best look would have kept.
            p_adjusted: (pv * p.alpha / threshold).min(1.0),
            scale: SCALE.to_string(),
            noise_sd_pct: sd * 100.0,
            excluded: 0,
            confirmation: None,
            rescue: None,
            reason,
            trail,
            borrowed: Some(Box::new(b.record())),
        }))
    }
}

/// A gross outlier among a decision's pairs: the one that ended the likelihood ratio.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Wild {
    /// Its place (1-based) and its distance from the pairs' median, in sds.
    pub pair: usize,
    pub sds: f64,
}

impl Wild {
    /// What the row's reason says of it.
    pub fn reason(&self) -> String {
        format!(
            "pair {} lay {:.0} sds from the pairs' median (a gross outlier: over {OUTLIER_K:.0}), so the two phases, whose outlier rule sets such pairs aside, decided on every pair",
            self.pair, self.sds
        )
    }
}

/// The first of `pairs` (log-ratios) outside the outlier band ([`outlier_band`], [`OUTLIER_K`]
/// sds of the history's `sd` or of their robust sd) around the median of the pairs up to it
/// (itself included): the history's own gross-outlier reading (`history::Entry::max_dev`), pair
/// by pair. A normal pair lies that far once in 5e8.
pub fn first_wild(sd: f64, pairs: &[f64]) -> Option<Wild> {
    (1..pairs.len()).find_map(|i| {
        let upto = &pairs[..=i];
        let sd = outlier_band(OUTLIER_K, sd, upto) / OUTLIER_K;
        let sds = (pairs[i] - median(upto)).abs() / sd;
        (sds > OUTLIER_K).then_some(Wild { pair: i + 1, sds })
    })
}

/// The decision's scale as the row names it: the gain side's sd, the history's pooled with the
/// pairs' own.
pub const SCALE: &str = "pooled";

/// ln of the sum of the exponentials of `terms` (-inf where every term is).
pub fn log_mix(terms: impl Iterator<Item = f64> + Clone) -> f64 {
    let top = terms.clone().fold(f64::NEG_INFINITY, f64::max);
    if top == f64::NEG_INFINITY {
        return top;
    }
    top + terms.map(|x| (x - top).exp()).sum::<f64>().ln()
}

/// ln P(Z <= x) for a standard normal Z, without underflow far in the lower tail (where the
/// Mills ratio's first terms are exact to 1e-6 from x = -30 on).
pub fn ln_normal_cdf(x: f64) -> f64 {
    if x > -30.0 {
        (0.5 * statrs::function::erf::erfc(-x / std::f64::consts::SQRT_2)).ln()
    } else {
        -x * x / 2.0 - (-x).ln() - 0.5 * (2.0 * std::f64::consts::PI).ln() + (1.0 - 1.0 / (x * x)).ln()
    }
}

/// The reason of a one-phase ratio that ran its budget of `max_pairs` without a stop.
pub(super) fn budget_reason(max_pairs: usize, pv: f64, threshold: f64, mean: f64, min_effect_pct: f64) -> String {
    format!(
        "no clear answer after the budget of {} pairs (p = {} > {}; mean {:+.2}%): a gain of {}% is still plausible; rerun with more pairs to settle it",
        max_pairs,
        fmt_p(pv),
        fmt_p(threshold),
        pct(mean),
        min_effect_pct
    )
}

/// A one-phase ratio's looks as the decision's trail: ln LR against the keep level of
/// `(keep_at, futile_at)`, and the revert stop on the same scale (its ratio against the weighed
/// no gain differs from ln LR by a term of the pairs alone); `df0` is the history's df the
/// gain side's sd carries.
pub(super) fn ratio_trail(looks: &[LrLook], (keep_at, futile_at): (f64, f64), threshold: f64, df0: f64, scale: &str) -> Vec<Look> {
    looks
        .iter()
        .enumerate()
        .map(|(k, l)| Look {
            phase: LookPhase::Decision,
            look: k + 1,
            pairs: l.measured,
            tested: l.used,
            estimate_pct: pct(l.mean),
            se_pct: l.sd / (l.used as f64).sqrt() * 100.0,
            statistic: l.log_lr.is_finite().then_some(l.log_lr),
            keep_boundary: Some(keep_at),
            revert_boundary: Some(futile_at + l.log_lr - l.log_lr_futility).filter(|x| x.is_finite()),
            alpha: threshold,
            df: df0 + l.used.saturating_sub(1) as f64,
            scale: scale.to_string(),
        })
        .collect()
}

/// The pairs a decision read, as its reason says them.
fn test_pairs(last: Option<&LrLook>) -> String {
    match last {
        Some(l) if l.used < l.measured => format!("{} ({} used)", l.measured, l.used),
        Some(l) => l.measured.to_string(),
        None => "0".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::rng::Rng;
    use crate::stats::sequential::levels::{LR_NULL_RHO_MAX, LR_RHOS, LR_RHOS_NONE};
    use crate::stats::sequential::LR_SCALES;
    use crate::stats::sequential::{NoiseScale, Params};

    /// The shipped test ([`WholePairLr::new`], a 1% minimum effect, 22 pairs) with its own
    /// keep level and without the minimum effect.
    fn whole_pair_lr(keep_at: f64) -> WholePairLr {
        // The ratio itself: no early keep's least mean (a short history's, `for_history`).
        WholePairLr { keep_at, min_mean: f64::NEG_INFINITY, early_sds: 0.0, ..WholePairLr::new(1.0, 22) }
    }

    /// The two sums of the test's closed form at 2 pairs with the sd fixed (no pooling): the gain
    /// side, the mixture over the scales and the correlations `rhos` of the mixture over the gains
    /// of the two log-ratios (the second given the sums' one contrast e = s2 - s1, variance
    /// 2 (c sd)^2: shifted by rho e / 2, its variance times 1 - rho^2 / 2), times that contrast;
    /// no gain at its best fit (one sd of the log-ratios and the contrast, mean at most 0, a
    /// correlation up to `rho_max`, by a grid), and no gain over the scales and correlations.
    fn closed_form(pairs: &[(f64, f64); 2], sd: f64, mu1: f64, rhos: &[(f64, f64)], rho_max: f64) -> (f64, f64) {
        let e = pairs[1].1 - pairs[0].1;
        let normal = |x: f64, s: f64| (-x * x / (2.0 * s * s)).exp() / s;
        let (mut gain, mut none_mixed) = (0.0, 0.0);
        for (c, wc) in LR_SCALES {
            let s = c * sd;
            let sums = (-e * e / (4.0 * s * s)).exp() / s;
            for &(rho, wq) in rhos.iter().filter(|q| q.1 > 0.0) {
                let (a, b) = (pairs[0].0, pairs[1].0 - rho * e / 2.0);
                let (s1, s2) = (s, s * (1.0 - rho * rho / 2.0).sqrt());
                let gains: f64 = MIXTURE.iter().map(|(j, w)| w * normal(a - j * mu1, s1) * normal(b - j * mu1, s2)).sum();
                // The wide component: the two log-ratios jointly normal, variances s_i^2 + tau^2
                // and covariance tau^2 (a shared mean drawn from N(0, tau^2)).
                let t2 = LR_WIDE_SD * LR_WIDE_SD;
                let det = (s1 * s1 + t2) * (s2 * s2 + t2) - t2 * t2;
                let q = ((s2 * s2 + t2) * a * a + (s1 * s1 + t2) * b * b - 2.0 * t2 * a * b) / det;
                // Its prior the half above no gain: times twice the posterior's mass there.
                let post_v = 1.0 / (1.0 / t2 + 1.0 / (s1 * s1) + 1.0 / (s2 * s2));
                let post_m = post_v * (a / (s1 * s1) + b / (s2 * s2));
                let above = 0.5 * statrs::function::erf::erfc(-post_m / (2.0 * post_v).sqrt());
                let wide = 2.0 * above * (-q / 2.0).exp() / det.sqrt();
                gain += wc * wq * ((1.0 - LR_WIDE_WEIGHT) * gains + LR_WIDE_WEIGHT * wide) * sums;
                none_mixed += wc * wq * normal(a, s1) * normal(b, s2) * sums;
            }
        }
        // No gain: the log-ratios' mean at most 0 (z2 its squared distance above, times n), and
        // the contrasts of the log-ratios and the sums (q: squares and cross product).
        let mean = (pairs[0].0 + pairs[1].0) / 2.0;
        let (hr, hs) = ((pairs[1].0 - pairs[0].0) / 2f64.sqrt(), e / 2f64.sqrt());
        let z2 = 2.0 * mean.max(0.0).powi(2);
        let none = (0..=20000)
            .map(|i| {
                let rho = -rho_max + 2.0 * rho_max * i as f64 / 20000.0;
                let c = (hr * hr + hs * hs - 2.0 * rho * hr * hs) / (1.0 - rho * rho) + z2;
                -1.5 * (c / 3.0).ln() - 0.5 * (1.0 - rho * rho).ln() - 1.5
            })
            .fold(f64::NEG_INFINITY, f64::max);
        (gain.ln() - none, gain.ln() - none_mixed.ln())
    }

    #[test]
    fn a_history_that_shows_one_mode_on_few_pairs_keeps_early_only_a_gain_of_several_calibrated_sds() {
        let sd = 0.01;
        let base = WholePairLr::new(1.0, 30);
        let (short, told, two) = (base.for_history(true, 16), base.for_history(true, ONE_MODE_TOLD_PAIRS), base.for_history(false, 100));
        let look =
            |used: usize, mean: f64| LrLook { measured: used, used, mean, sd, log_lr: 20.0, log_lr_futility: 0.0, calibrated_sd: sd };
        assert_eq!(told.stop(&look(2, 0.03)), Some(Stop::Keep), "one mode told: from the second pair");
        assert_eq!(short.stop(&look(2, 0.03)), None, "3 sds at 2 pairs");
        assert_eq!(short.stop(&look(LR_EARLY_UNTIL - 1, 0.99 * LR_EARLY_SDS * sd)), None);
        assert_eq!(short.stop(&look(LR_EARLY_UNTIL - 1, LR_EARLY_SDS * sd)), Some(Stop::Keep));
        assert_eq!(short.stop(&look(LR_EARLY_UNTIL, 0.02)), Some(Stop::Keep), "from LR_EARLY_UNTIL pairs any mean of the minimum effect");
        assert_eq!(two.stop(&look(LR_KEEP_FROM_TWO_MODES - 1, 0.1)), None, "two modes: no keep before the streak's pairs");
        assert_eq!((short.keep_at, told.keep_at, two.keep_at), (LR_KEEP_AT, LR_KEEP_AT_ONE_MODE, LR_KEEP_AT));
    }

    #[test]
    fn no_gain_s_correlated_fit_is_its_best_over_the_allowed_correlations() {
        let mut rng = Rng::new(7);
        for case in 0..200 {
            let n = 2 + case % 12;
            let (noisy, rho_max) = (1.0 + (case % 4) as f64, [0.3, 0.6, 0.8][case % 3]);
            let (mut qr, mut qs, mut crs, mut mr, mut ms) = (0.0, 0.0, 0.0, 0.0, 0.0);
            for i in 0..n {
                let (a, b) = (0.01 * rng.normal(), 0.01 * noisy * rng.normal());
                let (r, s, k) = (a - b, a + b, (i + 1) as f64);
                let (dr, ds) = (r - mr, s - ms);
                mr += dr / k;
                ms += ds / k;
                qr += dr * (r - mr);
                qs += ds * (s - ms);
                crs += dr * (s - ms);
            }
            let z2 = n as f64 * mr.max(0.0).powi(2);
            let m = 2.0 * n as f64 - 1.0;
            let brute = (0..=20000)
                .map(|i| {
                    let rho = -rho_max + 2.0 * rho_max * i as f64 / 20000.0;
                    let c = (qr + qs - 2.0 * rho * crs) / (1.0 - rho * rho) + z2;
                    -0.5 * m * (c / m).ln() - 0.5 * (n as f64 - 1.0) * (1.0 - rho * rho).ln() - 0.5 * m
                })
                .fold(f64::NEG_INFINITY, f64::max);
            let fit = none_correlated(z2, qr, qs, crs, n as f64, rho_max);
            assert!(fit >= brute - 1e-9 && fit <= brute + 1e-6, "case {case}: {fit} against {brute}");
        }
    }

    #[test]
    fn pairs_whose_log_ratios_mirror_their_log_sums_are_not_kept_on_the_incumbent_s_calibration() {
        // A do-nothing change whose candidate is 3x as noisy as the incumbent (a draw of the
        // simulator's model): its own noise moves each log-ratio and log-sum by opposite amounts,
        // and four pairs of a fast candidate read as a clean gain to a fit that cannot see that.
        let pairs = [(0.0467, -0.0336), (0.0414, -0.0497), (0.0633, -0.0550), (0.0421, -0.0492)].map(|(r, s)| (r, Some(s)));
        let sd = std::f64::consts::SQRT_2 * 0.01;
        let test = WholePairLr::new(1.0, 30).for_history(true, ONE_MODE_TOLD_PAIRS);
        let blind = WholePairLr { null_rho_max: 0.0, rhos: LR_RHOS_NONE, ..test };
        assert_eq!(blind.looks(sd, false, &pairs).1, Some(Stop::Keep), "a fit without the correlation keeps them");
        let (looks, stop) = test.looks(sd, false, &pairs);
        assert_eq!(stop, None, "{looks:?}");
        assert!(looks.last().unwrap().log_lr < test.keep_at - 0.5, "{looks:?}");
    }

    #[test]
    fn the_whole_pair_likelihood_ratio_at_two_pairs_matches_its_closed_form() {
        let (sd, mu1) = (0.014, 1.03f64.ln());
        // Sums that move against the ratios (a noisier candidate's) and with them.
        for pairs in [[(0.021, 0.003), (0.034, -0.011)], [(0.012, 0.020), (0.041, -0.017)], [(0.030, -0.010), (0.010, -0.031)]] {
            for (rhos, rho_max) in [(LR_RHOS_NONE, 0.0), (LR_RHOS, LR_NULL_RHO_MAX)] {
                let (lambda, futility) = closed_form(&pairs, sd, mu1, &rhos, rho_max);
                let fixed = |keep_at: f64| WholePairLr {
                    ratio_df: f64::INFINITY,
                    sum_df: f64::INFINITY,
                    futile_at: f64::NEG_INFINITY,
                    max_pairs: 2,
                    rhos,
                    null_rho_max: rho_max,
                    ..whole_pair_lr(keep_at)
                };
                let at = |keep_at: f64| fixed(keep_at).decide(sd, false, |i| pairs[i]);
                assert_eq!(at(lambda - 1e-6), (Stop::Keep, 2), "lambda {lambda}");
                assert_eq!(at(lambda + 1e-6), (Stop::Budget, 2), "lambda {lambda}");
                // The futility statistic: the same gain against no gain over the same scales.
                let look = fixed(f64::INFINITY).looks(sd, false, &pairs.map(|(r, s)| (r, Some(s)))).0[0];
                assert!(
                    (look.log_lr - lambda).abs() < 1e-6 && (look.log_lr_futility - futility).abs() < 1e-9,
                    "{look:?} {lambda} {futility}"
                );
                // A warm history sets the first pair aside: the same two pairs, read from the second.
                let shifted = [(9.0, 9.0), pairs[0], pairs[1]];
                let warm = WholePairLr { max_pairs: 3, ..fixed(lambda - 1e-6) };
                assert_eq!(warm.decide(sd, true, |i| shifted[i]), (Stop::Keep, 3));
            }
        }
    }

    #[test]
    fn the_whole_pair_likelihood_ratio_holds_ville_s_level_at_every_noise_level_of_normal_runs() {
        // keep_at = ln 100: by Ville's inequality at most 1% at any true sd against the
        // calibrated one (the gain side, a mixture of joint densities each pooled from the
        // pairs before each one, keeps the martingale); 20000 draws resolve 1%.
        let sd = std::f64::consts::SQRT_2 * 0.01;
        let test = whole_pair_lr(100f64.ln());
        for (i, k) in [0.5, 1.0, 1.78, 3.0, 10.0].into_iter().enumerate() {
            let mut rng = Rng::new(41 + i as u64);
            let keeps = (0..20_000)
                .filter(|_| {
                    test.decide(sd, false, |_| {
                        let (a, b) = (0.01 * k * rng.normal(), 0.01 * k * rng.normal());
                        (a - b, a + b)
                    })
                    .0 == Stop::Keep
                })
                .count();
            assert!(keeps <= 200, "{k}x: {keeps} of 20000");
        }
    }

    #[test]
    fn the_whole_pair_likelihood_ratio_keeps_three_percent_at_one_percent_noise_in_few_pairs() {
        // The shipped levels after a history of one mode, as a normal machine's shows: +3% at
        // CV 1% keeps in few pairs (under 7.5 on average, 15 runs); here with the calibration exact.
        let sd = std::f64::consts::SQRT_2 * 0.01;
        let test = WholePairLr::new(1.0, 30).for_history(true, ONE_MODE_TOLD_PAIRS);
        let mut rng = Rng::new(5);
        let (mut keeps, mut pairs) = (0, 0);
        for _ in 0..4000 {
            let (stop, n) = test.decide(sd, false, |_| {
                let (a, b) = (0.01 * rng.normal(), 0.01 * rng.normal());
                (1.03f64.ln() + a - b, a + b)
            });
            keeps += (stop == Stop::Keep) as usize;
            pairs += n;
        }
        assert!(keeps >= 3800 && pairs <= 4000 * 15 / 2, "{keeps} kept in {pairs} pairs");
    }

    /// The rule with `[decision] method = "likelihood-ratio"`'s defaults (16 + 5 pairs, rescue
    /// to 30) and a 15-df history of sd `sd`.
    fn rule(sd: f64, history: bool) -> Sequential {
        let params = Params {
            alpha: 0.02,
            confirm_pairs: 5,
            confirm_alpha: 0.045,
            futility_beta: Some(0.3),
            max_pairs: 16,
            rescue_pairs: 30,
            rescue_alpha: 0.0001,
            likelihood_ratio: OnePhase::WithHistory,
            levels: crate::stats::sequential::Levels { ratio_wide: LR_WIDE_WEIGHT, ..crate::stats::sequential::Levels::first() },
            ..Params::for_tests(16)
        };
        Sequential::new(params).with_history(history.then(|| Borrowed::new(NoiseScale { sd, df: 15.0 })))
    }

    /// Drive `seq` to its decision on `pairs` (log-ratio, log-sum), asserting it asks for one
    /// first-phase pair at a time.
    fn drive(seq: &Sequential, pairs: &[(f64, f64)]) -> Decision {
        let (mut r, mut s) = (vec![], vec![]);
        for &(x, y) in pairs {
            match seq.next_runs(&r, &[], &s, &[]) {
                Next::Done(d) => return d,
                next => assert_eq!(next, Next::Measure { phase: Phase::Main, pairs: 1 }),
            }
            r.push(x);
            s.push(y);
        }
        match seq.next_runs(&r, &[], &s, &[]) {
            Next::Done(d) => d,
            next => panic!("undecided after {} pairs: {next:?}", r.len()),
        }
    }

    /// Normal pairs of runs with CV `cv` and a gain of `gain` (a fraction).
    fn pairs(gain: f64, cv: f64, n: usize, seed: u64) -> Vec<(f64, f64)> {
        let mut rng = Rng::new(seed);
        (0..n)
            .map(|_| {
                let (a, b) = (cv * rng.normal(), cv * rng.normal());
                ((1.0 + gain).ln() + a - b, a + b)
            })
            .collect()
    }

    #[test]
    fn with_history_the_likelihood_ratio_decides_in_one_phase_and_its_figures_come_from_its_trail() {
        let sd = std::f64::consts::SQRT_2 * 0.01;
        let seq = rule(sd, true);
        // The level its rule keeps at (this history cannot tell one mode from two).
        let level = seq.params.deciding_ratio(seq.borrowed.as_ref()).unwrap().keep_at;
        assert_eq!(seq.max_measured_pairs(), 30);
        let all = pairs(0.10, 0.01, 30, 3);
        let d = drive(&seq, &all);
        assert_eq!(d.verdict, Verdict::Keep, "{}", d.reason);
        assert_eq!(d.procedure, crate::stats::Procedure::LikelihoodRatio);
        // Handed more pairs than it needed, it decides on the same ones and says how many.
        let (r, s): (Vec<f64>, Vec<f64>) = all.iter().copied().unzip();
        assert_eq!(seq.next_runs(&r, &[], &s, &[]), Next::Done(d.clone()));
        assert!(d.confirmation.is_none() && d.rescue.is_none() && d.scale == SCALE);
        // One look per pair from the second; the last crossed the keep level.
        assert_eq!((d.looks, d.trail.len(), d.pairs), (d.pairs - 1, d.pairs - 1, d.trail.last().unwrap().pairs));
        let last = d.trail.last().unwrap();
        assert!(last.statistic.unwrap() >= level && d.trail[..d.looks - 1].iter().all(|l| l.statistic.unwrap() < level));
        // p is the trail's best e^-statistic; p_adjusted scales it to the first phase's alpha.
        let best = d.trail.iter().map(|l| (-l.statistic.unwrap()).exp()).fold(1.0, f64::min);
        assert!((d.p_value - best).abs() < 1e-15 && d.p_value <= d.p_threshold);
        assert!((d.p_threshold - (-level).exp()).abs() < 1e-15);
        assert!((d.p_adjusted - d.p_value * 0.02 / d.p_threshold).abs() < 1e-15 && d.p_adjusted <= 0.02);
        assert!((d.effect_pct - last.estimate_pct).abs() < 1e-12 && d.ci_low_pct < d.effect_pct && d.effect_pct < d.ci_high_pct);
        assert_eq!(d.borrowed.as_ref().map(|b| b.sd_pct), Some(sd * 100.0));
    }

    #[test]
    fn the_normal_cdf_s_log_is_exact_in_the_middle_and_continuous_into_the_far_tail() {
        assert!((ln_normal_cdf(0.0) - 0.5f64.ln()).abs() < 1e-12);
        // Phi(-1.959964) = 0.025 (tables); Phi(-10) = 7.6198530241605e-24 (scipy.stats.norm.cdf).
        assert!((ln_normal_cdf(-1.959964) - 0.025f64.ln()).abs() < 1e-6);
        assert!((ln_normal_cdf(-10.0) - 7.6198530241605e-24f64.ln()).abs() < 1e-9);
        let (a, b) = (ln_normal_cdf(-30.0 + 1e-9), ln_normal_cdf(-30.0 - 1e-9));
        assert!((a - b).abs() < 1e-5 && a.is_finite() && ln_normal_cdf(-1e3).is_finite(), "{a} {b}");
    }

    #[test]
    fn a_gain_far_above_the_grid_keeps_at_once_and_a_large_slowdown_reverts() {
        // 2x and 10x faster at CV 1%: far beyond the grid's largest gain (6 x 3%), which alone
        // fitted them worse than no gain's free sd, to the budget with p = 1.
        let seq = rule(std::f64::consts::SQRT_2 * 0.01, true);
        for gain in [1.0, 9.0] {
            let d = drive(&seq, &pairs(gain, 0.01, 30, 4));
            assert!(d.verdict == Verdict::Keep && d.pairs <= 3, "{gain}: {} pairs: {}", d.pairs, d.reason);
        }
        let d = drive(&seq, &pairs(-0.5, 0.01, 30, 4));
        assert!(d.verdict == Verdict::Revert && d.pairs <= 3, "{} pairs: {}", d.pairs, d.reason);
        // A rule recorded before the wide component replays without it: the 2x speed-up to the
        // budget, as it was decided then.
        let mut before = seq.clone();
        before.params.levels.ratio_wide = 0.0;
        let d = drive(&before, &pairs(1.0, 0.01, 30, 4));
        assert!(d.verdict == Verdict::Inconclusive && d.pairs == 30, "{} pairs: {}", d.pairs, d.reason);
    }

    #[test]
    fn on_a_quiet_machine_the_grid_is_powered_for_three_sds_never_under_the_minimum_effect() {
        let mut seq = rule(0.005, true);
        seq.params.levels.ratio_powered_for_sds = crate::stats::sequential::LR_POWERED_FOR_SDS;
        let p = &seq.params;
        // CV 1% (pair sd 1.41%): 3 sds is over +3%, the grid as before.
        assert_eq!(p.likelihood_ratio_test(0.0141).mu1, 0.03f64.ln_1p());
        assert!((p.likelihood_ratio_test(0.005).mu1 - 0.015).abs() < 1e-12);
        // An H200's 0.3% pairs: 0.9%, under the 1% minimum effect, so the minimum.
        assert_eq!(p.likelihood_ratio_test(0.003).mu1, 0.01f64.ln_1p());
        // A +1.5% gain on pairs of sd 0.5%: a +3% grid reads it as worse than no gain and leaves
        // it to the wide component; the scaled grid keeps it more often, in fewer pairs.
        let mut before = seq.clone();
        before.params.levels.ratio_powered_for_sds = 0.0;
        let tally = |seq: &Sequential| {
            (0..200u64).fold((0, 0), |(k, n), seed| {
                let d = drive(seq, &pairs(0.015, 0.005 / std::f64::consts::SQRT_2, 30, seed));
                (k + (d.verdict == Verdict::Keep) as usize, n + d.pairs)
            })
        };
        let ((k1, n1), (k0, n0)) = (tally(&seq), tally(&before));
        assert!(k1 > k0 + 20 && n1 < n0, "scaled {k1} kept in {n1} pairs, recorded rule {k0} in {n0}");
    }

    #[test]
    fn the_likelihood_ratio_reverts_a_do_nothing_change_at_its_futility_boundary() {
        let seq = rule(std::f64::consts::SQRT_2 * 0.01, true);
        let d = drive(&seq, &pairs(0.0, 0.01, 30, 11));
        assert_eq!(d.verdict, Verdict::Revert, "{}", d.reason);
        let last = d.trail.last().unwrap();
        assert!(last.statistic.unwrap() <= last.revert_boundary.unwrap());
        assert!(d.trail[..d.looks - 1].iter().all(|l| l.statistic.unwrap() > l.revert_boundary.unwrap()));
        assert!(d.p_value > d.p_threshold && d.p_adjusted > 0.02);
    }

    #[test]
    fn the_likelihood_ratio_ends_inconclusive_at_its_budget_and_needs_the_minimum_effect_to_keep() {
        let sd = std::f64::consts::SQRT_2 * 0.01;
        let seq = rule(sd, true);
        let found = (0..200u64).find_map(|seed| {
            let d = drive(&seq, &pairs(0.015, 0.01, 30, seed));
            (d.verdict == Verdict::Inconclusive).then_some(d)
        });
        let d = found.expect("a +1.5% gain at CV 1% left undecided by some seed");
        assert_eq!((d.pairs, d.looks), (30, 29), "{}", d.reason);
        assert!(d.p_value > d.p_threshold);
        // A look past the keep level with a mean under the minimum effect goes on.
        let test = WholePairLr::new(1.0, 30);
        let look = |mean: f64| LrLook { measured: 9, used: 9, mean, sd, log_lr: LR_KEEP_AT + 1.0, log_lr_futility: 0.0, calibrated_sd: sd };
        assert_eq!(test.stop(&look(1.0099f64.ln())), None);
        assert_eq!(test.stop(&look(1.01f64.ln())), Some(Stop::Keep));
    }

    #[test]
    fn without_history_the_likelihood_ratio_rule_is_the_two_phases() {
        let lr = rule(0.014, false);
        let two = Sequential::new(Params { likelihood_ratio: OnePhase::Never, ..lr.params.clone() });
        assert_eq!(lr.next(&[], &[]), two.next(&[], &[]));
        let d = pairs(0.10, 0.01, 4, 5);
        let r: Vec<f64> = d.iter().map(|p| p.0).collect();
        assert_eq!(lr.next(&r, &[]), two.next(&r, &[]));
        assert_eq!(lr.max_measured_pairs(), two.max_measured_pairs());
    }

    #[test]
    fn auto_decides_by_the_likelihood_ratio_unless_the_history_set_gross_outliers_aside() {
        let mut auto = rule(0.014, true);
        auto.params.likelihood_ratio = OnePhase::WithoutOutliers;
        let d = pairs(0.10, 0.01, 4, 5);
        let r: Vec<f64> = d.iter().map(|p| p.0).collect();
        assert!(auto.likelihood_ratio().is_some());
        assert_eq!(auto.next(&r[..2], &[]), Next::Measure { phase: Phase::Main, pairs: 1 });
        auto.borrowed.as_mut().unwrap().outliers = 1;
        let two = Sequential::new(Params { likelihood_ratio: OnePhase::Never, ..auto.params.clone() }).with_history(auto.borrowed.clone());
        assert!(auto.likelihood_ratio().is_none());
        assert_eq!(auto.next(&r[..2], &[]), two.next(&r[..2], &[]));
        assert_eq!(auto.next(&r, &[]), two.next(&r, &[]));
        assert_eq!(auto.max_measured_pairs(), two.max_measured_pairs());
    }

    /// A clear gain on a loaded machine (1.6x, each run's noise 20%) under a small budget (8
    /// pairs, 4 to confirm: 24 pairs in all) whose pairs 10 and 15 are wild (an incumbent run
    /// 23x slow, a candidate run 12x slow), after the pairs where the ratio hands a wild pair to
    /// the two phases.
    fn wild_after_the_first_phase(seed: u64) -> (Sequential, Vec<(f64, f64)>) {
        let sd = std::f64::consts::SQRT_2 * 0.2;
        let mut seq = rule(sd, true);
        seq.params.max_pairs = 8;
        seq.params.confirm_pairs = 4;
        seq.params.likelihood_ratio = OnePhase::UntilOutlier;
        seq.params.levels = crate::stats::sequential::Levels::current();
        let mut p = pairs(0.6, 0.2, 24, seed);
        p[9] = (p[9].0 + 23f64.ln(), p[9].1 + 23f64.ln());
        p[14] = (p[14].0 - 12.5f64.ln(), p[14].1 + 12.5f64.ln());
        (seq, p)
    }

    /// A +3% gain at CV 1% on a machine where one process in seven runs 15% slower, as
    /// `experiment` measures it: 30 pairs, the slow runs falling every 7th run, the calibration
    /// having taken the slow pairs into its sd (`sd`).
    fn one_slow_run_in_seven(sd: f64, seed: u64) -> (Sequential, Vec<(f64, f64)>) {
        let mut seq = rule(sd, true);
        seq.params.likelihood_ratio = OnePhase::UntilOutlier;
        seq.params.levels = crate::stats::sequential::Levels::current();
        let mut p = pairs(0.03, 0.01, 30, seed);
        let slow = 1.15f64.ln();
        for (i, x) in p.iter_mut().enumerate() {
            // Runs 2i (first) and 2i + 1 (second) of the pair; the incumbent runs first in pairs
            // 1, 2, 5, 6, ... (`incumbent_first`).
            let inc_first = crate::stats::sequential::incumbent_first(Phase::Main, i);
            for run in [2 * i, 2 * i + 1] {
                if run % 7 == 3 {
                    let incumbent = (run == 2 * i) == inc_first;
                    x.0 += if incumbent { slow } else { -slow };
                    x.1 += slow;
                }
            }
        }
        (seq, p)
    }

    #[test]
    fn a_slow_run_in_every_seventh_costs_its_pairs_not_a_clear_gain() {
        // A calibration of that machine lends about 7.5% for one pair's sd when it keeps its slow
        // pairs (two modes: `history::trim_two_modes`).
        let (seq, p) = one_slow_run_in_seven(0.075, 3);
        let hit = (0..30).filter(|i| [2 * i, 2 * i + 1].iter().any(|r| r % 7 == 3)).count();
        assert_eq!(hit, 9, "pairs holding one slow run");
        let d = drive(&seq, &p);
        assert_eq!((d.verdict, d.procedure), (Verdict::Keep, crate::stats::Procedure::Rescue), "{}", d.reason);
        let rescue = d.rescue.clone().expect("the rescue's record");
        assert_eq!(rescue.set_aside, hit, "{}", d.reason);
        assert!((d.effect_pct - 3.0).abs() < 1.0, "{}", d.effect_pct);
        // The band of 6 of the history's sds, or the pairs' robust sd when larger, sets aside none
        // of them, and the t-test over all the pairs does not keep.
        let mut before = seq.clone();
        before.params.levels = crate::stats::sequential::Levels::before_robust_rescue();
        let b = drive(&before, &p);
        assert_eq!(b.verdict, Verdict::Inconclusive, "{}", b.reason);
        assert_eq!(b.rescue.expect("the rescue's record").set_aside, 0, "{}", b.reason);
    }

    #[test]
    fn wild_pairs_past_the_first_phase_cost_their_own_pairs_not_a_clear_gain() {
        let (seq, p) = wild_after_the_first_phase(7);
        assert_eq!(seq.params.max_total_pairs(), 24);
        let d = drive(&seq, &p);
        // The ratio, whose no-gain fit widens its sd to take in the wild pairs, runs its budget;
        // the rescue's t-test reads the 22 others.
        assert_eq!((d.verdict, d.procedure, d.pairs), (Verdict::Keep, crate::stats::Procedure::Rescue, 24), "{}", d.reason);
        assert!(
            d.reason.contains("the t-test over 22 of 24 pairs (2 set aside, over 4 of their robust sds from their median)"),
            "{}",
            d.reason
        );
        let clean: Vec<f64> = p.iter().enumerate().filter(|(i, _)| ![9, 14].contains(i)).map(|(_, x)| x.0).collect();
        let mean = clean.iter().sum::<f64>() / 22.0;
        assert!((d.effect_pct - pct(mean)).abs() < 1e-9, "{} {}", d.effect_pct, pct(mean));
        let rescue = d.rescue.clone().expect("the rescue's record");
        assert_eq!((rescue.pairs, rescue.set_aside, rescue.before, rescue.passed), (24, 2, Verdict::Inconclusive, true));
        assert_eq!(d.total_pairs(), 24, "no pair measured past the ratio's budget");
        // The rule recorded before: the ratio's budget ends it, inconclusive.
        let mut before = seq.clone();
        before.params.levels.rescue_outlier_k = 0.0;
        before.params.levels.ratio_rescued = false;
        let b = drive(&before, &p);
        assert_eq!(
            (b.verdict, b.procedure, b.pairs),
            (Verdict::Inconclusive, crate::stats::Procedure::LikelihoodRatio, 24),
            "{}",
            b.reason
        );
        // The rescue reading every pair, wild ones included, cannot keep it either.
        before.params.levels.ratio_rescued = true;
        let all = drive(&before, &p);
        assert_eq!(all.verdict, Verdict::Inconclusive, "{}", all.reason);
        assert!(all.reason.contains("the t-test over all 24 pairs"), "{}", all.reason);
    }

    #[test]
    fn a_gross_outlier_among_the_first_phase_s_pairs_hands_auto_s_decision_to_the_two_phases() {
        let sd = std::f64::consts::SQRT_2 * 0.01;
        // The band is the history's sd, or from three pairs the pairs' robust sd when larger.
        assert_eq!(first_wild(sd, &[0.0, 0.0]), None);
        // Of two pairs the median is their midpoint: the second is 6 sds from it at 12 apart.
        assert_eq!(first_wild(sd, &[0.0, 11.9 * sd]), None);
        let w = first_wild(sd, &[0.0, 13.0 * sd]).unwrap();
        assert!(w.pair == 2 && (w.sds - 6.5).abs() < 1e-9, "{w:?}");
        assert_eq!(first_wild(sd, &[0.0, 0.0, 0.0, 6.1 * sd]).map(|w| w.pair), Some(4));
        assert_eq!(first_wild(sd, &[0.0, 0.0, 0.0, 5.9 * sd]), None);
        // Pairs spread as widely as the outlier is far: no outlier (their robust sd is the band).
        assert_eq!(first_wild(sd, &[0.0, 5.0 * sd, -5.0 * sd, 9.0 * sd]), None);

        let mut auto = rule(sd, true);
        auto.params.likelihood_ratio = OnePhase::UntilOutlier;
        let two = Sequential::new(Params { likelihood_ratio: OnePhase::Never, ..auto.params.clone() }).with_history(auto.borrowed.clone());
        let (mut r, mut s): (Vec<f64>, Vec<f64>) = pairs(0.10, 0.01, 30, 21).into_iter().unzip();
        let confirm: Vec<(f64, f64)> = pairs(0.10, 0.01, 30, 22);
        let decide = |seq: &Sequential, r: &[f64], s: &[f64]| {
            crate::stats::sequential::run_pairs_to_decision(seq, |phase, i| match phase {
                Phase::Main => (r[i], Some(s[i])),
                Phase::Confirm => (confirm[i].0, Some(confirm[i].1)),
            })
        };
        // Clean pairs: the ratio decides, as under `WithoutOutliers`.
        let clean = decide(&auto, &r, &s);
        assert_eq!((clean.verdict, clean.scale.as_str()), (Verdict::Keep, SCALE), "{}", clean.reason);
        // The second pair's incumbent run 3x slow: from that pair on the two phases decide on the
        // same pairs, and the reason says why.
        r[1] += 3.0f64.ln();
        s[1] += 3.0f64.ln();
        assert_eq!(auto.next_runs(&r[..1], &[], &s[..1], &[]), Next::Measure { phase: Phase::Main, pairs: 1 });
        assert_eq!(auto.next_runs(&r[..2], &[], &s[..2], &[]), two.next_runs(&r[..2], &[], &s[..2], &[]));
        let (a, t) = (decide(&auto, &r, &s), decide(&two, &r, &s));
        assert_eq!(t.verdict, Verdict::Keep, "{}", t.reason);
        assert!(a.reason.starts_with("pair 2 lay ") && a.reason.ends_with(&t.reason), "{}", a.reason);
        assert_eq!(Decision { reason: t.reason.clone(), ..a.clone() }, t);
        assert_eq!((clean.procedure, a.procedure), (crate::stats::Procedure::LikelihoodRatio, crate::stats::Procedure::TwoPhases));
        assert_eq!(auto.max_measured_pairs(), two.max_measured_pairs().max(30));
        // `WithoutOutliers` (the rule recorded before) never hands over: the ratio goes on.
        auto.params.likelihood_ratio = OnePhase::WithoutOutliers;
        assert_eq!(auto.next_runs(&r[..2], &[], &s[..2], &[]), Next::Measure { phase: Phase::Main, pairs: 1 });
    }

    #[test]
    fn a_warm_history_sets_the_first_pair_aside_and_sums_are_read_only_when_every_pair_has_one() {
        let sd = std::f64::consts::SQRT_2 * 0.01;
        let test = WholePairLr::new(1.0, 30);
        let p: Vec<(f64, Option<f64>)> = pairs(0.03, 0.01, 6, 8).into_iter().map(|(r, s)| (r, Some(s))).collect();
        let (cold, _) = test.looks(sd, false, &p);
        let (warm, _) = test.looks(sd, true, &p);
        assert_eq!((cold[0].measured, cold[0].used), (2, 2));
        assert_eq!((warm[0].measured, warm[0].used), (3, 2));
        // The warm reading is the cold one of the pairs after the first.
        let (shifted, _) = test.looks(sd, false, &p[1..]);
        assert!((warm[0].log_lr - shifted[0].log_lr).abs() < 1e-12);
        // One pair without a sum: the sums are left out of every look.
        let mut gap = p.clone();
        gap[3].1 = None;
        let ratios_only: Vec<(f64, Option<f64>)> = p.iter().map(|&(r, _)| (r, None)).collect();
        assert_eq!(test.looks(sd, false, &gap).0, test.looks(sd, false, &ratios_only).0);
        assert_ne!(test.looks(sd, false, &gap).0, cold);
    }
}
