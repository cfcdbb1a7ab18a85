//! A probe of one procedure in place of the three the rule chains (the likelihood ratio, the two
//! phases, the rescue): a likelihood ratio of whole pairs whose per-pair density is a contaminated
//! normal, so a wild pair costs both sides alike, and whose gain side reads its scale from the
//! history pooled with the pairs' own robust spread (a vague scale where no history is).
//!
//! Each model's trials are drawn exactly as `ratchet-lab simulate` draws them (same seeds, the same
//! calibration, the same sides), and the shipped rule decides the same draws beside it.
//!
//! `cargo run --release -p ratchet-lab --example one_rule_probe -- [key=value ...]`, keys: model
//! (part of a name, or `=NAME` exactly; all by default), gain (0.03), trials (500), seed
//! (20260522), history_pairs (61, where a model sets none), history (1; 0: no trial borrows a
//! scale), shipped (1: the shipped rule decides the same draws too), keep (ln LR to keep; ln 1000),
//! futile (-2), min_pairs (0: no least number of pairs to keep), eps (the outlier component's
//! share, 0.1), k (its shape: a normal k times as wide, 0 a Cauchy of the same scale, -k half
//! each; 8), sums (1: read the log-sums' contrasts; under product=1 the product's level, off),
//! d_mean (1: contrast each sum with the mean of those before, not their median), sum_scale (1:
//! the gain side's own scale for the sums), df and sum_df (the history's weight, in pairs, in the gain side's scales; -1: the history's
//! own df; 8 and 4), own_sd (1: the pairs' plain sd in place of their MAD's), rho_max (0; above:
//! no gain fits a correlation of log-ratio and log-sum up to it) and gain_rho (1: the gain side
//! mixes over correlations too), distrust (0; above: the history's weight falls as the pairs'
//! own spread s above its sd s0, divided by (s / s0)^distrust).
//!
//! The no-gain family and the gain side's prior (lab/notes/decisions-history.md, "A no-gain fit
//! that holds the noise"): null_eps (1: pure normals are fitted too, beside the outlier share),
//! modes (1: a share up to modes_q of pairs +-2-6 sds out, two modes of runs), null0 (1: a mean of
//! 0 is fitted too below a negative median), bayes (1: the gain side's sds are a fixed grid of
//! step bayes_step weighed by the history's chi-square posterior, a log-uniform share vague
//! beside it; log-uniform alone without history), rescue (a level above 0: a t-test over the
//! pairs at the budget, beyond 4 robust sds set aside), sd_step (the no-gain fit's sd grid),
//! rho_steps (its correlation grid), refine (1: golden sections refine the best grid point), fast
//! (1: no sd under a quarter of the pairs' robust sd), sum_fit (1: no gain reads each sum but the
//! first off the level that fits them best), trace (1: each keep's pairs on stderr), product (1:
//! the product's robust ratio, `stats::sequential::robust`, decides in place of the probe's own:
//! the same verdicts as c1's keys on every model, gain 0 and +3%; at its own levels but `sums`,
//! `outlier_share`, `modes_share` and `gain_modes` where given).
//! lab/notes/decisions-history.md, "One procedure in place of three", has what it measured.

#[path = "common/args.rs"]
mod args;

use ratchet::config::DecisionConfig;
use ratchet::stats::sequential::likelihood::{log_mix, Stop};
use ratchet::stats::sequential::{incumbent_first, mean_sd, median, robust_sd, Phase, RobustLevels, RobustRatio, Sequential};
use ratchet::stats::Verdict;
use ratchet_lab::simulate::{cell_positions, decide_sides, draw_trial_by, scenarios, trial_rng, with_knobs, Draw};

const LN_2PI_HALF: f64 = 0.918_938_533_204_672_7;

/// The gain side's multiples of `mu1` and their weights.
const GAINS: [(f64, f64); 5] = [(1.0, 0.65), (2.0, 0.1), (3.0, 0.1), (6.0, 0.1), (15.0, 0.05)];

#[derive(Clone, Copy)]
struct One {
    keep_at: f64,
    futile_at: f64,
    max_pairs: usize,
    min_mean: f64,
    eps: f64,
    k: f64,
    sums: bool,
    df: f64,
    sum_scale: bool,
    sum_df: f64,
    rho_max: f64,
    gain_rho: bool,
    min_pairs: usize,
    distrust: f64,
    own_sd: bool,
    d_mean: bool,
    trace: bool,
    null_eps: bool,
    modes: bool,
    sd_step: f64,
    modes_q: f64,
    bayes: bool,
    bayes_step: f64,
    vague: f64,
    rescue: f64,
    fast: bool,
    null0: bool,
    rho_steps: usize,
    refine: bool,
    sum_fit: bool,
}

/// The clean component (ln density `clean`) mixed with the outlier component at share `eps`:
/// `k` > 0 a normal `k` times as wide (ln density `wide(k)`), `k` = 0 a Cauchy of the same scale
/// (`cauchy`), whose cost grows only with the log of how far out a pair lies; `k` < 0 half each.
fn with_outliers(clean: f64, wide: impl Fn(f64) -> f64, cauchy: f64, eps: f64, k: f64) -> f64 {
    let tail = if k > 0.0 {
        wide(k)
    } else if k < 0.0 {
        log_mix([wide(-k), cauchy].into_iter()) - std::f64::consts::LN_2
    } else {
        cauchy
    };
    log_mix([(1.0 - eps).ln() + clean, eps.ln() + tail].into_iter())
}

/// ln of one log-ratio's density at `x` off its mean, sd `sd`.
fn ln_f(x: f64, sd: f64, eps: f64, k: f64) -> f64 {
    let clean = -x * x / (2.0 * sd * sd) - sd.ln() - LN_2PI_HALF;
    let wide = |k: f64| -x * x / (2.0 * k * k * sd * sd) - (k * sd).ln() - LN_2PI_HALF;
    let cauchy = -(1.0 + x * x / (sd * sd)).ln() - sd.ln() - std::f64::consts::PI.ln();
    with_outliers(clean, wide, cauchy, eps, k)
}

/// The pair's joint density (log-ratio off its mean at sd `sd`, sum contrast `d` at sd `sd_d`,
/// correlated by `rho`: a side noisier than the other gives (var incumbent - var candidate) /
/// their sum), both from one component; the log-ratio's alone without a contrast.
fn ln_pair_rho(r: f64, d: Option<f64>, sd: f64, sd_d: f64, rho: f64, eps: f64, k: f64) -> f64 {
    let Some(d) = d else { return ln_f(r, sd, eps, k) };
    let (zr, zd) = (r / sd, d / sd_d);
    let one = 1.0 - rho * rho;
    let q = (zr * zr - 2.0 * rho * zr * zd + zd * zd) / one;
    let sd = sd * one.sqrt();
    let clean = -q / 2.0 - sd.ln() - sd_d.ln() - 2.0 * LN_2PI_HALF;
    let wide = |k: f64| -q / (2.0 * k * k) - (k * sd).ln() - (k * sd_d).ln() - 2.0 * LN_2PI_HALF;
    let cauchy = -1.5 * (1.0 + q).ln() - sd.ln() - sd_d.ln() - (2.0 * std::f64::consts::PI).ln();
    with_outliers(clean, wide, cauchy, eps, k)
}

impl One {
    /// The gain side's sds and their prior weights where `bayes` is set: around the history's sd
    /// by its chi-square posterior (df `hdf`), with a log-uniform share `vague` from a quarter of
    /// it to 16x; without history log-uniform from 0.05% to 30% of a pair.
    fn bayes_scales(&self, hist: Option<(f64, f64)>) -> Vec<(f64, f64)> {
        let step: f64 = self.bayes_step;
        match hist {
            Some((sd0, hdf)) => {
                let grid: Vec<f64> = (-15..=30).map(|k| sd0 * step.powi(k)).collect();
                let ln_post: Vec<f64> = grid.iter().map(|&s| hdf * (sd0 / s).ln() - hdf * (sd0 / s).powi(2) / 2.0).collect();
                let top = log_mix(ln_post.iter().copied());
                let n = grid.len() as f64;
                grid.iter().zip(&ln_post).map(|(&s, &l)| (s, (1.0 - self.vague) * (l - top).exp() + self.vague / n)).collect()
            }
            None => {
                let grid: Vec<f64> = (0..).map(|k| 0.0005 * step.powi(k)).take_while(|&s| s <= 0.3).collect();
                let n = grid.len() as f64;
                grid.into_iter().map(|s| (s, 1.0 / n)).collect()
            }
        }
    }
    /// The pairs' own scale the gain side pools: the MAD's sd, or (`own_sd`) the plain sd.
    fn own_sd(&self, x: &[f64]) -> f64 {
        if self.own_sd {
            mean_sd(x).1
        } else {
            robust_sd(x)
        }
    }
    /// Decide on pairs drawn one at a time (log-ratio, log-sum) with the history's sd of one
    /// pair (`None`: no history).
    fn decide(&self, hist: Option<(f64, f64)>, warm: bool, mut pair: impl FnMut(usize) -> (f64, f64)) -> (Stop, usize) {
        // Without history: a vague scale, 1% of a run's log (0.0141 a pair) over a wide grid.
        // `df` < 0: the history weighs as its own df.
        let (sd0, df0, scales): (f64, f64, Vec<(f64, f64)>) = match hist {
            Some((sd, hdf)) => (sd, if self.df < 0.0 { hdf } else { self.df }, vec![(1.0, 0.8), (1.7, 0.1), (3.0, 0.1)]),
            None => (
                0.0141,
                1.0,
                vec![(0.25, 1.0 / 6.0), (0.5, 1.0 / 6.0), (1.0, 1.0 / 6.0), (2.0, 1.0 / 6.0), (4.0, 1.0 / 6.0), (8.0, 1.0 / 6.0)],
            ),
        };
        // `bayes`: the gain side's scales are fixed sds with prior weights (the history's chi-square
        // posterior, 1 - vague of it, beside a log-uniform share `vague`), not multiples of a
        // predictive sd; the gain's likelihood is then the marginal over them.
        let scales = if self.bayes { self.bayes_scales(hist) } else { scales };
        let sum_df = if self.sum_df < 0.0 { df0 } else { self.sum_df };
        let mu1 = match hist {
            Some((sd, _)) => (3.0 * sd).clamp(self.min_mean, 0.03f64.ln_1p()),
            None => 0.03f64.ln_1p(),
        };
        let (eps, k) = (self.eps, self.k);
        let rhos: Vec<(f64, f64)> = if self.rho_max > 0.0 && self.gain_rho {
            let r = self.rho_max;
            vec![(0.0, 0.6), (-r / 2.0, 0.1), (r / 2.0, 0.1), (-r, 0.1), (r, 0.1)]
        } else {
            vec![(0.0, 1.0)]
        };
        // The no-gain family: each eps of `null_eps`, and where `modes` is set a share q of pairs
        // whose log-ratio lies +-delta out (two modes of runs: one side slow, the other not).
        let epss: &[f64] = if self.null_eps { &[0.0, eps] } else { &[eps] };
        let mut mode_grid: Vec<(f64, f64)> = vec![(0.0, 0.0)];
        if self.modes {
            for q in [self.modes_q / 2.0, self.modes_q] {
                for dz in [2.0, 3.0, 4.0, 6.0] {
                    mode_grid.push((q, dz));
                }
            }
        }
        let mut gains = vec![vec![[0.0f64; GAINS.len()]; rhos.len()]; scales.len()];
        let mut nones = vec![vec![0.0f64; rhos.len()]; scales.len()];
        let (mut rs, mut ss, mut ds): (Vec<f64>, Vec<f64>, Vec<Option<f64>>) = (vec![], vec![], vec![]);
        // Where the history shows a warm-up, its first pair is set aside.
        let skip = warm as usize;
        for i in 0..self.max_pairs {
            let (r, s) = pair(i);
            if i < skip {
                continue;
            }
            let i = i - skip;
            // The sum's contrast with the median of the sums before it, scaled to a pair's sd.
            let d = (self.sums && i > 0).then(|| {
                let kk = i as f64;
                if self.d_mean {
                    return (s - ss.iter().sum::<f64>() / kk) / (1.0 + 1.0 / kk).sqrt();
                }
                let f = if i <= 2 { 1.0 } else { std::f64::consts::FRAC_PI_2 };
                (s - median(&ss)) / (1.0 + f / kk).sqrt()
            });
            // The gain side's predictive scale: the history pooled with the pairs before.
            let own = if rs.len() >= 3 { Some(self.own_sd(&rs)) } else { None };
            let sd_hat = match own {
                Some(o) => {
                    let kk = (rs.len() - 1) as f64;
                    // The history weighs less as the pairs' own spread departs from it.
                    let df0 = df0 / (o / sd0).max(1.0).powf(self.distrust);
                    ((df0 * sd0 * sd0 + kk * o * o) / (df0 + kk)).sqrt()
                }
                None => sd0,
            };
            // The sums' own scale on the gain side (a level that wanders is no gain's to explain).
            let own_d: Vec<f64> = ds.iter().flatten().copied().collect();
            let sd_d_hat = if self.sum_scale && own_d.len() >= 3 {
                let o = self.own_sd(&own_d);
                let kk = (own_d.len() - 1) as f64;
                ((sum_df * sd0 * sd0 + kk * o * o) / (sum_df + kk)).sqrt()
            } else {
                sd_hat
            };
            for (j, &(c, _)) in scales.iter().enumerate() {
                let (sd, sd_d) = if self.bayes { (c, c) } else { ((c * sd_hat).max(1e-6), (c * sd_d_hat).max(1e-6)) };
                for (q, &(rho, _)) in rhos.iter().enumerate() {
                    for (g, &(m, _)) in gains[j][q].iter_mut().zip(&GAINS) {
                        *g += ln_pair_rho(r - m * mu1, d, sd, sd_d, rho, eps, k);
                    }
                    nones[j][q] += ln_pair_rho(r, d, sd, sd_d, rho, eps, k);
                }
            }
            rs.push(r);
            ss.push(s);
            ds.push(d);
            let n = rs.len();
            if n < 2 {
                continue;
            }
            let gain = log_mix(scales.iter().zip(&gains).map(|(&(_, w), gq)| {
                w.ln()
                    + log_mix(
                        rhos.iter().zip(gq).map(|(&(_, rw), g)| rw.ln() + log_mix(GAINS.iter().zip(g).map(|(&(_, gw), v)| gw.ln() + v))),
                    )
            }));
            let none_mixed = log_mix(
                scales.iter().zip(&nones).map(|(&(_, w), vq)| w.ln() + log_mix(rhos.iter().zip(vq).map(|(&(_, rw), v)| rw.ln() + v))),
            );
            // No gain at its best: a mean of at most 0 (the median's, or 0), the sd that fits best.
            let m0 = median(&rs).min(0.0);
            let spread = rs.iter().map(|x| (x - m0).abs()).fold(0.0f64, f64::max).max(1e-6);
            let mut best = f64::NEG_INFINITY;
            // `fast`: no sd below a quarter of the pairs' robust sd is tried (none fits better).
            let mut sd = if self.fast && n >= 3 { (spread / 400.0).max(robust_sd(&rs) / 4.0) } else { spread / 400.0 };
            // `null0`: below a median under 0, no gain is fitted at a mean of 0 as well.
            let means: &[f64] = if self.null0 && m0 < 0.0 { &[m0, 0.0] } else { &[m0] };
            let steps = if self.rho_max > 0.0 { self.rho_steps } else { 0 };
            // ln likelihood of no gain at (sd, rho, eps, mean, mode share, mode distance in sds).
            // `sum_fit`: no gain reads each sum (but the first, which both sides take as given)
            // off the level that fits them best, where the gain side predicts it from those before.
            let with_sums: Vec<usize> = (0..rs.len()).filter(|&i| ds[i].is_some()).collect();
            let s_bar = with_sums.iter().map(|&i| ss[i]).sum::<f64>() / with_sums.len().max(1) as f64;
            let r_bar = with_sums.iter().map(|&i| rs[i]).sum::<f64>() / with_sums.len().max(1) as f64;
            let ll = |sd: f64, rho: f64, e: f64, m0n: f64, mq: f64, dz: f64| -> f64 {
                let level = s_bar - rho * (r_bar - m0n);
                rs.iter()
                    .zip(&ds)
                    .zip(&ss)
                    .map(|((&x, &d), &sum)| {
                        let d = if self.sum_fit { d.map(|_| sum - level) } else { d };
                        let c = ln_pair_rho(x - m0n, d, sd, sd, rho, e, k);
                        if mq == 0.0 {
                            return c;
                        }
                        let delta = dz * sd;
                        log_mix(
                            [
                                (1.0 - mq).ln() + c,
                                (mq / 2.0).ln() + ln_pair_rho(x - m0n - delta, d, sd, sd, rho, e, k),
                                (mq / 2.0).ln() + ln_pair_rho(x - m0n + delta, d, sd, sd, rho, e, k),
                            ]
                            .into_iter(),
                        )
                    })
                    .sum()
            };
            let mut at = (sd, 0.0, eps, m0, 0.0, 0.0);
            while sd <= spread * 2.0 {
                for q in 0..=steps {
                    let rho = if steps > 0 { -self.rho_max + 2.0 * self.rho_max * q as f64 / steps as f64 } else { 0.0 };
                    for (&e, &m0n) in epss.iter().flat_map(|e| means.iter().map(move |m| (e, m))) {
                        // The pure normal (eps 0) without modes only: the modes come with outliers.
                        for &(mq, dz) in mode_grid.iter().filter(|m| e > 0.0 || m.0 == 0.0) {
                            let v = ll(sd, rho, e, m0n, mq, dz);
                            if v > best {
                                best = v;
                                at = (sd, rho, e, m0n, mq, dz);
                            }
                        }
                    }
                }
                sd *= self.sd_step;
            }
            // `refine`: the best grid point's sd (and correlation) refined by golden sections, so
            // a coarse grid never under-fits no gain.
            if self.refine {
                let (sd0b, rho0, e, m0n, mq, dz) = at;
                let w = self.sd_step.ln();
                let (lsd, v) = golden(sd0b.ln() - w, sd0b.ln() + w, &|l| ll(l.exp(), rho0, e, m0n, mq, dz));
                best = best.max(v);
                if steps > 0 {
                    let r = self.rho_max / steps as f64 * 2.0;
                    let (rho, v) = golden((rho0 - r).max(-0.99), (rho0 + r).min(0.99), &|x| ll(lsd.exp(), x, e, m0n, mq, dz));
                    best = best.max(v);
                    let (_, v) = golden(lsd - w / 2.0, lsd + w / 2.0, &|l| ll(l.exp(), rho, e, m0n, mq, dz));
                    best = best.max(v);
                }
            }
            let log_lr = gain - best;
            let mean = robust_mean(&rs);
            if log_lr >= self.keep_at && mean >= self.min_mean && n >= self.min_pairs {
                if self.trace {
                    let z: Vec<String> = rs.iter().map(|x| format!("{:.1}", x / sd0)).collect();
                    let zd: Vec<String> = ds.iter().map(|x| x.map_or("-".into(), |x| format!("{:.1}", x / sd0))).collect();
                    eprintln!("keep n={n} lr={log_lr:.2} gain={gain:.2} best={best:.2} z=[{}] d=[{}]", z.join(" "), zd.join(" "));
                }
                return (Stop::Keep, n);
            }
            if gain - none_mixed <= self.futile_at {
                return (Stop::Futile, n);
            }
        }
        if self.rescue > 0.0 && rescue_keeps(&rs, self.rescue, self.min_mean) {
            return (Stop::Keep, self.max_pairs);
        }
        (Stop::Budget, self.max_pairs)
    }
}

/// The maximum of a unimodal `f` on [lo, hi] by 14 golden-section steps: (where, value).
fn golden(lo: f64, hi: f64, f: &dyn Fn(f64) -> f64) -> (f64, f64) {
    let g = 0.618_033_988_75;
    let (mut a, mut b) = (lo, hi);
    for _ in 0..14 {
        let (c, d) = (b - g * (b - a), a + g * (b - a));
        if f(c) > f(d) {
            b = d
        } else {
            a = c
        }
    }
    let x = (a + b) / 2.0;
    (x, f(x))
}

/// The budget's last look (`rescue` = its level): a one-sided t-test over the pairs, those over 4
/// robust sds from their median set aside, with a mean of at least `min_mean`.
fn rescue_keeps(x: &[f64], level: f64, min_mean: f64) -> bool {
    let kept = within_band(x, 1e-12);
    let n = kept.len();
    if n < 3 {
        return false;
    }
    let (mean, s) = mean_sd(&kept);
    mean >= min_mean && mean / (s / (n as f64).sqrt()) >= ratchet::stats::t_quantile(1.0 - level, (n - 1) as f64)
}

/// The mean of the pairs within 4 robust sds of their median (all below 4 pairs).
fn robust_mean(x: &[f64]) -> f64 {
    if x.len() < 4 {
        return x.iter().sum::<f64>() / x.len() as f64;
    }
    let kept = within_band(x, 1e-9);
    kept.iter().sum::<f64>() / kept.len().max(1) as f64
}

/// The values within 4 robust sds (never under `floor`) of their median.
fn within_band(x: &[f64], floor: f64) -> Vec<f64> {
    let (m, sd) = (median(x), robust_sd(x));
    x.iter().copied().filter(|v| (v - m).abs() <= 4.0 * sd.max(floor)).collect()
}

/// The product's robust ratio (`stats::sequential::robust`) on the same pairs: (stop, pairs read).
fn robust_decide(hist: Option<(f64, f64)>, warm: bool, levels: RobustLevels, pair: &dyn Fn(usize) -> (f64, f64)) -> (Stop, usize) {
    let test = RobustRatio { levels, max_pairs: 30, min_mean: 0.01f64.ln_1p(), history: hist, skip_first: warm };
    let pairs: Vec<(f64, Option<f64>)> = (0..30).map(pair).map(|(r, s)| (r, Some(s))).collect();
    match test.looks(&pairs) {
        (looks, Some(stop @ (Stop::Keep | Stop::Futile))) => (stop, looks.last().map_or(0, |l| l.used)),
        _ if test.rescue_keeps(&pairs[warm as usize..].iter().map(|p| p.0).collect::<Vec<_>>()) => (Stop::Keep, 30),
        _ => (Stop::Budget, 30),
    }
}

fn main() {
    let kv = args::Args::from_env();
    let product = kv.num("product", 0.0) > 0.0;
    // The product's own level unless `sums` is given.
    let product_levels = RobustLevels {
        sums: kv.num("sums", f64::from(u8::from(RobustLevels::CURRENT.sums))) > 0.0,
        outlier_share: kv.num("outlier_share", RobustLevels::CURRENT.outlier_share),
        modes_share: kv.num("modes_share", RobustLevels::CURRENT.modes_share),
        gain_modes: kv.num("gain_modes", RobustLevels::CURRENT.gain_modes),
        ..RobustLevels::CURRENT
    };
    let gain = kv.num("gain", 0.03);
    let trials = kv.num("trials", 500.0) as usize;
    let seed = kv.num("seed", 20260522.0) as u64;
    let shipped = kv.num("shipped", 1.0) > 0.0;
    let history = kv.num("history", 1.0) > 0.0;
    let want = kv.get("model").cloned().unwrap_or_default();
    let cfg = DecisionConfig::earlier();
    let seq = Sequential::new(cfg.params(None));
    let one = One {
        keep_at: kv.num("keep", 1000f64.ln()),
        futile_at: kv.num("futile", -2.0),
        max_pairs: 30,
        min_mean: 0.01f64.ln_1p(),
        eps: kv.num("eps", 0.1),
        k: kv.num("k", 8.0),
        sums: kv.num("sums", 1.0) > 0.0,
        df: kv.num("df", 8.0),
        sum_scale: kv.num("sum_scale", 1.0) > 0.0,
        sum_df: kv.num("sum_df", 4.0),
        rho_max: kv.num("rho_max", 0.0),
        gain_rho: kv.num("gain_rho", 1.0) > 0.0,
        min_pairs: kv.num("min_pairs", 0.0) as usize,
        distrust: kv.num("distrust", 0.0),
        own_sd: kv.num("own_sd", 0.0) > 0.0,
        d_mean: kv.num("d_mean", 0.0) > 0.0,
        trace: kv.num("trace", 0.0) > 0.0,
        null_eps: kv.num("null_eps", 0.0) > 0.0,
        modes: kv.num("modes", 0.0) > 0.0,
        sd_step: kv.num("sd_step", 1.06),
        modes_q: kv.num("modes_q", 0.5),
        bayes: kv.num("bayes", 0.0) > 0.0,
        bayes_step: kv.num("bayes_step", 1.1),
        vague: kv.num("vague", 0.2),
        rescue: kv.num("rescue", 0.0),
        fast: kv.num("fast", 0.0) > 0.0,
        null0: kv.num("null0", 0.0) > 0.0,
        rho_steps: kv.num("rho_steps", 12.0) as usize,
        refine: kv.num("refine", 0.0) > 0.0,
        sum_fit: kv.num("sum_fit", 0.0) > 0.0,
    };
    let positions = cell_positions(&seq);
    let cand = 1.0 / (1.0 + gain);
    println!("| model | gain | one: kept | runs | shipped: kept | runs |");
    println!("|---|---:|---:|---:|---:|---:|");
    let (mut sum_one, mut sum_ship, mut cells) = (0.0, 0.0, 0usize);
    let hp = kv.num("history_pairs", 61.0) as usize;
    let exact = want.strip_prefix('=');
    for s in scenarios().into_iter().filter(|s| exact.map_or(s.name.contains(want.as_str()), |e| s.name == e)) {
        // As `simulate --history-pairs 61` runs them.
        let s = s.with_history_pairs(hp);
        let (mut keeps, mut runs, mut skeeps, mut sruns) = (0usize, 0usize, 0usize, 0usize);
        for t in 0..trials {
            let mut rng = trial_rng(seed, t);
            let Draw { borrowed, states, confirm_states, sides } = draw_trial_by(Some(&seq), &s, positions, history, &mut rng);
            let hist = borrowed.as_ref().map(|b| (b.scale.sd, b.scale.df));
            // One phase: a jump "at the confirmation" comes after the first phase's 2 pairs.
            let st: Vec<f64> = match &confirm_states {
                Some(c) => states[..4].iter().chain(&c[4..]).copied().collect(),
                None => states.clone(),
            };
            let side = |p: usize, candidate: bool| sides.get(p).map_or(1.0, |f| if candidate { f.1 } else { f.0 });
            let warm = borrowed.as_ref().is_some_and(|b| b.shows_warmup());
            let pair = |i: usize| {
                let pos = 2 * i;
                let (a, b) = (st[pos], st[pos + 1]);
                let (inc, cnd) = if incumbent_first(Phase::Main, i) {
                    (a * side(pos, false), b * cand * side(pos + 1, true))
                } else {
                    (b * side(pos + 1, false), a * cand * side(pos, true))
                };
                ((inc / cnd).ln(), (inc * cnd).ln())
            };
            let (stop, pairs) = if product { robust_decide(hist, warm, product_levels, &pair) } else { one.decide(hist, warm, pair) };
            keeps += (stop == Stop::Keep) as usize;
            runs += 2 * pairs;
            if shipped {
                let trial_seq = seq.clone().with_history(with_knobs(borrowed, seq.borrowed.as_ref()));
                let (d, pos, _) = decide_sides(&trial_seq, &states, confirm_states.as_deref(), &sides, gain);
                skeeps += (d.verdict == Verdict::Keep) as usize;
                sruns += pos;
            }
        }
        let pct = |k: usize| 100.0 * k as f64 / trials as f64;
        let mean = |r: usize| r as f64 / trials as f64;
        println!(
            "| {} | {:+.0}% | {:.2}% | {:.1} | {:.2}% | {:.1} |",
            s.name,
            100.0 * gain,
            pct(keeps),
            mean(runs),
            pct(skeeps),
            mean(sruns)
        );
        sum_one += mean(runs);
        sum_ship += mean(sruns);
        cells += 1;
    }
    println!("mean runs over {cells} models: one {:.2}, shipped {:.2}", sum_one / cells as f64, sum_ship / cells as f64);
}
