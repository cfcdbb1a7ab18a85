//! Every level that decides keep or revert beyond `[decision]`'s own (alpha, pairs, futility):
//! the constants docs/decisions.md's table of levels names, each with its reason. The probes that
//! chose them, and their figures, are the lab's (lab/notes/decisions-history.md).

use serde::{Deserialize, Serialize};

/// The borrowed sd's safety factor: the history's sd is multiplied by this before use, so noise
/// a little above history stays covered by the bound.
pub const SAFETY: f64 = 1.25;
/// The variance guard's one-sided F level in the first phase: above it the pairs' own t-test
/// decides the look.
pub const GUARD: f64 = 0.15;
/// The guard's F level in the confirmation (pooled with the first phase's spread).
pub const CONFIRM_GUARD: f64 = 0.15;
/// The re-read's F level: a confirmation this much noisier than history re-reads the first
/// phase's deciding look on its scale.
pub const RETEST_GUARD: f64 = 0.05;
/// Pairs the confirmation measures beyond `confirm_pairs` with a borrowed scale.
pub const CONFIRM_EXTRA: usize = 1;
/// A gross outlier's distance from the batch's median, in sds (the history's, or the batch's
/// robust sd when larger).
pub const OUTLIER_K: f64 = 6.0;
/// At most one pair in this many of a batch is set aside as a gross outlier (more is the noise).
pub const OUTLIER_SHARE: usize = 4;
/// Pairs from which the outlier band may widen to the batch's own robust sd (a median absolute
/// deviation needs three values to say anything about two).
pub const ROBUST_BAND_PAIRS: usize = 3;
/// With a borrowed scale: futility when the (1 - this) upper bound is below the minimum effect
/// (the 40% bound: a precise scale can stop sooner).
pub const FUTILITY_BETA: f64 = 0.6;
/// The same before `min_pairs` (the 65% bound: a warm-up ramp biases the first pairs against
/// the candidate).
pub const EARLY_BETA: f64 = 0.35;
/// The share of its alpha increment the first phase's first look spends on a borrowed scale.
pub const FIRST_SHARE: f64 = 0.2;
/// Pairs before a batch's first look on a borrowed scale (the scale need not come from them).
pub const FIRST_LOOK: usize = 2;
/// The least number of pairs dropped from each end of a look's kept pairs for the futility
/// stop's second reading: a first-phase look stops for futility only when the bound is below the
/// minimum effect by the mean and by the trimmed mean, so one slow pair does not revert a gain.
pub const FUTILITY_TRIM: usize = 1;
/// The share of a look's kept pairs dropped from each end for that reading (at least
/// [`FUTILITY_TRIM`]): the middle half's mean. On a machine where one run in seven is slow a
/// quarter of the pairs hold one slow run, and a mean without them is the gain's.
pub const FUTILITY_TRIM_SHARE: f64 = 0.25;
/// The rescue's gross-outlier band, in the pairs' own robust sds (1.4826 MAD) from their median:
/// a normal pair lies that far once in 16,000; a pair with one run in a 15% slower mode, at CV
/// 1%, ten sds out.
pub const RESCUE_OUTLIER_K: f64 = 4.0;
/// The confirmation's futility level (its 70% upper bound below the minimum effect).
pub const CONFIRM_BETA: f64 = 0.3;
/// The first successive differences of a session's first batch's log-sums that are its
/// warm-up: the history records them apart (`history::Entry::warmup`) and leaves them out of its
/// sum spread, and the guard reads the experiment's first phase's around their mean. A session
/// starts cold (clocks, caches, a JIT): read as noise, that step would fire the guard on every
/// experiment of a warming machine and make a calibration under-read a later noise jump.
pub const WARMUP_STEPS: usize = 1;
/// How many of their standard errors from zero the history's mean warm-up step must be for the
/// guard to read around it (below, the step is read as it is): a quiet machine's chance step
/// is not subtracted.
pub const WARMUP_Z: f64 = 2.0;
/// Pairs before the first phase's first look on a borrowed scale where a session of the history
/// showed two modes (`Borrowed::waits_longer`), past `min_pairs` too. A machine with a slow mode
/// lends its smallest sd from the calibration that saw the fewest slow runs, and a few pairs in
/// the slow mode's pattern then read as a clean gain; waiting holds such a streak under the
/// bound. Where the history saw gross outliers alone, or its sessions were too short to tell, the
/// first look waits [`OUTLIER_FIRST_LOOK_BEFORE`] pairs, never past `min_pairs`.
pub const OUTLIER_FIRST_LOOK: usize = 6;
/// The first look where the history shows a second population of runs but not two modes
/// (`Borrowed::second_population`).
pub const OUTLIER_FIRST_LOOK_BEFORE: usize = 4;
/// The fewest pairs any look reads: one pair has no spread and no sum difference.
pub const MIN_LOOK: usize = 2;
/// A spread this small relative to the mean is none (a deterministic benchmark's identical
/// log-ratios): the sign decides.
pub const NO_SPREAD: f64 = 1e-12;

/// The one-phase likelihood-ratio test's gains (`likelihood::WholePairLr`), as multiples of the
/// one it is powered for, with their prior weights: most on the minimum, the rest spread so
/// that a large gain is not read as noise.
pub const MIXTURE: [(f64, f64); 4] = [(1.0, 0.7), (2.0, 0.1), (3.0, 0.1), (6.0, 0.1)];
/// The gain side's wide component: a prior over the mean log-ratio, the half above no gain of a
/// normal with this sd, weighed against [`MIXTURE`]'s gains as `LR_WIDE_WEIGHT` to
/// `1 - LR_WIDE_WEIGHT`. Without it a gain far above the grid's largest (6 x 3%) fits no gain's
/// free sd better than any of the grid's means, and a 2x speed-up would run to its budget.
pub const LR_WIDE_SD: f64 = 0.5;
pub const LR_WIDE_WEIGHT: f64 = 0.05;
/// The gain it is powered for, in percent (the larger of this and the minimum effect).
pub const LR_POWERED_FOR_PCT: f64 = 3.0;
/// On a quiet machine, at most this many calibrated sds of one pair (never under the minimum
/// effect): a +3% grid on a machine with 0.3% pairs reads a +1.25% gain as worse than no gain.
pub const LR_POWERED_FOR_SDS: f64 = 3.0;
/// Its keep level, ln(gain's likelihood / no gain's best), where the history shows runs in two
/// modes or cannot tell (else `LR_KEEP_AT_ONE_MODE`), from `LR_KEEP_FROM_TWO_MODES` used pairs.
/// Below Ville's ln 1000 = 6.91, which holds only for normal runs: the worst machine is one of
/// two modes, whose streaks of pairs in one mode's pattern look like a gain to a normal
/// likelihood, and this level holds its do-nothing changes under 0.1% in simulation.
pub const LR_KEEP_AT: f64 = 6.5;
/// The same level in rules recorded before `LR_KEEP_FROM_TWO_MODES` as switches
/// ([`Levels::from_switches`]), from the second pair.
pub const LR_KEEP_AT_BEFORE_STREAK: f64 = 6.0;
/// Its keep level where the history's runs show one mode (`stats::modes`: every pooled session
/// of at least `MODES_MIN_PAIRS` pairs below `MODES_AT`) on `ONE_MODE_TOLD_PAIRS`: the two-mode
/// machine that sets `LR_KEEP_AT` is then ruled out, and the worst case left is a noise jump
/// since the calibration, which no history can show.
pub const LR_KEEP_AT_ONE_MODE: f64 = 5.7;
/// Where the history does not show its runs in one mode, no keep on fewer used pairs than this.
/// On a machine of two modes a pair whose incumbent ran slow and candidate fast has a chance of
/// p (1 - p) <= 1/4, and a streak of them is, pair for pair, a clean gain of the modes' distance
/// to a normal likelihood: five in a row come up at most 1/4^5 = 0.098% of the time.
pub const LR_KEEP_FROM_TWO_MODES: usize = 5;
/// ... and from this many where a pooled session of the history showed two modes
/// (`Borrowed::waits_longer`): where the modes lie far
/// apart for the noise within them, a near-streak of mixed pairs also reads as a clean gain.
pub const LR_KEEP_FROM_TWO_MODES_SHOWN: usize = 8;
/// A session shows two modes when the two-mode mixture fits its runs this many nats better than
/// one normal (`stats::modes::two_modes_llr`): about 1% of one-mode sessions exceed it at 8 to 30
/// pairs (the unit tests of `stats::modes`).
pub const MODES_AT: f64 = 5.0;
/// The ratio keeps at `LR_KEEP_AT_ONE_MODE` only where the sessions that showed one mode hold at
/// least this many pairs; on fewer it keeps at `LR_KEEP_AT` and, before `LR_EARLY_UNTIL` used
/// pairs, only at a mean of `LR_EARLY_SDS` calibrated sds: a short calibration that came out low
/// can hide modes that lie within its noise.
pub const ONE_MODE_TOLD_PAIRS: usize = 60;
/// Unless one mode is shown on `ONE_MODE_TOLD_PAIRS` pairs (fewer, or two modes, or none told), a
/// keep before `LR_EARLY_UNTIL` used pairs needs a mean of at least this many calibrated sds of
/// one pair: a mode the screen cannot see lies within about that distance, and a streak of its
/// pattern reads as a gain of the modes' distance.
pub const LR_EARLY_SDS: f64 = 4.0;
/// Used pairs from which [`LR_EARLY_SDS`] no longer applies.
pub const LR_EARLY_UNTIL: usize = 6;
/// Fewer pairs than this in a session tell one mode from two too seldom to check.
pub const MODES_MIN_PAIRS: usize = 8;
/// Its futility level: a gain at most e^-2 as likely as no gain, both weighed over the scales.
pub const LR_FUTILE_AT: f64 = -2.0;
/// The df the calibrated sd counts for in the gain side's sd of the log-ratios and of the
/// log-sums, pooled with the pairs before each one: taken as exact, the calibrated sd made a
/// warm-up ramp's gain look like no gain.
pub const LR_RATIO_DF: f64 = 8.0;
pub const LR_SUM_DF: f64 = 4.0;
/// Pairs it sets aside at the start where the history shows a warm-up (`WARMUP_Z`).
pub const LR_SKIP: usize = 1;
/// The gain side's scales, as multiples of the calibrated sd (each pooled with the pairs), with
/// their prior weights: a noise jump since the calibration costs ln 10 once instead of a
/// too-narrow likelihood at every pair.
pub const LR_SCALES: [(f64, f64); 3] = [(1.0, 0.8), (1.7, 0.1), (3.0, 0.1)];
/// The gain side's correlations of a pair's log-ratio with its log-sum (the sides' variance
/// difference over their sum: 0 for equal sides, -0.6 for a candidate twice as noisy), with
/// their prior weights; none beyond [`LR_NULL_RHO_MAX`], so that a correlation alone, which no
/// gain fits as well, is never evidence of a gain.
pub const LR_RHOS: [(f64, f64); 5] = [(0.0, 0.6), (-0.3, 0.1), (0.3, 0.1), (-0.6, 0.1), (0.6, 0.1)];
/// The largest correlation of a pair's log-ratio with its log-sum that no gain's best fit may
/// take: (k^2 - 1) / (k^2 + 1) for sides k times apart in noise, 0.6 for k = 2.
pub const LR_NULL_RHO_MAX: f64 = 0.6;
/// The gain side's correlations of the rules recorded before them: none.
pub const LR_RHOS_NONE: [(f64, f64); 5] = [(0.0, 1.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0)];

/// The levels of the likelihood ratio and of the first look that a rule records with each
/// decision, as numbers: a decision replays by the levels it was made with, read from its
/// record, and no code asks which version wrote it. Rules recorded before the numbers were
/// written named their levels by switches; [`Levels::from_switches`] reads those (the one place
/// that knows what each switch meant).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Levels {
    /// The wide component's weight beside the grid's gains (0: none).
    pub ratio_wide: f64,
    /// The grid is powered for at most this many calibrated sds of one pair, never under the
    /// minimum effect (0: for `LR_POWERED_FOR_PCT` alone).
    pub ratio_powered_for_sds: f64,
    /// The ratio's keep level (ln LR), and the level where the history shows one mode.
    pub ratio_keep_at: f64,
    pub ratio_keep_at_one_mode: f64,
    /// No keep before this many used pairs where the history does not show one mode (0: from
    /// the second), and before this many where a session of it showed two modes (0: as many).
    pub ratio_keep_from_two_modes: usize,
    pub ratio_keep_from_two_modes_shown: usize,
    /// Unless one mode is shown on `ratio_one_mode_told_pairs` pairs, a keep before
    /// `LR_EARLY_UNTIL` used pairs needs a mean of this many calibrated sds (0: none, and one
    /// mode on any pairs keeps at the one-mode level).
    pub ratio_early_sds: f64,
    pub ratio_one_mode_told_pairs: usize,
    /// With a borrowed scale, the first phase's first look waits for this many pairs (at most
    /// `min_pairs`) where the history shows a second population of runs (0: no wait), and for
    /// this many, past `min_pairs` too, where a session showed two modes (0: as for a second
    /// population).
    pub first_look_second_population: usize,
    pub first_look_two_modes: usize,
    /// The largest correlation of a log-ratio with its log-sum no gain's fit may take (0: none,
    /// as records written before this level), and the gain side's correlations with their
    /// weights.
    pub ratio_null_rho_max: f64,
    pub ratio_rhos: [(f64, f64); LR_RHOS.len()],
    /// The rescue's t-test sets aside the pairs further than this many sds (the history's, or
    /// the pairs' robust sd when larger) from their median (0: none), and a ratio that ends at
    /// its budget goes on to the rescue too (`ratio_rescued`): a few wild pairs cost their own
    /// pairs, not the decision.
    pub rescue_outlier_k: f64,
    pub ratio_rescued: bool,
    /// The rescue's band is never narrower than this many of the history's sds times
    /// `rescue_outlier_k` (0: the pairs' robust sd alone; a slow mode the calibration took in
    /// would widen it past the slow pairs).
    pub rescue_band_floor: f64,
    /// The share of a first-phase look's kept pairs the futility stop's second reading drops from
    /// each end (at least [`FUTILITY_TRIM`]; 0: that one pair).
    pub futility_trim_share: f64,
}

impl Levels {
    /// The levels new decisions use: the constants above.
    pub const fn current() -> Levels {
        Levels {
            ratio_wide: LR_WIDE_WEIGHT,
            ratio_powered_for_sds: LR_POWERED_FOR_SDS,
            ratio_keep_at: LR_KEEP_AT,
            ratio_keep_at_one_mode: LR_KEEP_AT_ONE_MODE,
            ratio_keep_from_two_modes: LR_KEEP_FROM_TWO_MODES,
            ratio_keep_from_two_modes_shown: LR_KEEP_FROM_TWO_MODES_SHOWN,
            ratio_early_sds: LR_EARLY_SDS,
            ratio_one_mode_told_pairs: ONE_MODE_TOLD_PAIRS,
            first_look_second_population: OUTLIER_FIRST_LOOK_BEFORE,
            first_look_two_modes: OUTLIER_FIRST_LOOK,
            ratio_null_rho_max: LR_NULL_RHO_MAX,
            ratio_rhos: LR_RHOS,
            rescue_outlier_k: RESCUE_OUTLIER_K,
            ratio_rescued: true,
            rescue_band_floor: 0.0,
            futility_trim_share: FUTILITY_TRIM_SHARE,
        }
    }

    /// The current levels less those that came after the last rule recorded as switches: no
    /// correlation of log-ratios with log-sums, a rescue that reads every pair and only after
    /// the two phases.
    pub const fn before_correlations() -> Levels {
        Levels {
            ratio_null_rho_max: 0.0,
            ratio_rhos: LR_RHOS_NONE,
            rescue_outlier_k: 0.0,
            ratio_rescued: false,
            ..Levels::before_robust_rescue()
        }
    }

    /// The current levels less the rescue's band in the pairs' robust sds and the futility
    /// stop's middle half: a band of 6 sds, the history's or the pairs' robust sd when larger,
    /// and a second reading without one pair at each end.
    pub const fn before_robust_rescue() -> Levels {
        Levels { rescue_outlier_k: OUTLIER_K, rescue_band_floor: 1.0, futility_trim_share: 0.0, ..Levels::current() }
    }

    /// The levels of a rule recorded with none of the switches on: the ratio at one level from
    /// the second pair, no wide component, no first-look wait.
    pub const fn first() -> Levels {
        Levels::from_switches(Switches {
            wide: false,
            scaled: false,
            one_mode: false,
            streak: false,
            outlier_first_look: false,
            told: false,
            outlier_first_look_later: false,
            streak_shown: false,
        })
    }

    /// The levels a rule recorded as switches meant (each switch turned one rule on).
    pub const fn from_switches(s: Switches) -> Levels {
        let (keep_at, keep_from_two_modes) = if s.streak { (LR_KEEP_AT, LR_KEEP_FROM_TWO_MODES) } else { (LR_KEEP_AT_BEFORE_STREAK, 0) };
        let (early_sds, told_pairs) = if s.told { (LR_EARLY_SDS, ONE_MODE_TOLD_PAIRS) } else { (0.0, 0) };
        Levels {
            ratio_wide: if s.wide { LR_WIDE_WEIGHT } else { 0.0 },
            ratio_powered_for_sds: if s.scaled { LR_POWERED_FOR_SDS } else { 0.0 },
            ratio_keep_at: keep_at,
            ratio_keep_at_one_mode: if s.one_mode { LR_KEEP_AT_ONE_MODE } else { keep_at },
            ratio_keep_from_two_modes: keep_from_two_modes,
            ratio_keep_from_two_modes_shown: if s.streak && s.streak_shown { LR_KEEP_FROM_TWO_MODES_SHOWN } else { 0 },
            ratio_early_sds: early_sds,
            ratio_one_mode_told_pairs: told_pairs,
            first_look_second_population: if s.outlier_first_look { OUTLIER_FIRST_LOOK_BEFORE } else { 0 },
            first_look_two_modes: if s.outlier_first_look && s.outlier_first_look_later { OUTLIER_FIRST_LOOK } else { 0 },
            ratio_null_rho_max: 0.0,
            ratio_rhos: LR_RHOS_NONE,
            rescue_outlier_k: 0.0,
            ratio_rescued: false,
            rescue_band_floor: 1.0,
            futility_trim_share: 0.0,
        }
    }
}

/// The switches rules recorded before their levels were written as numbers (absent: off).
#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub struct Switches {
    #[serde(default, rename = "likelihood_ratio_wide")]
    pub wide: bool,
    #[serde(default, rename = "likelihood_ratio_scaled")]
    pub scaled: bool,
    #[serde(default, rename = "likelihood_ratio_one_mode")]
    pub one_mode: bool,
    #[serde(default, rename = "likelihood_ratio_streak")]
    pub streak: bool,
    #[serde(default)]
    pub outlier_first_look: bool,
    #[serde(default, rename = "likelihood_ratio_told")]
    pub told: bool,
    #[serde(default)]
    pub outlier_first_look_later: bool,
    #[serde(default, rename = "likelihood_ratio_streak_shown")]
    pub streak_shown: bool,
}

impl Switches {
    /// Every switch on: what the last rule recorded as switches wrote.
    pub const ALL: Switches = Switches {
        wide: true,
        scaled: true,
        one_mode: true,
        streak: true,
        outlier_first_look: true,
        told: true,
        outlier_first_look_later: true,
        streak_shown: true,
    };
}

/// A record's levels: the numbers where it wrote them, else what its switches meant.
#[derive(Deserialize)]
struct Recorded {
    ratio_wide: Option<f64>,
    ratio_powered_for_sds: Option<f64>,
    ratio_keep_at: Option<f64>,
    ratio_keep_at_one_mode: Option<f64>,
    ratio_keep_from_two_modes: Option<usize>,
    ratio_keep_from_two_modes_shown: Option<usize>,
    ratio_early_sds: Option<f64>,
    ratio_one_mode_told_pairs: Option<usize>,
    first_look_second_population: Option<usize>,
    first_look_two_modes: Option<usize>,
    ratio_null_rho_max: Option<f64>,
    ratio_rhos: Option<[(f64, f64); LR_RHOS.len()]>,
    rescue_outlier_k: Option<f64>,
    ratio_rescued: Option<bool>,
    rescue_band_floor: Option<f64>,
    futility_trim_share: Option<f64>,
    #[serde(flatten)]
    switches: Switches,
}

impl<'de> Deserialize<'de> for Levels {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Levels, D::Error> {
        let r = Recorded::deserialize(d)?;
        let numbers = (
            r.ratio_wide,
            r.ratio_powered_for_sds,
            r.ratio_keep_at,
            r.ratio_keep_at_one_mode,
            r.ratio_keep_from_two_modes,
            r.ratio_keep_from_two_modes_shown,
            r.ratio_early_sds,
            r.ratio_one_mode_told_pairs,
            r.first_look_second_population,
            r.first_look_two_modes,
        );
        // The correlations, the rescue's outliers and the futility's middle half came after the
        // other numbers: absent, as the rule was before them.
        let later = |l: Levels| Levels {
            ratio_null_rho_max: r.ratio_null_rho_max.unwrap_or(0.0),
            ratio_rhos: r.ratio_rhos.unwrap_or(LR_RHOS_NONE),
            rescue_outlier_k: r.rescue_outlier_k.unwrap_or(0.0),
            ratio_rescued: r.ratio_rescued.unwrap_or(false),
            rescue_band_floor: r.rescue_band_floor.unwrap_or(1.0),
            futility_trim_share: r.futility_trim_share.unwrap_or(0.0),
            ..l
        };
        match numbers {
            (None, None, None, None, None, None, None, None, None, None) => Ok(later(Levels::from_switches(r.switches))),
            (Some(a), Some(b), Some(c), Some(e), Some(f), Some(g), Some(h), Some(i), Some(j), Some(k)) => Ok(later(Levels {
                ratio_wide: a,
                ratio_powered_for_sds: b,
                ratio_keep_at: c,
                ratio_keep_at_one_mode: e,
                ratio_keep_from_two_modes: f,
                ratio_keep_from_two_modes_shown: g,
                ratio_early_sds: h,
                ratio_one_mode_told_pairs: i,
                first_look_second_population: j,
                first_look_two_modes: k,
                ratio_null_rho_max: 0.0,
                ratio_rhos: LR_RHOS_NONE,
                rescue_outlier_k: 0.0,
                ratio_rescued: false,
                rescue_band_floor: 1.0,
                futility_trim_share: 0.0,
            })),
            _ => Err(serde::de::Error::custom("a rule's levels are recorded in part: every ratio_* and first_look_* level or none")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_with_numbers_reads_back_its_numbers() {
        let odd = Levels {
            ratio_keep_at: 6.91,
            ratio_keep_from_two_modes: 7,
            first_look_two_modes: 0,
            ratio_null_rho_max: 0.8,
            ratio_rhos: [(0.0, 0.5), (0.3, 0.5), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0)],
            rescue_outlier_k: 4.5,
            ratio_rescued: false,
            rescue_band_floor: 0.5,
            futility_trim_share: 0.1,
            ..Levels::current()
        };
        for levels in [Levels::current(), Levels::first(), odd] {
            let json = serde_json::to_string(&levels).unwrap();
            assert!(!json.contains("likelihood_ratio_"), "no switch is written: {json}");
            assert_eq!(serde_json::from_str::<Levels>(&json).unwrap(), levels);
        }
    }

    #[test]
    fn a_record_with_switches_reads_as_what_they_meant() {
        let none: Levels = serde_json::from_str("{}").unwrap();
        assert_eq!(none, Levels::first());
        let all: Levels = serde_json::from_str(
            r#"{"likelihood_ratio_wide":true,"likelihood_ratio_scaled":true,"likelihood_ratio_one_mode":true,
                "likelihood_ratio_streak":true,"outlier_first_look":true,"likelihood_ratio_told":true,
                "outlier_first_look_later":true,"likelihood_ratio_streak_shown":true}"#,
        )
        .unwrap();
        assert_eq!(all, Levels::before_correlations());
        // One switch on its own: before the streak rule the ratio kept at its older level from the
        // second pair, and the shown-modes wait needs the streak rule under it.
        let streak_shown: Levels = serde_json::from_str(r#"{"likelihood_ratio_streak_shown":true}"#).unwrap();
        assert_eq!((streak_shown.ratio_keep_at, streak_shown.ratio_keep_from_two_modes_shown), (LR_KEEP_AT_BEFORE_STREAK, 0));
        let streak: Levels = serde_json::from_str(r#"{"likelihood_ratio_streak":true}"#).unwrap();
        assert_eq!((streak.ratio_keep_at, streak.ratio_keep_from_two_modes), (LR_KEEP_AT, LR_KEEP_FROM_TWO_MODES));
        assert_eq!(streak.ratio_keep_at_one_mode, LR_KEEP_AT, "no one-mode level without its switch");
    }

    #[test]
    fn a_record_written_before_the_correlations_and_the_rescue_s_outliers_reads_without_them() {
        let mut v = serde_json::to_value(Levels { ratio_keep_at: 6.91, ..Levels::current() }).unwrap();
        for later in ["ratio_null_rho_max", "ratio_rhos", "rescue_outlier_k", "ratio_rescued", "rescue_band_floor", "futility_trim_share"] {
            v.as_object_mut().unwrap().remove(later);
        }
        let l = serde_json::from_value::<Levels>(v).unwrap();
        assert_eq!(l, Levels { ratio_keep_at: 6.91, ..Levels::before_correlations() });
        // Each of them read on its own.
        let mut v = serde_json::to_value(Levels::current()).unwrap();
        v.as_object_mut().unwrap().remove("ratio_rescued");
        assert_eq!(serde_json::from_value::<Levels>(v).unwrap(), Levels { ratio_rescued: false, ..Levels::current() });
    }

    #[test]
    fn a_record_written_before_the_robust_rescue_reads_with_its_band_and_one_pair_trimmed() {
        let mut v = serde_json::to_value(Levels { rescue_outlier_k: OUTLIER_K, ..Levels::current() }).unwrap();
        for later in ["rescue_band_floor", "futility_trim_share"] {
            v.as_object_mut().unwrap().remove(later);
        }
        assert_eq!(serde_json::from_value::<Levels>(v).unwrap(), Levels::before_robust_rescue());
        assert_ne!(Levels::before_robust_rescue(), Levels::current());
    }

    #[test]
    fn a_record_with_some_numbers_is_refused() {
        let mut v = serde_json::to_value(Levels::current()).unwrap();
        v.as_object_mut().unwrap().remove("ratio_keep_at");
        let err = serde_json::from_value::<Levels>(v).unwrap_err().to_string();
        assert!(err.contains("recorded in part"), "{err}");
    }
}
