//! Every level that decides keep or revert beyond `[decision]`'s own (alpha, pairs, futility):
//! the constants docs/decisions.md's table of levels names, each with its reason. The probes that
//! chose them, and their figures, are the lab's (lab/notes/decisions-history.md).

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
/// Pairs dropped from each end of a look's pairs for the futility stop's second reading: a
/// first-phase look stops for futility only when the bound is below the minimum effect by the
/// mean and by this trimmed mean (0: by the mean alone), so one slow pair does not revert a gain.
pub const FUTILITY_TRIM: usize = 1;
/// The confirmation's futility level (its 70% upper bound below the minimum effect).
pub const CONFIRM_BETA: f64 = 0.3;
/// Huber-type clipping of the log-ratios the borrowed look reads, in robust sds (0: off): it
/// kept more gains on a two-mode machine but let more do-nothing changes through under noise
/// jumps, so it stays off (a lab knob).
pub const HUBER_K: f64 = 0.0;
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
/// (`Borrowed::second_population`), and in rules recorded before `Params::outlier_first_look_later`.
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
/// The same level in rules recorded before `LR_KEEP_FROM_TWO_MODES` (`Params::
/// likelihood_ratio_streak` false), from the second pair.
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
/// (`Borrowed::waits_longer`, `Params::likelihood_ratio_streak_shown`): where the modes lie far
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
