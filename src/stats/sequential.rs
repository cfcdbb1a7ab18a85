//! The sequential keep/revert procedure: a group-sequential one-sided paired test on the
//! log-ratios (speed-up terms) of interleaved pairs, with alpha spent across looks, a futility
//! stop, a minimum effect, and a confirmation batch in the complementary order. Pure: the same
//! code drives real experiments (`experiment`), `ratchet simulate` and the unit tests.
//!
//! Why this method. Each look tests the pairs so far with a one-sided test at the increment of
//! an alpha-spending function (Lan & DeMets 1983, Biometrika 70(3):659-663; Pocock- or
//! O'Brien-Fleming-type). Testing each look at its own increment bounds the false-keep
//! probability across all looks by the union bound (Bonferroni): the sum of the increments,
//! `alpha`, whatever the correlation between looks or the stopping; slightly conservative and
//! exactly valid. Futility stops never raise the false-keep rate (they only revert). The keep
//! must then survive an independent batch in the complementary order, tested alone at
//! `confirm_alpha`: under no gain the two phases are independent, so a false keep has
//! probability at most `alpha * confirm_alpha` (0.02 x 0.05 = 0.001 by default).
//!
//! Without history every look is the pairs' own t-test. With a noise scale borrowed from history
//! ([`Borrowed`]) a look uses the history's sd pooled with the pairs' own residuals,
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

use super::{fmt_p, pct, Confirmation, Decision, Look, LookPhase, Verdict};
use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, FisherSnedecor, Normal, StudentsT};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// How the overall `alpha` is spread over the looks (Lan & DeMets 1983 spending functions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Spending {
    /// `alpha * ln(1 + (e - 1) t)`: spends early, for early keeps of large gains.
    #[default]
    Pocock,
    /// `2 - 2 Phi(z_{1 - alpha/2} / sqrt(t))`: keeps almost all of alpha for the last look.
    OBrienFleming,
}

impl Spending {
    /// The alpha spent by information fraction `t` (pairs so far / maximum pairs), in [0, alpha].
    pub fn spent(self, alpha: f64, t: f64) -> f64 {
        let t = t.clamp(0.0, 1.0);
        if t == 0.0 {
            return 0.0;
        }
        match self {
            Spending::Pocock => alpha * (1.0 + (std::f64::consts::E - 1.0) * t).ln(),
            Spending::OBrienFleming => {
                let n = Normal::new(0.0, 1.0).expect("standard normal");
                2.0 - 2.0 * n.cdf(n.inverse_cdf(1.0 - alpha / 2.0) / t.sqrt())
            }
        }
    }
}

/// The procedure's parameters (from `[decision]`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Params {
    /// Pairs before the first look.
    pub min_pairs: usize,
    /// Pairs at the last look: the budget.
    pub max_pairs: usize,
    /// Pairs between looks.
    pub look_every: usize,
    /// One-sided false-keep level of the first phase, across all its looks.
    pub alpha: f64,
    pub spending: Spending,
    /// The smallest gain worth keeping, in percent.
    pub min_effect_pct: f64,
    /// Stop for futility when the one-sided (1 - beta) upper bound of the gain is below the
    /// minimum effect. `None`: never stop early for futility.
    pub futility_beta: Option<f64>,
    /// Whether a keep must be confirmed by an independent batch in reversed order.
    pub confirm: bool,
    pub confirm_pairs: usize,
    pub confirm_alpha: f64,
}

impl Params {
    /// A single look at `pairs` pairs with the whole alpha: the fixed-sample t-test.
    pub fn fixed(pairs: usize, alpha: f64, min_effect_pct: f64) -> Params {
        Params {
            min_pairs: pairs,
            max_pairs: pairs,
            look_every: 1,
            alpha,
            spending: Spending::Pocock,
            min_effect_pct,
            futility_beta: None,
            confirm: false,
            confirm_pairs: 0,
            confirm_alpha: alpha,
        }
    }

    /// The pair counts at which the procedure looks: min_pairs, min_pairs + look_every, ...,
    /// and always max_pairs last.
    pub fn looks(&self) -> Vec<usize> {
        let mut v = vec![];
        let mut n = self.min_pairs.min(self.max_pairs);
        while n < self.max_pairs {
            v.push(n);
            n += self.look_every.max(1);
        }
        v.push(self.max_pairs);
        v
    }

    /// The significance level of each look: the increments of the spending function.
    pub fn look_alphas(&self) -> Vec<f64> {
        let looks = self.looks();
        let mut prev = 0.0;
        looks
            .iter()
            .map(|&n| {
                let cum = self.spending.spent(self.alpha, n as f64 / self.max_pairs as f64);
                let a = (cum - prev).max(0.0);
                prev = cum;
                a
            })
            .collect()
    }

    /// Most pairs a decision can take, confirmation included.
    pub fn max_total_pairs(&self) -> usize {
        self.max_pairs + if self.confirm { self.confirm_pairs } else { 0 }
    }
}

/// The two batches of an experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Pairs in the order BA, AB, AB, BA, ... (A = incumbent).
    Main,
    /// The confirmation batch, in the complementary order: AB, BA, BA, AB, ...
    Confirm,
}

impl Phase {
    /// As `runs.jsonl` records it.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Main => "main",
            Phase::Confirm => "confirmation",
        }
    }
}

/// Whether the incumbent runs first in pair `i` (0-based) of `phase`: BA, AB, AB, BA, BA, AB,
/// AB, BA, ... in the first phase, the complement in the confirmation. Orientations come in twos
/// after the first pair: with AB, BA, ... alternating, adjacent oriented log-ratios of a
/// serially correlated (AR(1)) machine are positively correlated, by rho (1 - rho)^2 sigma^2,
/// and the t-test's variance is too small; in twos the lag-1 covariances alternate in sign and
/// cancel. Every 2 pairs hold one AB and one BA with the incumbent in the middle (B A A B), so a
/// linear drift cancels at every even look, the first one included, and a warm-up ramp (convex,
/// decaying) counts against the candidate there, never for it: at 2 pairs of a 10% ramp over 3
/// runs, -0.7% where BA, BA gave -2.1% (a third of a +3% gain, enough for early futility).
pub fn incumbent_first(phase: Phase, i: usize) -> bool {
    (i % 4 == 1 || i % 4 == 2) == (phase == Phase::Main)
}

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
    /// written before the sum guard existed, or a parallel sweep's worker): the guard sees the
    /// log-ratios alone.
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
}

impl Borrowed {
    /// The defaults documented in docs/decisions.md (chosen with `ratchet simulate`).
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
        }
    }

    /// With the history's spread of the pairs' log-sums (see [`sum_spread`]).
    pub fn with_sums(mut self, sums: Option<NoiseScale>) -> Borrowed {
        self.sums = sums;
        self
    }
}

/// The spread of a batch's log-sums (ln incumbent + ln candidate of each pair, speed-up terms)
/// from successive differences (von Neumann 1941): half the sum of squared differences of
/// consecutive sums, with one df per difference. Differences cancel the slow session changes
/// (drift, a level the session runs at) that the pairs' sums carry and their log-ratios do not.
/// Under independent runs var(sum) = var(log-ratio), so it is n - 1 more df about the noise.
pub fn sum_spread(s: &[f64]) -> (f64, f64) {
    let ss: f64 = s.windows(2).map(|w| (w[1] - w[0]).powi(2) / 2.0).sum();
    (ss, s.len().saturating_sub(1) as f64)
}

/// Defaults of [`Borrowed`].
pub const SAFETY: f64 = 1.25;
pub const GUARD: f64 = 0.15;
pub const CONFIRM_GUARD: f64 = 0.15;
pub const RETEST_GUARD: f64 = 0.05;
pub const CONFIRM_EXTRA: usize = 1;
pub const OUTLIER_K: f64 = 6.0;
pub const FUTILITY_BETA: f64 = 0.65;
pub const EARLY_BETA: f64 = 0.35;
pub const FIRST_SHARE: f64 = 0.2;
/// Pairs before a batch's first look on a borrowed scale (the scale need not come from them).
pub const FIRST_LOOK: usize = 2;
pub const CONFIRM_BETA: f64 = 0.3;

/// Quantiles by (kind, p, df1, df2) bits.
type Memo = HashMap<(u8, u64, u64, u64), f64>;

/// What the driver does next.
// `Done` is built once per decision; boxing it would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Measure this many more pairs of `phase`, then ask again.
    Measure {
        phase: Phase,
        pairs: usize,
    },
    Done(Decision),
}

/// The procedure: give it the log-ratios measured so far (positive = candidate better, in
/// speed-up terms), one per pair, of each phase; it says what to measure next or what it
/// decided. It replays every look from the data alone, so the decision is a function of the
/// samples (and of the borrowed noise scale, if any).
#[derive(Debug, Clone)]
pub struct Sequential {
    pub params: Params,
    /// The noise scale from history; `None`: every look is the experiment's own t-test.
    pub borrowed: Option<Borrowed>,
    /// Quantiles asked for so far (shared by clones: the simulation clones one per trial).
    memo: Rc<RefCell<Memo>>,
}

/// One look's test of a batch's (kept) pairs.
#[derive(Debug, Clone)]
struct Test {
    /// Pairs tested, pairs measured (the prefix the kept ones come from), and set aside.
    n: usize,
    measured: usize,
    excluded: usize,
    mean: f64,
    se: f64,
    /// Degrees of freedom of the reference t distribution (the history's when borrowed).
    df: f64,
    borrowed: bool,
    /// With a borrowed scale: the own variance over the history's (log-ratios and sums
    /// together), its df, and the history's df (the guard's F statistic).
    ratio: Option<(f64, f64, f64)>,
}

impl Test {
    fn t(&self) -> f64 {
        if self.se > 0.0 {
            self.mean / self.se
        } else if self.mean > 1e-12 {
            f64::INFINITY
        } else {
            f64::NEG_INFINITY
        }
    }
    fn scale_name(&self) -> &'static str {
        if self.borrowed {
            "history"
        } else {
            "own"
        }
    }
}

/// What a batch's own spread carries into the next batch's tests (see [`Sequential::prior_of`]).
#[derive(Debug, Clone, Copy, Default)]
struct Prior {
    /// Residual sum of squares of the log-ratios and its df.
    ss: f64,
    df: f64,
    /// The sums' successive-difference sum of squares over the history's sum variance, and df.
    sum_q: f64,
    sum_df: f64,
}

/// One batch's pairs: log-ratios `d` and log-sums `s` (empty when not known).
#[derive(Debug, Clone, Copy)]
struct Batch<'a> {
    d: &'a [f64],
    s: &'a [f64],
}

/// What one look of the first phase concluded.
enum LookOutcome {
    Promising,
    Futile(String),
    Continue,
    Exhausted(String),
}

/// The sample mean and sd (n - 1) of `d`; sd 0 for fewer than two values.
pub(crate) fn mean_sd(d: &[f64]) -> (f64, f64) {
    let n = d.len() as f64;
    let mean = d.iter().sum::<f64>() / n;
    let var = if d.len() > 1 { d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0) } else { 0.0 };
    (mean, var.sqrt())
}

pub(crate) fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// The robust sd of `d`: 1.4826 x its median absolute deviation from the median (the sd of a
/// normal sample, which one wild value cannot move). NaN when `d` is empty.
pub(crate) fn robust_sd(d: &[f64]) -> f64 {
    let med = median(d);
    1.4826 * median(&d.iter().map(|x| (x - med).abs()).collect::<Vec<_>>())
}

/// At most one pair in this many of a batch is set aside as a gross outlier (more is the noise).
pub const OUTLIER_SHARE: usize = 4;

/// Most gross outliers set aside among `m` measured pairs: one in [`OUTLIER_SHARE`] (at least
/// one). More than that is not a rare outlier but the noise itself: then nothing is set aside.
fn allowed_outliers(m: usize) -> usize {
    (m / OUTLIER_SHARE).max(1)
}

impl Sequential {
    pub fn new(params: Params) -> Self {
        Sequential { params, borrowed: None, memo: Rc::new(RefCell::new(HashMap::new())) }
    }

    /// The procedure with a noise scale borrowed from history (see [`Borrowed`]).
    pub fn with_history(mut self, borrowed: Option<Borrowed>) -> Self {
        self.borrowed = borrowed;
        self
    }

    /// Quantile `p` of Student's t with `df` degrees of freedom (normal when infinite), memoized:
    /// the simulation asks for the same few millions of times.
    fn tq(&self, p: f64, df: f64) -> f64 {
        let key = (0u8, p.to_bits(), df.to_bits(), 0);
        if let Some(&q) = self.memo.borrow().get(&key) {
            return q;
        }
        let q = if df.is_finite() { super::t_quantile(p, df) } else { Normal::new(0.0, 1.0).expect("normal").inverse_cdf(p) };
        self.memo.borrow_mut().insert(key, q);
        q
    }

    /// Upper quantile `1 - a` of the F distribution with (d1, d2) degrees of freedom, memoized.
    fn fq(&self, a: f64, d1: f64, d2: f64) -> f64 {
        let key = (1u8, a.to_bits(), d1.to_bits(), d2.to_bits());
        if let Some(&q) = self.memo.borrow().get(&key) {
            return q;
        }
        let q = FisherSnedecor::new(d1, d2).expect("positive dfs").inverse_cdf(1.0 - a);
        self.memo.borrow_mut().insert(key, q);
        q
    }

    /// Whether a confirmation look's own spread shows the noise above the history's at the
    /// `retest_guard` F level.
    fn jumped(&self, t: &Test) -> bool {
        match (&self.borrowed, t.ratio) {
            (Some(b), Some((r, d1, d2))) if b.retest_guard > 0.0 => r > self.fq(b.retest_guard, d1, d2),
            _ => false,
        }
    }

    /// One-sided p-value of a test for "the candidate is better".
    fn p_value(&self, t: &Test) -> f64 {
        let z = t.t();
        if z.is_infinite() {
            return if z > 0.0 { 0.0 } else { 1.0 };
        }
        if t.df.is_finite() {
            1.0 - StudentsT::new(0.0, 1.0, t.df).expect("df > 0").cdf(z)
        } else {
            1.0 - Normal::new(0.0, 1.0).expect("normal").cdf(z)
        }
    }

    /// The first phase's look levels: the spending function's increments, except that with a
    /// borrowed scale the first look spends only `first_share` of its increment and the second
    /// the rest (their sum, and so the union bound, is unchanged). The first look has the fewest
    /// own df to check the borrowed scale on (2 at 2 pairs), so a noise jump the guard misses
    /// passes there most often; a large gain still passes it at the smaller level.
    fn main_alphas(&self, p: &Params) -> Vec<f64> {
        let mut alphas = p.look_alphas();
        if let Some(b) = self.borrowed.as_ref().filter(|_| alphas.len() > 1) {
            let share = b.first_share.clamp(0.0, 1.0);
            alphas[1] += alphas[0] * (1.0 - share);
            alphas[0] *= share;
        }
        alphas
    }

    /// The first phase's params as run: with a borrowed scale the first look comes after
    /// `first_look` pairs (the scale need not be estimated from the batch itself).
    fn main_params(&self) -> Params {
        match &self.borrowed {
            Some(b) if self.params.min_pairs < self.params.max_pairs => {
                Params { min_pairs: b.first_look.max(2).min(self.params.min_pairs), ..self.params.clone() }
            }
            _ => self.params.clone(),
        }
    }

    /// The confirmation's looks and their levels: one look at `confirm_pairs` with the whole
    /// `confirm_alpha`, or, with a borrowed scale, looks from `first_look` every `look_every`
    /// pairs with `confirm_alpha` spent across them (O'Brien-Fleming-type).
    fn confirm_plan(&self) -> (Vec<usize>, Vec<f64>) {
        let p = &self.params;
        match &self.borrowed {
            Some(b) if p.confirm_pairs + b.confirm_extra > b.first_look => {
                let c = Params {
                    min_pairs: b.first_look.max(2),
                    max_pairs: p.confirm_pairs + b.confirm_extra,
                    look_every: p.look_every,
                    alpha: p.confirm_alpha,
                    // Keeps most of the level for the batch's last look: a large gain still
                    // passes at the first, a moderate one is not lost to early looks.
                    spending: Spending::OBrienFleming,
                    ..p.clone()
                };
                (c.looks(), c.look_alphas())
            }
            _ => (vec![p.confirm_pairs], vec![p.confirm_alpha]),
        }
    }

    /// Most pairs one batch of `n` tested pairs may measure, replacements of outliers included.
    fn cap(&self, n: usize) -> usize {
        if self.borrowed.is_some() {
            n + allowed_outliers(n)
        } else {
            n
        }
    }

    /// Most pairs a decision can measure, confirmation and replaced outliers included.
    pub fn max_measured_pairs(&self) -> usize {
        let p = &self.params;
        let extra = self.borrowed.as_ref().map_or(0, |b| b.confirm_extra);
        self.cap(p.max_pairs) + if p.confirm { self.cap(p.confirm_pairs + extra) } else { 0 }
    }

    /// The pairs of `d` kept for a test: all of them, or with a borrowed scale those within
    /// `outlier_k` sds of the median (the history's sd, or the batch's 1.4826 MAD when larger;
    /// when at most `allowed_outliers` fall outside).
    fn kept(&self, d: &[f64]) -> Vec<f64> {
        self.kept_idx(d).into_iter().map(|i| d[i]).collect()
    }

    /// [`Sequential::kept`] as indices into `d` (in order).
    fn kept_idx(&self, d: &[f64]) -> Vec<usize> {
        let all = (0..d.len()).collect();
        let Some(b) = &self.borrowed else { return all };
        let mut band = b.outlier_k * b.scale.sd;
        if d.len() >= 3 {
            // In units of the batch's own robust sd (1.4826 MAD) when that is larger: under a noise
            // jump a band in history sds would set aside ordinary pairs of the wider noise, and the
            // spread left would understate it (the own t-test then rejects too often).
            band = band.max(b.outlier_k * robust_sd(d));
        }
        if d.len() < 3 {
            // Two pairs further apart than twice the band: one is an outlier, but which one
            // only a third pair can tell (the caller measures it).
            return if d.len() == 2 && (d[0] - d[1]).abs() > 2.0 * band { vec![] } else { all };
        }
        let med = median(d);
        let kept: Vec<usize> = (0..d.len()).filter(|&i| (d[i] - med).abs() <= band).collect();
        if d.len() - kept.len() > allowed_outliers(d.len()) {
            all
        } else {
            kept
        }
    }

    /// The own spread a batch hands to the next one (the confirmation): its kept pairs'
    /// residual sum of squares and df, and (with the history's sum spread) the guard's
    /// statistic of its sums in units of the history's variance.
    fn prior_of(&self, d: &[f64], s: &[f64]) -> Prior {
        let idx = self.kept_idx(d);
        let kept: Vec<f64> = idx.iter().map(|&i| d[i]).collect();
        let (_, sd) = mean_sd(&kept);
        let df = kept.len().saturating_sub(1) as f64;
        let mut prior = Prior { ss: sd * sd * df, df, ..Prior::default() };
        if let Some(hs) = self.borrowed.as_ref().and_then(|b| b.sums) {
            if s.len() >= d.len() {
                let v: Vec<f64> = idx.iter().map(|&i| s[i]).collect();
                let (ss, df) = sum_spread(&v);
                prior.sum_q = ss / (hs.sd * hs.sd);
                prior.sum_df = df;
            }
        }
        prior
    }

    /// The test of a look at `n` pairs of a batch `d`: `None` when more pairs must be measured.
    /// With a borrowed scale, the shortest prefix whose kept pairs number `n` (or the capped
    /// prefix) is tested with the history's sd times the safety factor, unless its own variance
    /// is significantly above the history's (the guard): then, as without history, with its own
    /// t-test.
    #[cfg(test)]
    fn test(&self, d: &[f64], n: usize, prior: (f64, f64)) -> Option<Test> {
        let prior = Prior { ss: prior.0, df: prior.1, ..Prior::default() };
        self.test_at(Batch { d, s: &[] }, n, prior, self.borrowed.as_ref().map_or(GUARD, |b| b.guard))
    }

    /// [`Sequential::test`] with the variance guard at F level `guard`. With the history's sum
    /// spread and the batch's sums, the guard tests the log-ratios' and the sums' spread
    /// together (each in units of its history's variance): twice the df at the first looks.
    fn test_at(&self, batch: Batch, n: usize, prior: Prior, guard: f64) -> Option<Test> {
        let d = batch.d;
        let cap = self.cap(n);
        let mut m = n;
        let idx = loop {
            if d.len() < m {
                return None;
            }
            let k = self.kept_idx(&d[..m]);
            if k.len() >= n || m >= cap {
                break k;
            }
            m += 1;
        };
        let kept: Vec<f64> = idx.iter().map(|&i| d[i]).collect();
        let (mean, own_sd) = mean_sd(&kept);
        let k = kept.len();
        let batch_ss = own_sd * own_sd * (k - 1) as f64;
        let batch_df = (k - 1) as f64;
        // The experiment's own spread: this batch's residuals, pooled (with a borrowed scale)
        // with `prior`, the residual sum of squares and df of the batch before it.
        let (ss, df) = if self.borrowed.is_some() { (batch_ss + prior.ss, batch_df + prior.df) } else { (batch_ss, batch_df) };
        let own_sd = if df > 0.0 { (ss / df).sqrt() } else { 0.0 };
        let own = |own_sd: f64, df: f64| Test {
            n: k,
            measured: m,
            excluded: m - k,
            mean,
            se: own_sd / (k as f64).sqrt(),
            df: df.max(1.0),
            borrowed: false,
            ratio: None,
        };
        // Identical log-ratios (a deterministic benchmark): no spread to test; the sign decides.
        let own_sd = if own_sd <= 1e-12 * mean.abs().max(1e-300) { 0.0 } else { own_sd };
        let Some(b) = &self.borrowed else { return Some(own(own_sd, df)) };
        let h = b.scale.sd;
        let sums = b.sums.filter(|_| batch.s.len() >= m && h > 0.0).map(|hs| {
            let v: Vec<f64> = idx.iter().map(|&i| batch.s[i]).collect();
            let (sss, sdf) = sum_spread(&v);
            (hs, sss / (hs.sd * hs.sd), sdf)
        });
        // The history's variance pooled with the experiment's own residuals (independent of the
        // batch mean under normal noise, so the t distribution with the summed df holds).
        let pooled = ((b.scale.df * h * h + ss) / (b.scale.df + df)).sqrt();
        // A confirmation look: `prior` holds the first phase's spread.
        let confirming = prior.df > 0.0 || prior.sum_df > 0.0;
        let Some((hs, bsum_q, bsum_df)) = sums else {
            let noisier = df >= 1.0 && own_sd * own_sd > h * h * self.fq(guard, df, b.scale.df);
            if noisier {
                // The pairs' own t-test, its scale never below the borrowed one: at fewer df, every
                // rejection of it is one of the borrowed look too. In the confirmation from its own
                // pairs alone (see below).
                let (osd, odf) = if confirming { ((batch_ss / batch_df.max(1.0)).sqrt(), batch_df) } else { (own_sd, df) };
                return Some(Test { ratio: Some((own_sd * own_sd / (h * h), df, b.scale.df)), ..own(osd.max(b.safety * pooled), odf) });
            }
            return Some(Test {
                se: b.safety * pooled / (k as f64).sqrt(),
                df: b.scale.df + df,
                borrowed: true,
                ratio: (df >= 1.0).then_some((own_sd * own_sd / (h * h), df, b.scale.df)),
                ..own(0.0, 1.0)
            });
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
            return Some(Test { ratio, ..own(sd, odf.min(pdf)) });
        }
        Some(Test { se: b.safety * pooled / (k as f64).sqrt(), df: pdf, borrowed: true, ratio, ..own(0.0, 1.0) })
    }

    /// The noise sd behind a test, as a percent of one pair's log-ratio.
    fn sd_pct(t: &Test) -> f64 {
        t.se * (t.n as f64).sqrt() * 100.0
    }

    /// What to do next, given the log-ratios of each phase (without the runs' sums: the guard
    /// sees the log-ratios alone). See [`Sequential::next_runs`].
    pub fn next(&self, main: &[f64], confirm: &[f64]) -> Next {
        self.next_runs(main, confirm, &[], &[])
    }

    /// What to do next, given each phase's log-ratios and the pairs' log-sums (ln incumbent +
    /// ln candidate, in speed-up terms: [`log_sums`]), one per pair; sums shorter than the
    /// log-ratios are not used.
    pub fn next_runs(&self, main: &[f64], confirm: &[f64], main_s: &[f64], confirm_s: &[f64]) -> Next {
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
            let outcome = self.look(&t, a_k, min_log, k + 1, last);
            let q = self.tq(1.0 - p.alpha, t.df);
            let pv = self.p_value(&t);
            let base = |verdict, reason: String| Decision {
                verdict,
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
                noise_sd_pct: Self::sd_pct(&t),
                excluded: t.excluded,
                confirmation: None,
                trail: trail.clone(),
                borrowed: self.borrowed.as_ref().map(|b| {
                    Box::new(super::BorrowedScale {
                        sd_pct: b.scale.sd * 100.0,
                        df: b.scale.df,
                        sums_sd_pct: b.sums.map(|s| s.sd * 100.0),
                        sums_df: b.sums.map(|s| s.df),
                        source: b.source.clone(),
                    })
                }),
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

    fn look(&self, t: &Test, a_k: f64, min_log: f64, look: usize, last: bool) -> LookOutcome {
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
            let upper = t.mean + self.tq(1.0 - beta, t.df) * t.se;
            if upper < min_log {
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

    /// The confirmation decides whether a promising first phase becomes a keep: the batch
    /// itself must show a gain (> 0) at `confirm_alpha` (spent over its looks when sequential).
    /// A failed confirmation is `unconfirmed`. The reported estimate pools both batches (the
    /// first phase alone overestimates after an early stop); the batch's own estimate and CI,
    /// free of that selection, are reported beside it.
    fn confirmation(&self, main: &[f64], prior: Prior, batch: Batch, mut first: Decision) -> Next {
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

/// The look record ([`Look`]): each boundary on the statistic's scale (estimate / se), as
/// [`Sequential::look`] and [`Sequential::confirmation`] apply it.
impl Sequential {
    /// The level of the futility bound at a first-phase look: early (before `min_pairs`) or
    /// borrowed-scale levels, the configured one, or at the last look a plain `alpha`; `None`
    /// where this look cannot stop for futility.
    fn futility_level(&self, t: &Test, last: bool) -> Option<f64> {
        let p = &self.params;
        let futility_beta = match &self.borrowed {
            Some(b) if p.futility_beta.is_some() && t.n < p.min_pairs => Some(b.early_beta),
            Some(b) if p.futility_beta.is_some() => Some(b.futility_beta),
            _ => p.futility_beta,
        };
        match (futility_beta, last) {
            (Some(b), _) => Some(b),
            (None, true) => Some(p.alpha),
            (None, false) => None,
        }
    }

    fn record(&self, t: &Test, phase: LookPhase, look: usize, alpha: f64, keep: f64, revert: Option<f64>) -> Look {
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
    fn look_record(&self, t: &Test, look: usize, a_k: f64, min_log: f64, beta: Option<f64>) -> Look {
        let keep = self.tq(1.0 - a_k, t.df).max(min_log / t.se);
        let revert = beta.map(|b| min_log / t.se - self.tq(1.0 - b, t.df));
        self.record(t, LookPhase::Decision, look, a_k, keep, revert)
    }

    /// A confirmation look: confirmed at t >= q(1 - a_j) (with a gain > 0); unconfirmed below it
    /// at the batch's last look, and before that (borrowed scale) when the (1 - early_beta) upper
    /// bound is also below the minimum effect.
    fn confirm_look_record(&self, t: &Test, look: usize, a_j: f64, min_log: f64, final_look: bool) -> Look {
        let keep = self.tq(1.0 - a_j, t.df);
        let futile = self.borrowed.as_ref().map(|b| min_log / t.se - self.tq(1.0 - b.confirm_beta, t.df));
        let revert = if final_look { Some(keep) } else { futile.map(|f| f.min(keep)) };
        self.record(t, LookPhase::Confirmation, look, a_j, keep, revert)
    }
}

/// Run the procedure to its decision against a source of pairs: `measure(phase, i)` returns the
/// log-ratio of pair `i` of `phase`. Used by the simulation and the tests; the experiment
/// drives [`Sequential::next`] itself because a measurement can fail.
pub fn run_to_decision(seq: &Sequential, mut measure: impl FnMut(Phase, usize) -> f64) -> Decision {
    run_pairs_to_decision(seq, |phase, i| (measure(phase, i), None))
}

/// [`run_to_decision`] with each pair's log-sum too (`None` where unknown): `measure(phase, i)`
/// returns the log-ratio and log-sum of pair `i` of `phase`.
pub fn run_pairs_to_decision(seq: &Sequential, mut measure: impl FnMut(Phase, usize) -> (f64, Option<f64>)) -> Decision {
    let (mut main, mut confirm) = ((vec![], vec![]), (vec![], vec![]));
    loop {
        match seq.next_runs(&main.0, &confirm.0, &main.1, &confirm.1) {
            Next::Done(d) => return d,
            Next::Measure { phase, pairs } => {
                let (d, s) = if phase == Phase::Main { &mut main } else { &mut confirm };
                for _ in 0..pairs {
                    let i = d.len();
                    let (x, y) = measure(phase, i);
                    d.push(x);
                    if let Some(y) = y {
                        s.push(y);
                    }
                }
            }
        }
    }
}

/// The pairs' log-sums in speed-up terms: (ln incumbent + ln candidate) / elasticity, the
/// sign making a slower session larger whatever the metric's direction (the guard uses only
/// their spread). `None` where a value is missing or not positive.
pub fn log_sums(pairs: &[(f64, f64)], direction: super::Direction, elasticity: f64) -> Vec<f64> {
    let sign = match direction {
        super::Direction::Lower => 1.0,
        super::Direction::Higher => -1.0,
    };
    pairs.iter().map(|&(a, b)| sign * (a.ln() + b.ln()) / elasticity).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> Params {
        Params {
            min_pairs: 4,
            max_pairs: 12,
            look_every: 2,
            alpha: 0.05,
            spending: Spending::Pocock,
            min_effect_pct: 1.0,
            futility_beta: Some(0.2),
            confirm: true,
            confirm_pairs: 6,
            confirm_alpha: 0.02,
        }
    }

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    /// Log-ratios of `gain` (a fraction) with a deterministic +-`wiggle` pattern.
    fn ratios(gain: f64, wiggle: f64, n: usize) -> Vec<f64> {
        let w = [1.0, -0.5, 0.3, -0.8, 0.6, -0.2, 0.9, -0.4];
        (0..n).map(|i| (1.0 + gain).ln() + wiggle * w[i % w.len()]).collect()
    }

    #[test]
    fn spending_functions_match_their_formulas() {
        // Pocock-type: 0.05 * ln(1 + (e - 1) * 0.5) = 0.05 * 0.6201145069582774 (math.log).
        assert!(close(Spending::Pocock.spent(0.05, 0.5), 0.05 * 0.6201145069582774, 1e-12));
        // O'Brien-Fleming-type at t = 0.5: 2 - 2 * scipy.stats.norm.cdf(norm.ppf(0.975) / sqrt(0.5))
        // = 0.005574596680784305.
        assert!(close(Spending::OBrienFleming.spent(0.05, 0.5), 0.005574596680784305, 1e-9));
        for s in [Spending::Pocock, Spending::OBrienFleming] {
            assert!(close(s.spent(0.05, 1.0), 0.05, 1e-9));
            assert_eq!(s.spent(0.05, 0.0), 0.0);
        }
    }

    #[test]
    fn looks_and_their_alphas_sum_to_alpha() {
        let p = params();
        assert_eq!(p.looks(), vec![4, 6, 8, 10, 12]);
        let a = p.look_alphas();
        assert!(close(a.iter().sum::<f64>(), 0.05, 1e-12));
        assert!(a.iter().all(|&x| x > 0.0));
        let p = Params { max_pairs: 11, ..params() };
        assert_eq!(p.looks(), vec![4, 6, 8, 10, 11]);
        assert_eq!(Params::fixed(5, 0.05, 1.0).looks(), vec![5]);
    }

    #[test]
    fn orders_come_in_twos_and_confirmation_is_the_complement() {
        let main: Vec<bool> = (0..8).map(|i| incumbent_first(Phase::Main, i)).collect();
        let conf: Vec<bool> = (0..8).map(|i| incumbent_first(Phase::Confirm, i)).collect();
        // BA, AB, AB, BA, ... then AB, BA, BA, AB, ...
        assert_eq!(main, [false, true, true, false, false, true, true, false]);
        assert_eq!(conf, [true, false, false, true, true, false, false, true]);
    }

    #[test]
    fn asks_for_the_first_look_then_the_next() {
        let s = Sequential::new(params());
        assert_eq!(s.next(&[], &[]), Next::Measure { phase: Phase::Main, pairs: 4 });
        // A small noisy gain: neither clear nor futile at 4 pairs.
        let d = ratios(0.01, 0.01, 4);
        assert_eq!(s.next(&d, &[]), Next::Measure { phase: Phase::Main, pairs: 2 });
    }

    #[test]
    fn big_gain_stops_early_and_is_confirmed() {
        let s = Sequential::new(params());
        let d = ratios(0.10, 0.005, 4);
        assert_eq!(s.next(&d, &[]), Next::Measure { phase: Phase::Confirm, pairs: 6 });
        let Next::Done(dec) = s.next(&d, &ratios(0.10, 0.005, 6)) else { panic!("decided") };
        assert_eq!(dec.verdict, Verdict::Keep, "{}", dec.reason);
        assert_eq!((dec.pairs, dec.looks), (4, 1));
        let c = dec.confirmation.unwrap();
        assert!(c.passed && c.pairs == 6 && c.p_value < 0.02);
        assert!(dec.ci_low_pct < dec.effect_pct && dec.effect_pct < dec.ci_high_pct);
        assert!(close(dec.effect_pct, 10.0, 0.5), "{}", dec.effect_pct);
    }

    #[test]
    fn failed_confirmation_is_unconfirmed() {
        let s = Sequential::new(params());
        let d = ratios(0.10, 0.005, 4);
        let Next::Done(dec) = s.next(&d, &ratios(0.0, 0.005, 6)) else { panic!("decided") };
        assert_eq!(dec.verdict, Verdict::Unconfirmed);
        assert!(dec.reason.contains("unconfirmed") && dec.reason.contains("--pairs"), "{}", dec.reason);
        assert!(!dec.confirmation.unwrap().passed);
    }

    #[test]
    fn no_gain_stops_for_futility() {
        let s = Sequential::new(params());
        let Next::Done(dec) = s.next(&ratios(-0.02, 0.003, 4), &[]) else { panic!("decided") };
        assert_eq!(dec.verdict, Verdict::Revert);
        assert!(dec.reason.contains("no worthwhile gain"), "{}", dec.reason);
        assert_eq!(dec.looks, 1);
    }

    #[test]
    fn budget_running_out_is_inconclusive() {
        // A gain around the minimum effect with wide noise: never clear, never futile.
        let s = Sequential::new(params());
        let d = ratios(0.012, 0.03, 12);
        let dec = run_to_decision(&s, |_, i| d[i]);
        assert_eq!(dec.verdict, Verdict::Inconclusive, "{}", dec.reason);
        assert_eq!((dec.pairs, dec.looks), (12, 5));
    }

    #[test]
    fn significant_but_small_gain_is_not_kept() {
        let s = Sequential::new(Params { futility_beta: None, confirm: false, ..params() });
        let d = ratios(0.004, 0.0005, 12);
        let dec = run_to_decision(&s, |_, i| d[i]);
        assert_ne!(dec.verdict, Verdict::Keep);
        assert!(dec.p_value < 1e-6);
    }

    #[test]
    fn fixed_params_reproduce_the_fixed_t_test() {
        let pairs: Vec<(f64, f64)> = [1.05, 1.02, 1.04, 1.03, 1.06].iter().map(|r| (100.0, 100.0 * r)).collect();
        let d: Vec<f64> = crate::stats::log_ratios(&pairs, crate::config::Direction::Higher);
        let seq = run_to_decision(&Sequential::new(Params::fixed(5, 0.05, 1.0)), |_, i| d[i]);
        // One look at 5 pairs with the whole alpha is the plain one-sided t-test.
        let (mean, _, p) = crate::stats::t_test_greater(&d);
        assert_eq!(seq.verdict, Verdict::Keep);
        assert_eq!(seq.looks, 1);
        assert!(close(seq.p_value, p, 1e-15) && close(seq.effect_pct, pct(mean), 1e-12));
    }
    fn borrowed(sd: f64) -> Sequential {
        Sequential::new(Params { alpha: 0.02, confirm_pairs: 5, confirm_alpha: 0.05, futility_beta: Some(0.3), max_pairs: 16, ..params() })
            .with_history(Some(Borrowed::new(NoiseScale { sd, df: 15.0 })))
    }

    #[test]
    fn history_decides_a_clear_gain_at_two_pairs_each() {
        let s = borrowed(0.014);
        assert_eq!(s.next(&[], &[]), Next::Measure { phase: Phase::Main, pairs: 2 });
        let d = ratios(0.10, 0.005, 2);
        assert_eq!(s.next(&d, &[]), Next::Measure { phase: Phase::Confirm, pairs: 2 });
        let Next::Done(dec) = s.next(&d, &ratios(0.10, 0.005, 2)) else { panic!("decided") };
        assert_eq!(dec.verdict, Verdict::Keep, "{}", dec.reason);
        assert_eq!((dec.pairs, dec.scale.as_str()), (2, "history"));
        // The history's sd times the safety factor, pooled with the pairs' own spread.
        assert!(dec.noise_sd_pct > 0.014 * 100.0 * 0.9 && dec.noise_sd_pct < 0.014 * 100.0 * SAFETY, "{}", dec.noise_sd_pct);
        assert!(dec.p_adjusted >= dec.p_value && dec.p_threshold < 0.02);
        let c = dec.confirmation.unwrap();
        assert!(c.ci_low_pct < c.effect_pct && c.effect_pct < c.ci_high_pct);
    }

    #[test]
    fn pairs_noisier_than_history_fall_back_to_their_own_t_test() {
        // History says 0.2%; the pairs scatter by 5%: the guard hands the look to the t-test.
        let s = borrowed(0.002);
        let d = [0.10, 0.02, 0.12, 0.01, 0.09, 0.03];
        let t = s.test(&d, 6, (0.0, 0.0)).unwrap();
        assert!(!t.borrowed);
        let quiet = [0.10, 0.101, 0.099, 0.1005, 0.0995, 0.1];
        assert!(s.test(&quiet, 6, (0.0, 0.0)).unwrap().borrowed);
    }

    #[test]
    fn a_gross_outlier_is_set_aside_and_replaced() {
        let s = borrowed(0.014);
        // Pair 2 has a run 3x slower on the incumbent's side: a +110% log-ratio.
        let d = [0.10, 0.11, 1.2, 0.09];
        let t = s.test(&d, 4, (0.0, 0.0));
        assert!(t.is_none(), "one more pair is needed to replace it");
        let d = [0.10, 0.11, 1.2, 0.09, 0.1];
        let t = s.test(&d, 4, (0.0, 0.0)).unwrap();
        assert_eq!((t.n, t.measured, t.excluded), (4, 5, 1));
        assert!((t.mean - 0.1).abs() < 1e-12);
        // Without history nothing is set aside.
        assert_eq!(Sequential::new(params()).test(&d[..4], 4, (0.0, 0.0)).unwrap().excluded, 0);
    }

    /// History: one pair's log-ratio and log-sum both have sd 1% (15 df each).
    fn with_sums(retest_guard: f64) -> Sequential {
        let scale = NoiseScale { sd: 0.01, df: 15.0 };
        let b = Borrowed { retest_guard, ..Borrowed::new(scale).with_sums(Some(scale)) };
        Sequential::new(Params { alpha: 0.02, confirm_pairs: 5, confirm_alpha: 0.05, futility_beta: Some(0.3), max_pairs: 16, ..params() })
            .with_history(Some(b))
    }

    #[test]
    fn the_sums_see_a_noise_jump_that_two_log_ratios_miss() {
        let s = with_sums(RETEST_GUARD);
        // Two pairs at +5% whose log-ratios agree (1 df: the guard cannot fire on them), but whose
        // runs moved together by 6% between the pairs: their sums' spread is 18 x the history's
        // (0.06^2 / 2 over 0.01^2, 1 df).
        let main = [0.05, 0.0501];
        let (quiet, jumpy) = ([0.0, 0.0001], [0.0, 0.06]);
        // The log-ratios alone (or quiet sums): significant on the borrowed scale, on to the
        // confirmation after 2 pairs.
        assert_eq!(s.next(&main, &[]), Next::Measure { phase: Phase::Confirm, pairs: 2 });
        assert_eq!(s.next_runs(&main, &[], &quiet, &[]), Next::Measure { phase: Phase::Confirm, pairs: 2 });
        // With the sums the guard sees the jump ((0 + 18) / 2 df = 9 > F(2, 15) at 0.15, 2.2):
        // the look falls back to the pairs' own scale (3x the history's, 2 df) and waits.
        assert_eq!(s.next_runs(&main, &[], &jumpy, &[]), Next::Measure { phase: Phase::Main, pairs: 2 });
        // A history written before the sums were recorded: the guard sees the log-ratios alone.
        let old = s.clone().with_history(s.borrowed.clone().map(|b| b.with_sums(None)));
        assert_eq!(old.next_runs(&main, &[], &jumpy, &[]), Next::Measure { phase: Phase::Confirm, pairs: 2 });
    }

    #[test]
    fn a_fallback_is_never_looser_than_the_borrowed_look() {
        // Whatever fires the guard (log-ratios or sums), every rejection of the fallback look must
        // be one of the borrowed look too: its critical mean is at least the borrowed one's.
        let s = with_sums(RETEST_GUARD);
        let mut rng = crate::stats::rng::Rng::new(3);
        let mut fired = 0;
        for _ in 0..400 {
            let n = 2 + (rng.uniform() * 8.0) as usize;
            let (jd, js) = (0.5 + 3.0 * rng.uniform(), 0.5 + 3.0 * rng.uniform());
            let d: Vec<f64> = (0..n).map(|_| 0.01 * jd * rng.normal()).collect();
            let sums: Vec<f64> = (0..n).map(|_| 0.01 * js * rng.normal()).collect();
            let prior = Prior { ss: 0.0004 * rng.uniform(), df: 1.0, sum_q: 3.0 * rng.uniform(), sum_df: 1.0 };
            for guard in [GUARD, CONFIRM_GUARD] {
                // (None: two pairs far apart, one of them an outlier a third pair must tell.)
                let Some(t) = s.test_at(Batch { d: &d, s: &sums }, n, prior, guard) else { continue };
                let b = s.test_at(Batch { d: &d, s: &sums }, n, prior, 1e-300).unwrap();
                assert!(b.borrowed);
                if t.borrowed {
                    continue;
                }
                fired += 1;
                for a in [0.05, 0.01, 0.002] {
                    assert!(s.tq(1.0 - a, t.df) * t.se >= s.tq(1.0 - a, b.df) * b.se * (1.0 - 1e-12), "{t:?} {b:?}");
                }
            }
        }
        assert!(fired > 100, "the guard fired {fired} times");
    }

    #[test]
    fn a_confirmation_that_finds_the_noise_jumped_re_reads_the_first_phase() {
        let main = [0.05, 0.0501];
        let quiet = [0.0, 0.0001];
        // The confirmation: a huge gain, but its sums scatter as if the noise were 7x the
        // history's (ratio (0.2^2 / 2 / 0.01^2) / 4 df = 50 > F(4, 15) at 0.05). Its own scale,
        // from its own pairs (1 + 1 df): sd 0.1, so t = 3 / (0.1 / sqrt 2) = 42 > q(0.9993, 2 df)
        // = 27.0.
        let (conf, conf_s) = ([3.0, 3.0], [0.0, 0.2]);
        // Without the re-read the confirmation passes on its own scale: kept on 2 + 2 pairs.
        let Next::Done(dec) = with_sums(0.0).next_runs(&main, &conf, &quiet, &conf_s) else { panic!("decided") };
        assert_eq!(dec.verdict, Verdict::Keep, "{}", dec.reason);
        // With it, the first phase's +5% at 2 pairs (its first look, at a fifth of the increment,
        // 0.00078) does not hold on that scale (q(0.99922, 2 df) x 0.1 / sqrt 2 = 1.8): the
        // confirmation measures on.
        assert_eq!(with_sums(RETEST_GUARD).next_runs(&main, &conf, &quiet, &conf_s), Next::Measure { phase: Phase::Confirm, pairs: 2 });
    }

    #[test]
    fn under_a_noise_jump_ordinary_pairs_are_not_set_aside_as_outliers() {
        // History sd 1%: the old band was 6%. Eight pairs of a noise 4x that (sd 4%), one of them
        // 1.8 sd out: an ordinary pair of this batch, but 6.7% from the median (0.005).
        let s = with_sums(RETEST_GUARD);
        let d = [0.01, -0.03, 0.04, -0.02, 0.072, -0.045, 0.0, 0.03];
        assert_eq!(s.kept_idx(&d).len(), 8, "the band follows the batch's own robust sd when larger");
        // A gross outlier (a run 3x slower: ln 3 = 1.1) still is one, at the history's noise...
        let quiet = [0.01, -0.012, 0.004, 1.1, -0.008, 0.0];
        assert_eq!(s.kept_idx(&quiet), vec![0, 1, 2, 4, 5]);
        // ...and at the jumped one.
        let mut noisy = d.to_vec();
        noisy[3] = -1.1;
        assert_eq!(s.kept_idx(&noisy), vec![0, 1, 2, 4, 5, 6, 7]);
    }

    #[test]
    fn the_confirmation_s_own_test_does_not_borrow_the_first_phase_s_spread() {
        // The first phase stopped on two quiet pairs; the confirmation is 4x noisier than history.
        // Its own test's sd comes from its own pairs (log-ratios and sums) alone, not pooled down
        // with the first phase's small spread.
        let s = with_sums(RETEST_GUARD);
        let prior = s.prior_of(&[0.05, 0.0501], &[0.0, 0.0001]);
        let d = [0.02, 0.09, -0.01, 0.06];
        let sums = [0.0, 0.05, -0.03, 0.04];
        let t = s.test_at(Batch { d: &d, s: &sums }, 4, prior, CONFIRM_GUARD).expect("a look");
        assert!(!t.borrowed, "the guard fires");
        let (_, sd) = mean_sd(&d);
        let (sss, sdf) = sum_spread(&sums);
        let own = ((sd * sd * 3.0 + sss) / (3.0 + sdf)).sqrt();
        assert!((t.se * 2.0 - own).abs() < 1e-12, "{} vs {own}", t.se * 2.0);
        assert_eq!(t.df, 6.0);
        // The first phase's own looks keep their pooled spread (nothing before them to select).
        let m = s.test_at(Batch { d: &d, s: &sums }, 4, Prior::default(), GUARD).expect("a look");
        assert!((m.se - t.se).abs() < 1e-12 && m.df == 6.0);
    }

    #[test]
    fn the_first_look_spends_a_fifth_of_its_increment_and_the_second_the_rest() {
        let s = with_sums(RETEST_GUARD);
        let p = s.main_params();
        let (plain, shared) = (p.look_alphas(), s.main_alphas(&p));
        assert!((shared[0] - FIRST_SHARE * plain[0]).abs() < 1e-15);
        assert!((shared[0] + shared[1] - plain[0] - plain[1]).abs() < 1e-15);
        assert_eq!(shared[2..], plain[2..]);
        // Without history the spending function is used as it is.
        let own = Sequential::new(s.params.clone());
        assert_eq!(own.main_alphas(&own.main_params()), own.params.look_alphas());
    }

    #[test]
    fn log_sums_are_the_runs_sum_in_speed_up_terms() {
        use crate::stats::Direction;
        let pairs = [(100.0, 110.0), (50.0, 40.0)];
        let lower = log_sums(&pairs, Direction::Lower, 1.0);
        assert!((lower[0] - (100f64.ln() + 110f64.ln())).abs() < 1e-12);
        // A higher-is-better metric with elasticity 2 (score ~ 1 / latency^2): the same spread.
        let higher = log_sums(&pairs, Direction::Higher, 2.0);
        assert!((higher[1] + (50f64.ln() + 40f64.ln()) / 2.0).abs() < 1e-12);
        assert_eq!(sum_spread(&[1.0, 3.0, 2.0]), ((4.0 + 1.0) / 2.0, 2.0));
    }
}
