//! The noise scale borrowed from history and how it is used ([`Borrowed`], its defaults from
//! [`super::levels`]), and the spread of the pairs' log-sums that the guard reads beside it.

use super::levels::*;
use serde::{Deserialize, Serialize};

/// The noise scale borrowed from history (`stats::history`): the standard deviation of one
/// pair's log-ratio in speed-up terms, and the degrees of freedom it was estimated with.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct NoiseScale {
    pub sd: f64,
    pub df: f64,
}

/// How a borrowed noise scale is used. See the module's notes and docs/decisions.md.
#[derive(Debug, Clone, PartialEq)]
pub struct Borrowed {
    pub scale: NoiseScale,
    /// The history's sd is multiplied by this before use (noise a little above history stays
    /// covered by the bound).
    pub safety: f64,
    /// The variance guard: the experiment's own t-test decides a look when its pairs' variance
    /// exceeds the history's at this one-sided F-test level.
    pub guard: f64,
    /// The guard's level in the confirmation, where it pools the first phase's spread with the
    /// batch's own: a second look at a noise jump the first phase's few df missed.
    pub confirm_guard: f64,
    /// A pair further than this many sds (the history's, or the batch's own robust sd when
    /// larger) from the batch's median is a gross outlier: set aside and replaced by another pair.
    pub outlier_k: f64,
    /// The first look of each batch (pairs); looks follow every `look_every` pairs.
    pub first_look: usize,
    /// Futility level with a borrowed scale (in place of `futility_beta`), and at the looks
    /// before `min_pairs` (a warm-up ramp biases the first pairs against the candidate).
    pub futility_beta: f64,
    pub early_beta: f64,
    /// Futility level of the confirmation's looks: it fails early when its (1 - beta) upper
    /// bound is below the minimum effect.
    pub confirm_beta: f64,
    /// The history's spread of the pairs' log-sums ([`sum_spread`]); `None` (a noise history
    /// written before the sum guard existed): the guard sees the log-ratios alone.
    pub sums: Option<NoiseScale>,
    /// When a confirmation look's own spread is above the history's at this F level (the noise
    /// has jumped, so the first phase's borrowed look was too lenient), a pass of the
    /// confirmation also needs the first phase's deciding look to hold on that spread's scale.
    pub retest_guard: f64,
    /// Pairs the confirmation measures beyond `confirm_pairs` (its power back from the safety
    /// factor; a clear gain still passes at its first look).
    pub confirm_extra: usize,
    /// The share of its alpha increment the first phase's first look (at `first_look` pairs, with
    /// the fewest own df to check the scale on) spends; the rest moves to the second look.
    pub first_share: f64,
    /// The noise-history sessions the scale was pooled from (`source@time;...`, newest first),
    /// recorded with each decision.
    pub source: String,
    /// The warm-up profile the history lends ([`Warmup`]); `None`: the guard reads the first
    /// phase's sums as they are.
    pub warmup: Option<Warmup>,
    /// How many of the profile's first steps the guard may read around (0: none, the sums as
    /// they are), and how far from zero (in standard errors) a step must be for it to.
    pub warmup_positions: usize,
    pub warmup_z: f64,
    /// The history's pooled sessions that saw a gross outlier (`history::Entry::max_dev`): where
    /// any did, `OnePhase::WithoutOutliers` and `UntilOutlier` leave the decision to the two
    /// phases.
    pub outliers: usize,
    /// Of the history's pooled sessions with enough pairs to tell (`history::Entry::modes`), how
    /// many showed two modes in their runs; `None`: none could tell. Where it is `Some(0)` the
    /// likelihood ratio keeps at its one-mode level (`WholePairLr::keep_at_one_mode`) once
    /// `modes_pairs` reach `ONE_MODE_TOLD_PAIRS`.
    pub modes: Option<usize>,
    /// Pairs of the kept sessions that could tell one mode from two, where none showed two
    /// (`history::one_mode_pairs`): a low calibration on a machine whose modes lie within its
    /// noise shows one mode on a few pairs.
    pub modes_pairs: usize,
}

/// How a session's first pairs move when it starts cold: the mean of the first successive
/// differences of the first phase's log-sums over the history's sessions (a warm-up makes them
/// negative: each pair faster than the one before), the number of sessions it is the mean of,
/// and the sd of one session's difference. The guard reads the experiment's first differences
/// around the steps the history shows apart from zero ([`Borrowed::warmup_positions`],
/// [`Borrowed::warmup_z`]), so a warm-up it has seen before is not taken for noise, while a
/// noise jump still is.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Warmup {
    pub steps: Vec<f64>,
    pub sessions: f64,
    pub sd: f64,
}

impl Warmup {
    /// The steps the guard reads around: the first `positions`, each where it is more than `z`
    /// of its standard errors from zero (0 elsewhere: read as it is).
    pub fn used(&self, positions: usize, z: f64) -> Vec<f64> {
        let se = self.sd / self.sessions.max(1.0).sqrt();
        self.steps.iter().take(positions).map(|&p| if p.abs() > z * se { p } else { 0.0 }).collect()
    }
}

impl Borrowed {
    /// The scale as the decision records it.
    pub fn record(&self) -> crate::stats::BorrowedScale {
        crate::stats::BorrowedScale {
            sd_pct: self.scale.sd * 100.0,
            df: self.scale.df,
            sums_sd_pct: self.sums.map(|s| s.sd * 100.0),
            sums_df: self.sums.map(|s| s.df),
            source: self.source.clone(),
        }
    }

    /// The defaults documented in docs/decisions.md (chosen with `ratchet-lab simulate`).
    pub fn new(scale: NoiseScale) -> Borrowed {
        Borrowed {
            scale,
            safety: SAFETY,
            guard: GUARD,
            confirm_guard: CONFIRM_GUARD,
            outlier_k: OUTLIER_K,
            first_look: FIRST_LOOK,
            futility_beta: FUTILITY_BETA,
            early_beta: EARLY_BETA,
            confirm_beta: CONFIRM_BETA,
            sums: None,
            retest_guard: RETEST_GUARD,
            confirm_extra: CONFIRM_EXTRA,
            first_share: FIRST_SHARE,
            source: String::new(),
            warmup: None,
            warmup_positions: WARMUP_STEPS,
            warmup_z: WARMUP_Z,
            outliers: 0,
            modes: None,
            modes_pairs: 0,
        }
    }

    /// With the history's spread of the pairs' log-sums (see [`sum_spread`]).
    pub fn with_sums(mut self, sums: Option<NoiseScale>) -> Borrowed {
        self.sums = sums;
        self
    }

    /// Whether the history shows a warm-up: its profile's first step apart from zero, as the
    /// guard reads it (the likelihood ratio then sets the first pair aside).
    pub fn shows_warmup(&self) -> bool {
        self.warmup.as_ref().is_some_and(|w| w.used(1, self.warmup_z).iter().any(|&x| x != 0.0))
    }

    /// Whether the history shows, or cannot rule out, a second population of runs: a pooled
    /// session saw a gross outlier, or the sessions do not show one mode. On such a machine a
    /// few pairs whose incumbent ran in the slow population and candidate in the fast one read as
    /// a clean gain of the populations' distance, and the calibration that saw the fewest of them
    /// lends the smallest sd: no keep rests on a streak of them (`OUTLIER_FIRST_LOOK`,
    /// `LR_KEEP_FROM_TWO_MODES`).
    pub fn second_population(&self) -> bool {
        self.outliers > 0 || !self.one_mode()
    }

    /// Whether a pooled session showed its runs in two modes: there the first look waits
    /// `Levels::first_look_two_modes` (past `min_pairs` too) and the ratio's first keep
    /// `Levels::ratio_keep_from_two_modes_shown`. A slow mode's streak is what the wait is for; a
    /// history that saw gross outliers alone (spikes, 3x runs, which the outlier rule sets aside
    /// in the decision too) or whose sessions were too short to tell keeps the shorter wait.
    pub fn waits_longer(&self) -> bool {
        self.modes.is_some_and(|m| m > 0)
    }

    /// Pairs before the first phase's first look: `first_look`, or at least the levels' wait
    /// where the history shows a second population ([`Self::second_population`]), the longer
    /// one where it showed two modes ([`Self::waits_longer`]).
    pub fn main_first_look(&self, levels: &super::Levels) -> usize {
        let (second, two) = (levels.first_look_second_population, levels.first_look_two_modes);
        if second == 0 || !self.second_population() {
            self.first_look
        } else if two > 0 && self.waits_longer() {
            self.first_look.max(two)
        } else {
            self.first_look.max(second)
        }
    }

    /// Whether the history shows its runs in one mode: some pooled session could tell, and none
    /// showed two.
    pub fn one_mode(&self) -> bool {
        self.modes == Some(0)
    }

    /// The first phase's sum spread as the guard reads it: around the warm-up profile where the
    /// history has one ([`sum_spread_profiled`]).
    pub(super) fn first_phase_sum_spread(&self, s: &[f64]) -> (f64, f64) {
        match &self.warmup {
            Some(w) => sum_spread_profiled(s, &w.used(self.warmup_positions, self.warmup_z), w.sessions),
            None => sum_spread(s),
        }
    }
}

/// The spread of a batch's log-sums (ln incumbent + ln candidate of each pair, speed-up terms)
/// from successive differences (von Neumann 1941): half the sum of squared differences of
/// consecutive sums, with one df per difference. Differences cancel the slow session changes
/// (drift, a level the session runs at) that the pairs' sums carry and their log-ratios do not.
/// Under independent runs var(sum) = var(log-ratio), so it is n - 1 more df about the noise.
pub fn sum_spread(s: &[f64]) -> (f64, f64) {
    sum_spread_profiled(s, &[], 1.0)
}

/// [`sum_spread`] of a first phase's log-sums read around the warm-up profile's `steps` (0: a
/// difference read as it is): each difference minus its step, in units of its variance (the
/// difference's and the profile's: 1 + 1/`sessions` times a difference's), one df each.
pub fn sum_spread_profiled(s: &[f64], steps: &[f64], sessions: f64) -> (f64, f64) {
    let inflate = 1.0 + 1.0 / sessions.max(1.0);
    let ss = s
        .windows(2)
        .enumerate()
        .map(|(j, x)| match steps.get(j).filter(|p| **p != 0.0) {
            Some(p) => (x[1] - x[0] - p).powi(2) / (2.0 * inflate),
            None => (x[1] - x[0]).powi(2) / 2.0,
        })
        .sum();
    (ss, s.len().saturating_sub(1) as f64)
}
