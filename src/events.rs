//! What the core reports while it works: typed [`Event`]s into an [`Events`] sink. The core
//! (experiment, session, sweep, calibrate) never prints; the command line renders the events as
//! text with a progress bar ([`crate::cli::ui::Text`]), and [`JsonLines`] writes them one JSON object
//! a line. Tests collect them in a `Vec<Event>`.

use crate::bench::{RunStatus, Side};
use crate::outcome::{Outcome, SweepOutcome};
use crate::signals::Cancel;
use crate::stats::noise::NoiseFloor;
use crate::stats::sequential::Params;
use crate::store::ResultRow;
use serde::Serialize;
use std::path::PathBuf;

/// One thing that happened. Serialized with its kind under `"event"` (snake case).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A recovery finished or rolled back what a stopped ratchet left behind.
    Recovered { what: String },
    /// Something the user should know that is not an error.
    Note { text: String },
    /// What the hypothesis commits (paths and sizes), before it is committed.
    Hypothesis { listing: String },
    /// An experiment committed its hypothesis and starts measuring.
    ExperimentStarted {
        id: u64,
        message: String,
        branch: String,
        candidate: String,
        incumbent: String,
        metric: String,
        params: Params,
        /// How the metric scales with speed (see `stats::elasticity`).
        elasticity: f64,
        /// Where the noise scale comes from (`stats::history::describe`).
        history: String,
        /// The likelihood ratio's budget in pairs where it decides (`[decision] method = "auto"`
        /// or `"likelihood-ratio"` with history); `None`: the two phases.
        one_phase: Option<usize>,
    },
    /// A measuring session starts; it runs at most about `max_runs` benchmark processes.
    SessionStarted { max_runs: usize },
    /// Run `run` (0-based, in the session) of `side` starts.
    RunStarted { run: usize, side: Side, label: String },
    /// Run `run` ended.
    RunFinished { run: usize, side: Side, label: String, status: RunStatus, latency_ms: Option<f64>, value: Option<f64>, wall_s: f64 },
    /// Run `run` was throttled and is run again (`attempt` of at most `max`).
    RunRepeated { run: usize, side: Side, attempt: u32, max: u32 },
    /// `crashed` crashed; `other` runs once to tell a broken set-up from a broken hypothesis.
    CrossCheck { crashed: Side, other: Side },
    /// Where the session stands: runs done of the likely total and the time left
    /// (`Tracking` adds one after the start and after each run).
    Progress(crate::progress::Estimate),
    /// The session's runs are over.
    SessionFinished,
    /// The procedure asked for this many more runs before its next look (a confirmation's
    /// whole batch, say): the session's progress counts them as ahead, whatever the record's
    /// likely total.
    RunsAhead { runs: usize },
    /// An experiment was decided (or stopped) and its row recorded.
    ExperimentFinished { outcome: Box<Outcome> },
    /// A sweep starts.
    SweepStarted { branch: String, hypotheses: usize, already_done: usize, to_run: usize, max_wall_s: Option<f64>, max_runs: Option<u64> },
    /// A hypothesis that already has its row (`id`) is passed over.
    HypothesisDone { index: usize, total: usize, name: String, id: u64 },
    /// A hypothesis starts, `elapsed_s` into the sweep.
    HypothesisStarted { index: usize, total: usize, name: String, elapsed_s: f64 },
    /// Where the sweep stands as a hypothesis starts: done of total, elapsed, time left at its pace.
    SweepProgress(crate::progress::SweepEta),
    /// The sweep recorded a row without measuring (skipped, refused).
    Unmeasured { row: Box<ResultRow> },
    /// The sweep ended; `gain` is the results' overall gain line, when there is one.
    SweepFinished { outcome: SweepOutcome, runs: u64, wall_s: f64, gain: Option<String> },
    /// `ratchet calibrate` starts its A/A pairs.
    CalibrationStarted { pairs: usize, commit: String, branch: String },
    /// The noise floor was measured and written to `path`.
    CalibrationFinished { metric: String, noise: NoiseFloor, params: Params, path: PathBuf },
    /// Where the noise scale of later decisions now comes from (`stats::history::describe`).
    NoiseHistory { text: String },
    /// A parallel sweep handed a trial to a device slot (`recheck`: a stale winner measured
    /// again against the trunk head).
    TrialSubmitted { trial: String, name: String, slot: Option<usize>, device: String, incumbent: String, recheck: bool },
    /// A trial's worker ended (`end`: how its measuring ended, from its trial.json).
    TrialFinished { trial: String, name: String, slot: Option<usize>, end: String, wall_s: f64 },
    /// A winner whose trunk head moved while it was measured waits for its recheck.
    StaleWinner { name: String, won_against: String, head: String },
}

/// A yes/no question the core puts to the person running ratchet; the command line's text face
/// answers it from the terminal. The core never reads the terminal itself.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "question", rename_all = "snake_case")]
pub enum Question {
    /// Untracked large or binary files (each "path (size[, binary])") would enter the
    /// hypothesis: commit them?
    CommitLargeFiles { files: Vec<String> },
}

impl Question {
    /// The question as asked on a terminal.
    pub fn text(&self) -> String {
        match self {
            Question::CommitLargeFiles { files } => format!(
                "large or binary untracked files would be committed: {}\ncommit them as part of the hypothesis? [y/N] ",
                files.join(", ")
            ),
        }
    }
}

/// Where events go.
pub trait Events {
    fn emit(&mut self, event: Event);

    /// Put `question` to the person at the command line: `Some(answer)`, or `None` where nobody
    /// can answer (no terminal, `--json`, a test's sink), and the caller keeps its
    /// non-interactive default.
    fn ask(&mut self, _question: &Question) -> Option<bool> {
        None
    }
}

impl Events for Vec<Event> {
    fn emit(&mut self, event: Event) {
        self.push(event);
    }
}

/// Drops every event.
pub struct Discard;

impl Events for Discard {
    fn emit(&mut self, _: Event) {}
}

/// One JSON object per line: the machine-readable face (`--json`).
pub struct JsonLines<W: std::io::Write>(pub W);

impl<W: std::io::Write> Events for JsonLines<W> {
    fn emit(&mut self, event: Event) {
        // Output that cannot be written is dropped, as `println!` through the relay does: an
        // experiment never fails because its reader went away.
        if let Ok(line) = serde_json::to_string(&event) {
            let _ = writeln!(self.0, "{line}");
        }
    }
}

/// What every operation gets besides its inputs: where its events go and the token that stops it.
pub struct Effects<'a> {
    pub events: &'a mut dyn Events,
    pub cancel: Cancel,
}

impl<'a> Effects<'a> {
    pub fn new(events: &'a mut dyn Events, cancel: Cancel) -> Self {
        Effects { events, cancel }
    }

    pub fn emit(&mut self, event: Event) {
        self.events.emit(event);
    }

    pub fn note(&mut self, text: impl Into<String>) {
        self.events.emit(Event::Note { text: text.into() });
    }

    /// Ask the person at the command line (see [`Events::ask`]).
    pub fn ask(&mut self, question: &Question) -> Option<bool> {
        self.events.ask(question)
    }
}

/// An events sink around another that follows a session's runs and, after its start and after
/// each run, adds an [`Event::Progress`] with the [`estimate`](crate::progress::estimate). Everything else passes through.
pub struct Tracking<'a> {
    inner: &'a mut dyn Events,
    plan: crate::progress::Plan,
    run_secs: Vec<f64>,
    /// Runs done plus those the procedure last asked for: the fewest the session will take.
    floor: usize,
}

impl<'a> Tracking<'a> {
    pub fn new(inner: &'a mut dyn Events, plan: crate::progress::Plan) -> Tracking<'a> {
        Tracking { inner, plan, run_secs: vec![], floor: 0 }
    }
}

impl Events for Tracking<'_> {
    fn emit(&mut self, event: Event) {
        let follow = match &event {
            Event::SessionStarted { .. } => {
                self.run_secs.clear();
                self.floor = 0;
                true
            }
            // Counted from the next run's estimate on (one estimate after the start and one
            // after each run, as before).
            Event::RunsAhead { runs } => {
                self.floor = self.floor.max(self.run_secs.len() + runs);
                false
            }
            Event::RunFinished { wall_s, .. } => {
                self.run_secs.push(*wall_s);
                true
            }
            _ => false,
        };
        self.inner.emit(event);
        if follow {
            self.inner.emit(Event::Progress(crate::progress::estimate(&self.plan, &self.run_secs, self.floor)));
        }
    }

    fn ask(&mut self, question: &Question) -> Option<bool> {
        self.inner.ask(question)
    }
}
