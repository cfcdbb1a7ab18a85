//! `ratchet-lab simulate --jobs`: a night's queue on K simulated device slots, scheduled by the
//! controller's own merge lane ([`Lane`], the chain), each trial decided by the serial rule
//! (`ratchet_lab::parallel::measure`). It shows what the chain buys in throughput and that no false
//! keep comes of it, also when a stale winner's gain vanishes, shrinks or reverses.
//!
//! As in the controller: new trials and rechecks start on the chain's tip; a winner measured
//! against the tip joins the chain and merges without a recheck once the links before it land;
//! a winner measured against a commit that can no longer become the head is stale and is
//! rechecked on the tip (side by side with other rechecks); a recheck that is not kept cuts the
//! chain, and the rechecks after it are stopped and start again on the new tip. A recheck's
//! true effect is the interaction's (the worst case: every stale winner interacts).

use crate::parallel::{effect_of, measure, Interaction, ParallelPlan, ParallelReport, Queue, TrialTest, INTERACTIONS};
use crate::simulate::Scenario;
use ratchet::scale::lane::{Lane, Link, Place};
use ratchet::stats::sequential::Sequential;
use ratchet::stats::Verdict;
use std::collections::VecDeque;

/// A trial on a slot, or a finished winner waiting for the lane.
#[derive(Debug, Clone)]
struct Trial {
    id: String,
    h: usize,
    incumbent: String,
    candidate: String,
    slot: usize,
    start: u64,
    end: u64,
    runs: u64,
    verdict: Verdict,
    /// The true effect it was measured with (on its incumbent).
    effect: f64,
    /// A recheck (or a second-device trial): its first win.
    first: Option<First>,
    /// With `speculate`: when its first phase passed (in time units), until the chain has
    /// been offered its link.
    promising_at: Option<u64>,
}

/// A winner's first trial, as its recheck carries it.
#[derive(Debug, Clone)]
struct First {
    runs: u64,
    /// The commit it won against.
    incumbent: String,
    /// The trunk moved since (the recheck is measured against another head: the interaction
    /// applies).
    moved: bool,
    /// A fresh winner's second-device trial, not a stale winner's recheck.
    confirm: bool,
}

struct Sim<'a> {
    seq: &'a Sequential,
    plan: &'a ParallelPlan,
    effects: Vec<f64>,
    rep: ParallelReport,
    now: u64,
    head: String,
    lane: Lane,
    running: Vec<Trial>,
    winners: VecDeque<Trial>,
    /// Rechecks to start again (cut from the chain): hypothesis and first win.
    requeue: VecDeque<(usize, First)>,
    next_new: usize,
    next_id: u64,
    recheck_waits: bool,
}

impl Sim<'_> {
    fn free_slot(&self, not: Option<usize>) -> Option<usize> {
        (0..self.plan.slots.max(1)).find(|s| Some(*s) != not && !self.running.iter().any(|t| t.slot == *s))
    }

    /// Start a trial of `h` on the tip: a first trial, or (with `first`) a recheck, which joins
    /// the chain at once.
    fn start(&mut self, h: usize, slot: usize, first: Option<First>) {
        let tip = self.lane.tip(&self.head).to_string();
        self.next_id += 1;
        let id = format!("t{}", self.next_id);
        let candidate = format!("c{}", self.next_id);
        let first = first.map(|f| First { moved: f.incumbent != tip, ..f });
        let moved = first.as_ref().is_some_and(|f| f.moved);
        self.rep.stale += usize::from(moved);
        let effect = if moved { self.plan.interaction.after(self.effects[h]) } else { self.effects[h] };
        // A serial baseline takes its devices in turn (see `ParallelPlan::devices`).
        let device = if self.plan.slots <= 1 && self.plan.devices > 1 { (self.next_id - 1) as usize % self.plan.devices } else { slot };
        let m = measure(self.seq, self.plan, device, effect, h, self.next_id);
        let (verdict, runs) = (m.verdict, m.runs);
        let promising_at = m.promising_after.filter(|_| self.plan.speculate && first.is_none()).map(|p| self.now + p);
        self.rep.trials += 1;
        if first.is_some() {
            self.lane.push(Link { id: id.clone(), incumbent: tip.clone(), candidate: candidate.clone() });
        }
        self.running.push(Trial {
            id,
            h,
            incumbent: tip,
            candidate,
            slot,
            start: self.now,
            end: self.now + runs,
            runs,
            verdict,
            effect,
            first,
            promising_at,
        });
    }

    /// With `speculate`: the first trial `j` has passed its first phase; measured on the tip, it
    /// joins the chain now, so that trials started from here on build on its candidate.
    fn promising(&mut self, j: usize) {
        self.running[j].promising_at = None;
        let t = &self.running[j];
        if t.incumbent == self.lane.tip(&self.head) {
            let link = Link { id: t.id.clone(), incumbent: t.incumbent.clone(), candidate: t.candidate.clone() };
            self.lane.push(link);
        }
    }

    fn merge(&mut self, t: &Trial) {
        self.head = t.candidate.clone();
        let r = &mut self.rep;
        r.merged += 1;
        r.trunk_gain *= 1.0 + t.effect;
        if let Some(c) = r.by_effect.iter_mut().find(|c| c.0 == self.effects[t.h]) {
            c.2 += 1;
        }
        if t.first.as_ref().is_some_and(|f| f.moved) {
            r.stale_merged += 1;
            r.stale_merged_below_min += usize::from(t.effect * 100.0 < self.seq.params.min_effect_pct);
        }
    }

    /// The link at `at` was not kept: the rechecks after it start again on the new tip (those
    /// in flight are stopped, their runs so far spent); a first win after it waits, stale now.
    fn cut(&mut self, at: usize) {
        for l in self.lane.cut(at).into_iter().skip(1) {
            if self.running.iter().chain(&self.winners).any(|t| t.id == l.id && t.first.is_none()) {
                // A first trial that joined while promising (`speculate`): it goes on, and is
                // rechecked if it wins, as any trial measured against a commit that will not be.
                continue;
            }
            let t = if let Some(i) = self.running.iter().position(|t| t.id == l.id) {
                let t = self.running.remove(i);
                self.rep.runs += self.now - t.start;
                t
            } else if let Some(i) = self.winners.iter().position(|t| t.id == l.id && t.first.is_some()) {
                self.winners.remove(i).expect("in range")
            } else {
                continue;
            };
            self.rep.restarted += 1;
            self.requeue.push_back((t.h, t.first.expect("a link in flight or won after a cut is a recheck")));
        }
    }

    /// The controller's `lane_step`: merge the decided front, let winners on the tip join,
    /// recheck stale winners on the tip while slots are free.
    fn lane_step(&mut self) {
        self.recheck_waits = false;
        'again: loop {
            for i in 0..self.winners.len() {
                let w = &self.winners[i];
                let link = Link { id: w.id.clone(), incumbent: w.incumbent.clone(), candidate: w.candidate.clone() };
                // A fresh winner with a second device asked for is confirmed on another slot
                // first, as a recheck on the tip.
                let place = match self.lane.place(&self.head, &link) {
                    Place::Join | Place::Merge if self.plan.second_device && w.first.is_none() => Place::Stale,
                    p => p,
                };
                match place {
                    Place::Wait => {}
                    Place::Merge => {
                        let w = self.winners.remove(i).expect("in range");
                        self.lane.pop_front();
                        self.merge(&w);
                        continue 'again;
                    }
                    Place::Join => {
                        self.lane.push(link);
                        continue 'again;
                    }
                    Place::Stale => {
                        if let Some(at) = self.lane.position(&link.id) {
                            self.cut(at);
                            continue 'again;
                        }
                        // A second-device trial never runs on the slot that found the winner
                        // (with one slot there is no other).
                        let not = (self.plan.second_device && self.plan.slots > 1).then_some(w.slot);
                        let Some(slot) = self.free_slot(not) else {
                            self.recheck_waits = true;
                            continue;
                        };
                        let w = self.winners.remove(i).expect("in range");
                        let first = match w.first {
                            // A recheck whose chain was cut after it won: again from its first win.
                            Some(f) => First { runs: f.runs + w.runs, ..f },
                            None => {
                                let confirm = self.lane.tip(&self.head) == w.incumbent;
                                self.rep.confirm_trials += usize::from(confirm);
                                First { runs: w.runs, incumbent: w.incumbent, moved: false, confirm }
                            }
                        };
                        self.start(w.h, slot, Some(first));
                        continue 'again;
                    }
                }
            }
            return;
        }
    }

    fn finished(&mut self, t: Trial) {
        self.rep.runs += t.runs;
        if t.verdict == Verdict::Keep {
            self.winners.push_back(t);
            return;
        }
        if t.first.as_ref().is_some_and(|f| f.confirm) {
            self.rep.confirm_failed += 1;
        }
        if let Some(at) = self.lane.position(&t.id) {
            self.cut(at);
        }
    }
}

/// Simulate one night of `plan.hypotheses` hypotheses on `plan.slots` device slots through the
/// chain.
pub fn simulate_trunk(seq: &Sequential, plan: &ParallelPlan) -> ParallelReport {
    let k = plan.slots.max(1);
    let effects: Vec<f64> = (0..plan.hypotheses).map(|h| effect_of(plan.seed, h, plan.queue)).collect();
    let mut rep = ParallelReport {
        slots: k,
        hypotheses: plan.hypotheses,
        by_effect: plan.queue.shares().iter().map(|&(e, _)| (e, 0, 0)).collect(),
        trunk_gain: 1.0,
        ..Default::default()
    };
    for &e in &effects {
        if let Some(c) = rep.by_effect.iter_mut().find(|c| c.0 == e) {
            c.1 += 1;
        }
    }
    let mut s = Sim {
        seq,
        plan,
        effects,
        rep,
        now: 0,
        head: "c0".into(),
        lane: Lane::default(),
        running: vec![],
        winners: VecDeque::new(),
        requeue: VecDeque::new(),
        next_new: 0,
        next_id: 0,
        recheck_waits: false,
    };
    loop {
        // The controller's order: rechecks started again first, then the lane, then new
        // hypotheses unless a stale winner waits for a slot.
        while let Some(slot) = s.free_slot(None) {
            let Some((h, first)) = s.requeue.pop_front() else { break };
            s.start(h, slot, Some(first));
        }
        s.lane_step();
        while !s.recheck_waits && s.next_new < plan.hypotheses {
            let Some(slot) = s.free_slot(None) else { break };
            s.next_new += 1;
            s.start(s.next_new - 1, slot, None);
        }
        // A first phase that passes before the next trial ends is acted on first.
        let next_end = s.running.iter().map(|t| t.end).min();
        let promise = (0..s.running.len()).filter_map(|j| s.running[j].promising_at.map(|p| (p, j))).min();
        if let Some((p, j)) = promise.filter(|&(p, _)| next_end.is_none_or(|e| p < e)) {
            s.now = p;
            s.promising(j);
            continue;
        }
        let Some(i) = (0..s.running.len()).min_by_key(|&i| (s.running[i].end, s.running[i].slot)) else {
            // Nothing in flight after the lane's step: every winner has merged or been decided.
            assert!(
                s.winners.is_empty() && s.requeue.is_empty(),
                "the simulated lane is stuck: {:?} waiting, chain {:?}",
                s.winners,
                s.lane.ids().collect::<Vec<_>>()
            );
            break;
        };
        let t = s.running.remove(i);
        s.now = t.end;
        s.finished(t);
    }
    s.rep.wall = s.now;
    s.rep
}

/// What `ratchet-lab simulate --jobs` simulates: the slot counts, the queue and its length, the
/// seed, and the devices' noise.
pub struct Night<'a> {
    pub slots: &'a [usize],
    pub hypotheses: usize,
    pub queue: Queue,
    pub seed: u64,
    pub second_device: bool,
    pub scenario: &'a Scenario,
    /// How trials decide, and whether promising first trials join the chain (the probe's
    /// knobs; `ratchet-lab simulate --jobs` runs the procedure without speculation).
    pub test: TrialTest,
    pub speculate: bool,
}

/// The table of `ratchet-lab simulate --jobs`: one night per slot count and interaction, the same
/// queue each time, and the lane's false-keep rate on vanished gains.
pub fn table(seq: &Sequential, night: &Night) -> String {
    let Night { slots, hypotheses, queue, seed, second_device, scenario, test, speculate } = *night;
    let mut out = String::new();
    out.push_str(&format!(
        "\n### {} hypotheses on a serial trunk, K device slots, the merge lane's chain ({}{})\n\n",
        hypotheses,
        scenario.name,
        if second_device { ", winners confirmed on a second device" } else { "" }
    ));
    out.push_str("| slots | a stale winner's gain after another keep | hypotheses / 1000 units | speed-up (over the serial loop on the same devices) | runs / hypothesis | rechecks (started again) | merged | stale merged (below min effect) | +0% kept (false keeps) | 95% interval | -5% kept | +1% kept | +3% kept | +10% kept | trunk gain / 100 hypotheses |\n");
    out.push_str("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    // The devices differ a little in noise (`parallel::device_factor`): each K's baseline is the
    // serial loop taking the same K devices in turn, not the first device alone.
    let serial = |k: usize| {
        let plan = ParallelPlan {
            slots: 1,
            hypotheses,
            seed,
            second_device,
            interaction: Interaction::None,
            scenario: scenario.clone(),
            queue,
            devices: k,
            test,
            speculate: false,
        };
        simulate_trunk(seq, &plan).throughput()
    };
    let mut bases = vec![];
    for &k in slots {
        let base = serial(k);
        bases.push((k, base));
        for interaction in INTERACTIONS {
            if k == 1 && interaction != Interaction::None {
                continue; // one slot is never stale
            }
            let plan = ParallelPlan {
                slots: k,
                hypotheses,
                seed,
                second_device,
                interaction,
                scenario: scenario.clone(),
                queue,
                devices: 1,
                test,
                speculate,
            };
            let r = simulate_trunk(seq, &plan);
            let (fk, nulls) = r.false_keeps();
            out.push_str(&format!(
                "| {} | {} | {:.1} | {:.2}x | {:.1} | {} ({}) | {} | {} ({}) | {:.3}% | {} | {} | {} | {} | {} | {:+.1}% |\n",
                k,
                if k == 1 { "-".into() } else { interaction.label() },
                r.throughput(),
                r.throughput() / base,
                r.runs as f64 / r.hypotheses as f64,
                r.stale,
                r.restarted,
                r.merged,
                r.stale_merged,
                r.stale_merged_below_min,
                fk as f64 / nulls.max(1) as f64 * 100.0,
                crate::simulate::interval(fk, nulls.max(1)),
                rate(r.keep_rate(-0.05), 2),
                rate(r.keep_rate(0.01), 1),
                rate(r.keep_rate(0.03), 1),
                rate(r.keep_rate(0.10), 1),
                r.gain_per_100(),
            ));
        }
    }
    let bases: Vec<String> = bases.iter().map(|(k, b)| format!("{k}: {b:.1}")).collect();
    out.push_str(&format!(
        "\nThe serial loop on the same K devices, taken in turn (the speed-up's baseline), in hypotheses / 1000 units: {}.\n",
        bases.join(", ")
    ));
    let n = hypotheses.max(2000);
    let (kept, n) = crate::parallel::lane_keeps(seq, scenario, 0.0, n, seed, test);
    let p = &seq.params;
    out.push_str(&format!(
        "\nThe lane's recheck of a stale winner whose gain vanished (true effect 0 on the new head): {kept} of {n} kept, {:.3}% {}; the serial rule's bound is {:.3}%.\n",
        kept as f64 / n as f64 * 100.0,
        crate::simulate::interval(kept, n),
        p.false_keep_bound() * 100.0
    ));
    out
}

/// A keep rate as a percentage with `places` decimals, or "-" when the queue had no such
/// hypothesis.
fn rate(r: Option<f64>, places: usize) -> String {
    r.map_or("-".into(), |r| format!("{:.*}%", places, r * 100.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate::scenario;

    fn seq() -> Sequential {
        Sequential::new(ratchet::config::DecisionConfig::earlier().params(None))
    }

    fn plan(slots: usize, hypotheses: usize) -> ParallelPlan {
        let cv1 = scenario("cv 1%");
        ParallelPlan {
            slots,
            hypotheses,
            seed: 42,
            second_device: false,
            interaction: Interaction::None,
            scenario: cv1,
            queue: Queue::Mix,
            devices: 1,
            test: TrialTest::Procedure,
            speculate: false,
        }
    }

    /// A night on the cv 1% machine, one device, the procedure's own trials.
    fn night<'a>(slots: &'a [usize], hypotheses: usize, queue: Queue, seed: u64, cv1: &'a Scenario) -> Night<'a> {
        Night { slots, hypotheses, queue, seed, second_device: false, scenario: cv1, test: TrialTest::Procedure, speculate: false }
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
    fn more_slots_decide_faster_and_every_run_is_counted() {
        let s = seq();
        let one = simulate_trunk(&s, &plan(1, 400));
        let four = simulate_trunk(&s, &plan(4, 400));
        // Four slots finish the same queue in well under half the time, and never run more
        // than four runs at once.
        assert!(four.wall * 2 < one.wall, "{} vs {}", four.wall, one.wall);
        assert!(four.runs <= 4 * four.wall, "{four:?}");
        assert!(four.merged <= 400);
        // Every trial beyond the first of each hypothesis is a recheck on a moved trunk.
        assert_eq!(four.trials, 400 + four.stale, "{four:?}");
        assert!(four.stale > 0, "four slots see a moved trunk now and then");
        assert!(four.keep_rate(0.10).unwrap() > 0.9, "{:?}", four.by_effect);
    }

    #[test]
    fn each_slot_count_is_measured_against_the_serial_loop_on_the_same_devices() {
        // The devices' noise differs (0.8x-1.25x); a serial loop on the first device alone made
        // every speed-up partly a quieter device's. The serial baseline of K slots takes the same
        // K devices in turn, and the table says what each baseline was.
        let mut serial4 = plan(1, 400);
        serial4.devices = 4;
        let one = simulate_trunk(&seq(), &plan(1, 400));
        let turn = simulate_trunk(&seq(), &serial4);
        assert_eq!((turn.trials, turn.stale), (400, 0), "a serial loop is never stale");
        assert_ne!(one.runs, turn.runs, "other devices, other runs");
        let cv1 = scenario("cv 1%");
        let night = night(&[1, 4], 400, Queue::Mix, 42, &cv1);
        let t = table(&seq(), &night);
        let four = simulate_trunk(&seq(), &plan(4, 400));
        let want = format!("| 4 | independent | {:.1} | {:.2}x |", four.throughput(), four.throughput() / turn.throughput());
        assert!(t.contains(&want), "{want}\n{t}");
        assert!(t.contains(&format!("1: {:.1}, 4: {:.1}.", one.throughput(), turn.throughput())), "{t}");
    }

    #[test]
    fn speculating_on_promising_first_trials_leaves_fewer_stale_winners_and_keeps_the_bound() {
        // Speculation starts on a first phase that passed: the two phases' procedure, which has one
        // (the likelihood ratio decides in one phase, so nothing is promising before its keep).
        let s = Sequential::new(
            ratchet::config::DecisionConfig { method: ratchet::config::Method::Sequential, ..Default::default() }.params(None),
        );
        let mut p = plan(4, 3000);
        p.queue = Queue::Win30;
        let today = simulate_trunk(&s, &p);
        p.speculate = true;
        let spec = simulate_trunk(&s, &p);
        assert!(spec.stale * 20 < today.stale * 19, "stale winners: {} speculating, {} without", spec.stale, today.stale);
        assert!(spec.wall < today.wall, "{} vs {}", spec.wall, today.wall);
        // Every hypothesis is decided once, no run is lost from the count, and do-nothing
        // changes stay out (about 1650 of them: the bound allows 1.65).
        assert_eq!(spec.by_effect.iter().map(|c| c.1).sum::<usize>(), 3000);
        assert!(spec.runs <= 4 * spec.wall);
        assert!(spec.false_keeps().0 <= 1, "{:?}", spec.false_keeps());
        // A promising trial whose confirmation fails cuts the chain: with every stale winner's
        // gain gone, nothing below the minimum effect is merged.
        p.interaction = Interaction::Vanish;
        let vanish = simulate_trunk(&s, &p);
        assert_eq!(vanish.stale_merged_below_min, 0, "{vanish:?}");
        assert!(vanish.restarted > 0, "cut chains start rechecks again");
    }

    #[test]
    fn the_known_noise_sprt_spends_fewer_runs_than_the_procedure_and_keeps_its_levels() {
        // The floor of docs/decisions.md as the lane probe's trial: no test at these levels
        // spends less, and it is not one ratchet could run (it knows the noise).
        let s = seq();
        let mut p = plan(1, 3000);
        let procedure = simulate_trunk(&s, &p);
        p.test = TrialTest::KnownNoiseSprt;
        let floor = simulate_trunk(&s, &p);
        assert!(floor.runs * 10 < procedure.runs * 8, "{} vs {}", floor.runs, procedure.runs);
        assert!(floor.false_keeps().0 <= 2, "{:?}", floor.false_keeps());
        assert!(floor.keep_rate(0.10).unwrap() > 0.99 && floor.keep_rate(0.03).unwrap() > 0.9, "{:?}", floor.by_effect);
        assert_eq!(floor.keep_rate(-0.05), Some(0.0));
    }

    #[test]
    fn a_win30_queue_draws_its_shares_and_has_no_minimum_effect_gains() {
        // The queue the throughput target names: 30% of its hypotheses win, none is +1%, and the
        // table says "-" for an effect the queue does not hold rather than a 0% keep rate.
        let mut p = plan(4, 4000);
        p.queue = Queue::Win30;
        let r = simulate_trunk(&seq(), &p);
        let share = |e: f64| r.by_effect.iter().find(|c| c.0 == e).map_or(0, |c| c.1) as f64 / 4000.0;
        assert!((share(0.03) + share(0.10) - 0.30).abs() < 0.03, "{:?}", r.by_effect);
        assert_eq!(r.keep_rate(0.01), None);
        assert!(r.keep_rate(0.10).unwrap() > 0.9);
        // More winners than the mix's means more stale ones on 4 slots.
        let mix = simulate_trunk(&seq(), &plan(4, 4000));
        assert!(r.stale > mix.stale, "win30 {} stale rechecks, mix {}", r.stale, mix.stale);
        let cv1 = scenario("cv 1%");
        let night = night(&[1, 4], 300, Queue::Win30, 3, &cv1);
        let t = table(&seq(), &night);
        let four: Vec<&str> = t.lines().filter(|l| l.starts_with("| 4 |")).collect();
        assert_eq!(four.len(), 4, "one row per interaction: {t}");
        assert!(four.iter().all(|l| l.split(" | ").nth(11) == Some("-")), "{t}");
    }

    #[test]
    fn the_chain_keeps_four_slots_busy_while_stale_winners_are_rechecked() {
        // With the mix's gains most winners on 4 slots are stale, yet rechecks run side by side
        // and new trials go on meanwhile: over 2.7x the serial loop's throughput (one recheck at
        // a time, with the rest of the lane waiting, gave 2.57x in the same simulation).
        let s = seq();
        let one = simulate_trunk(&s, &plan(1, 2000));
        let four = simulate_trunk(&s, &plan(4, 2000));
        assert!(four.stale * 2 > four.merged, "most merges follow a recheck: {four:?}");
        assert!(four.wall * 27 < one.wall * 10, "{} vs {}", four.wall, one.wall);
    }

    #[test]
    fn a_second_device_confirms_every_merge() {
        let mut p = plan(4, 300);
        p.second_device = true;
        let r = simulate_trunk(&seq(), &p);
        // Every merge passed a trial on a second device (or a stale winner's recheck).
        assert!(r.confirm_trials + r.stale >= r.merged, "{r:?}");
        assert!(r.merged > 0);
    }

    #[test]
    fn interacting_winners_are_not_merged_below_the_minimum_effect() {
        for interaction in [Interaction::Vanish, Interaction::Reverse(0.01)] {
            let mut p = plan(4, 600);
            p.interaction = interaction;
            let r = simulate_trunk(&seq(), &p);
            assert!(r.stale > 5, "{r:?}");
            assert_eq!(r.stale_merged_below_min, 0, "{interaction:?}: {r:?}");
            assert_eq!(r.stale_merged, 0, "{interaction:?}: {r:?}");
            // Do-nothing changes are never kept.
            assert_eq!(r.false_keeps().0, 0, "{interaction:?}: {r:?}");
        }
        // A gain left at +0.7%, under the 1% minimum effect: merged about as rarely as the
        // serial rule keeps such a change.
        let mut p = plan(4, 600);
        p.interaction = Interaction::Shrink(0.007);
        let r = simulate_trunk(&seq(), &p);
        assert!(r.stale_merged_below_min * 5 <= r.stale.max(1), "{r:?}");
        // Independent effects: stale winners with real gains do merge.
        let r = simulate_trunk(&seq(), &plan(4, 600));
        assert!(r.stale_merged > 0, "{r:?}");
    }

    #[test]
    fn a_cut_chain_starts_its_rechecks_again() {
        // When gains reverse, every recheck loses and cuts the chain behind it: the rechecks
        // after it start again, and every hypothesis still gets its row.
        let mut p = plan(8, 600);
        p.interaction = Interaction::Reverse(0.01);
        let r = simulate_trunk(&seq(), &p);
        assert!(r.restarted > 0, "{r:?}");
        assert_eq!(r.by_effect.iter().map(|c| c.1).sum::<usize>(), 600);
    }
}
