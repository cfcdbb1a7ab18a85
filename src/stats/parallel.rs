//! K parallel trials on one serial trunk, simulated (`ratchet simulate --jobs 1,2,4,8`): the
//! decision procedure, unchanged, run by K device slots that each measure a hypothesis against
//! the trunk head it started from, with one merge at a time and stale winners re-measured.
//!
//! The model. A night's queue holds hypotheses whose true effects on the trunk are drawn from
//! [`MIX`] (most changes do nothing or hurt; a few help). A device slot takes the next
//! hypothesis and runs one trial: interleaved pairs of the trunk head it started from and the
//! candidate, on that device only, until the procedure decides (each run one time unit: a
//! benchmark whose time is dominated by the device, as a sleep is). A keep merges only if the
//! trunk has not moved since the trial started; otherwise the winner is stale and is measured
//! again against the new head before anything else (its effect is assumed unchanged by the
//! rebase). With `second_device`, a fresh winner must also keep in a trial on another slot
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
use super::sequential::{Borrowed, Params, Sequential};
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
    /// A stale winner is re-measured by one confirmation-sized look (significantly better than
    /// the new head) instead of a whole trial.
    pub recheck: bool,
    /// The devices' noise (each slot scales its cv by its own factor).
    pub scenario: Scenario,
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
    Lane { first_slot: usize },
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
    // A stale winner's recheck: one look of a confirmation's size and level, for any gain > 0.
    let seq = if plan.recheck && matches!(job.kind, Kind::Lane { .. }) {
        let p = &seq.params;
        Sequential::new(Params::fixed(p.confirm_pairs.max(2), p.confirm_alpha, 0.0))
    } else {
        seq.clone()
    };
    // A parallel sweep's worker is handed the log-ratios' scale only (`--noise-scale sd:df`), so
    // its guard sees the log-ratios alone, as here.
    let seq = seq.with_history(scale.map(|b| Borrowed { sums: None, ..b }));
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
    // Winners waiting for the lane (FIFO), and whether the lane is measuring one now.
    let mut waiting: VecDeque<(usize, usize)> = VecDeque::new();
    let mut lane_busy = false;
    let mut free: Vec<usize> = (0..k).collect();
    let mut running: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    // Per slot: the job it runs, the trunk it started from, and the verdict it will reach.
    let mut slot_state: Vec<Option<(Job, u64, Verdict)>> = vec![None; k];
    let merge = |rep: &mut ParallelReport, trunk: &mut u64, h: usize| {
        *trunk += 1;
        rep.merged += 1;
        let e = effects[h];
        rep.trunk_gain *= 1.0 + e;
        if let Some(c) = rep.by_effect.iter_mut().find(|c| c.0 == e) {
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
                waiting.iter().position(|&(_, first)| !plan.second_device || k == 1 || first != slot)
            };
            let job = match lane {
                Some(i) => {
                    let (h, first_slot) = waiting.remove(i).expect("position is in range");
                    lane_busy = true;
                    if plan.second_device {
                        rep.confirm_trials += 1;
                    }
                    Job { h, kind: Kind::Lane { first_slot } }
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
            let (verdict, runs) = trial(seq, plan, slot, effects[job.h], &job);
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
            Kind::Lane { .. } => {
                lane_busy = false;
                // Nothing merged while the lane measured: the head it measured is the trunk's.
                debug_assert_eq!(base, trunk);
                if verdict == Verdict::Keep {
                    merge(&mut rep, &mut trunk, job.h);
                } else if plan.second_device {
                    rep.confirm_failed += 1;
                }
            }
            Kind::Trial if verdict == Verdict::Keep => {
                if base != trunk {
                    rep.stale += 1;
                    waiting.push_back((job.h, slot));
                } else if plan.second_device || lane_busy {
                    // Either way it waits its turn: the lane may merge before it.
                    waiting.push_back((job.h, slot));
                } else {
                    merge(&mut rep, &mut trunk, job.h);
                }
            }
            Kind::Trial => {}
        }
    }
    rep.wall = now;
    rep
}

/// The table of `ratchet simulate --jobs`: one night per slot count and stale policy, the same
/// queue each time.
pub fn table(seq: &Sequential, slots: &[usize], hypotheses: usize, seed: u64, second_device: bool, scenario: &Scenario) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "\n### {} hypotheses on a serial trunk, K device slots ({}{})\n\n",
        hypotheses,
        scenario.name,
        if second_device { ", winners confirmed on a second device" } else { "" }
    ));
    out.push_str("| slots | stale winner | hypotheses / 1000 units | speed-up | runs / hypothesis | stale | merged | +0% kept (false keeps) | 95% interval | -5% kept | +1% kept | +3% kept | +10% kept | trunk gain / 100 hypotheses |\n");
    out.push_str("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    let mut first = None;
    for &k in slots {
        for recheck in [false, true] {
            if k == 1 && recheck {
                continue; // one slot is never stale
            }
            let plan = ParallelPlan { slots: k, hypotheses, seed, second_device, recheck, scenario: scenario.clone() };
            let r = simulate_trunk(seq, &plan);
            let base = *first.get_or_insert(r.throughput());
            let (fk, nulls) = r.false_keeps();
            out.push_str(&format!(
                "| {} | {} | {:.1} | {:.2}x | {:.1} | {} | {} | {:.3}% | {} | {:.2}% | {:.1}% | {:.1}% | {:.1}% | {:+.1}% |\n",
                k,
                if k == 1 {
                    "-"
                } else if recheck {
                    "rechecked"
                } else {
                    "full trial"
                },
                r.throughput(),
                r.throughput() / base,
                r.runs as f64 / r.hypotheses as f64,
                r.stale,
                r.merged,
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
        ParallelPlan { slots, hypotheses, seed: 42, second_device: false, recheck: false, scenario: cv1 }
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
}
