//! K parallel trials on one serial trunk, simulated (`ratchet simulate --jobs 1,2,4,8`): the
//! decision procedure, unchanged, run by K device slots that each measure a hypothesis against
//! the trunk head it started from, with one merge at a time and stale winners re-measured by the
//! same (serial) rule, also when another keep made their gain vanish, shrink or reverse.
//!
//! The model. A night's queue holds hypotheses whose true effects on the trunk are drawn from
//! [`MIX`] (most changes do nothing or hurt; a few help). A device slot takes the next
//! hypothesis and runs one trial: interleaved pairs of the trunk head it started from and the
//! candidate, on that device only, until the procedure decides (each run one time unit: a
//! benchmark whose time is dominated by the device, as a sleep is). A keep merges only if the
//! trunk has not moved since the trial started; otherwise the winner is stale and is measured
//! again against the new head before anything else, by the serial loop's own rule (its minimum
//! effect and levels). What the rebase does to its effect is the plan's [`Interaction`]: nothing,
//! or the gain vanishes, shrinks below the minimum effect or reverses once another change is
//! kept (two edits of one kernel that each help alone). With `second_device`, a fresh winner must also keep in a trial on another slot
//! before it merges (against picking the luckiest of K noisy tests). Each device has its own
//! noise level (within 0.8x-1.25x of the scenario's) and borrows its scale from its own
//! calibration, as `ratchet calibrate` per slot would; no comparison ever spans two devices.
//!
//! Why error rates do not change with K: every decision is one trial's, made by the same
//! procedure on one device against the head it measured; a stale winner must win again, so
//! parallelism adds chances to lose a true gain's keep (it is re-measured) but none to keep a
//! null change. The simulation checks that, and measures what parallelism buys: hypotheses per
//! time unit, and what the stale re-measurements cost.

use super::rng::Rng;
use super::sequential::{Borrowed, Sequential};
use super::simulate::{calibrated_scale, decide_on, session, Scenario};
use super::Verdict;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// The true effects of a night's hypotheses (speed-up fractions) and their shares: over half do
/// nothing, some are slower, a few are gains at, above and well above the minimum effect.
pub const MIX: [(f64, f64); 5] = [(0.0, 0.55), (-0.05, 0.15), (0.01, 0.10), (0.03, 0.12), (0.10, 0.08)];

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
    /// Winners whose trunk had moved: measured again.
    pub stale: usize,
    /// Second-device trials run, and winners they did not confirm.
    pub confirm_trials: usize,
    pub confirm_failed: usize,
    pub merged: usize,
    /// Stale winners merged after their recheck, and of those the ones whose effect on the head
    /// they merged onto was below the minimum effect (the interaction's false keeps).
    pub stale_merged: usize,
    pub stale_merged_below_min: usize,
    /// Per effect of [`MIX`]: (hypotheses with it, merged).
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

    /// Share of hypotheses with true effect `e` that were merged.
    pub fn keep_rate(&self, e: f64) -> f64 {
        self.by_effect.iter().find(|(x, _, _)| *x == e).map_or(0.0, |(_, t, m)| *m as f64 / (*t).max(1) as f64)
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    /// A hypothesis's first trial.
    Trial,
    /// A winner's second measurement, against the trunk head when it starts (the merge lane):
    /// a stale winner's re-measurement, or its second-device trial (never on `first_slot`).
    /// `stale`: the trunk moved since its first trial, so the plan's interaction applies.
    Lane { first_slot: usize, stale: bool },
}

#[derive(Debug, Clone, Copy)]
struct Job {
    h: usize,
    kind: Kind,
}

/// One device: its noise factor.
fn device_factor(seed: u64, slot: usize) -> f64 {
    let mut rng = Rng::new(seed ^ 0xD1CE_0000 ^ (slot as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    // Log-uniform in [0.8, 1.25]: devices of one host differ a little.
    (0.8f64.ln() + rng.uniform() * (1.25f64.ln() - 0.8f64.ln())).exp()
}

/// The true effect of hypothesis `h`, drawn from [`MIX`].
fn effect_of(seed: u64, h: usize) -> f64 {
    let mut rng = Rng::new(seed ^ 0xEFFE_C700 ^ (h as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9));
    let u = rng.uniform();
    let mut acc = 0.0;
    for (e, w) in MIX {
        acc += w;
        if u < acc {
            return e;
        }
    }
    MIX[MIX.len() - 1].0
}

/// One trial on `slot`: the procedure's verdict and the runs it took. The device borrows the
/// scale of a calibration drawn on the same device for this trial.
fn trial(seq: &Sequential, plan: &ParallelPlan, slot: usize, effect: f64, job: &Job) -> (Verdict, u64) {
    let salt = (job.h as u64) << 20 ^ slot as u64 ^ if matches!(job.kind, Kind::Lane { .. }) { 1 << 60 } else { 0 };
    let mut rng = Rng::new(plan.seed ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let device = Scenario { cv: plan.scenario.cv * device_factor(plan.seed, slot), ..plan.scenario.clone() };
    let scale = calibrated_scale(&device, &mut rng);
    // Every trial, a stale winner's recheck too, decides with the serial loop's rule: its
    // minimum effect and levels are what bound a keep of a gain another keep made vanish.
    // A parallel sweep's worker is handed the log-ratios' scale only (`--noise-scale sd:df`), so
    // its guard sees the log-ratios alone, as here.
    let seq = seq.clone().with_history(scale.map(|b| Borrowed { sums: None, ..b }));
    let states = session(&device, 2 * seq.max_measured_pairs() + 2, device.jump, &mut rng);
    let (d, pos) = decide_on(&seq, &states, effect);
    (d.verdict, pos as u64)
}

/// Simulate one night of `plan.hypotheses` hypotheses on `plan.slots` device slots.
///
/// Merges are serial through one lane: a winner merges at once only if the trunk has not moved
/// since its trial began (and no second device is asked for); otherwise it waits in a FIFO, and
/// the lane measures one waiting winner at a time against the current head while no other merge
/// happens, so a winner is re-measured at most once and never against a head that moves under it.
pub fn simulate_trunk(seq: &Sequential, plan: &ParallelPlan) -> ParallelReport {
    let k = plan.slots.max(1);
    let mut rep = ParallelReport {
        slots: k,
        hypotheses: plan.hypotheses,
        by_effect: MIX.iter().map(|&(e, _)| (e, 0, 0)).collect(),
        trunk_gain: 1.0,
        ..Default::default()
    };
    let effects: Vec<f64> = (0..plan.hypotheses).map(|h| effect_of(plan.seed, h)).collect();
    for &e in &effects {
        if let Some(c) = rep.by_effect.iter_mut().find(|c| c.0 == e) {
            c.1 += 1;
        }
    }
    let mut trunk: u64 = 0;
    let mut now: u64 = 0;
    let mut next_new = 0usize;
    // Winners waiting for the lane (FIFO: hypothesis, slot, the trunk its trial started from),
    // and whether the lane is measuring one now.
    let mut waiting: VecDeque<(usize, usize, u64)> = VecDeque::new();
    let min_effect_pct = seq.params.min_effect_pct;
    let mut lane_busy = false;
    let mut free: Vec<usize> = (0..k).collect();
    let mut running: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    // Per slot: the job it runs, the trunk it started from, and the verdict it will reach.
    let mut slot_state: Vec<Option<(Job, u64, Verdict)>> = vec![None; k];
    // `e`: the change's true effect on the head it merges onto (the interaction's, when stale);
    // tallied under its effect alone.
    let merge = |rep: &mut ParallelReport, trunk: &mut u64, h: usize, e: f64| {
        *trunk += 1;
        rep.merged += 1;
        rep.trunk_gain *= 1.0 + e;
        if let Some(c) = rep.by_effect.iter_mut().find(|c| c.0 == effects[h]) {
            c.2 += 1;
        }
    };
    loop {
        // Hand out work to free slots, lowest slot first: the lane's next winner, then new
        // hypotheses.
        free.sort_unstable();
        let mut idle = vec![];
        for slot in std::mem::take(&mut free) {
            let lane = if lane_busy {
                None
            } else {
                // A second-device trial never runs on the slot that found the winner (with one
                // slot there is no other).
                waiting.iter().position(|&(_, first, _)| !plan.second_device || k == 1 || first != slot)
            };
            let job = match lane {
                Some(i) => {
                    let (h, first_slot, base) = waiting.remove(i).expect("position is in range");
                    lane_busy = true;
                    if plan.second_device {
                        rep.confirm_trials += 1;
                    }
                    Job { h, kind: Kind::Lane { first_slot, stale: base != trunk } }
                }
                None if next_new < plan.hypotheses => {
                    next_new += 1;
                    Job { h: next_new - 1, kind: Kind::Trial }
                }
                None => {
                    idle.push(slot);
                    continue;
                }
            };
            let effect = match job.kind {
                Kind::Lane { stale: true, .. } => plan.interaction.after(effects[job.h]),
                _ => effects[job.h],
            };
            let (verdict, runs) = trial(seq, plan, slot, effect, &job);
            rep.trials += 1;
            rep.runs += runs;
            slot_state[slot] = Some((job, trunk, verdict));
            running.push(Reverse((now + runs, slot)));
        }
        free = idle;
        let Some(Reverse((end, slot))) = running.pop() else { break };
        now = end;
        free.push(slot);
        let (job, base, verdict) = slot_state[slot].take().expect("a running slot has its job");
        match job.kind {
            Kind::Lane { stale, .. } => {
                lane_busy = false;
                // Nothing merged while the lane measured: the head it measured is the trunk's.
                debug_assert_eq!(base, trunk);
                if verdict == Verdict::Keep {
                    let e = if stale { plan.interaction.after(effects[job.h]) } else { effects[job.h] };
                    merge(&mut rep, &mut trunk, job.h, e);
                    if stale {
                        rep.stale_merged += 1;
                        rep.stale_merged_below_min += usize::from(e * 100.0 < min_effect_pct);
                    }
                } else if plan.second_device {
                    rep.confirm_failed += 1;
                }
            }
            Kind::Trial if verdict == Verdict::Keep => {
                if base != trunk {
                    rep.stale += 1;
                    waiting.push_back((job.h, slot, base));
                } else if plan.second_device || lane_busy {
                    // Either way it waits its turn: the lane may merge before it.
                    waiting.push_back((job.h, slot, base));
                } else {
                    merge(&mut rep, &mut trunk, job.h, effects[job.h]);
                }
            }
            Kind::Trial => {}
        }
    }
    rep.wall = now;
    rep
}

/// How often the merge lane keeps a stale winner whose true effect on the new head is `effect`:
/// `n` rechecks, each on one of `slots` simulated devices with its own calibration. Returns
/// (kept, n). With `effect` 0 (the gain vanished) every keep is a false keep, which the serial
/// rule bounds by `alpha x confirm_alpha`.
pub fn lane_keeps(seq: &Sequential, scenario: &Scenario, effect: f64, n: usize, seed: u64) -> (usize, usize) {
    let plan =
        ParallelPlan { slots: 4, hypotheses: n, seed, second_device: false, interaction: Interaction::None, scenario: scenario.clone() };
    let kept = (0..n)
        .filter(|&h| {
            let job = Job { h, kind: Kind::Lane { first_slot: 0, stale: true } };
            trial(seq, &plan, h % plan.slots, effect, &job).0 == Verdict::Keep
        })
        .count();
    (kept, n)
}

/// What another keep may do to a stale winner's gain, as the table simulates it: nothing, or it
/// vanishes, shrinks to +0.7% (under the default 1% minimum effect) or reverses to -1%.
pub const INTERACTIONS: [Interaction; 4] = [Interaction::None, Interaction::Vanish, Interaction::Shrink(0.007), Interaction::Reverse(0.01)];

/// The table of `ratchet simulate --jobs`: one night per slot count and interaction, the same
/// queue each time, and the lane's false-keep rate on vanished gains.
pub fn table(seq: &Sequential, slots: &[usize], hypotheses: usize, seed: u64, second_device: bool, scenario: &Scenario) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "\n### {} hypotheses on a serial trunk, K device slots ({}{})\n\n",
        hypotheses,
        scenario.name,
        if second_device { ", winners confirmed on a second device" } else { "" }
    ));
    out.push_str("| slots | a stale winner's gain after another keep | hypotheses / 1000 units | speed-up | runs / hypothesis | stale | merged | stale merged (below min effect) | +0% kept (false keeps) | 95% interval | -5% kept | +1% kept | +3% kept | +10% kept | trunk gain / 100 hypotheses |\n");
    out.push_str("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    let mut first = None;
    for &k in slots {
        for interaction in INTERACTIONS {
            if k == 1 && interaction != Interaction::None {
                continue; // one slot is never stale
            }
            let plan = ParallelPlan { slots: k, hypotheses, seed, second_device, interaction, scenario: scenario.clone() };
            let r = simulate_trunk(seq, &plan);
            let base = *first.get_or_insert(r.throughput());
            let (fk, nulls) = r.false_keeps();
            out.push_str(&format!(
                "| {} | {} | {:.1} | {:.2}x | {:.1} | {} | {} | {} ({}) | {:.3}% | {} | {:.2}% | {:.1}% | {:.1}% | {:.1}% | {:+.1}% |\n",
                k,
                if k == 1 { "-".into() } else { interaction.label() },
                r.throughput(),
                r.throughput() / base,
                r.runs as f64 / r.hypotheses as f64,
                r.stale,
                r.merged,
                r.stale_merged,
                r.stale_merged_below_min,
                fk as f64 / nulls.max(1) as f64 * 100.0,
                super::simulate::interval(fk, nulls.max(1)),
                r.keep_rate(-0.05) * 100.0,
                r.keep_rate(0.01) * 100.0,
                r.keep_rate(0.03) * 100.0,
                r.keep_rate(0.10) * 100.0,
                r.gain_per_100(),
            ));
        }
    }
    let n = hypotheses.max(2000);
    let (kept, n) = lane_keeps(seq, scenario, 0.0, n, seed);
    let p = &seq.params;
    out.push_str(&format!(
        "\nThe lane's recheck of a stale winner whose gain vanished (true effect 0 on the new head): {kept} of {n} kept, {:.3}% {}; the serial rule's bound is alpha x confirm_alpha = {:.3}%.\n",
        kept as f64 / n as f64 * 100.0,
        super::simulate::interval(kept, n),
        p.alpha * if p.confirm { p.confirm_alpha } else { 1.0 } * 100.0
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::simulate::scenarios;

    fn seq() -> Sequential {
        Sequential::new(crate::config::DecisionConfig::default().params(None))
    }

    fn plan(slots: usize, hypotheses: usize) -> ParallelPlan {
        let cv1 = scenarios().into_iter().find(|s| s.name == "cv 1%").expect("the grid has cv 1%");
        ParallelPlan { slots, hypotheses, seed: 42, second_device: false, interaction: Interaction::None, scenario: cv1 }
    }

    #[test]
    fn one_slot_is_the_serial_loop() {
        // One slot: no trial ever starts from a stale head, and the wall time is every run.
        let r = simulate_trunk(&seq(), &plan(1, 300));
        assert_eq!(r.stale, 0);
        assert_eq!(r.wall, r.runs);
        assert_eq!(r.trials, 300);
        assert_eq!(r.by_effect.iter().map(|c| c.1).sum::<usize>(), 300);
    }

    #[test]
    fn more_slots_decide_faster_and_merge_one_at_a_time() {
        let s = seq();
        let one = simulate_trunk(&s, &plan(1, 400));
        let four = simulate_trunk(&s, &plan(4, 400));
        // Four slots finish the same queue in well under half the time.
        assert!(four.wall * 2 < one.wall, "{} vs {}", four.wall, one.wall);
        // Every merge was measured against the head it merged onto: merges never exceed
        // hypotheses, and a stale winner cost a trial more.
        assert!(four.merged <= 400);
        assert!(four.trials <= 400 + four.stale + four.merged, "{four:?}");
        assert!(four.stale > 0, "four slots see a moved trunk now and then");
        // +10% changes are kept on any number of slots.
        assert!(four.keep_rate(0.10) > 0.9, "{:?}", four.by_effect);
    }

    #[test]
    fn a_second_device_confirms_every_merge() {
        let mut p = plan(4, 300);
        p.second_device = true;
        let r = simulate_trunk(&seq(), &p);
        // Every merge passed a second-device trial (or was re-measured stale first).
        assert!(r.confirm_trials >= r.merged, "{r:?}");
        assert!(r.merged > 0);
    }

    fn cv1() -> Scenario {
        scenarios().into_iter().find(|s| s.name == "cv 1%").expect("the grid has cv 1%")
    }

    #[test]
    fn a_recheck_keeps_a_vanished_gain_within_the_serial_bound() {
        // The lane re-measures a winner whose gain another keep made vanish: every keep is a
        // false keep, and the serial rule bounds them by alpha x confirm_alpha (0.1% by
        // default). One confirmation-sized look at p <= 0.05 with no minimum effect kept 5%.
        let s = seq();
        let bound = s.params.alpha * s.params.confirm_alpha;
        let (kept, n) = lane_keeps(&s, &cv1(), 0.0, 3000, 11);
        assert!((kept as f64) <= 3.0 * bound * n as f64, "{kept} of {n} vanished gains kept; bound {bound}");
        // Reversed (-1%): never kept.
        assert_eq!(lane_keeps(&s, &cv1(), -0.01, 1000, 12).0, 0);
    }

    #[test]
    fn a_recheck_holds_a_shrunken_gain_to_the_minimum_effect() {
        // +0.7% left under a 1% minimum effect: the serial rule keeps it about as rarely as a
        // serial sweep does (a fixed look for any gain > 0 kept 5 of 16 in the field).
        let s = seq();
        let (kept, n) = lane_keeps(&s, &cv1(), 0.007, 1000, 13);
        assert!(kept * 10 < n, "{kept} of {n} kept");
        // A gain well above the minimum effect still passes its recheck.
        let (kept, n) = lane_keeps(&s, &cv1(), 0.03, 300, 14);
        assert!(kept * 10 > n * 8, "{kept} of {n} kept");
    }

    #[test]
    fn interacting_winners_are_not_merged_below_the_minimum_effect() {
        for interaction in [Interaction::Vanish, Interaction::Reverse(0.01)] {
            let mut p = plan(4, 600);
            p.interaction = interaction;
            let r = simulate_trunk(&seq(), &p);
            assert!(r.stale > 10, "{r:?}");
            assert_eq!(r.stale_merged_below_min, 0, "{interaction:?}: {r:?}");
            assert_eq!(r.stale_merged, 0, "{interaction:?}: {r:?}");
        }
        // Independent effects: stale winners with real gains do merge.
        let r = simulate_trunk(&seq(), &plan(4, 600));
        assert!(r.stale_merged > 0, "{r:?}");
    }
}
