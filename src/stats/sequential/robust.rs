//! The robust ratio: one likelihood ratio of the pairs' log-ratios that decides alone, with or
//! without history (`method = "robust-ratio"`). No gain is fitted at its best over a family
//! wide enough to hold the noise of real machines (outlier pairs, two modes of runs); the gain
//! side weighs the same outliers and, for the keep, the same modes, so a wild pair or a second
//! mode costs its own pairs on both sides instead of handing the decision to another test.
//!
//! The rule, after every pair (docs/decisions.md, "The robust ratio"):
//! - **keep** when a gain of at least the minimum effect is `e^keep_at` times as likely as no gain
//!   at its best, and the pairs' robust mean is at least the minimum effect;
//! - **revert** when a gain is `e^-futile_at` times less likely than no gain, both weighed over
//!   the same noise, or a loss (the gain side mirrored) `e^keep_at` times as likely as no gain;
//! - at the budget, **keep** if the t-test of the pairs, those over `band` robust sds from their
//!   median set aside, passes at `rescue_alpha`, else **inconclusive**.
//!
//! The bound: where the no-gain family holds the true noise law, the ratio against its best
//! fit is at most the ratio against the truth, which Ville's inequality holds above `e^keep_at`
//! with probability at most `e^-keep_at` (1/1111 = 0.09%), whatever prior the gain side
//! weighs; the rescue adds `rescue_alpha` by the union bound: 0.1% in all.

use super::likelihood::{budget_reason, log_mix, ratio_trail, LrLook, Stop};
use super::sample::{mean_sd, median, robust_sd};
use super::{Borrowed, Next, Phase, Sequential};
use crate::stats::{fmt_p, pct, Decision, Procedure, Rescue, Verdict};
use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

const LN_2PI_HALF: f64 = 0.918_938_533_204_672_7;

/// The gain side's gains, as multiples of the one it is powered for, with their prior weights:
/// most on the minimum, the rest spread so that a large gain is not read as noise.
const GAINS: [(f64, f64); 4] = [(1.0, 0.65), (2.0, 0.1), (3.0, 0.1), (6.0, 0.1)];
/// ... and beyond them, at weight 0.05 shared evenly, gains from 6.6x in steps of 10% up to a
/// 100x speed-up: a gain far above the grid (+25%, a 4x speed-up) then has a mean near its own,
/// where the noise of a quiet machine would read it as no gain's outlier.
const TAIL: (f64, f64, f64) = (6.6, 0.05, 1.1);
const TAIL_TOP: f64 = 4.605_170_185_988_091; // ln 100
/// The no-gain fit's sd grid: a step of 12%, from a quarter of the pairs' robust sd (none
/// below fits better) to twice their widest distance from the fitted mean.
const FIT_SD_STEP: f64 = 1.12;
/// The second mode's distances from the first, in the fitted sd: a pair with one run in a
/// mode 2-6 sds away. Each at half `modes_share` and at all of it.
const MODE_SDS: [f64; 4] = [2.0, 3.0, 4.0, 6.0];
/// The gain side's sd grid: a step of 10% from a 0.05% pair (no history) or from a quarter of
/// the history's sd (15 steps down, 30 up: 16x).
const GAIN_SD_STEP: f64 = 1.1;
/// Without history, the gain side's sds run from 0.05% to 30% of a pair, log-uniform.
const VAGUE_SDS: (f64, f64) = (0.0005, 0.3);

/// The levels of the robust ratio, recorded with every decision it makes (replay reads them).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RobustLevels {
    /// ln of the likelihood ratio at which it keeps: ln 1111, so that with the rescue's
    /// 0.0001 the bound is 0.1%.
    pub keep_at: f64,
    /// ln of the ratio (gain against no gain, both weighed over the same sds) at which it
    /// reverts.
    pub futile_at: f64,
    /// The gain it is powered for, in percent (never under the minimum effect), and at most
    /// this many of the history's sds of a pair on a quiet machine.
    pub powered_for_pct: f64,
    pub powered_for_sds: f64,
    /// The share of outlier pairs both sides allow, and the outliers' law: half a normal this
    /// many times as wide, half a Cauchy of the clean sd.
    pub outlier_share: f64,
    pub outlier_width: f64,
    /// The largest share of pairs the no-gain fit may put in a second mode.
    pub modes_share: f64,
    /// The share of the gain side's prior on its sd that is log-uniform over 1/4x-16x the
    /// history's, beside the history's own posterior.
    pub vague: f64,
    /// The budget in pairs (`[decision] pairs`, or `--pairs`), then its t-test: the
    /// test's level (`rescue_alpha`) and its band in robust sds.
    pub pairs: usize,
    pub rescue_alpha: f64,
    pub band: f64,
    /// Whether each pair's log-sum enters both sides beside its log-ratio. Off: a candidate
    /// noisier than its incumbent correlates the two, which neither side's family holds (0.15% of
    /// do-nothing changes kept at 3x), while the log-ratios alone are normal whatever each side's
    /// noise. Rows written before this level read the sums (absent: on).
    #[serde(default = "sums_read_before")]
    pub sums: bool,
    /// The keep's gain side's prior weight on a second mode of runs: the no-gain fit's shares
    /// and distances, evenly. Without it only no gain could read a second mode, and a machine
    /// with one (a run in seven 8% slow) kept +3% 54% of the time. The revert reads neither
    /// side's modes. Rows written before this level had none (absent: 0).
    #[serde(default)]
    pub gain_modes: f64,
}

fn sums_read_before() -> bool {
    true
}

impl RobustLevels {
    pub const CURRENT: RobustLevels = RobustLevels {
        keep_at: 7.013_115_794_639_964,
        futile_at: -2.0,
        powered_for_pct: 3.0,
        powered_for_sds: 3.0,
        outlier_share: 0.2,
        outlier_width: 8.0,
        modes_share: 0.25,
        vague: 0.2,
        pairs: 30,
        rescue_alpha: 0.0001,
        band: 4.0,
        sums: false,
        gain_modes: 0.2,
    };
}

impl Default for RobustLevels {
    fn default() -> Self {
        RobustLevels::CURRENT
    }
}

/// What one look read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RobustLook {
    /// Pairs measured up to it (a warm-up pair set aside included) and read.
    pub measured: usize,
    pub used: usize,
    /// ln(gain / no gain at its best) and ln(gain / no gain, both weighed).
    pub log_lr: f64,
    pub log_lr_futility: f64,
    /// The read pairs' robust mean and robust sd.
    pub mean: f64,
    pub sd: f64,
}

/// The robust ratio on one decision's data: its levels, the budget, the minimum effect, and
/// the history's sd of a pair with its df (`None`: no history).
#[derive(Debug, Clone)]
pub struct RobustRatio {
    pub levels: RobustLevels,
    pub max_pairs: usize,
    /// The minimum effect, ln(1 + min_effect_pct / 100).
    pub min_mean: f64,
    pub history: Option<(f64, f64)>,
    /// Where the history shows a warm-up, the first pair is set aside.
    pub skip_first: bool,
}

impl RobustRatio {
    /// The gain it is powered for, as a mean log-ratio.
    pub fn mu1(&self) -> f64 {
        let cap = (self.levels.powered_for_pct / 100.0).ln_1p();
        match self.history {
            Some((sd, _)) => (self.levels.powered_for_sds * sd).min(cap).max(self.min_mean),
            None => cap.max(self.min_mean),
        }
    }

    /// The gain side's means (log-ratios) with their prior weights: [`GAINS`] of the gain it is
    /// powered for, then [`TAIL`]'s up to a 100x speed-up.
    pub fn gain_means(&self) -> Vec<(f64, f64)> {
        let mu1 = self.mu1();
        let (from, weight, step) = TAIL;
        let tail: Vec<f64> = (0..).map(|k| from * mu1 * step.powi(k)).take_while(|&m| m <= TAIL_TOP).collect();
        let share = weight / tail.len().max(1) as f64;
        GAINS.iter().map(|&(m, w)| (m * mu1, w)).chain(tail.into_iter().map(|m| (m, share))).collect()
    }

    /// The gain side's sds with their prior weights: the history's chi-square posterior around
    /// its sd (1 - `vague` of the weight) beside a log-uniform share `vague`; without history
    /// log-uniform over [`VAGUE_SDS`].
    fn gain_sds(&self) -> Vec<(f64, f64)> {
        match self.history {
            Some((sd0, df)) => {
                let grid: Vec<f64> = (-15..=30).map(|k| sd0 * GAIN_SD_STEP.powi(k)).collect();
                let ln_post: Vec<f64> = grid.iter().map(|&s| df * (sd0 / s).ln() - df * (sd0 / s).powi(2) / 2.0).collect();
                let top = log_mix(ln_post.iter().copied());
                let n = grid.len() as f64;
                let vague = self.levels.vague;
                grid.iter().zip(&ln_post).map(|(&s, &l)| (s, (1.0 - vague) * (l - top).exp() + vague / n)).collect()
            }
            None => {
                let grid: Vec<f64> = (0..).map(|k| VAGUE_SDS.0 * GAIN_SD_STEP.powi(k)).take_while(|&s| s <= VAGUE_SDS.1).collect();
                let n = grid.len() as f64;
                grid.into_iter().map(|s| (s, 1.0 / n)).collect()
            }
        }
    }

    /// ln density of one pair: its log-ratio `r` off its mean and, where known, its sum's
    /// contrast `d` with the sums before, both at sd `sd`, from one component of the outlier
    /// mixture.
    fn ln_pair(&self, r: f64, d: Option<f64>, sd: f64) -> f64 {
        let (eps, k) = (self.levels.outlier_share, self.levels.outlier_width);
        let (clean, wide, cauchy) = match d {
            None => {
                let q = r * r / (sd * sd);
                (
                    -q / 2.0 - sd.ln() - LN_2PI_HALF,
                    -q / (2.0 * k * k) - (k * sd).ln() - LN_2PI_HALF,
                    -(1.0 + q).ln() - sd.ln() - std::f64::consts::PI.ln(),
                )
            }
            Some(d) => {
                let q = (r / sd) * (r / sd) + (d / sd) * (d / sd);
                (
                    -q / 2.0 - sd.ln() - sd.ln() - 2.0 * LN_2PI_HALF,
                    -q / (2.0 * k * k) - (k * sd).ln() - (k * sd).ln() - 2.0 * LN_2PI_HALF,
                    -1.5 * (1.0 + q).ln() - sd.ln() - sd.ln() - (2.0 * std::f64::consts::PI).ln(),
                )
            }
        };
        let tail = log_mix([wide, cauchy].into_iter()) - std::f64::consts::LN_2;
        log_mix([(1.0 - eps).ln() + clean, eps.ln() + tail].into_iter())
    }

    /// The second-mode components the keep's gain side mixes over, (ln prior weight, share,
    /// index into [`MODE_SDS`]): none at all at `1 - gain_modes`, the rest evenly over the
    /// no-gain fit's shares and distances.
    fn weighed_modes(&self) -> Vec<(f64, f64, usize)> {
        let w = self.levels.gain_modes;
        if w <= 0.0 {
            return vec![(0.0, 0.0, 0)];
        }
        let q = self.levels.modes_share;
        let modes: Vec<(f64, usize)> = [q / 2.0, q].into_iter().flat_map(|q| (0..MODE_SDS.len()).map(move |k| (q, k))).collect();
        let each = (w / modes.len() as f64).ln();
        std::iter::once(((1.0 - w).ln(), 0.0, 0)).chain(modes.into_iter().map(|(q, k)| (each, q, k))).collect()
    }

    /// ln density of one pair off its mean `x` at sd `sd` under each of
    /// [`RobustRatio::weighed_modes`]'s components, into `out`: the pair itself
    /// ([`RobustRatio::ln_pair`]), or with the mode's share a clean normal `dz` sds to either
    /// side (the weighed sides are a prior, so the cheaper law serves; the fit keeps the full one).
    fn ln_pair_modes(&self, x: f64, d: Option<f64>, sd: f64, modes: &[(f64, f64, usize)], out: &mut [f64]) {
        let c = self.ln_pair(x, d, sd);
        if modes.len() == 1 {
            out[0] = c;
            return;
        }
        let dd = d.map_or(0.0, |d| (d / sd) * (d / sd));
        let dims = if d.is_some() { 2.0 } else { 1.0 };
        let norm = -dims * (sd.ln() + LN_2PI_HALF) - dd / 2.0 - c;
        // Each distance's two sides, relative to the pair's own density (bounded: its outlier
        // tail never vanishes).
        let side = MODE_SDS.map(|dz| {
            let (lo, hi) = ((x - dz * sd) / sd, (x + dz * sd) / sd);
            (norm - lo * lo / 2.0).exp() + (norm - hi * hi / 2.0).exp()
        });
        for (o, &(_, q, k)) in out.iter_mut().zip(modes) {
            *o = if q == 0.0 { c } else { c + (1.0 - q + q / 2.0 * side[k]).ln() };
        }
    }

    /// ln likelihood of no gain at its best: a mean of at most 0 (the pairs' median, or 0), an
    /// sd on the [`FIT_SD_STEP`] grid, and a share up to `modes_share` of pairs in a second
    /// mode [`MODE_SDS`] away, whichever fits best.
    fn no_gain_best(&self, rs: &[f64], ds: &[Option<f64>]) -> f64 {
        let n = rs.len();
        let m0 = median(rs).min(0.0);
        let spread = rs.iter().map(|x| (x - m0).abs()).fold(0.0f64, f64::max).max(1e-6);
        let q = self.levels.modes_share;
        let modes: Vec<(f64, f64)> =
            std::iter::once((0.0, 0.0)).chain([q / 2.0, q].into_iter().flat_map(|q| MODE_SDS.map(|dz| (q, dz)))).collect();
        let means: &[f64] = if m0 < 0.0 { &[m0, 0.0] } else { &[m0] };
        let ll = |sd: f64, m: f64, mq: f64, dz: f64| -> f64 {
            rs.iter()
                .zip(ds)
                .map(|(&x, &d)| {
                    let c = self.ln_pair(x - m, d, sd);
                    if mq == 0.0 {
                        return c;
                    }
                    let delta = dz * sd;
                    log_mix(
                        [
                            (1.0 - mq).ln() + c,
                            (mq / 2.0).ln() + self.ln_pair(x - m - delta, d, sd),
                            (mq / 2.0).ln() + self.ln_pair(x - m + delta, d, sd),
                        ]
                        .into_iter(),
                    )
                })
                .sum()
        };
        let mut best = f64::NEG_INFINITY;
        let mut sd = if n >= 3 { (spread / 400.0).max(robust_sd(rs) / 4.0) } else { spread / 400.0 };
        while sd <= spread * 2.0 {
            for &m in means {
                for &(mq, dz) in &modes {
                    best = best.max(ll(sd, m, mq, dz));
                }
            }
            sd *= FIT_SD_STEP;
        }
        best
    }

    /// Every look over `pairs` (log-ratio, log-sum where known), up to the first stop, and the
    /// stop if any; `Stop::Budget` once `max_pairs` are read without one (the rescue's verdict
    /// is [`RobustRatio::rescue_keeps`]'s).
    pub fn looks(&self, pairs: &[(f64, Option<f64>)]) -> (Vec<RobustLook>, Option<Stop>) {
        let sds = self.gain_sds();
        let means = self.gain_means();
        let modes = self.weighed_modes();
        // ln likelihood so far: of a gain per sd, mean and mode component; of a loss per sd and
        // mean, of no gain per sd, both without the modes (the revert reads them so).
        let mut gains = vec![vec![vec![0.0f64; modes.len()]; means.len()]; sds.len()];
        let mut losses = vec![vec![0.0f64; means.len()]; sds.len()];
        let mut nones = vec![0.0f64; sds.len()];
        let mut one = vec![0.0f64; modes.len()];
        let add = |acc: &mut [f64], one: &[f64]| acc.iter_mut().zip(one).for_each(|(a, o)| *a += o);
        // Over the modes at their prior weights.
        let mix = |acc: &[f64]| -> f64 { log_mix(modes.iter().zip(acc).map(|(&(w, _, _), v)| w + v)) };
        let (mut rs, mut ss, mut ds): (Vec<f64>, Vec<f64>, Vec<Option<f64>>) = (vec![], vec![], vec![]);
        let mut looks = vec![];
        let skip = self.skip_first as usize;
        for (i, &(r, s)) in pairs.iter().enumerate().take(self.max_pairs) {
            if i < skip {
                continue;
            }
            let s = s.filter(|_| self.levels.sums);
            let k = rs.len();
            // The sum's contrast with the median of the sums before it, scaled to a pair's sd
            // (the median's variance: 1/k of a pair's to 3 values, pi/2k above).
            let d = match s {
                Some(s) if k > 0 && ss.len() == k => {
                    let f = if k <= 2 { 1.0 } else { std::f64::consts::FRAC_PI_2 };
                    Some((s - median(&ss)) / (1.0 + f / k as f64).sqrt())
                }
                _ => None,
            };
            for (j, &(sd, _)) in sds.iter().enumerate() {
                for ((g, l), &(m, _)) in gains[j].iter_mut().zip(losses[j].iter_mut()).zip(&means) {
                    self.ln_pair_modes(r - m, d, sd, &modes, &mut one);
                    add(g, &one);
                    *l += self.ln_pair(r + m, d, sd);
                }
                nones[j] += self.ln_pair(r, d, sd);
            }
            rs.push(r);
            if let Some(s) = s {
                ss.push(s);
            }
            ds.push(d);
            if rs.len() < 2 {
                continue;
            }
            // The gain side over its sds and means, with the modes (the keep) or without (the
            // first component alone: the revert).
            let weigh = |m: &dyn Fn(&[f64]) -> f64| {
                log_mix(
                    sds.iter().zip(&gains).map(|(&(_, w), g)| w.ln() + log_mix(means.iter().zip(g).map(|(&(_, gw), v)| gw.ln() + m(v)))),
                )
            };
            let gain = weigh(&mix);
            // The revert weighs both sides without the modes, as before the level: reverts stay
            // as they were (the modes there too moved no +3% cell on the probe), at a third of
            // the arithmetic.
            let gain_plain = weigh(&|v: &[f64]| v[0]);
            let none_weighed = log_mix(sds.iter().zip(&nones).map(|(&(_, w), v)| w.ln() + v));
            // The gain side mirrored: the same prior over losses.
            let loss =
                log_mix(sds.iter().zip(&losses).map(|(&(_, w), g)| w.ln() + log_mix(means.iter().zip(g).map(|(&(_, gw), v)| gw.ln() + v))));
            let look = RobustLook {
                measured: i + 1,
                used: rs.len(),
                log_lr: gain - self.no_gain_best(&rs, &ds),
                log_lr_futility: gain_plain - none_weighed,
                mean: robust_mean(&rs, self.levels.band),
                sd: robust_sd(&rs),
            };
            looks.push(look);
            if look.log_lr >= self.levels.keep_at && look.mean >= self.min_mean {
                return (looks, Some(Stop::Keep));
            }
            // Revert: a gain e^2 times less likely than no gain at the same noise, or a loss as
            // sure as a keep would be of a gain (a clear loss, whose pairs both sides read as
            // outliers at the gain side's noise, so the first ratio stays near 1).
            if look.log_lr_futility <= self.levels.futile_at || loss - none_weighed >= self.levels.keep_at {
                return (looks, Some(Stop::Futile));
            }
        }
        let read = pairs.len().min(self.max_pairs);
        (looks, (read == self.max_pairs).then_some(Stop::Budget))
    }

    /// The budget's t-test: over the pairs within `band` robust sds of their median, one-sided
    /// at `rescue_alpha`, with a mean of at least the minimum effect. (mean, sd, pairs, p).
    pub fn rescue(&self, x: &[f64]) -> (f64, f64, usize, f64) {
        let kept = within_band(x, self.levels.band, 1e-12);
        let n = kept.len();
        if n < 3 {
            return (robust_mean(x, self.levels.band), 0.0, n, 1.0);
        }
        let (mean, s) = mean_sd(&kept);
        let t = mean / (s / (n as f64).sqrt());
        let p = if t.is_finite() {
            1.0 - StudentsT::new(0.0, 1.0, (n - 1) as f64).expect("df > 0").cdf(t)
        } else if t > 0.0 {
            0.0
        } else {
            1.0
        };
        (mean, s, n, p)
    }

    /// Whether the budget's t-test keeps.
    pub fn rescue_keeps(&self, x: &[f64]) -> bool {
        self.rescue_passes(self.rescue(x))
    }

    /// Whether a t-test [`RobustRatio::rescue`] read keeps: at least 3 pairs, a mean of at
    /// least the minimum effect, t at its level.
    fn rescue_passes(&self, (mean, s, n, _): (f64, f64, usize, f64)) -> bool {
        n >= 3
            && mean >= self.min_mean
            && mean / (s / (n as f64).sqrt()) >= crate::stats::t_quantile(1.0 - self.levels.rescue_alpha, (n - 1) as f64)
    }
}

/// The mean of the pairs within `band` robust sds of their median (all of them below 4 pairs).
fn robust_mean(x: &[f64], band: f64) -> f64 {
    if x.len() < 4 {
        return x.iter().sum::<f64>() / x.len() as f64;
    }
    let kept = within_band(x, band, 1e-9);
    kept.iter().sum::<f64>() / kept.len().max(1) as f64
}

/// The values within `band` robust sds (never under `floor`) of their median.
fn within_band(x: &[f64], band: f64, floor: f64) -> Vec<f64> {
    let (m, sd) = (median(x), robust_sd(x));
    x.iter().copied().filter(|v| (v - m).abs() <= band * sd.max(floor)).collect()
}

impl Sequential {
    /// The robust ratio for this decision (`Params::robust`), with the history's scale if any.
    pub fn robust_ratio(&self, levels: RobustLevels) -> RobustRatio {
        let b = self.borrowed.as_ref();
        RobustRatio {
            levels,
            max_pairs: levels.pairs,
            min_mean: (self.params.min_effect_pct / 100.0).ln_1p(),
            history: b.map(|b| (b.scale.sd, b.scale.df)),
            skip_first: b.is_some_and(Borrowed::shows_warmup),
        }
    }

    /// What the robust ratio does next on the first phase's log-ratios and log-sums.
    pub(super) fn robust_next(&self, levels: RobustLevels, main: &[f64], main_s: &[f64]) -> Next {
        let test = self.robust_ratio(levels);
        let pairs: Vec<(f64, Option<f64>)> = main.iter().enumerate().map(|(i, &r)| (r, main_s.get(i).copied())).collect();
        let (looks, stop) = test.looks(&pairs);
        let Some(stop) = stop else {
            return Next::Measure { phase: Phase::Main, pairs: 1 };
        };
        let p = &self.params;
        let threshold = (-levels.keep_at).exp();
        let last = looks.last().copied();
        let read = match (stop, last) {
            (Stop::Keep | Stop::Futile, Some(l)) => l.measured,
            _ => main.len().min(test.max_pairs),
        };
        let skip = test.skip_first as usize;
        let used = &main[skip.min(read)..read];
        // The ratio's p: 1 / its largest ratio over the looks, by Ville's inequality.
        let pv = looks.iter().map(|l| (-l.log_lr).exp()).fold(1.0, f64::min);
        // The budget's t-test, read once (its figures only where the budget ended the decision).
        let budget = test.rescue(used);
        let (mean, sd, n) = match stop {
            Stop::Budget => (budget.0, budget.1, budget.2),
            _ => last.map_or((0.0, 0.0, 0), |l| (l.mean, l.sd, l.used)),
        };
        let se = sd / (n.max(1) as f64).sqrt();
        let q = self.tq(1.0 - p.alpha, (n.max(2) - 1) as f64);
        let ratio = last.map_or(f64::NEG_INFINITY, |l| l.log_lr);
        let rescued = stop == Stop::Budget && test.rescue_passes(budget);
        let (verdict, reason) = match stop {
            Stop::Keep => (
                Verdict::Keep,
                format!(
                    "a gain is {:.0} times as likely as no gain at its best fit after {} pairs (p = {} <= {}), with a robust mean gain {:+.2}% of at least the minimum effect {}%",
                    ratio.exp(),
                    n,
                    fmt_p(pv),
                    fmt_p(threshold),
                    pct(mean),
                    p.min_effect_pct
                ),
            ),
            Stop::Futile => (
                Verdict::Revert,
                format!(
                    "no worthwhile gain: a +{}% gain is at most {:.2} times as likely as no gain after {} pairs (robust mean {:+.2}%)",
                    (pct(test.mu1()) * 10.0).round() / 10.0,
                    levels.futile_at.exp(),
                    n,
                    pct(mean)
                ),
            ),
            Stop::Budget if rescued => (
                Verdict::Keep,
                format!(
                    "kept at the budget of {} pairs by their t-test (p = {} <= {}, {} pairs over {} robust sds out set aside), mean gain {:+.2}%",
                    test.max_pairs,
                    fmt_p(budget.3),
                    fmt_p(levels.rescue_alpha),
                    used.len() - n,
                    levels.band,
                    pct(mean)
                ),
            ),
            Stop::Budget => (Verdict::Inconclusive, budget_reason(test.max_pairs, pv, threshold, mean, p.min_effect_pct)),
        };
        let as_lr = |l: &RobustLook| LrLook {
            measured: l.measured,
            used: l.used,
            mean: l.mean,
            sd: l.sd,
            log_lr: l.log_lr,
            log_lr_futility: l.log_lr_futility,
            calibrated_sd: 0.0,
        };
        let trail = ratio_trail(&looks.iter().map(as_lr).collect::<Vec<_>>(), (levels.keep_at, levels.futile_at), threshold, 0.0, SCALE);
        // The budget's t-test, recorded as the earlier rule's rescue is: the pairs it set aside
        // (0-based, in the order measured), so the row shows the estimate of those it read.
        let rescue = (stop == Stop::Budget).then(|| {
            let (m, sd) = (median(used), robust_sd(used));
            let set_aside_pairs: Vec<usize> =
                used.iter().enumerate().filter(|(_, &v)| (v - m).abs() > levels.band * sd.max(1e-12)).map(|(i, _)| i + skip).collect();
            Rescue {
                pairs: read,
                set_aside: set_aside_pairs.len(),
                set_aside_pairs,
                p_value: budget.3,
                alpha: levels.rescue_alpha,
                passed: rescued,
                before: Verdict::Inconclusive,
            }
        });
        Next::Done(Decision {
            verdict,
            procedure: if rescued { Procedure::Rescue } else { Procedure::RobustRatio },
            effect_pct: pct(mean),
            ci_low_pct: pct(mean - q * se),
            ci_high_pct: pct(mean + q * se),
            ci_level: 1.0 - 2.0 * p.alpha,
            p_value: if rescued { budget.3 } else { pv },
            pairs: read,
            looks: looks.len(),
            p_threshold: if rescued { levels.rescue_alpha } else { threshold },
            p_adjusted: if rescued { budget.3 } else { pv },
            scale: SCALE.to_string(),
            noise_sd_pct: sd * 100.0,
            excluded: skip.min(read),
            confirmation: None,
            rescue,
            reason,
            trail,
            borrowed: self.borrowed.as_ref().map(|b| Box::new(b.record())),
        })
    }
}

/// What a robust-ratio decision's `scale` says: the pairs' own robust spread read against the
/// history's posterior.
pub const SCALE: &str = "robust";

#[cfg(test)]
mod tests {
    use super::*;

    fn ratio(history: Option<(f64, f64)>) -> RobustRatio {
        RobustRatio { levels: RobustLevels::CURRENT, max_pairs: 30, min_mean: 0.01f64.ln_1p(), history, skip_first: false }
    }

    /// Deterministic normal-ish noise: a fixed sequence of standard normals by Box-Muller.
    fn normals(n: usize, seed: u64) -> Vec<f64> {
        let mut rng = crate::stats::rng::Rng::new(seed);
        (0..n).map(|_| rng.normal()).collect()
    }

    fn pairs(gain: f64, sd: f64, z: &[f64]) -> Vec<(f64, Option<f64>)> {
        z.chunks(2).map(|c| (gain + sd * c[0], Some(sd * c[1]))).collect()
    }

    #[test]
    fn keeps_a_clear_gain_and_reverts_none() {
        let r = ratio(Some((0.01, 60.0)));
        let (looks, stop) = r.looks(&pairs(0.03f64.ln_1p(), 0.01, &normals(60, 1)));
        assert_eq!(stop, Some(Stop::Keep));
        assert!(looks.len() < 15, "+3% at a 1% pair keeps within 15 pairs: {}", looks.len());
        let (_, stop) = r.looks(&pairs(0.0, 0.01, &normals(60, 2)));
        assert_eq!(stop, Some(Stop::Futile));
    }

    #[test]
    fn a_large_gain_keeps_and_a_large_loss_reverts_at_once_on_a_quiet_machine() {
        // A 0.78% pair, as a quiet benchmark's: 4x is far above the +3% grid.
        let r = ratio(Some((0.0078, 29.0)));
        let z = normals(60, 9);
        let (looks, stop) = r.looks(&pairs(4f64.ln(), 0.0078, &z));
        assert!(stop == Some(Stop::Keep) && looks.last().unwrap().measured <= 5, "{looks:?}");
        let (looks, stop) = r.looks(&pairs(-(4f64.ln()), 0.0078, &z));
        assert!(stop == Some(Stop::Futile) && looks.last().unwrap().measured <= 3, "{looks:?}");
        // The gain side reaches a 100x speed-up, its weights summing to 1 (Ville's bound needs it).
        let means = r.gain_means();
        assert!(means.last().unwrap().0 <= 100f64.ln() && means.last().unwrap().0 > 100f64.ln() / 1.1);
        assert!((means.iter().map(|m| m.1).sum::<f64>() - 1.0).abs() < 1e-12);
        let sds: f64 = r.gain_sds().iter().map(|s| s.1).sum();
        assert!((sds - 1.0).abs() < 1e-12 && (ratio(None).gain_sds().iter().map(|s| s.1).sum::<f64>() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn two_wild_pairs_cost_only_themselves() {
        // A 1.6x gain on a loaded machine: 22 of 24 pairs in its favour, one 23x and one 0.08x.
        let z = normals(48, 3);
        let mut p = pairs(1.6f64.ln(), 0.1, &z);
        p[5].0 = 23f64.ln();
        p[9].0 = 0.08f64.ln();
        let (_, stop) = ratio(None).looks(&p);
        assert_eq!(stop, Some(Stop::Keep));
    }

    #[test]
    fn stops_nowhere_before_two_pairs_and_at_the_budget() {
        let r = ratio(Some((0.01, 60.0)));
        let (looks, stop) = r.looks(&pairs(0.0, 0.01, &normals(2, 4)));
        assert!(looks.is_empty() && stop.is_none());
        // A mean of +1.25% at a 2% pair: a gain and no gain fit four pairs alike.
        let few = RobustRatio { max_pairs: 4, ..ratio(Some((0.02, 30.0))) };
        let split: Vec<(f64, Option<f64>)> = [0.03, -0.01, 0.02, 0.01].iter().map(|&r| (r, Some(0.0))).collect();
        let (looks, stop) = few.looks(&split);
        assert_eq!((looks.len(), stop), (3, Some(Stop::Budget)), "{looks:?}");
        assert_eq!(few.looks(&split[..3]).1, None, "short of the budget it asks for more");
    }

    #[test]
    fn a_warmup_pair_is_set_aside() {
        let r = RobustRatio { skip_first: true, ..ratio(Some((0.01, 60.0))) };
        let mut p = pairs(0.0, 0.01, &normals(60, 6));
        p[0].0 = 5.0;
        let (looks, _) = r.looks(&p);
        assert_eq!((looks[0].measured, looks[0].used), (3, 2));
        assert!(looks[0].mean.abs() < 0.05, "the wild first pair is not read: {}", looks[0].mean);
    }

    #[test]
    fn the_rescue_sets_aside_pairs_beyond_its_band() {
        let r = ratio(None);
        let mut x: Vec<f64> = normals(30, 7).iter().map(|z| 0.03 + 0.01 * z).collect();
        assert!(r.rescue_keeps(&x));
        x[3] = -3.0;
        let (_, _, n, p) = r.rescue(&x);
        assert_eq!(n, 29);
        assert!(p < 1e-4 && r.rescue_keeps(&x));
        let flat: Vec<f64> = normals(30, 8).iter().map(|z| 0.01 * z).collect();
        assert!(!r.rescue_keeps(&flat));
    }

    #[test]
    fn the_log_sums_move_nothing_unless_a_row_recorded_them_read() {
        // A candidate 3x as noisy as its incumbent: each log-ratio correlates with its log-sum.
        let z = normals(60, 10);
        let (inc, cand) = (0.01, 0.03);
        let p: Vec<(f64, Option<f64>)> = z.chunks(2).map(|c| (inc * c[0] - cand * c[1], Some(inc * c[0] + cand * c[1]))).collect();
        let bare: Vec<(f64, Option<f64>)> = p.iter().map(|&(r, _)| (r, None)).collect();
        let r = ratio(Some((0.014, 60.0)));
        assert_eq!(r.looks(&p), r.looks(&bare), "the log-ratios alone decide");
        let before = RobustRatio { levels: RobustLevels { sums: true, ..RobustLevels::CURRENT }, ..r };
        assert_ne!(before.looks(&p).0, before.looks(&bare).0, "a row that read the sums replays reading them");
    }

    #[test]
    fn levels_round_trip_as_numbers() {
        let json = serde_json::to_string(&RobustLevels::CURRENT).unwrap();
        assert!(json.contains("\"keep_at\":7.01"), "{json}");
        let back: RobustLevels = serde_json::from_str(&json).unwrap();
        assert_eq!(back, RobustLevels::CURRENT);
        // Written before the gain side read a second mode, a row had none; before the sums were
        // a level, it read them too.
        let between = json.replace(",\"gain_modes\":0.2", "");
        assert!(!between.contains("gain_modes"), "{between}");
        assert_eq!(serde_json::from_str::<RobustLevels>(&between).unwrap(), RobustLevels { gain_modes: 0.0, ..RobustLevels::CURRENT });
        let before = between.replace(",\"sums\":false", "");
        assert!(!before.contains("sums"), "{before}");
        assert_eq!(
            serde_json::from_str::<RobustLevels>(&before).unwrap(),
            RobustLevels { sums: true, gain_modes: 0.0, ..RobustLevels::CURRENT }
        );
    }

    #[test]
    fn a_second_mode_of_runs_is_read_by_both_sides() {
        // A machine where every 7th run is 8% slow (5.6 pair sds at a 1.41% pair): a pair
        // holding one sits 8% off, to one side or the other by which run it is.
        let machine = |gain: f64, seed: u64| -> Vec<(f64, Option<f64>)> {
            let z = normals(60, seed);
            let slow = |run: usize| if run.is_multiple_of(7) { 1.08f64.ln() } else { 0.0 };
            (0..30)
                .map(|i| {
                    let (inc, cand) = if i % 2 == 0 { (2 * i, 2 * i + 1) } else { (2 * i + 1, 2 * i) };
                    (gain + 0.01 * (z[2 * i] - z[2 * i + 1]) + slow(inc) - slow(cand), None)
                })
                .collect()
        };
        let r = ratio(Some((0.0141, 60.0)));
        let without = RobustRatio { levels: RobustLevels { gain_modes: 0.0, ..RobustLevels::CURRENT }, ..r.clone() };
        for seed in 1..=3 {
            // +3% after 16 pairs: only no gain could read the mode, and the gain side's mode
            // is worth at least e^2 more evidence (2.6-4.2 nats on these draws).
            let p = machine(0.03f64.ln_1p(), seed);
            let ratio_at_16 = |t: &RobustRatio| t.looks(&p[..16]).0.last().unwrap().log_lr;
            assert!(ratio_at_16(&r) >= ratio_at_16(&without) + 2.0, "seed {seed}: {} {}", ratio_at_16(&r), ratio_at_16(&without));
            // No gain on the same machine reverts, as it did.
            assert_eq!((r.looks(&machine(0.0, seed)).1, without.looks(&machine(0.0, seed)).1), (Some(Stop::Futile), Some(Stop::Futile)));
        }
    }
}
