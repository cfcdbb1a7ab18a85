//! The least runs any decision can spend at ratchet's levels, and tests that run near it: Wald's
//! SPRT with the noise known, the information bound for tests that keep their level when the
//! noise jumps above its calibration (for tests of the log-ratios alone and of whole pairs), and
//! two probe tests that hold it: a scale-free sequential test of the log-ratios, and a
//! group-sequential t-test of whole pairs.
//! `ratchet-lab simulate` prints them under its with-history table; lab/notes/decisions-history.md, "The floor".

use ratchet::stats::rng::Rng;
use ratchet::stats::sequential::likelihood::log_mix;
pub use ratchet::stats::sequential::likelihood::{Stop, WholePairLr};
use ratchet::stats::sequential::Borrowed;
pub use ratchet::stats::sequential::MIXTURE;

/// Expected pairs of Wald's sequential probability ratio test of no gain against a log-ratio
/// mean of `mu1`, when the true mean is `mu`, with the noise known (sd `sd` per pair), false
/// keeps `alpha` and power `1 - beta` at `mu1` (Wald 1947, ignoring the overshoot):
/// (L ln B + (1 - L) ln A) / E[z], A = (1 - beta) / alpha, B = beta / (1 - alpha),
/// E[z] = mu1 (mu - mu1 / 2) / sd^2, L the probability of accepting no gain. No test of the same
/// levels does better on average at `mu` = 0 or `mu1`: the floor for runs per decision.
pub fn sprt_pairs(mu: f64, mu1: f64, sd: f64, alpha: f64, beta: f64) -> f64 {
    let (a, b) = (((1.0 - beta) / alpha).ln(), (beta / (1.0 - alpha)).ln());
    let var = sd * sd;
    // h solves E[exp(h z)] = 1 for the log-likelihood ratio z of one pair.
    let h = 1.0 - 2.0 * mu / mu1;
    if h.abs() < 1e-9 {
        return -a * b / (mu1 * mu1 / var);
    }
    let l = ((h * a).exp() - 1.0) / ((h * a).exp() - (h * b).exp());
    (l * b + (1.0 - l) * a) / (mu1 * (mu - mu1 / 2.0) / var)
}

/// Wald's SPRT of [`sprt_pairs`] run pair by pair on normal log-ratios of mean `mu` and known sd
/// `sd`, with Wald's thresholds ln A and ln B, over `trials` seeded draws: the mean pairs it
/// takes (whole pairs, with the overshoot the formula ignores) and the share it keeps. Its
/// errors come out below `alpha` and `beta` (the overshoot again), so the test meeting them
/// exactly lies between this and the formula: the floor as a real test on whole pairs sees it.
pub fn sprt_run(mu: f64, mu1: f64, sd: f64, alpha: f64, beta: f64, trials: usize, seed: u64) -> (f64, f64) {
    sprt_run_jumped(mu, 1.0, mu1, sd, alpha, beta, trials, seed)
}

/// [`sprt_run`] on log-ratios whose sd is `jump` times the `sd` the test takes as known (the
/// noise jumped above its calibration).
#[allow(clippy::too_many_arguments)]
pub fn sprt_run_jumped(mu: f64, jump: f64, mu1: f64, sd: f64, alpha: f64, beta: f64, trials: usize, seed: u64) -> (f64, f64) {
    let mut rng = Rng::new(seed);
    let (mut pairs, mut keeps) = (0usize, 0usize);
    for _ in 0..trials {
        let (keep, n) = sprt_trial(mu, jump, mu1, sd, alpha, beta, &mut rng);
        pairs += n;
        keeps += keep as usize;
    }
    (pairs as f64 / trials as f64, keeps as f64 / trials as f64)
}

/// One decision of [`sprt_run_jumped`]'s test, drawing from `rng`: whether it keeps, and the
/// pairs it took.
pub fn sprt_trial(mu: f64, jump: f64, mu1: f64, sd: f64, alpha: f64, beta: f64, rng: &mut Rng) -> (bool, usize) {
    let (a, b) = (((1.0 - beta) / alpha).ln(), (beta / (1.0 - alpha)).ln());
    let (mut llr, mut pairs) = (0.0, 0usize);
    while b < llr && llr < a {
        let x = mu + jump * sd * rng.normal();
        llr += mu1 / (sd * sd) * (x - mu1 / 2.0);
        pairs += 1;
    }
    (llr >= a, pairs)
}

/// Draws per gain of the SPRT run that `ratchet-lab simulate` prints under its table (and per gain
/// of the scale-free test's cells there).
pub const SPRT_TRIALS: usize = 200_000;

/// The binary divergence d(p, q) = p ln(p / q) + (1 - p) ln((1 - p) / (1 - q)), in nats: the
/// least information that tells an event of probability `p` from one of probability `q`.
pub fn binary_divergence(p: f64, q: f64) -> f64 {
    let term = |a: f64, b: f64| if a == 0.0 { 0.0 } else { a * (a / b).ln() };
    term(p, q) + term(1.0 - p, 1.0 - q)
}

/// What a test reads of each pair: its log-ratio alone, or the whole pair (the log-ratio and
/// the log-sum, i.e. both runs). Under independent runs a pair's log-sum has the log-ratio's
/// variance and does not move with the gain, so it says how noisy the machine is now: ratchet's
/// variance guard reads it, so its floor is the whole pair's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reads {
    Ratios,
    WholePairs,
}

/// Kullback-Leibler divergence, in nats, of one pair under a gain (log-ratio N(`mu`, `sd`^2))
/// from one under no gain at `k` times the noise (N(0, (`k` `sd`)^2)); with the whole pair, plus
/// the log-sum's: N(m, `sd`^2) from N(m, (`k` `sd`)^2), the level m the same (a test must hold
/// its level at every level of the machine, so the closest do-nothing change has it).
fn pair_divergence(mu: f64, sd: f64, k: f64, reads: Reads) -> f64 {
    let ratio = k.ln() + (1.0 + (mu / sd).powi(2)) / (2.0 * k * k) - 0.5;
    match reads {
        Reads::Ratios => ratio,
        Reads::WholePairs => ratio + k.ln() + 1.0 / (2.0 * k * k) - 0.5,
    }
}

/// The floor for tests that must also hold their false keeps when the noise jumps: the pairs
/// any test spends on average at a true gain `mu` (log-ratio; sd `sd` a pair as calibrated) when
/// it keeps that gain with probability `1 - beta` and keeps a do-nothing change with probability
/// at most `alpha` whatever the noise, from the calibrated level up to `max_jump` times it.
/// For `mu` > 0: under no gain the floor is the known-noise one ([`sprt_pairs`] at 0), since the
/// gain's power is asked at the calibrated noise only (and there the log-sums are alike).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JumpFloor {
    pub pairs: f64,
    /// The noise level (times the calibration's) whose do-nothing changes look most like the gain:
    /// the one that sets the floor.
    pub jump: f64,
}

/// [`JumpFloor`] by the information inequality of sequential tests (Wald 1947 for the SPRT's
/// average sample number; in this form, Garivier & Kaufmann 2016, "Optimal best arm
/// identification with fixed confidence", COLT, Lemma 1): for any stopping rule and any two
/// models P (the gain) and Q (a do-nothing change), E_P[pairs] x KL(P, Q) >= d(P(keep),
/// Q(keep)) >= d(1 - beta, alpha). Every Q the test must hold its level under gives a bound;
/// the tightest is the Q closest to P, a do-nothing change at sd `k` x `sd`, clamped to [1,
/// `max_jump`]: k^2 = 1 + (mu / sd)^2 for a test of the log-ratios alone (the variance that
/// matches the gain's second moment), k^2 = 1 + (mu / sd)^2 / 2 for one that reads the whole
/// pair (the log-sums pull Q's noise back towards the calibrated one; the minimum of
/// [`pair_divergence`]). At `max_jump` = 1 this is the known-noise floor [`sprt_pairs`] at
/// `mu1` = `mu` either way. A lower bound, not a test: no test is known to reach it.
pub fn jump_safe_pairs(mu: f64, sd: f64, alpha: f64, beta: f64, max_jump: f64, reads: Reads) -> JumpFloor {
    let share = match reads {
        Reads::Ratios => 1.0,
        Reads::WholePairs => 0.5,
    };
    let jump = (1.0 + share * (mu / sd).powi(2)).sqrt().clamp(1.0, max_jump.max(1.0));
    JumpFloor { pairs: binary_divergence(1.0 - beta, alpha) / pair_divergence(mu, sd, jump, reads), jump }
}

/// A do-nothing machine's runs, for [`family_floor`]: each run's log-latency is the machine's
/// level, plus noise of sd `sd` (normal, or Student t with `tail_df` df scaled to that sd),
/// plus independent slowdowns (the probability of each and the log of its factor), all of it
/// independent from run to run.
#[derive(Debug, Clone, PartialEq)]
pub struct NullRuns {
    pub name: String,
    pub sd: f64,
    pub tail_df: Option<f64>,
    pub slowdowns: Vec<(f64, f64)>,
    /// The noise may be at any multiple of `sd` from 1 to this (1: at `sd` only), as a jump
    /// above the calibration leaves it.
    pub max_jump: f64,
}

impl NullRuns {
    /// ln of the density of one run's log-latency at `x`, the level `level`, the noise `jump`
    /// times `sd`: a mixture over which slowdowns hit the run.
    fn ln_density(&self, x: f64, level: f64, jump: f64) -> f64 {
        let sd = self.sd * jump;
        let noise = |z: f64| match self.tail_df {
            Some(df) => {
                // Student t scaled to sd `sd`: scale sd sqrt((df - 2) / df).
                use statrs::function::gamma::ln_gamma;
                let scale = sd * ((df - 2.0) / df).sqrt();
                let u = z / scale;
                ln_gamma((df + 1.0) / 2.0)
                    - ln_gamma(df / 2.0)
                    - 0.5 * (df * std::f64::consts::PI).ln()
                    - scale.ln()
                    - (df + 1.0) / 2.0 * (1.0 + u * u / df).ln()
            }
            None => -0.5 * (z / sd).powi(2) - sd.ln() - 0.5 * (2.0 * std::f64::consts::PI).ln(),
        };
        // Every combination of slowdowns: its probability and its total shift.
        let mut parts = vec![(0.0f64, 0.0f64)];
        for &(p, shift) in &self.slowdowns {
            parts = parts.iter().flat_map(|&(lw, s)| [(lw + (1.0 - p).ln(), s), (lw + p.ln(), s + shift)]).collect();
        }
        log_mix(parts.iter().map(|&(lw, s)| lw + noise(x - level - s)))
    }

    /// KL divergence, in nats, of one whole pair under a gain (incumbent N(0, `run_sd`^2),
    /// candidate N(-`mu`, `run_sd`^2), log-latencies) from one pair of this machine's runs at
    /// `level` and `jump`: each run's normal entropy against the machine's density, by
    /// Simpson's rule over +-10 sds.
    fn pair_divergence(&self, mu: f64, run_sd: f64, level: f64, jump: f64) -> f64 {
        const STEPS: usize = 400;
        let run = |m: f64| {
            let (a, h) = (m - 10.0 * run_sd, 20.0 * run_sd / STEPS as f64);
            let cross: f64 = (0..=STEPS)
                .map(|i| {
                    let x = a + i as f64 * h;
                    let w = if i == 0 || i == STEPS {
                        1.0
                    } else if i % 2 == 1 {
                        4.0
                    } else {
                        2.0
                    };
                    let z = (x - m) / run_sd;
                    let pdf = (-0.5 * z * z).exp() / (run_sd * (2.0 * std::f64::consts::PI).sqrt());
                    w * pdf * self.ln_density(x, level, jump)
                })
                .sum::<f64>()
                * h
                / 3.0;
            -0.5 * (2.0 * std::f64::consts::PI * std::f64::consts::E * run_sd * run_sd).ln() - cross
        };
        run(0.0) + run(-mu)
    }

    /// The machine's do-nothing change closest to the gain: the least [`Self::pair_divergence`]
    /// over its level and its jump in [1, `max_jump`], by a grid then coordinate descent.
    /// Returns (KL, level, jump).
    fn closest(&self, mu: f64, run_sd: f64) -> (f64, f64, f64) {
        let kl = |c: f64, lk: f64| self.pair_divergence(mu, run_sd, c, lk.exp());
        let lmax = self.max_jump.max(1.0).ln();
        let reach = self.slowdowns.iter().map(|s| s.1).fold(0.0, f64::max) + mu + 4.0 * run_sd;
        let (mut best, mut c, mut lk) = (f64::INFINITY, 0.0, 0.0);
        for i in 0..=40 {
            let ci = 4.0 * run_sd - reach * i as f64 / 40.0;
            for j in 0..=if lmax > 0.0 { 12 } else { 0 } {
                let lj = lmax * j as f64 / 12.0;
                let v = kl(ci, lj);
                if v < best {
                    (best, c, lk) = (v, ci, lj);
                }
            }
        }
        let (mut dc, mut dk) = (reach / 40.0, lmax / 12.0);
        while dc > 1e-7 * run_sd {
            let mut moved = false;
            for (ec, ek) in [(dc, 0.0), (-dc, 0.0), (0.0, dk), (0.0, -dk)] {
                let (nc, nk) = (c + ec, (lk + ek).clamp(0.0, lmax));
                let v = kl(nc, nk);
                if v < best - 1e-15 {
                    (best, c, lk, moved) = (v, nc, nk, true);
                }
            }
            if !moved {
                dc /= 2.0;
                dk /= 2.0;
            }
        }
        (best, c, lk.exp())
    }
}

/// One machine's bound in [`family_floor`].
#[derive(Debug, Clone, PartialEq)]
pub struct MachineFloor {
    pub name: String,
    /// The least KL a pair, the pairs it bounds, and where the machine's closest do-nothing
    /// change sits: its level (log, relative to the incumbent's) and noise (times `sd`).
    pub divergence: f64,
    pub pairs: f64,
    pub level: f64,
    pub jump: f64,
}

/// The information bound of [`jump_safe_pairs`] over a family of do-nothing machines, any
/// shape: a test that keeps a gain `mu` (log-ratio; normal runs, a pair's sd `sd` as
/// calibrated) with probability `1 - beta` and keeps a do-nothing change with probability at
/// most `alpha` on every machine of `family` spends on average at least d(1 - beta, alpha) /
/// KL(gain, machine) pairs, for each machine; the floor is the largest, from the machine whose
/// closest do-nothing change looks most like the gain. The test reads whole pairs (both runs).
/// With one normal machine that may jump to `max_jump` this is
/// `jump_safe_pairs(.., Reads::WholePairs)` again (a test).
pub fn family_floor(mu: f64, sd: f64, alpha: f64, beta: f64, family: &[NullRuns]) -> Vec<MachineFloor> {
    let run_sd = sd / std::f64::consts::SQRT_2;
    let d = binary_divergence(1.0 - beta, alpha);
    family
        .iter()
        .map(|m| {
            let (divergence, level, jump) = m.closest(mu, run_sd);
            MachineFloor { name: m.name.clone(), divergence, pairs: d / divergence, level, jump }
        })
        .collect()
}

/// The floor of [`family_floor`] sharpened for tests that measure whole pairs: against one
/// machine's closest do-nothing change Q (its level and noise from [`family_floor`]), the
/// expected pairs under the gain P of Wald's SPRT of P against Q with its two thresholds tuned
/// until its errors are `alpha` under Q and `beta` under P, overshoot and all. For one simple
/// P and one simple Q no test with those errors spends fewer pairs on average under P (A. Wald &
/// J. Wolfowitz, "Optimum character of the sequential probability ratio test", Ann. Math.
/// Statist. 19, 1948), and a test that must hold its level on the whole machine must hold it at
/// Q too, so this bounds every such test from below, and more tightly than the information
/// inequality, which leaves out that a test stops on whole pairs, past its threshold. Drawn
/// under P only: Q's error is E_P[e^-S 1{keep}] at the stop (the change of measure), so no
/// rare event is simulated. `paths` paths of at most `SPRT_FLOOR_MAX_PAIRS` pairs, seeded.
#[allow(clippy::too_many_arguments)]
pub fn sprt_floor(mu: f64, sd: f64, alpha: f64, beta: f64, machine: &NullRuns, q: &MachineFloor, paths: usize, seed: u64) -> SprtFloor {
    let run_sd = sd / std::f64::consts::SQRT_2;
    let ln_p = |x: f64, m: f64| -0.5 * ((x - m) / run_sd).powi(2) - run_sd.ln() - 0.5 * (2.0 * std::f64::consts::PI).ln();
    let mut rng = Rng::new(seed);
    // Each path's running log-likelihood ratio, pair by pair.
    let sums: Vec<f64> = (0..paths)
        .flat_map(|_| {
            let mut s = 0.0;
            (0..SPRT_FLOOR_MAX_PAIRS)
                .map(|_| {
                    let (inc, cand) = (run_sd * rng.normal(), -mu + run_sd * rng.normal());
                    s += ln_p(inc, 0.0) - machine.ln_density(inc, q.level, q.jump) + ln_p(cand, -mu)
                        - machine.ln_density(cand, q.level, q.jump);
                    s
                })
                .collect::<Vec<f64>>()
        })
        .collect();
    // (P(keep) under P, P(keep) under Q, mean pairs under P) of the SPRT keeping at S >= upper
    // and stopping at S <= -lower; a path that reaches neither within the cap counts as going on
    // to the cap without a keep (it makes the pairs a shade low, never high).
    let run = |upper: f64, lower: f64| {
        let (mut power, mut size, mut pairs) = (0.0, 0.0, 0usize);
        for path in sums.chunks(SPRT_FLOOR_MAX_PAIRS) {
            let stop = path.iter().position(|&s| s >= upper || s <= -lower);
            pairs += stop.map_or(SPRT_FLOOR_MAX_PAIRS, |i| i + 1);
            if let Some(i) = stop.filter(|&i| path[i] >= upper) {
                power += 1.0;
                size += (-path[i]).exp();
            }
        }
        (power / paths as f64, size / paths as f64, pairs as f64 / paths as f64)
    };
    // For an upper threshold, the lower one that gives the power exactly (power rises with it).
    let lower_for = |upper: f64| {
        let (mut lo, mut hi) = (0.0, 20.0);
        for _ in 0..30 {
            let mid = (lo + hi) / 2.0;
            if run(upper, mid).0 < 1.0 - beta {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        hi
    };
    // The upper threshold whose error under Q is alpha (it falls as the threshold rises).
    let (mut lo, mut hi) = (0.0, 2.0 * (1.0 / alpha).ln() + 5.0);
    for _ in 0..30 {
        let mid = (lo + hi) / 2.0;
        if run(mid, lower_for(mid)).1 > alpha {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let lower = lower_for(hi);
    SprtFloor { pairs: run(hi, lower).2, upper: hi, lower }
}

/// [`sprt_floor`]'s answer: the SPRT's mean pairs under the gain, and its thresholds (it keeps
/// once the log-likelihood ratio reaches `upper`, stops at `-lower`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SprtFloor {
    pub pairs: f64,
    pub upper: f64,
    pub lower: f64,
}

/// The most pairs a path of [`sprt_floor`] is drawn to: far past where the tuned thresholds stop
/// every path at the gains and machines it is asked about (about 6 pairs on average at +3%).
pub const SPRT_FLOOR_MAX_PAIRS: usize = 64;

/// The largest noise jump the floor and the scale-free test are held to: point 4 of the power
/// work (docs/decisions.md) asks for the false-keep bound at jumps of 1.5x-10x.
pub const MAX_JUMP: f64 = 10.0;

/// A sequential test whose false-keep level holds whatever the noise level, calibrated or not,
/// built so that it needs no variance guard and no second phase: the probe of how near the floor
/// a test that holds point 4 by construction comes (`lab/examples/floor_probe.rs`). After each pair
/// it compares the pairs' normal likelihood under a gain (a mixture of [`MIXTURE`]'s gains, each
/// pair's sd the calibration's pooled with the pairs before it) with their largest likelihood
/// under no gain (at the sd that fits them best). For each fixed true sd s the ratio to the
/// no-gain likelihood at s is a nonnegative martingale under no gain (the gains' sd is known
/// before each pair), and the largest no-gain likelihood is at least that one, so by Ville's
/// inequality (1939) the test keeps a do-nothing change with probability at most
/// `exp(-keep_at)` at every s: the calibration steers only its power. It stops for futility
/// when, at the calibrated sd, no gain is `exp(-futile_at)` times as likely as `mu1`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScaleFree {
    /// The gain the test is powered for (log-ratio), and the calibrated sd of one pair.
    pub mu1: f64,
    pub sd: f64,
    /// ln of the likelihood ratio that keeps (ln 1/alpha), and of the one that stops for
    /// futility (ln beta, negative).
    pub keep_at: f64,
    pub futile_at: f64,
    pub max_pairs: usize,
}

impl ScaleFree {
    pub fn new(mu1: f64, sd: f64, alpha: f64, beta: f64, max_pairs: usize) -> ScaleFree {
        ScaleFree { mu1, sd, keep_at: (1.0 / alpha).ln(), futile_at: beta.ln(), max_pairs }
    }

    /// Decide on the pairs' oriented log-ratios (`pair(i)`, positive when the candidate is
    /// faster), drawn one at a time: how it ended and the pairs it took.
    pub fn decide(&self, mut pair: impl FnMut(usize) -> f64) -> (Stop, usize) {
        let var = self.sd * self.sd;
        // Each gain's log-likelihood (without the constant every term shares), the pairs' sum,
        // sum of squares, and sum of squared deviations from their running mean.
        let mut gains = [0.0; MIXTURE.len()];
        let (mut s1, mut s2, mut dev) = (0.0, 0.0, 0.0);
        for i in 0..self.max_pairs {
            // The gains' sd: the calibration's, pooled with the pairs so far at the
            // calibration's df, known before this pair is drawn.
            let sd_i = ((CALIBRATION_DF * var + dev) / (CALIBRATION_DF + i as f64)).sqrt();
            let x = pair(i);
            for (g, (times, _)) in gains.iter_mut().zip(MIXTURE) {
                *g += -(x - times * self.mu1).powi(2) / (2.0 * sd_i * sd_i) - sd_i.ln();
            }
            let n = (i + 1) as f64;
            let mean_before = if i == 0 { 0.0 } else { s1 / i as f64 };
            s1 += x;
            s2 += x * x;
            dev += (x - mean_before) * (x - s1 / n);
            let gain = log_mix(MIXTURE.iter().zip(gains).map(|(&(_, w), g)| w.ln() + g));
            // The no-gain likelihood at its best sd, sqrt(s2 / n); identical zero pairs have
            // none (ln 0), and nothing keeps.
            let none = -0.5 * n * (s2 / n).ln() - 0.5 * n;
            if gain - none >= self.keep_at {
                return (Stop::Keep, i + 1);
            }
            if self.mu1 * (s1 - n * self.mu1 / 2.0) / var <= self.futile_at {
                return (Stop::Futile, i + 1);
            }
        }
        (Stop::Budget, self.max_pairs)
    }
}

/// A sequential test that a simulated cell can run on a trial's pairs: each pair as its
/// oriented log-ratio (positive when the candidate is faster) and its log-sum, with the sd of
/// one pair as the trial's calibration gave it (which a test may use for power, never for its
/// level).
pub trait PairTest {
    fn max_pairs(&self) -> usize;
    /// `history`: the trial's calibration (a test may read the first pairs around the warm-up it
    /// shows, or keep at the level its modes call for).
    fn decide_pairs(&self, calibrated_sd: f64, history: Option<&Borrowed>, pair: &mut dyn FnMut(usize) -> (f64, f64)) -> (Stop, usize);
}

impl PairTest for ScaleFree {
    fn max_pairs(&self) -> usize {
        self.max_pairs
    }
    /// The log-ratios alone.
    fn decide_pairs(&self, calibrated_sd: f64, _history: Option<&Borrowed>, pair: &mut dyn FnMut(usize) -> (f64, f64)) -> (Stop, usize) {
        ScaleFree { sd: calibrated_sd, ..*self }.decide(|i| pair(i).0)
    }
}

/// A one-sided group-sequential t-test of whole pairs, with no borrowed scale: the probe of how
/// near the whole-pair floor ([`Reads::WholePairs`]) a test that reads the log-sums as evidence
/// about the noise comes. At each look (every pair from the second) the pairs' mean log-ratio is
/// divided by the standard error from both spreads: the log-ratios' squared deviations from
/// their mean and the log-sums' from theirs, over 2n - 2 df. Under independent normal runs of
/// one noise level and no gain, a pair's log-ratio and log-sum are independent with one
/// variance, so that ratio is Student's t at 2n - 2 df whatever the noise level: a look's false
/// keeps are its level at every noise, and by the union bound the looks' sum to `alpha`
/// (Pocock-type spending, alpha ln(1 + (e - 1) n / max_pairs); Lan & DeMets 1983). It keeps at
/// a significant look with a mean of at least `min_effect`, and stops for futility when the
/// look's one-sided (1 - `beta`) upper bound is below `min_effect`. A positively correlated
/// machine makes the sums noisier than the ratios, which only widens the error; a warm-up ramp
/// or a step does too (and costs power). Runs from a mixture of modes are not normal, and there
/// the looks' far tails do not hold: `floor_probe test=pairs` measures 0.41% false keeps on the
/// bimodal machine (lab/notes/decisions-history.md, "A test of whole pairs").
///
/// Two variants, for the probe of those failures: [`PairT::with_calibration_floor`] never lets
/// the error's sd fall below the calibration's (a mixture's pairs can agree by chance, and
/// their spread with them), and [`PairT::with_successive_sums`] reads the log-sums' spread from
/// successive differences (which a ramp or a trend hardly moves), at the df that matches that
/// estimator's variance (von Neumann 1941: 2(n - 1)^2 / (3n - 4)), an approximation.
#[derive(Debug, Clone, PartialEq)]
pub struct PairT {
    pub max_pairs: usize,
    pub min_effect: f64,
    alpha: f64,
    beta: f64,
    floor: bool,
    successive: bool,
    /// Per look, from 2 pairs: the critical t and the futility quantile.
    crit: Vec<f64>,
    futile: Vec<f64>,
}

impl PairT {
    pub fn new(alpha: f64, beta: f64, max_pairs: usize, min_effect: f64) -> PairT {
        PairT { max_pairs: max_pairs.max(2), min_effect, alpha, beta, floor: false, successive: false, crit: vec![], futile: vec![] }
            .tabled()
    }

    pub fn with_calibration_floor(self) -> PairT {
        PairT { floor: true, ..self }
    }

    pub fn with_successive_sums(self) -> PairT {
        PairT { successive: true, ..self }.tabled()
    }

    /// The error's df at `n` pairs: the log-ratios' n - 1, and the log-sums' n - 1 or, read
    /// from successive differences, 2(n - 1)^2 / (3n - 4).
    fn df(&self, n: usize) -> f64 {
        let m = (n - 1) as f64;
        m + if self.successive { 2.0 * m * m / (3.0 * n as f64 - 4.0) } else { m }
    }

    fn tabled(self) -> PairT {
        use statrs::distribution::{ContinuousCDF, StudentsT};
        let (alpha, max) = (self.alpha, self.max_pairs);
        let spent = |n: usize| alpha * (1.0 + (std::f64::consts::E - 1.0) * n as f64 / max as f64).ln();
        let (mut crit, mut futile) = (vec![], vec![]);
        for n in 2..=max {
            let level = spent(n) - if n == 2 { 0.0 } else { spent(n - 1) };
            let t = StudentsT::new(0.0, 1.0, self.df(n)).expect("df > 0");
            crit.push(t.inverse_cdf(1.0 - level));
            futile.push(t.inverse_cdf(1.0 - self.beta));
        }
        PairT { crit, futile, ..self }
    }

    /// Decide on the pairs (`pair(i)`: oriented log-ratio, log-sum), drawn one at a time, the
    /// calibration's sd of a pair beside them (read only with the floor): how it ended and the
    /// pairs it took.
    pub fn decide(&self, calibrated_sd: f64, mut pair: impl FnMut(usize) -> (f64, f64)) -> (Stop, usize) {
        // Running means and sums of squared deviations (Welford), for the ratios and the sums;
        // and half the squared successive differences of the sums.
        let (mut mr, mut qr, mut ms, mut qs, mut qd, mut last) = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
        for i in 0..self.max_pairs {
            let (r, s) = pair(i);
            let n = (i + 1) as f64;
            let (dr, ds) = (r - mr, s - ms);
            mr += dr / n;
            ms += ds / n;
            qr += dr * (r - mr);
            qs += ds * (s - ms);
            if i > 0 {
                qd += (s - last).powi(2) / 2.0;
            }
            last = s;
            if i == 0 {
                continue;
            }
            let sums = if self.successive { qd } else { qs };
            let mut sd = ((qr + sums) / (2.0 * n - 2.0)).sqrt();
            if self.floor {
                sd = sd.max(calibrated_sd);
            }
            let se = sd / n.sqrt();
            let k = i - 1;
            // Identical pairs (no spread at all): the sign decides, as in the procedure.
            if (se == 0.0 && mr > 0.0 || mr / se >= self.crit[k]) && mr >= self.min_effect {
                return (Stop::Keep, i + 1);
            }
            if mr + self.futile[k] * se < self.min_effect {
                return (Stop::Futile, i + 1);
            }
        }
        (Stop::Budget, self.max_pairs)
    }
}

impl PairTest for PairT {
    fn max_pairs(&self) -> usize {
        self.max_pairs
    }
    fn decide_pairs(&self, calibrated_sd: f64, _history: Option<&Borrowed>, pair: &mut dyn FnMut(usize) -> (f64, f64)) -> (Stop, usize) {
        self.decide(calibrated_sd, pair)
    }
}

impl PairTest for WholePairLr {
    fn max_pairs(&self) -> usize {
        self.max_pairs
    }
    fn decide_pairs(&self, calibrated_sd: f64, history: Option<&Borrowed>, pair: &mut dyn FnMut(usize) -> (f64, f64)) -> (Stop, usize) {
        let warm = history.is_some_and(Borrowed::shows_warmup);
        let (one_mode, modes_pairs) = history.map_or((false, 0), |b| (b.one_mode(), b.modes_pairs));
        self.for_history(one_mode, modes_pairs).decide(calibrated_sd, warm, pair)
    }
}

/// [`PairT`]'s futility level: the 40% upper bound, chosen by numpy over normal pairs at CV 1%
/// for 95% power at +3% with the fewest runs (0.4: 98.4% in 14.5 runs; 0.5: 97.1% in 14.3;
/// 0.6: 95.0% in 13.9; budget 16 pairs).
pub const PAIR_T_BETA: f64 = 0.6;

/// [`ScaleFree`]'s futility level: power 95.9% [95.4, 96.3] at +3% and CV 1% (`floor_probe
/// beta=0.1 trials=8000`; 0.15 gave 94.6%, 0.2 93.3%).
pub const FREE_BETA: f64 = 0.1;

/// Degrees of freedom the calibration's sd counts for in the gains' sd (`ratchet calibrate`'s
/// 16 pairs).
pub const CALIBRATION_DF: f64 = 15.0;

/// The procedure's two phases as designed, without what holds them on real machines: its look
/// grid, levels and futility bounds (`Sequential`'s own plan) read on independent normal
/// log-ratios, the borrowed scale the history's sd pooled with the pairs' own residuals times
/// the safety factor, with no variance guard, outlier rule, sums, warm-up profile, trimmed
/// futility reading or rescue. What the design itself costs, against the floors above and the
/// procedure's own cells (lab/notes/decisions-history.md, "What the two phases cost").
#[derive(Debug, Clone)]
pub struct TwoPhases {
    seq: ratchet::stats::sequential::Sequential,
    /// The history's df; `None`: the scale is known exactly (normal quantiles, no pooling).
    pub history_df: Option<f64>,
}

impl TwoPhases {
    /// The design of `params` with history knobs `b` (their scale is ignored: each trial draws
    /// its own calibration of `history_df` df).
    pub fn new(params: ratchet::stats::sequential::Params, b: ratchet::stats::sequential::Borrowed, history_df: Option<f64>) -> TwoPhases {
        TwoPhases { seq: ratchet::stats::sequential::Sequential::new(params).with_history(Some(b)), history_df }
    }

    /// Mean runs and share kept over `trials` decisions at a true log-ratio mean `mu`, pairs of
    /// sd `sd`, each trial with its own calibration.
    pub fn run(&self, mu: f64, sd: f64, trials: usize, seed: u64) -> (f64, f64) {
        let (mut runs, mut keeps) = (0usize, 0usize);
        let mut rng = Rng::new(seed);
        for _ in 0..trials {
            let (kept, pairs) = self.trial(mu, sd, &mut rng);
            runs += 2 * pairs;
            keeps += kept as usize;
        }
        (runs as f64 / trials as f64, keeps as f64 / trials as f64)
    }

    /// One decision: whether it kept, and the pairs it measured.
    fn trial(&self, mu: f64, sd: f64, rng: &mut Rng) -> (bool, usize) {
        let b = self.seq.borrowed.as_ref().expect("a borrowed scale");
        let p = &self.seq.params;
        let min_log = (1.0 + p.min_effect_pct / 100.0).ln();
        // The calibration's variance: sd^2 chi^2(df) / df.
        let hist = self.history_df.map(|df| {
            let ss: f64 = (0..df as usize).map(|_| (rng.normal() * sd).powi(2)).sum();
            (ss, df)
        });
        // The procedure's own quantiles (memoized; normal at infinite df, the noise known).
        let quantile = |q: f64, df: f64| self.seq.tq(q, df);
        // Each phase: looks with levels and futility levels, keep-worthy when past the level with
        // at least `floor` as its mean; returns (passed, pairs, residual ss and df).
        let mut phase = |looks: &[usize], alphas: &[f64], beta: &dyn Fn(usize) -> f64, floor: f64, prior: (f64, f64)| {
            let (mut sum, mut mean, mut ss) = (0.0, 0.0, 0.0);
            let mut n = 0usize;
            for (k, (&at, &a)) in looks.iter().zip(alphas).enumerate() {
                while n < at {
                    let x = mu + sd * rng.normal();
                    n += 1;
                    sum += x;
                    let m = sum / n as f64;
                    ss += (x - mean) * (x - m);
                    mean = m;
                }
                let (scale, df) = match hist {
                    Some((hss, hdf)) => {
                        let (tss, tdf) = (hss + prior.0 + ss, hdf + prior.1 + (n - 1) as f64);
                        ((tss / tdf).sqrt(), tdf)
                    }
                    None => (sd, f64::INFINITY),
                };
                let se = b.safety * scale / (n as f64).sqrt();
                if mean / se >= quantile(1.0 - a, df) && mean >= floor {
                    return (true, n, ss, (n - 1) as f64);
                }
                if k + 1 == looks.len() || mean + quantile(1.0 - beta(n), df) * se < min_log {
                    return (false, n, ss, (n - 1) as f64);
                }
            }
            unreachable!("the last look ends the phase")
        };
        let main = self.seq.main_params();
        let (looks, alphas) = (main.looks(), self.seq.main_alphas(&main));
        let first = |n: usize| if n < p.min_pairs { b.early_beta } else { b.futility_beta };
        let (passed, n1, ss, df) = phase(&looks, &alphas, &first, min_log, (0.0, 0.0));
        if !passed || !p.confirm {
            return (passed, n1);
        }
        let (clooks, calphas) = self.seq.confirm_plan();
        // The confirmation needs a mean above 0, not the minimum effect.
        let (kept, n2, _, _) = phase(&clooks, &calphas, &|_| b.confirm_beta, f64::MIN_POSITIVE, (ss, df));
        (kept, n1 + n2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sprt_floor_matches_wald_s_formula() {
        // Wald's formulas evaluated independently in Python (math.log, math.exp): no gain, +3%,
        // +10% against +3% at CV 1% (sd of a pair sqrt(2) x 1%), false keeps 0.1%, power 95%.
        let (mu1, sd) = ((1.03f64).ln(), std::f64::consts::SQRT_2 * 0.01);
        let pairs = |mu: f64| sprt_pairs(mu, mu1, sd, 0.001, 0.05);
        assert!((pairs(0.0) - 1.366511490271298).abs() < 1e-9, "{}", pairs(0.0));
        assert!((pairs(mu1) - 2.913465172189708).abs() < 1e-9, "{}", pairs(mu1));
        assert!((pairs(1.1f64.ln()) - 0.5760779952462686).abs() < 1e-9, "{}", pairs(1.1f64.ln()));
        // Continuous through the midpoint, where h = 0.
        assert!((pairs(mu1 / 2.0) - pairs(mu1 / 2.0 + 1e-7)).abs() < 1e-3);
    }

    #[test]
    fn the_sprt_run_on_whole_pairs_matches_an_independent_simulation() {
        // The same test simulated in Python (numpy, 2,000,000 draws each, standard errors
        // 0.001 or less): no gain 2.2100 pairs, keeps 0.031%; +3% 3.9033 pairs, keeps 98.48%;
        // +10% 1.0078 pairs, keeps 100%.
        let (mu1, sd) = ((1.03f64).ln(), std::f64::consts::SQRT_2 * 0.01);
        let run = |mu: f64, seed: u64| sprt_run(mu, mu1, sd, 0.001, 0.05, 200_000, seed);
        let (n0, k0) = run(0.0, 1);
        assert!((n0 - 2.2100).abs() < 0.02 && k0 < 0.001, "{n0} {k0}");
        let (n3, k3) = run(mu1, 2);
        assert!((n3 - 3.9033).abs() < 0.03 && (k3 - 0.9848).abs() < 0.002, "{n3} {k3}");
        let (n10, k10) = run(1.1f64.ln(), 3);
        assert!((n10 - 1.0078).abs() < 0.005 && k10 > 0.9999, "{n10} {k10}");
        // With the noise doubled (sd taken as known), far above the levels: 7.59% of 400000 in
        // the same numpy simulation.
        let (_, kj) = sprt_run_jumped(0.0, 2.0, mu1, sd, 0.001, 0.05, 200_000, 4);
        assert!((kj - 0.0759).abs() < 0.003, "{kj}");
        // Never under the formula's figure, which ignores the overshoot.
        assert!(n0 > sprt_pairs(0.0, mu1, sd, 0.001, 0.05) && n3 > sprt_pairs(mu1, mu1, sd, 0.001, 0.05));
    }

    #[test]
    fn the_jump_safe_floor_matches_the_information_bound_evaluated_independently() {
        // Python (math.log, math.sqrt): d(0.95, 0.001) = 6.363902296703837 nats; +3% at CV 1%
        // (a pair's sd sqrt(2) x 1%), the log-ratios alone: least favourable noise
        // 2.317026963540489x, 7.573505638541303 pairs; +10%: 6.813233584111419x,
        // 3.3164898034800667 pairs; held only to 2x: 7.363719191173221.
        let (mu1, sd) = ((1.03f64).ln(), std::f64::consts::SQRT_2 * 0.01);
        let ratios = |mu: f64, max: f64| jump_safe_pairs(mu, sd, 0.001, 0.05, max, Reads::Ratios);
        assert!((binary_divergence(0.95, 0.001) - 6.363902296703837).abs() < 1e-12);
        let f = ratios(mu1, MAX_JUMP);
        assert!((f.jump - 2.317026963540489).abs() < 1e-12 && (f.pairs - 7.573505638541303).abs() < 1e-9, "{f:?}");
        let f = ratios(1.1f64.ln(), MAX_JUMP);
        assert!((f.jump - 6.813233584111419).abs() < 1e-12 && (f.pairs - 3.3164898034800667).abs() < 1e-9, "{f:?}");
        let f = ratios(mu1, 2.0);
        assert!(f.jump == 2.0 && (f.pairs - 7.363719191173221).abs() < 1e-9, "{f:?}");
        // Held to no jump at all, it is the known-noise floor: Wald's formula at the gain.
        let known = ratios(mu1, 1.0);
        assert!((known.pairs - sprt_pairs(mu1, mu1, sd, 0.001, 0.05)).abs() < 1e-9, "{known:?}");
        // The more jump a test must survive, the more it spends.
        assert!(ratios(mu1, 1.5).pairs < ratios(mu1, MAX_JUMP).pairs);
    }

    #[test]
    fn reading_the_log_sums_lowers_the_jump_safe_floor_to_the_whole_pair_s_bound() {
        // Python, the whole pair (KL 2 ln k + (2 + r) / (2 k^2) - 1, r = (mu / sd)^2, minimised
        // in closed form and on a grid of k in [1, 10] by numpy): +3%: k = 1.7844626571847417,
        // 5.4944843508969905 pairs (10.99 runs, against 15.1 for the log-ratios alone); +10%:
        // 4.869299326990678x, 2.010139957084259 pairs.
        let (mu1, sd) = ((1.03f64).ln(), std::f64::consts::SQRT_2 * 0.01);
        let whole = |mu: f64, max: f64| jump_safe_pairs(mu, sd, 0.001, 0.05, max, Reads::WholePairs);
        let f = whole(mu1, MAX_JUMP);
        assert!((f.jump - 1.7844626571847417).abs() < 1e-12 && (f.pairs - 5.4944843508969905).abs() < 1e-9, "{f:?}");
        let f = whole(1.1f64.ln(), MAX_JUMP);
        assert!((f.jump - 4.869299326990678).abs() < 1e-12 && (f.pairs - 2.010139957084259).abs() < 1e-9, "{f:?}");
        // The closed form's k is the closest do-nothing change: any other noise level is
        // further from the gain and gives a weaker (smaller) bound.
        for k in [1.0, 1.5, 2.0, 2.317, 3.0, 10.0] {
            let at = binary_divergence(0.95, 0.001) / pair_divergence(mu1, sd, k, Reads::WholePairs);
            assert!(at <= whole(mu1, MAX_JUMP).pairs + 1e-9, "{k}: {at}");
        }
        // More information never raises a bound; with no jump the log-sums say nothing new.
        assert!(whole(mu1, MAX_JUMP).pairs < jump_safe_pairs(mu1, sd, 0.001, 0.05, MAX_JUMP, Reads::Ratios).pairs);
        assert!((whole(mu1, 1.0).pairs - sprt_pairs(mu1, mu1, sd, 0.001, 0.05)).abs() < 1e-9);
    }

    #[test]
    fn the_whole_pair_sprt_floor_has_the_errors_it_was_tuned_to_and_lies_above_the_information_bound() {
        // Tuned by the change of measure (draws under the gain only) at levels loose enough to
        // check by drawing under each model directly: the 50/50 machine's closest do-nothing
        // change (half the runs 3% slower, the fast mode on the candidate's level).
        let (mu, sd, alpha, beta) = ((1.03f64).ln(), std::f64::consts::SQRT_2 * 0.01, 0.05, 0.1);
        let machine = NullRuns { name: "50/50".into(), sd: 0.01, tail_df: None, slowdowns: vec![(0.5, mu)], max_jump: 1.0 };
        let q = family_floor(mu, sd, alpha, beta, std::slice::from_ref(&machine))[0].clone();
        let f = sprt_floor(mu, sd, alpha, beta, &machine, &q, 20_000, 11);
        let run_sd = 0.01;
        let ln_p = |x: f64, m: f64| -0.5 * ((x - m) / run_sd).powi(2);
        let ln_q = |x: f64| {
            let fast = -0.5 * ((x - q.level) / run_sd).powi(2);
            let slow = -0.5 * ((x - q.level - mu) / run_sd).powi(2);
            (0.5 * fast.exp() + 0.5 * slow.exp()).ln()
        };
        // One SPRT path drawn from the gain or from the machine: whether it keeps, its pairs.
        let path = |rng: &mut Rng, gain: bool| {
            let (mut s, mut n) = (0.0, 0);
            let draw = |rng: &mut Rng, m: f64| match gain {
                true => m + run_sd * rng.normal(),
                false => q.level + if rng.uniform() < 0.5 { mu } else { 0.0 } + run_sd * rng.normal(),
            };
            while -f.lower < s && s < f.upper {
                let (inc, cand) = (draw(rng, 0.0), draw(rng, -mu));
                s += ln_p(inc, 0.0) - ln_q(inc) + ln_p(cand, -mu) - ln_q(cand);
                n += 1;
            }
            (s >= f.upper, n)
        };
        let mut rng = Rng::new(12);
        let draws = 40_000;
        let under_q = (0..draws).filter(|_| path(&mut rng, false).0).count() as f64 / draws as f64;
        let (mut kept, mut pairs) = (0usize, 0usize);
        for _ in 0..draws {
            let (k, n) = path(&mut rng, true);
            kept += k as usize;
            pairs += n;
        }
        let (power, mean) = (kept as f64 / draws as f64, pairs as f64 / draws as f64);
        // Standard errors: 0.0011 for 5%, 0.0015 for 90%, about 0.02 pairs.
        assert!((under_q - alpha).abs() < 0.004, "Q keeps {under_q}, tuned to {alpha}");
        assert!((power - (1.0 - beta)).abs() < 0.006, "power {power}, tuned to {}", 1.0 - beta);
        assert!((mean - f.pairs).abs() < 0.08, "{mean} pairs drawn, {} by the change of measure", f.pairs);
        // No test beats the information bound; the SPRT, stopping past its thresholds, spends more.
        assert!(f.pairs > q.pairs && f.pairs < 1.5 * q.pairs, "{f:?} against the bound {}", q.pairs);
    }

    #[test]
    fn the_floor_over_machines_of_any_shape_matches_quadrature_in_python() {
        // scipy (integrate.quad, optimize.minimize over the level and the jump), runs at CV 1%
        // (a pair's sd sqrt(2) x 1%), +3%: the normal machine jumped to 1.7845x, KL
        // 1.1582346750455943 (the closed form's); t(3) tails jumped to 2.7007x,
        // 1.3399553482571227; half the runs 3% slower, 1.0403260639596645 at the level ln 1.03
        // below the incumbent's; 10% 5% slower, 2.0763252999485085. +10%: the normal machine
        // 3.1659001027643874 at 4.8693x, t(3) 3.4597912406832254 at 8.2600x.
        let (mu3, mu10, sd) = ((1.03f64).ln(), (1.1f64).ln(), std::f64::consts::SQRT_2 * 0.01);
        let machine = |name: &str, tail_df: Option<f64>, slowdowns: Vec<(f64, f64)>, max_jump: f64| NullRuns {
            name: name.into(),
            sd: 0.01,
            tail_df,
            slowdowns,
            max_jump,
        };
        let family = [
            machine("normal", None, vec![], MAX_JUMP),
            machine("t(3)", Some(3.0), vec![], MAX_JUMP),
            machine("50/50", None, vec![(0.5, 1.03f64.ln())], 1.0),
            machine("10% 5%", None, vec![(0.1, 1.05f64.ln())], 1.0),
        ];
        let at3 = family_floor(mu3, sd, 0.001, 0.05, &family);
        for (f, kl, jump) in at3
            .iter()
            .zip([(1.1582346750455943, 1.7845), (1.3399553482571227, 2.7007), (1.0403260639596645, 1.0), (2.0763252999485085, 1.0)])
            .map(|(f, (k, j))| (f, k, j))
        {
            assert!((f.divergence - kl).abs() < 1e-6 && (f.jump - jump).abs() < 2e-3, "{f:?} against {kl} at {jump}");
            assert!((f.pairs - binary_divergence(0.95, 0.001) / kl).abs() < 1e-5, "{f:?}");
        }
        // The normal machine alone is the closed form's floor.
        let whole = jump_safe_pairs(mu3, sd, 0.001, 0.05, MAX_JUMP, Reads::WholePairs);
        assert!((at3[0].pairs - whole.pairs).abs() < 1e-5 && (at3[0].jump - whole.jump).abs() < 1e-3, "{:?} {whole:?}", at3[0]);
        // The 50/50 machine's closest do-nothing change puts the slow mode exactly on the gain.
        assert!((at3[2].level + mu3).abs() < 1e-6, "{:?}", at3[2]);
        let at10 = family_floor(mu10, sd, 0.001, 0.05, &family[..2]);
        assert!((at10[0].divergence - 3.1659001027643874).abs() < 1e-6 && (at10[0].jump - 4.8693).abs() < 2e-3, "{:?}", at10[0]);
        assert!((at10[1].divergence - 3.4597912406832254).abs() < 1e-6 && (at10[1].jump - 8.2600).abs() < 5e-3, "{:?}", at10[1]);
    }

    #[test]
    fn the_whole_pair_t_test_s_critical_values_are_student_s_at_its_spent_levels() {
        // scipy: levels a ln(1 + (e - 1) n / 22) - a ln(1 + (e - 1) (n - 1) / 22), a = 0.001
        // (the first look takes all up to 2 pairs); stats.t.isf at 2n - 2 df; the futility
        // quantile stats.t.isf(0.6, 2n - 2).
        let t = PairT::new(0.001, 0.6, 22, 0.01);
        for (n, crit, futile) in [
            (2, 58.67986337847522, -0.2886751345948128),
            (3, 14.52238673878856, -0.2707222947075976),
            (10, 5.0159770881788575, -0.25712304263817076),
            (22, 4.4698969288703445, -0.2549578447480255),
        ] {
            assert!((t.crit[n - 2] - crit).abs() < 1e-6 * crit, "{n}: {} against {crit}", t.crit[n - 2]);
            assert!((t.futile[n - 2] - futile).abs() < 1e-6, "{n}: {} against {futile}", t.futile[n - 2]);
        }
    }

    #[test]
    fn the_whole_pair_t_test_holds_its_level_at_every_noise_level_of_normal_runs() {
        // Two independent normal runs a pair, no gain, the noise from half to 10x any calibration
        // (the test has none): at most alpha (1% here, so that 20000 draws resolve it).
        let test = PairT::new(0.01, PAIR_T_BETA, 22, 0.0);
        for (i, sd) in [0.005, 0.01, 0.05, 0.1].into_iter().enumerate() {
            let mut rng = Rng::new(21 + i as u64);
            let keeps = (0..20_000)
                .filter(|_| {
                    test.decide(0.0, |_| {
                        let (a, b) = (sd * rng.normal(), sd * rng.normal());
                        (a - b, a + b)
                    })
                    .0 == Stop::Keep
                })
                .count();
            assert!(keeps <= 200, "sd {sd}: {keeps} of 20000");
        }
        // A clear gain is kept within a few pairs; identical pairs keep on their sign alone.
        let mut rng = Rng::new(3);
        let (stop, n) = test.decide(0.0, |_| {
            let (a, b) = (0.01 * rng.normal(), 0.01 * rng.normal());
            (1.1f64.ln() + a - b, a + b)
        });
        assert!(stop == Stop::Keep && n <= 4, "{stop:?} at {n}");
        assert_eq!(test.decide(0.0, |_| (0.05, 1.0)), (Stop::Keep, 2));
        assert_eq!(test.decide(0.0, |_| (-0.05, 1.0)).0, Stop::Futile);
    }

    #[test]
    fn the_whole_pair_t_test_s_variants_floor_the_sd_and_read_successive_sums() {
        // Pairs that agree by chance (a mixture's modes): without the floor their zero spread
        // keeps at once; with the calibration's sd under it they are read at that noise.
        let plain = PairT::new(0.001, PAIR_T_BETA, 22, 0.0);
        let floored = plain.clone().with_calibration_floor();
        assert_eq!(plain.decide(0.014, |_| (0.005, 0.04)), (Stop::Keep, 2));
        assert_ne!(floored.decide(0.014, |i| (0.005, 0.04 + 0.001 * i as f64)).0, Stop::Keep);
        // The sums' spread from successive differences: von Neumann's df, 2(n - 1)^2 / (3n - 4)
        // beside the log-ratios' n - 1; a steady drift of the sums is then no noise.
        let successive = plain.clone().with_successive_sums();
        assert!((successive.df(6) - (5.0 + 50.0 / 14.0)).abs() < 1e-12 && plain.df(6) == 10.0);
        let drifting = |i: usize| (0.02 + [0.001, -0.001][i % 2], 0.01 * i as f64);
        let (fast, slow) = (successive.decide(0.0, drifting), plain.decide(0.0, drifting));
        assert!(fast.0 == Stop::Keep && (slow.0 != Stop::Keep || slow.1 > fast.1), "{fast:?} against {slow:?}");
    }

    /// `trials` do-nothing decisions of `test` on normal pairs of sd `sd`: the share it keeps.
    fn null_keeps(test: &ScaleFree, sd: f64, trials: usize, seed: u64) -> f64 {
        let mut rng = Rng::new(seed);
        let keeps = (0..trials).filter(|_| test.decide(|_| sd * rng.normal()).0 == Stop::Keep).count();
        keeps as f64 / trials as f64
    }

    #[test]
    fn the_scale_free_test_holds_its_level_at_every_noise_level() {
        // Ville's inequality: at most alpha whatever the true sd, below or far above the one the
        // test is powered for (alpha 1% so that 20000 draws resolve it).
        let sd = std::f64::consts::SQRT_2 * 0.01;
        let test = ScaleFree::new((1.03f64).ln(), sd, 0.01, FREE_BETA, 22);
        for (i, k) in [0.5, 1.0, 2.317, 5.0, 10.0].into_iter().enumerate() {
            let rate = null_keeps(&test, k * sd, 20_000, 11 + i as u64);
            assert!(rate <= 0.01, "{k}x: {rate}");
        }
        // Where the known-noise SPRT of the same level keeps 7.5% at 2x (above), this one is
        // still under it, and a calibration far off moves nothing but power.
        let at_twice = null_keeps(&ScaleFree::new((1.03f64).ln(), sd, 0.001, FREE_BETA, 22), 2.0 * sd, 100_000, 5);
        assert!(at_twice <= 0.001, "{at_twice}");
    }

    #[test]
    fn the_scale_free_test_keeps_gains_and_spends_no_less_than_the_floor() {
        let (mu1, sd) = ((1.03f64).ln(), std::f64::consts::SQRT_2 * 0.01);
        let test = ScaleFree::new(mu1, sd, 0.001, FREE_BETA, 22);
        let mut rng = Rng::new(3);
        let (mut keeps, mut pairs) = (0, 0);
        let trials = 20_000;
        for _ in 0..trials {
            let (stop, n) = test.decide(|_| mu1 + sd * rng.normal());
            keeps += (stop == Stop::Keep) as usize;
            pairs += n;
        }
        let (power, mean) = (keeps as f64 / trials as f64, pairs as f64 / trials as f64);
        assert!(power > 0.95, "{power}");
        // No test of the log-ratios at these levels beats their bound; this one is within a
        // third of it.
        let floor = jump_safe_pairs(mu1, sd, 0.001, 0.05, MAX_JUMP, Reads::Ratios).pairs;
        assert!(floor < mean && mean < 1.33 * floor, "{mean} pairs against {floor}");
        // Identical zero pairs (a deterministic benchmark, no change) are never a gain.
        assert_eq!(test.decide(|_| 0.0).0, Stop::Futile);
        // A clear +10% is kept; a clear slowdown stops for futility at once.
        assert_eq!(test.decide(|i| 1.1f64.ln() + [0.01, -0.01][i % 2]).0, Stop::Keep);
        assert_eq!(test.decide(|_| -0.05), (Stop::Futile, 1));
    }

    #[test]
    fn the_two_phases_as_designed_match_their_closed_form_with_one_look_each() {
        use ratchet::stats::sequential::{Borrowed, NoiseScale, Params};
        use statrs::distribution::{ContinuousCDF, Normal};
        // One look of 6 pairs, then a confirmation of one look of 2 (no extra pair, its first
        // look at 2): with the noise known, each phase keeps when its mean clears the larger of
        // its critical value and its floor, so keeps and runs have a closed form.
        let params = Params { confirm: true, confirm_pairs: 2, confirm_alpha: 0.05, ..Params::fixed(6, 0.02, 1.0) };
        let b = Borrowed { confirm_extra: 0, first_look: 2, ..Borrowed::new(NoiseScale { sd: 0.0, df: 0.0 }) };
        let design = TwoPhases::new(params, b.clone(), None);
        let z = Normal::new(0.0, 1.0).unwrap();
        let (mu, sd) = (1.02f64.ln(), std::f64::consts::SQRT_2 * 0.01);
        let pass = |n: f64, alpha: f64, floor: f64| {
            let c = (z.inverse_cdf(1.0 - alpha) * b.safety * sd / n.sqrt()).max(floor);
            z.cdf((mu - c) / (sd / n.sqrt()))
        };
        let (p1, p2) = (pass(6.0, 0.02, 1.01f64.ln()), pass(2.0, 0.05, 0.0));
        let trials = 200_000;
        let (runs, kept) = design.run(mu, sd, trials, 7);
        let se = (p1 * p2 * (1.0 - p1 * p2) / trials as f64).sqrt();
        assert!((kept - p1 * p2).abs() < 4.0 * se, "kept {kept}, closed form {}", p1 * p2);
        let want_runs = 2.0 * (6.0 + 2.0 * p1);
        // Runs are 12 or 16: their sd is at most 2.
        assert!((runs - want_runs).abs() < 4.0 * 2.0 / (trials as f64).sqrt(), "runs {runs}, closed form {want_runs}");
    }
}
