//! One simulated device trial of a parallel sweep, and what a night's queue is made of: the
//! decision procedure, unchanged, measuring one hypothesis on one of K device slots; the merge
//! lane that schedules those trials is simulated beside the controller's own lane
//! (`ratchet_lab::chain_sim`, `ratchet-lab simulate --jobs 1,2,4,8`).
//!
//! The model. A night's queue holds hypotheses whose true effects on the trunk are drawn from
//! [`MIX`] (most changes do nothing or hurt; a few help). A trial is interleaved pairs of an
//! incumbent and the candidate, on one device only, until the procedure decides (each run one
//! time unit: a benchmark whose time is dominated by the device, as a sleep is). A stale winner
//! is measured again by the serial loop's own rule (its minimum effect and levels); what the
//! rebase does to its effect is an [`Interaction`]: nothing, or the gain vanishes, shrinks below
//! the minimum effect or reverses once another change is kept (two edits of one kernel that each
//! help alone). Each device has its own noise level (within 0.8x-1.25x of the scenario's) and
//! borrows its scale from its own calibration, as `ratchet calibrate` per slot would; no
//! comparison ever spans two devices.

use crate::simulate::{calibrated_scale, decide_on, session, Scenario};
use ratchet::stats::rng::Rng;
use ratchet::stats::sequential::Sequential;
use ratchet::stats::Verdict;

/// The true effects of a night's hypotheses (speed-up fractions) and their shares: over half do
/// nothing, some are slower, a few are gains at, above and well above the minimum effect.
pub const MIX: [(f64, f64); 5] = [(0.0, 0.55), (-0.05, 0.15), (0.01, 0.10), (0.03, 0.12), (0.10, 0.08)];

/// A queue where 30% of the hypotheses are gains the serial rule keeps almost always (+3% and
/// +10%): the queue issue 30's throughput target names, where stale winners are most frequent.
pub const WIN30: [(f64, f64); 4] = [(0.0, 0.55), (-0.05, 0.15), (0.03, 0.20), (0.10, 0.10)];

/// Which mix of true effects a simulated or measured queue draws from (by name: `mix`, `win30`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Queue {
    /// [`MIX`]: 30% real gains, most of them small (about one hypothesis in eight is kept).
    #[default]
    Mix,
    /// [`WIN30`]: 30% of the hypotheses win.
    Win30,
}

impl Queue {
    /// The true effects (speed-up fractions) and their shares.
    pub fn shares(self) -> &'static [(f64, f64)] {
        match self {
            Queue::Mix => &MIX,
            Queue::Win30 => &WIN30,
        }
    }

    /// The queues by name.
    pub const NAMES: [(&'static str, Queue); 2] = [("mix", Queue::Mix), ("win30", Queue::Win30)];

    /// The shares as the tables print them, e.g. "+0%: 55%, -5%: 15%".
    pub fn describe(self) -> String {
        self.shares().iter().map(|(e, w)| format!("{:+.0}%: {:.0}%", e * 100.0, w * 100.0)).collect::<Vec<_>>().join(", ")
    }
}

/// What to simulate.
#[derive(Debug, Clone)]
pub struct ParallelPlan {
    /// Device slots running trials at once.
    pub slots: usize,
    /// Hypotheses in the queue.
    pub hypotheses: usize,
    pub seed: u64,
    /// A fresh winner must also keep on a second device before it merges.
    pub second_device: bool,
    /// What another keep does to a stale winner's gain.
    pub interaction: Interaction,
    /// The devices' noise (each slot scales its cv by its own factor).
    pub scenario: Scenario,
    /// The mix of true effects the queue is drawn from.
    pub queue: Queue,
    /// With one slot: the devices its trials take in turn (0 or 1: the first slot's alone). The
    /// serial baseline of K slots runs on the same K devices, so that a speed-up is not a
    /// quieter device's.
    pub devices: usize,
    /// How each trial decides.
    pub test: TrialTest,
    /// A design the controller does not have (a probe, `lab/examples/lane_probe.rs`): a first trial
    /// whose first phase passed joins the chain at once when it was measured on the tip, so
    /// that trials started meanwhile build on it; its failed confirmation cuts the chain.
    pub speculate: bool,
}

/// How a simulated trial decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TrialTest {
    /// The serial loop's procedure, its scale borrowed from the device's own calibration: what
    /// the controller runs.
    #[default]
    Procedure,
    /// Wald's sequential probability ratio test of no gain against +3%, pair by pair, with the
    /// device's noise known, false keeps 0.1% (`alpha x confirm_alpha`) and power 95%: the floor
    /// of docs/decisions.md ("The floor"), a bound on what any test at those levels can spend,
    /// not a test ratchet could run (the noise is never known).
    KnownNoiseSprt,
}

/// One simulated trial: its verdict, its runs, and (when its first phase passed) the runs
/// after which it did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    pub verdict: Verdict,
    pub runs: u64,
    pub promising_after: Option<u64>,
}

/// What a stale winner's true effect is on the head it is re-measured against (another change
/// was kept since its first trial). The worst case is simulated: every stale winner interacts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Interaction {
    /// The effect is the same on any head.
    None,
    /// The gain is gone (the other change did the same thing): a keep is a false keep.
    Vanish,
    /// The gain shrinks to this fraction (e.g. 0.007: +0.7% left, under a 1% minimum effect).
    Shrink(f64),
    /// The change now slows the trunk by this fraction (e.g. 0.01).
    Reverse(f64),
}

impl Interaction {
    /// The effect after another keep, of a change whose effect alone is `e`.
    pub fn after(self, e: f64) -> f64 {
        match self {
            Interaction::None => e,
            Interaction::Vanish => 0.0,
            Interaction::Shrink(f) => e.min(f),
            Interaction::Reverse(f) => -f,
        }
    }

    pub fn label(self) -> String {
        match self {
            Interaction::None => "independent".into(),
            Interaction::Vanish => "gain vanishes".into(),
            Interaction::Shrink(f) => format!("gain shrinks to {:+.1}%", f * 100.0),
            Interaction::Reverse(f) => format!("gain reverses to {:+.1}%", -f * 100.0),
        }
    }
}

/// Tallies of one simulated night.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParallelReport {
    pub slots: usize,
    pub hypotheses: usize,
    /// Time units from the first run to the last decision.
    pub wall: u64,
    pub trials: usize,
    pub runs: u64,
    /// Rechecks of winners whose trunk had moved (measured again against another head).
    pub stale: usize,
    /// Rechecks stopped or undone by a cut in the merge lane's chain, and started again.
    pub restarted: usize,
    /// Second-device trials run, and winners they did not confirm.
    pub confirm_trials: usize,
    pub confirm_failed: usize,
    pub merged: usize,
    /// Stale winners merged after their recheck, and of those the ones whose effect on the head
    /// they merged onto was below the minimum effect (the interaction's false keeps).
    pub stale_merged: usize,
    pub stale_merged_below_min: usize,
    /// Per effect of the plan's [`Queue`]: (hypotheses with it, merged).
    pub by_effect: Vec<(f64, usize, usize)>,
    /// The trunk's true speed-up at the end (product of the merged effects).
    pub trunk_gain: f64,
}

impl ParallelReport {
    /// Hypotheses decided per 1000 time units (runs of one device).
    pub fn throughput(&self) -> f64 {
        self.hypotheses as f64 / self.wall.max(1) as f64 * 1000.0
    }

    /// Merged do-nothing (+0%) hypotheses, and hypotheses of that kind.
    pub fn false_keeps(&self) -> (usize, usize) {
        self.by_effect.iter().filter(|(e, _, _)| *e == 0.0).fold((0, 0), |(k, n), (_, t, m)| (k + m, n + t))
    }

    /// The trunk's true speed-up per 100 hypotheses (geometric), in percent.
    pub fn gain_per_100(&self) -> f64 {
        ((self.trunk_gain.ln() / self.hypotheses.max(1) as f64 * 100.0).exp() - 1.0) * 100.0
    }

    /// Share of hypotheses with true effect `e` that were merged; `None` when the queue had none.
    pub fn keep_rate(&self, e: f64) -> Option<f64> {
        self.by_effect.iter().find(|(x, t, _)| *x == e && *t > 0).map(|(_, t, m)| *m as f64 / *t as f64)
    }
}

/// One device: its noise factor.
fn device_factor(seed: u64, slot: usize) -> f64 {
    let mut rng = Rng::new(seed ^ 0xD1CE_0000 ^ (slot as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    // Log-uniform in [0.8, 1.25]: devices of one host differ a little.
    (0.8f64.ln() + rng.uniform() * (1.25f64.ln() - 0.8f64.ln())).exp()
}

impl std::str::FromStr for Queue {
    type Err = String;
    fn from_str(s: &str) -> Result<Queue, String> {
        Queue::NAMES.iter().find(|(n, _)| n.eq_ignore_ascii_case(s)).map(|&(_, q)| q).ok_or_else(|| {
            let names: Vec<&str> = Queue::NAMES.iter().map(|(n, _)| *n).collect();
            format!("no queue {s:?}: the queues are {}", names.join(", "))
        })
    }
}

/// The true effect of hypothesis `h`, drawn from `queue`'s shares.
pub fn effect_of(seed: u64, h: usize, queue: Queue) -> f64 {
    let mut rng = Rng::new(seed ^ 0xEFFE_C700 ^ (h as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9));
    let u = rng.uniform();
    let shares = queue.shares();
    let mut acc = 0.0;
    for &(e, w) in shares {
        acc += w;
        if u < acc {
            return e;
        }
    }
    shares[shares.len() - 1].0
}

/// One trial on `slot`: the procedure's verdict and the runs it took. The device borrows the
/// scale of a calibration drawn on the same device for this trial. `salt` tells apart the
/// trials of one hypothesis (its first trial, its recheck, a recheck started again).
pub fn measure(seq: &Sequential, plan: &ParallelPlan, slot: usize, effect: f64, h: usize, salt: u64) -> Measured {
    let salt = (h as u64) << 20 ^ slot as u64 ^ salt << 56;
    let mut rng = Rng::new(plan.seed ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let device = Scenario { cv: plan.scenario.cv * device_factor(plan.seed, slot), ..plan.scenario.clone() };
    if plan.test == TrialTest::KnownNoiseSprt {
        return known_noise_sprt(&device, effect, &mut rng);
    }
    let scale = calibrated_scale(&device, &mut rng);
    // Every trial, a stale winner's recheck too, decides with the serial loop's rule: its
    // minimum effect and levels are what bound a keep of a gain another keep made vanish.
    // A worker is handed the device history's scale and its log-sums' spread (`--noise-scale`,
    // `--sums-scale`), as the serial loop borrows them.
    let seq = seq.clone().with_history(scale);
    let states = session(&device, 2 * seq.max_measured_pairs() + 2, device.jump, &mut rng);
    let (d, pos) = decide_on(&seq, &states, effect);
    // A first phase that passed handed over to the confirmation after its measured pairs.
    Measured { verdict: d.verdict, runs: pos as u64, promising_after: d.confirmation.as_ref().map(|_| 2 * d.pairs as u64) }
}

/// [`TrialTest::KnownNoiseSprt`] on one device ([`crate::floor::sprt_trial`]): normal
/// log-ratios of mean ln(1 + effect) and sd sqrt(2) x the device's cv, false keeps 0.1%, power
/// 95% at +3%.
fn known_noise_sprt(device: &Scenario, effect: f64, rng: &mut Rng) -> Measured {
    let sd = 2f64.sqrt() * device.cv;
    let (keep, pairs) = crate::floor::sprt_trial((1.0 + effect).ln(), 1.0, 1.03f64.ln(), sd, 0.001, 0.05, rng);
    Measured { verdict: if keep { Verdict::Keep } else { Verdict::Revert }, runs: 2 * pairs as u64, promising_after: None }
}

/// How often the merge lane keeps a stale winner whose true effect on the new head is `effect`:
/// `n` rechecks, each on one of `slots` simulated devices with its own calibration. Returns
/// (kept, n). With `effect` 0 (the gain vanished) every keep is a false keep, which the serial
/// rule bounds by `alpha x confirm_alpha`. Each recheck decides by `test`.
pub fn lane_keeps(seq: &Sequential, scenario: &Scenario, effect: f64, n: usize, seed: u64, test: TrialTest) -> (usize, usize) {
    let plan = ParallelPlan {
        slots: 4,
        hypotheses: n,
        seed,
        second_device: false,
        interaction: Interaction::None,
        scenario: scenario.clone(),
        queue: Queue::Mix,
        devices: 1,
        test,
        speculate: false,
    };
    let kept = (0..n).filter(|&h| measure(seq, &plan, h % plan.slots, effect, h, 1).verdict == Verdict::Keep).count();
    (kept, n)
}

/// What another keep may do to a stale winner's gain, as the table simulates it: nothing, or it
/// vanishes, shrinks to +0.7% (under the default 1% minimum effect) or reverses to -1%.
pub const INTERACTIONS: [Interaction; 4] = [Interaction::None, Interaction::Vanish, Interaction::Shrink(0.007), Interaction::Reverse(0.01)];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate::scenario;

    fn seq() -> Sequential {
        Sequential::new(ratchet::config::DecisionConfig::earlier().params(None))
    }

    fn cv1() -> Scenario {
        scenario("cv 1%")
    }

    #[test]
    fn a_recheck_keeps_a_vanished_gain_within_the_serial_bound() {
        // The lane re-measures a winner whose gain another keep made vanish: every keep is a
        // false keep, and the serial rule bounds them by alpha x confirm_alpha + rescue_alpha
        // (0.1% by default). One confirmation-sized look at p <= 0.05 with no minimum effect
        // kept 5%.
        let s = seq();
        let bound = s.params.false_keep_bound();
        let (kept, n) = lane_keeps(&s, &cv1(), 0.0, 3000, 11, TrialTest::Procedure);
        assert!((kept as f64) <= 3.0 * bound * n as f64, "{kept} of {n} vanished gains kept; bound {bound}");
        // Reversed (-1%): never kept.
        assert_eq!(lane_keeps(&s, &cv1(), -0.01, 1000, 12, TrialTest::Procedure).0, 0);
    }

    #[test]
    fn a_recheck_holds_a_shrunken_gain_to_the_minimum_effect() {
        // +0.7% left under a 1% minimum effect: the serial rule keeps it about as rarely as a
        // serial sweep does (a fixed look for any gain > 0 kept 5 of 16 in the field).
        let s = seq();
        let (kept, n) = lane_keeps(&s, &cv1(), 0.007, 1000, 13, TrialTest::Procedure);
        assert!(kept * 10 < n, "{kept} of {n} kept");
        // A gain well above the minimum effect still passes its recheck.
        let (kept, n) = lane_keeps(&s, &cv1(), 0.03, 300, 14, TrialTest::Procedure);
        assert!(kept * 10 > n * 8, "{kept} of {n} kept");
    }
}
