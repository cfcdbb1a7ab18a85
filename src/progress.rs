//! How much work is likely left: an experiment's expected benchmark runs and time, and a sweep's
//! remaining time, from recorded figures. Pure functions; the core emits their results as
//! events (`events::Tracking` does it for a session) and `ui` draws them.
//!
//! The likely size of an experiment is the median runs of the last [`RECENT`] decided
//! experiments in results (same metric): the sequential procedure stops most experiments long
//! before its budget, so the budget would make every bar and ETA wrong by the same large factor.
//! With no decided experiment on record there is nothing to say what is likely, and the total is
//! the budget, marked as such.

use crate::store::{ResultRow, Status};
use serde::Serialize;

/// How many of the most recent decided experiments the record reads: recent enough to follow a
/// changed design or noise history, enough for a stable median.
pub const RECENT: usize = 20;

/// What past experiments in results say about this benchmark's work.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Record {
    /// Decided experiments read (the last [`RECENT`] at most).
    pub decisions: usize,
    /// Their median runs.
    pub runs_per_decision: Option<f64>,
    /// Their wall time over their runs: seconds a run takes all in (checkout, commit and
    /// analysis shared out over the runs).
    pub secs_per_run: Option<f64>,
}

/// Whether a row ran the sequential procedure to its end: its runs are the work of a decision.
/// A crash or a no-op stops early for reasons that say nothing about the next decision.
fn decided(s: Status) -> bool {
    matches!(s, Status::Keep | Status::Revert | Status::Inconclusive | Status::Unconfirmed)
}

/// The record behind estimates: the last [`RECENT`] decided rows of `metric`, in results order.
pub fn record(rows: &[ResultRow], metric: &str) -> Record {
    let mut recent: Vec<&ResultRow> =
        rows.iter().rev().filter(|r| decided(r.status) && r.metric == metric && r.runs > 0).take(RECENT).collect();
    if recent.is_empty() {
        return Record::default();
    }
    recent.reverse();
    let runs: Vec<f64> = recent.iter().map(|r| r.runs as f64).collect();
    let timed: Vec<&&ResultRow> = recent.iter().filter(|r| r.wall_s > 0.0).collect();
    let timed_runs: f64 = timed.iter().map(|r| r.runs as f64).sum();
    Record {
        decisions: recent.len(),
        runs_per_decision: crate::metrics::median(&runs),
        secs_per_run: (timed_runs > 0.0).then(|| timed.iter().map(|r| r.wall_s).sum::<f64>() / timed_runs),
    }
}

/// What one session is expected to run, fixed when it starts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    /// Runs it will likely take: the record's median runs per decision, rounded up to whole
    /// pairs and never above the budget; the budget when nothing is on record.
    pub likely_runs: usize,
    /// The budget: the most runs the procedure may ask for.
    pub max_runs: usize,
    /// Decided experiments behind `likely_runs` (0: it is the budget).
    pub decisions: usize,
    /// Seconds a run took in the record, for the time left before this session has run any.
    pub record_secs_per_run: Option<f64>,
}

impl Plan {
    pub fn new(max_runs: usize, record: &Record) -> Plan {
        let likely = match record.runs_per_decision {
            Some(m) if record.decisions > 0 => (2 * (m / 2.0).ceil() as usize).clamp(2, max_runs.max(2)),
            _ => max_runs,
        };
        Plan { likely_runs: likely, max_runs, decisions: record.decisions, record_secs_per_run: record.secs_per_run }
    }
}

/// Where a session stands: carried by [`Event::Progress`] after it starts and after each run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Estimate {
    /// Runs finished (repeated throttled runs and cross-checks count: they are work too).
    pub done: usize,
    /// Runs the session will likely take: the plan's, or, once past it, the runs done rounded
    /// up to the next whole pair (the procedure asks for at least one more).
    pub total: usize,
    /// The budget.
    pub max_runs: usize,
    /// Decided experiments behind the plan's total (0: the total is the budget).
    pub decisions: usize,
    /// Seconds per run behind `left_s`.
    pub secs_per_run: Option<f64>,
    /// Whether `secs_per_run` is this session's own mean (else the record's).
    pub measured: bool,
    /// Seconds this session's runs have taken.
    pub elapsed_s: f64,
    /// Expected seconds left: (total - done) x secs_per_run.
    pub left_s: Option<f64>,
}

/// A session's estimate after the runs that took `run_secs` (in order). Its own mean run time
/// once a pair has run (both sides: they can differ), the record's before that.
pub fn estimate(plan: &Plan, run_secs: &[f64], floor: usize) -> Estimate {
    let done = run_secs.len();
    // Past the likely total, a pair ahead; never fewer than the runs the procedure asked for.
    let total = if done < plan.likely_runs { plan.likely_runs } else { done + 2 - done % 2 }.max(floor);
    let elapsed: f64 = run_secs.iter().sum();
    let own = (done > 0).then(|| elapsed / done as f64);
    let (secs, measured) = match (own, plan.record_secs_per_run) {
        (Some(s), _) if done >= 2 => (Some(s), true),
        (_, Some(r)) => (Some(r), false),
        (Some(s), None) => (Some(s), true),
        (None, None) => (None, false),
    };
    Estimate {
        done,
        total,
        max_runs: plan.max_runs,
        decisions: plan.decisions,
        secs_per_run: secs,
        measured,
        elapsed_s: elapsed,
        left_s: secs.map(|s| (total - done) as f64 * s),
    }
}

/// Where a sweep stands as a hypothesis starts: carried by [`Event::SweepProgress`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepEta {
    /// The hypothesis starting (0-based) and the queue's length.
    pub index: usize,
    pub total: usize,
    /// Hypotheses still to run, this one included.
    pub left: usize,
    /// Seconds since the sweep started.
    pub elapsed_s: f64,
    /// Experiments this sweep has measured (the pace's basis; 0: the record's).
    pub measured: usize,
    /// Decided experiments in the record behind the pace when `measured` is 0.
    pub decisions: usize,
    /// Runs per hypothesis and seconds per run behind `left_s`.
    pub runs_per_hypothesis: Option<f64>,
    pub secs_per_run: Option<f64>,
    /// Expected seconds left: left x runs_per_hypothesis x secs_per_run.
    pub left_s: Option<f64>,
    /// The same for the hypotheses after this one (the live figure is this plus the running
    /// experiment's own time left).
    pub after_this_s: Option<f64>,
    /// `--max-wall` less the elapsed time.
    pub wall_left_s: Option<f64>,
    /// Hypotheses the wall budget leaves time for at this pace (the sweep starts none that would
    /// end past it), when it is fewer than `left`.
    pub wall_fits: Option<usize>,
}

/// The sweep's estimate from its pace so far: `this_sweep` are the rows it recorded (those with
/// runs are its measured experiments: runs per hypothesis is their mean, seconds per run their
/// wall time over their runs); before it has measured any, the record's median and time per run.
pub fn sweep_eta(
    index: usize,
    total: usize,
    left: usize,
    elapsed_s: f64,
    this_sweep: &[ResultRow],
    record: &Record,
    max_wall_s: Option<f64>,
) -> SweepEta {
    let measured: Vec<&ResultRow> = this_sweep.iter().filter(|r| r.runs > 0).collect();
    let runs: f64 = measured.iter().map(|r| r.runs as f64).sum();
    let (runs_per, secs_per) = if measured.is_empty() {
        (record.runs_per_decision, record.secs_per_run)
    } else {
        (Some(runs / measured.len() as f64), Some(measured.iter().map(|r| r.wall_s).sum::<f64>() / runs))
    };
    let per_hypothesis = runs_per.zip(secs_per).map(|(r, s)| r * s);
    let wall_left = max_wall_s.map(|w| (w - elapsed_s).max(0.0));
    let wall_fits = match (wall_left, per_hypothesis) {
        (Some(w), Some(p)) if p > 0.0 => Some(((w / p).floor() as usize).min(left)).filter(|&n| n < left),
        _ => None,
    };
    SweepEta {
        index,
        total,
        left,
        elapsed_s,
        measured: measured.len(),
        decisions: if measured.is_empty() { record.decisions } else { 0 },
        runs_per_hypothesis: runs_per,
        secs_per_run: secs_per,
        left_s: per_hypothesis.map(|p| left as f64 * p),
        after_this_s: per_hypothesis.map(|p| left.saturating_sub(1) as f64 * p),
        wall_left_s: wall_left,
        wall_fits,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{Event, Events};

    fn row(id: u64, status: Status, runs: u32, wall_s: f64) -> ResultRow {
        ResultRow { metric: "latency".into(), runs, wall_s, ..ResultRow::unmeasured(id, status, "m", String::new(), String::new()) }
    }

    #[test]
    fn the_likely_total_is_the_median_decision_not_the_budget() {
        // Decisions of 12, 16 and 10 runs (median 12) under a budget of 80 runs; a crash after 2
        // runs, a no-op and a skip say nothing about a decision's length.
        let rows = [
            row(1, Status::Revert, 12, 60.0),
            row(2, Status::Crash, 2, 5.0),
            row(3, Status::Keep, 16, 90.0),
            row(4, Status::NoOp, 2, 4.0),
            row(5, Status::Inconclusive, 10, 50.0),
            row(6, Status::Skipped, 0, 0.1),
        ];
        let rec = record(&rows, "latency");
        assert_eq!((rec.decisions, rec.runs_per_decision), (3, Some(12.0)));
        // 200 s over 38 runs.
        assert!((rec.secs_per_run.unwrap() - 200.0 / 38.0).abs() < 1e-9);
        let plan = Plan::new(80, &rec);
        assert_eq!(plan.likely_runs, 12);
        let e = estimate(&plan, &[], 0);
        assert_eq!((e.done, e.total, e.max_runs, e.decisions), (0, 12, 80, 3));
        assert!((e.left_s.unwrap() - 12.0 * 200.0 / 38.0).abs() < 1e-9 && !e.measured);
    }

    #[test]
    fn the_record_reads_only_recent_decisions_of_the_same_metric() {
        let mut rows: Vec<ResultRow> = (0..RECENT as u64).map(|i| row(i, Status::Revert, 40, 40.0)).collect();
        rows.extend((0..RECENT as u64).map(|i| row(100 + i, Status::Revert, 8, 8.0)));
        rows.push(ResultRow { metric: "score".into(), ..row(200, Status::Keep, 60, 60.0) });
        let rec = record(&rows, "latency");
        assert_eq!((rec.decisions, rec.runs_per_decision, rec.secs_per_run), (RECENT, Some(8.0), Some(1.0)));
        assert_eq!(record(&rows, "tflops"), Record::default());
    }

    #[test]
    fn a_median_between_pairs_rounds_up_to_a_whole_pair_and_never_past_the_budget() {
        let rec = Record { decisions: 2, runs_per_decision: Some(11.0), secs_per_run: None };
        assert_eq!(Plan::new(40, &rec).likely_runs, 12);
        assert_eq!(Plan::new(8, &rec).likely_runs, 8);
    }

    #[test]
    fn with_nothing_on_record_the_total_is_the_budget() {
        let plan = Plan::new(38, &Record::default());
        let e = estimate(&plan, &[], 0);
        assert_eq!((e.total, e.decisions, e.secs_per_run, e.left_s), (38, 0, None, None));
    }

    #[test]
    fn the_time_left_comes_from_this_sessions_runs_once_a_pair_has_run() {
        let plan = Plan::new(40, &Record { decisions: 5, runs_per_decision: Some(10.0), secs_per_run: Some(3.0) });
        // One run: still the record's 3 s a run.
        let one = estimate(&plan, &[9.0], 0);
        assert_eq!((one.secs_per_run, one.measured, one.left_s), (Some(3.0), false, Some(27.0)));
        // A pair (9 s and 5 s): its own 7 s a run, 8 runs left.
        let two = estimate(&plan, &[9.0, 5.0], 0);
        assert_eq!((two.secs_per_run, two.measured, two.left_s, two.elapsed_s), (Some(7.0), true, Some(56.0), 14.0));
        // Without a record, a single run is all there is.
        let bare = estimate(&Plan::new(40, &Record::default()), &[4.0], 0);
        assert_eq!((bare.secs_per_run, bare.left_s), (Some(4.0), Some(156.0)));
    }

    #[test]
    fn past_the_likely_total_the_total_grows_a_pair_at_a_time() {
        let plan = Plan::new(40, &Record { decisions: 1, runs_per_decision: Some(4.0), secs_per_run: None });
        let at = |n: usize| estimate(&plan, &vec![1.0; n], 0).total;
        assert_eq!((at(3), at(4), at(5), at(6)), (4, 6, 6, 8));
        assert_eq!(estimate(&plan, &[1.0; 4], 0).left_s, Some(2.0));
        // Runs the procedure asked for (a confirmation's batch) are ahead whatever the record.
        let asked = estimate(&plan, &[1.0; 9], 16);
        assert_eq!((asked.total, asked.left_s), (16, Some(7.0)));
    }

    #[test]
    fn the_sweep_eta_is_its_pace_so_far_times_what_is_left() {
        // Two measured experiments (10 runs in 50 s, 14 runs in 70 s) and a skip: 12 runs a
        // hypothesis at 5 s a run, 60 s each; 4 left.
        let done = [row(1, Status::Revert, 10, 50.0), row(2, Status::Skipped, 0, 0.2), row(3, Status::Keep, 14, 70.0)];
        let rec = Record { decisions: 9, runs_per_decision: Some(30.0), secs_per_run: Some(1.0) };
        let e = sweep_eta(3, 7, 4, 125.0, &done, &rec, Some(300.0));
        assert_eq!((e.measured, e.decisions, e.runs_per_hypothesis, e.secs_per_run), (2, 0, Some(12.0), Some(5.0)));
        assert_eq!((e.left_s, e.after_this_s), (Some(240.0), Some(180.0)));
        // 175 s of the 300 s budget left: two more 60 s experiments fit, not four.
        assert_eq!((e.wall_left_s, e.wall_fits), (Some(175.0), Some(2)));
        // Enough wall for all: nothing to warn of; none asked: no wall figures.
        assert_eq!(sweep_eta(3, 7, 4, 125.0, &done, &rec, Some(1000.0)).wall_fits, None);
        let free = sweep_eta(3, 7, 4, 125.0, &done, &rec, None);
        assert_eq!((free.wall_left_s, free.wall_fits), (None, None));
    }

    #[test]
    fn before_the_sweep_has_measured_anything_the_record_sets_its_pace() {
        let rec = Record { decisions: 6, runs_per_decision: Some(12.0), secs_per_run: Some(2.5) };
        let e = sweep_eta(0, 5, 5, 0.0, &[], &rec, Some(3600.0));
        assert_eq!((e.measured, e.decisions, e.left_s, e.wall_left_s, e.wall_fits), (0, 6, Some(150.0), Some(3600.0), None));
        // Nothing measured and nothing on record: no estimate at all.
        let none = sweep_eta(0, 5, 5, 0.0, &[], &Record::default(), Some(3600.0));
        assert_eq!((none.left_s, none.wall_fits, none.wall_left_s), (None, None, Some(3600.0)));
    }

    #[test]
    fn tracking_adds_an_estimate_after_the_start_and_each_run_and_passes_the_rest() {
        use crate::bench::{RunStatus, Side};
        let mut out: Vec<Event> = vec![];
        let plan = Plan::new(20, &Record { decisions: 3, runs_per_decision: Some(6.0), secs_per_run: Some(2.0) });
        let mut t = crate::events::Tracking::new(&mut out, plan);
        t.emit(Event::SessionStarted { max_runs: 20 });
        for (run, wall_s) in [(0, 4.0), (1, 6.0)] {
            t.emit(Event::RunStarted { run, side: Side::Candidate, label: "pair 1".into() });
            let status = RunStatus::Ok;
            t.emit(Event::RunFinished {
                run,
                side: Side::Candidate,
                label: "pair 1".into(),
                status,
                latency_ms: None,
                value: None,
                wall_s,
            });
        }
        t.emit(Event::SessionFinished);
        let progress: Vec<&Estimate> = out.iter().filter_map(|e| if let Event::Progress(p) = e { Some(p) } else { None }).collect();
        assert_eq!(progress.len(), 3);
        assert_eq!((progress[0].done, progress[0].total, progress[0].left_s), (0, 6, Some(12.0)));
        assert_eq!((progress[2].done, progress[2].secs_per_run, progress[2].left_s), (2, Some(5.0), Some(20.0)));
        // Start, its estimate, two runs (start, end, estimate), the end.
        assert_eq!(out.len(), 9);
        assert!(matches!(out[1], Event::Progress(_)) && matches!(out[8], Event::SessionFinished));
        // The JSON face carries the same figures.
        let json = serde_json::to_value(&out[7]).unwrap();
        assert_eq!((json["event"].as_str(), json["total"].as_u64(), json["left_s"].as_f64()), (Some("progress"), Some(6), Some(20.0)));
    }
}
