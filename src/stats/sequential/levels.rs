//! Every level that decides keep or revert beyond `[decision]`'s own (alpha, pairs, futility):
//! the constants docs/decisions.md's table of levels names, with the probe that chose each.

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
/// (the 40% bound; 0.65 before the rescue, whose power a futility stop forgoes).
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
/// mean and by this trimmed mean (0: by the mean alone). On a machine whose runs are now and
/// then slow, one slow pair was enough to revert a real gain at 4-6 pairs.
pub const FUTILITY_TRIM: usize = 1;
/// The confirmation's futility level (its 70% upper bound below the minimum effect).
pub const CONFIRM_BETA: f64 = 0.3;
/// Huber-type clipping of the log-ratios the borrowed look reads, in robust sds (0: off). A probe
/// knob (`jump_probe huber=K`): at 1.5-2.5 it kept more +3% gains on a bimodal machine but let
/// more do-nothing changes through under noise jumps (docs/decisions.md, "A rank-robust look").
pub const HUBER_K: f64 = 0.0;
/// The first successive differences of a session's first batch's log-sums that are its
/// warm-up: the history records them apart (`history::Entry::warmup`) and leaves them out of its
/// sum spread, and the guard reads the experiment's first phase's around their mean. A session
/// starts cold (clocks, caches, a JIT), so its first pairs run slower than the next; read as
/// noise, that step fired the guard on every experiment of a warming machine, and in a
/// calibration's sum spread it made the history under-read a later noise jump (docs/decisions.md,
/// "A warm-up the history has seen"; `jump_probe warmup=N`).
pub const WARMUP_STEPS: usize = 1;
/// How many of their standard errors from zero the history's mean warm-up step must be for the
/// guard to read around it (below, the step is read as it is): a quiet machine's chance step
/// is not subtracted (`jump_probe warmup_z=Z`).
pub const WARMUP_Z: f64 = 2.0;
/// Pairs before the first phase's first look on a borrowed scale where the history shows a second
/// population of runs (`Borrowed::second_population`: a gross outlier, or not one mode). Such a
/// machine has a slow mode or spikes, and the calibration that saw the fewest of them lends the
/// smallest sd: on the CV 0.5% two-mode machine
/// (30% of runs 4% slower) its lowest 0.4% lend 0.11x-0.15x the truth, and two pairs both in the
/// slow mode's pattern (+4% each, 21% a pair) read as a clean gain at 30 of those sds, passed
/// by the confirmation's two pairs as often: 240 of its 335 false keeps in 100000 (0.335%).
/// At 4 pairs that is 0.21^4 = 0.2% a phase, and one pair of 4 may be set aside: 0.098%
/// [0.080, 0.119]. It costs `cv 1% + spikes` +10% 2.6 runs (11.4 -> 14.0) and moves its +3%
/// 84.8% -> 85.4%; 3 pairs left 0.121% (`lab/examples/keeps_probe.rs`, `ratchet-lab simulate
/// --null-trials 100000`; docs/decisions.md, "A streak of a second population"). Rules recorded
/// before `Params::outlier_first_look_later` waited that long ([`OUTLIER_FIRST_LOOK_BEFORE`]),
/// never past `min_pairs`, as a history whose sessions showed one mode, or were too short to
/// tell, still does (`Borrowed::waits_longer`). Now 6, past `min_pairs` too, where a session
/// showed two modes: with the slow mode at cv 1% (30% of runs 5% slower) the unlucky user's pairs
/// in it read as a gain on the pairs' own scale as well, and 4 pairs kept 0.114% [0.100, 0.130],
/// 5 pairs 0.095%, 6 pairs 0.067%-0.073%; the class's other shapes (`keeps_probe slow_p= slow=`)
/// at most 0.098% at 6, 0.113% at 5. Waiting also where the history saw gross outliers alone cost
/// `cv 1% + spikes` +10% 14.3 -> 17.4 runs for no bound it needed (docs/decisions.md, "Two-mode
/// machines of every shape").
pub const OUTLIER_FIRST_LOOK: usize = 6;
/// [`OUTLIER_FIRST_LOOK`] in rules recorded before `Params::outlier_first_look_later`.
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
/// normal with this sd (a gain of e^0.5 = 1.65x one sd out), weighed against [`MIXTURE`]'s gains as
/// `LR_WIDE_WEIGHT` to `1 - LR_WIDE_WEIGHT`. Without it a gain far above the grid's largest
/// (6 x 3%) fitted no gain's free sd better than any of the grid's means: a 2x speed-up at CV 1%
/// ran to its budget with p = 1 (inconclusive); it now keeps at 3 pairs (`floor_probe test=lr`:
/// +3% at CV 1% 13.9 runs, 13.8 without; the worst do-nothing cell 0.066%, 0.072% without).
pub const LR_WIDE_SD: f64 = 0.5;
pub const LR_WIDE_WEIGHT: f64 = 0.05;
/// The gain it is powered for, in percent (the larger of this and the minimum effect).
pub const LR_POWERED_FOR_PCT: f64 = 3.0;
/// On a quiet machine, at most this many calibrated sds of one pair (never under the minimum
/// effect): a +3% grid on an H200's 0.3% pairs read a +1.25% gain as worse than no gain and left
/// it to the wide component (80.5% kept in 13.0 runs at CV 0.23%; 100% in 9.3 now; CV 0.5%
/// +1.5% 61.6% -> 84.3%). 3 sds leaves CV 1% as it was (+3% in 13.9 runs); 2 and 2.5 cost it
/// 0.5 and 0.1 runs (the probe in docs/decisions.md, "A grid for quiet machines").
pub const LR_POWERED_FOR_SDS: f64 = 3.0;
/// Its keep level, ln(gain's likelihood / no gain's best), where the history shows runs in two
/// modes or cannot tell (else `LR_KEEP_AT_ONE_MODE`), from `LR_KEEP_FROM_TWO_MODES` used pairs:
/// below Ville's ln 1000 = 6.91, which holds only for normal runs; the worst machine is one of
/// two modes, whose streaks of pairs in one mode's pattern look like a gain to a normal
/// likelihood. Read off the user of the two-mode machines whose full history (60 df) came out in
/// its lowest 0.4% (`floor_probe test=lr only=60-df null=200000 seed=7`, from the 5th pair):
/// 6.0 kept 0.099% (50/50) and 0.101% (CV 0.5% two modes) of do-nothing changes, 6.5 0.082%
/// and 0.081%; the CV 0.5% two-mode machine's +3% then 85.50% -> 84.58% kept in 29.7 -> 31.4
/// runs, 10% of runs 5% slower 27.9 -> 29.0 runs (`only=bimodal trials=4000`). Histories of one
/// mode do not read it.
pub const LR_KEEP_AT: f64 = 6.5;
/// The same level in rules recorded before `LR_KEEP_FROM_TWO_MODES` (`Params::
/// likelihood_ratio_streak` false), from the second pair: read off the CV 0.5% bimodal machine's
/// typical calibration (`floor_probe test=lr only=bimodal null=300000 seed=99`: 5.75 kept 0.106%
/// [0.095, 0.119], 6.0 0.088% [0.078, 0.100], 6.2 0.071%); +3% at CV 1% then took 13.4, 13.8 and
/// 14.2 runs (`trials=20000 seed=7`).
pub const LR_KEEP_AT_BEFORE_STREAK: f64 = 6.0;
/// Its keep level where the history's runs show one mode (`stats::modes`: every pooled session
/// of at least `MODES_MIN_PAIRS` pairs below `MODES_AT`) on `ONE_MODE_TOLD_PAIRS`: the two-mode machine that sets
/// `LR_KEEP_AT` is then routed away, and the next worst do-nothing cells are a noise jump since
/// the calibration (2x: 0.080% [0.070, 0.090] of 300000 at 5.7, 0.089% at 5.6; `floor_probe
/// test=lr keep_at= null=300000 seed=7`), which no history can show. +3% at CV 1% takes 13.3
/// runs at 5.7 (13.2 at 5.6, 13.0 at 5.5; `trials=20000 seed=7`), within 10% of the 12.2-run floor.
pub const LR_KEEP_AT_ONE_MODE: f64 = 5.7;
/// Where the history does not show its runs in one mode, no keep on fewer used pairs than this.
/// On a machine of two modes a pair whose incumbent ran slow and candidate fast has a chance of
/// p (1 - p) <= 1/4, and a streak of them is, pair for pair, a clean gain of the modes' distance
/// to a normal likelihood: four in a row come up to 1/4^4 = 0.4% of the time, five at most
/// 0.098%. The user whose calibration came out in the lowest 0.4% on the CV 0.5% two-mode
/// machine (30% of runs 4% slower; the ratio alone, `floor_probe test=lr`, 200000 trials) kept
/// 0.209% with a 16-pair calibration and 0.221%-0.293% with 30-60 df; from 5 pairs 0.045% and
/// 0.052%-0.095%, while that machine's +3% stays 85.5% kept in 29.7 runs (29.6) and +10% takes
/// 11.2 runs (10.8). A one-mode history keeps from the second pair as before: the normal
/// machine's +10% would take 10.1 runs instead of 7.3 (docs/decisions.md, "A streak of a
/// second population").
pub const LR_KEEP_FROM_TWO_MODES: usize = 5;
/// ... and from this many where a pooled session of the history showed two modes
/// (`Borrowed::waits_longer`, `Params::likelihood_ratio_streak_shown`): where the modes lie far
/// apart for the noise within them (CV 0.5%, 40-50% of runs 3.5-5% slower) a normal likelihood
/// reads a near-streak of mixed pairs as a clean gain, and the unlucky user (lowest 0.4% of
/// calibrations) kept 0.10-0.12% from the 6th pair on at 5, 6 and 7 (0.087-0.110% at 7, 61-pair
/// calibration); at 8 at most 0.094%. +3% keeps as often; +10% on two-mode machines costs 0.5-4
/// runs (`keeps_probe slow_p= slow= cv=0.005 history=16|61`, `simulate --only bimodal`;
/// docs/decisions.md, "A streak of two modes at CV 0.5%").
pub const LR_KEEP_FROM_TWO_MODES_SHOWN: usize = 8;
/// A session shows two modes when the two-mode mixture fits its runs this many nats better than
/// one normal (`stats::modes::two_modes_llr`): about 1% of sessions of one normal mode exceed it
/// at 8 to 30 pairs, and every 16-pair calibration of the CV 0.5% bimodal machine (numpy, 2000
/// and 400 sessions; the unit tests of `stats::modes`).
pub const MODES_AT: f64 = 5.0;
/// The ratio keeps at `LR_KEEP_AT_ONE_MODE` only where the sessions that showed one mode hold at
/// least this many pairs; on fewer it keeps at `LR_KEEP_AT` and, before `LR_EARLY_UNTIL` used
/// pairs, only at a mean of `LR_EARLY_SDS` calibrated sds. A calibration that came out low
/// on a machine whose modes lie within its noise (half the runs 3% slower at CV 1%) is the one
/// that hides them: of the lowest 0.4% of such calibrations 84% show one mode at 16 pairs, 78%
/// at 32, 63% at 48, 35% at 61, and `auto` kept 0.219%, 0.155%, 0.108% and 0.082% of that
/// user's do-nothing changes (`keeps_probe history=N`, 100000 trials); with this rule 0.099%
/// at 16 pairs. The cost: +3% at CV 1% 13.4 -> 15.4 runs after a 16-pair calibration, 13.1 once
/// 60 pairs show one mode (`ratchet-lab simulate --defaults`; docs/decisions.md, "The calibration's
/// own uncertainty").
pub const ONE_MODE_TOLD_PAIRS: usize = 60;
/// Unless one mode is shown on `ONE_MODE_TOLD_PAIRS` pairs (fewer, or two modes, or none told), a
/// keep before `LR_EARLY_UNTIL` used pairs needs a mean of at least this many calibrated sds of one pair: a
/// mode the screen cannot see lies within about that distance, and a streak of its pattern reads
/// as a gain of the modes' distance (docs/decisions.md, "The calibration's own uncertainty").
/// Until the 5th used pair, that user (above) kept 0.122%, until the 6th 0.098%, and +3% at CV
/// 1% took 14.8 and 15.3 runs (the ratio alone, `floor_probe test=lr trials=20000 seed=7`).
pub const LR_EARLY_SDS: f64 = 4.0;
/// Used pairs from which [`LR_EARLY_SDS`] no longer applies.
pub const LR_EARLY_UNTIL: usize = 6;
/// Fewer pairs than this in a session tell one mode from two too seldom to check.
pub const MODES_MIN_PAIRS: usize = 8;
/// Its futility level: a gain at most e^-2 as likely as no gain, both weighed over the scales
/// (e^-1.6: +3% at CV 1% kept 96.6%, the bimodal machine's 84.3%; e^-2.3: 97.8%, 13.7 runs).
pub const LR_FUTILE_AT: f64 = -2.0;
/// The df the calibrated sd counts for in the gain side's sd of the log-ratios and of the
/// log-sums, pooled with the pairs before each one (`floor_probe ratio_df= sum_df=`: with the
/// calibrated sd as it is, a warm-up ramp's +3% kept 0.6%).
pub const LR_RATIO_DF: f64 = 8.0;
pub const LR_SUM_DF: f64 = 4.0;
/// Pairs it sets aside at the start where the history shows a warm-up (`WARMUP_Z`).
pub const LR_SKIP: usize = 1;
/// The gain side's scales, as multiples of the calibrated sd (each pooled with the pairs), with
/// their prior weights: a noise jump since the calibration costs ln 10 once instead of a
/// too-narrow likelihood at every pair (`floor_probe scales=`: the calibrated sd alone kept +3%
/// at a 2x jump 31.9%, with these 73.8%; at 3x +10% 66.9% and 99.9%; +3% at CV 1% 13.4 runs and
/// 13.5 at the same levels).
pub const LR_SCALES: [(f64, f64); 3] = [(1.0, 0.8), (1.7, 0.1), (3.0, 0.1)];
