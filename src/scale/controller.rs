//! The controller of a parallel sweep (`ratchet sweep --jobs N`): hands hypotheses to free slots
//! of an [`Engine`] as trials against the trunk head, and decides them one at a time on one
//! trunk through the merge lane of `stats::parallel` (docs/scale-out.md): a winner merges only
//! if its incumbent is still the head; a stale winner waits in a FIFO and is rechecked against
//! the head while nothing else merges. Every decision is the experiments' own, made here from
//! the worker's run directory; a worker decides nothing.
//!
//! Crash safety: `.ratchet/scale.json` journals every trial before it is submitted and its
//! engine handle before it is waited on, and every recording (row, merge, park) before it
//! starts, so a controller killed at any point loses no finished trial, merges nothing twice,
//! and its workers are stopped by the next start ([`recover`]).

use super::engine::{Engine, JobHandle, JobState, TrialSpec};
use super::trial::{TrialEnd, TrialResult};
use crate::config::{self, Config};
use crate::error::{Error, Result, WithPath};
use crate::events::{Effects, Event};
use crate::experiment::{self, Ended, RowContext};
use crate::outcome::{Outcome, SweepOutcome};
use crate::session::Stop;
use crate::stats::history;
use crate::stats::sequential::Next;
use crate::stats::Decision;
use crate::store::{ResultRow, State, Status, Store};
use crate::sweep::hypothesis::{Hypothesis, Plan};
use crate::sweep::SweepOptions;
use crate::vcs::{short, Repo};
use crate::workspace::{Locked, Workspace};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const JOURNAL: &str = crate::journal::SCALE.file;
/// How often a lost trial starts again when `[engine] retries` is not set.
pub const DEFAULT_RETRIES: u32 = 2;
/// Where a trial's candidate commit is kept until it is merged or parked.
pub const TRIAL_REF_PREFIX: &str = "refs/ratchet/trials/";
/// Where a stale winner's first candidate is kept once its row is recorded (`<row id>`).
pub const STALE_REF_PREFIX: &str = "refs/ratchet/stale/";
/// In a recorded trial's run directory: the id of the experiment it was recorded as.
pub const RECORDED_AS: &str = "experiment";

/// A trial the controller submitted (or is about to) and has not recorded yet.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Tracked {
    spec: TrialSpec,
    /// Set once the engine took it: what to poll or cancel.
    handle: Option<JobHandle>,
    /// The engine that took it (`Engine::name`): a restarted controller cancels it through the
    /// same kind of engine (a Slurm job's worker may run on another node).
    #[serde(default)]
    engine: String,
    hypothesis: String,
    /// A stale winner's recheck: the trial it first won.
    first: Option<FirstWin>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct FirstWin {
    trial: String,
    incumbent: String,
    /// The candidate it won with (on the old head): parked when its row is recorded.
    #[serde(default)]
    candidate: String,
    runs: u32,
    wall_s: f64,
    out_dir: PathBuf,
}

/// A row being recorded: what it changes is redone (idempotently) by a restarted controller.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Recording {
    row: ResultRow,
    branch: String,
    /// Run directories whose runs go to runs.jsonl under the row's id.
    out_dirs: Vec<PathBuf>,
    /// Merge: move the branch from `row.incumbent` to `row.commit`. Otherwise park `row.commit`.
    merge: bool,
    /// The trials this row ends (their journal entries and refs go).
    trials: Vec<String>,
    /// A stale winner's first candidate (on the head it first won against), parked under
    /// [`STALE_REF_PREFIX`]`<row id>` so its measured commit stays reachable.
    #[serde(default)]
    first_candidate: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Journal {
    #[serde(default)]
    next_trial: u64,
    #[serde(default)]
    trials: Vec<Tracked>,
    #[serde(default)]
    recording: Option<Recording>,
    /// Per hypothesis (its key): why each of its trials was lost (preempted, cancelled, killed)
    /// since it was last recorded; at `[engine] retries` + 1 losses it is recorded as lost.
    #[serde(default)]
    lost: std::collections::BTreeMap<String, Vec<String>>,
}

impl Journal {
    fn load(state_dir: &Path) -> Result<Journal> {
        crate::journal::SCALE.read_or_default(state_dir)
    }

    fn save(&self, state_dir: &Path) -> Result<()> {
        crate::journal::SCALE.write(state_dir, self)
    }
}

/// A trial's outcome as the experiments' code decides it.
struct Assessed {
    row: ResultRow,
    decision: Option<Decision>,
    result: TrialResult,
}

/// Finish what a stopped parallel sweep left (under the lock): a recording under way is
/// completed, every worker still running is stopped (with its benchmark), and a trial without a
/// result is forgotten (its hypothesis runs again). Finished trials stay journaled for the next
/// parallel sweep, which decides them from their run directories.
pub fn recover(ws: &Workspace, fx: &mut Effects) -> Result<()> {
    for what in recover_steps(&ws.repo, &ws.store)? {
        fx.emit(Event::Recovered { what });
    }
    Ok(())
}

/// [`recover`], returning what it did (for `ratchet recover`).
pub fn recover_steps(repo: &Repo, store: &Store) -> Result<Vec<String>> {
    recover_with(repo, store, None, false)
}

/// [`recover_steps`], cancelling the unfinished trials of an external engine (Slurm, hooks)
/// through `engine`, or through the one `[engine]` in ratchet.toml names when `None`. With
/// `reattach` (a parallel sweep starting on `engine`), that engine's unfinished trials are not
/// cancelled but stay journaled, to be watched again: on a busy cluster a cancelled job would go
/// to the back of the queue. A trial whose handle was never journaled is looked up by its name.
fn recover_with(repo: &Repo, store: &Store, mut engine: Option<&mut dyn Engine>, reattach: bool) -> Result<Vec<String>> {
    let state_dir = &repo.state_dir();
    let mut said = vec![];
    if !state_dir.join(JOURNAL).exists() {
        said.extend(drop_stray_trial_refs(repo, &[]));
        return Ok(said);
    }
    let mut j = Journal::load(state_dir)?;
    // Finished is decided before anything is stopped: a worker stopped now may still write a
    // result (its benchmark killed by the same signal reads as a crash), which must not count.
    let finished: Vec<String> = j.trials.iter().filter(|t| has_result(&t.spec.out_dir)).map(|t| t.spec.id.clone()).collect();
    let mut attached: Vec<String> = vec![];
    if let Some(e) = engine.as_deref_mut().filter(|e| reattach && e.name() != "local") {
        let name = e.name().to_string();
        let mut found = false;
        for t in j.trials.iter_mut().filter(|t| t.engine == name && !finished.contains(&t.spec.id)) {
            if t.handle.is_none() {
                t.handle = e.find(&t.spec)?;
                found |= t.handle.is_some();
            }
            if t.handle.is_some() {
                attached.push(t.spec.id.clone());
            }
        }
        if found {
            j.save(state_dir)?;
        }
        if !attached.is_empty() {
            said.push(format!(
                "re-attached the jobs a stopped parallel sweep left queued or running on the {name} engine ({})",
                attached.join(", ")
            ));
        }
    }
    let cancelled = cancel_unfinished(repo, &j, engine, &attached)?;
    if !cancelled.is_empty() {
        said.push(format!("cancelled the jobs a stopped parallel sweep left queued or running ({})", cancelled.join(", ")));
    }
    let stopped = super::local::kill_orphans(&crate::layout::trials_dir(state_dir), &attached);
    if !stopped.is_empty() {
        said.push(format!("stopped the workers a stopped parallel sweep left running ({})", stopped.join(", ")));
    }
    if let Some(rec) = j.recording.clone() {
        finish_recording(repo, store, &mut j, &rec)?;
        said.push(format!("finished recording experiment {} of a stopped parallel sweep", rec.row.id));
    }
    let before = j.trials.len();
    let mut dropped = vec![];
    j.trials.retain(|t| {
        let done = finished.contains(&t.spec.id) || attached.contains(&t.spec.id);
        if !done {
            dropped.push(t.spec.id.clone());
        }
        done
    });
    for id in &dropped {
        drop_trial_ref(repo, id);
    }
    if j.trials.len() != before {
        said.push(format!(
            "forgot {} unfinished trial(s) of a stopped parallel sweep; their hypotheses run again",
            before - j.trials.len()
        ));
    }
    j.save(state_dir)?;
    let keep: Vec<String> = j.trials.iter().map(|t| t.spec.id.clone()).collect();
    said.extend(drop_stray_trial_refs(repo, &keep));
    Ok(said)
}

/// Delete the trial refs that no journaled trial owns: a controller killed between making a
/// trial's ref and journaling it, or between forgetting a trial and deleting its ref, leaves one.
fn drop_stray_trial_refs(repo: &Repo, keep: &[String]) -> Option<String> {
    let gone = stray_trial_refs(repo, keep);
    for id in &gone {
        drop_trial_ref(repo, id);
    }
    (!gone.is_empty()).then(|| format!("deleted the refs of trials no parallel sweep tracks ({})", gone.join(", ")))
}

/// The trial ids under `refs/ratchet/trials/` other than `keep`'s.
fn stray_trial_refs(repo: &Repo, keep: &[String]) -> Vec<String> {
    let Ok(refs) = repo.repo.references_glob(&format!("{TRIAL_REF_PREFIX}*")) else { return vec![] };
    let names: Vec<String> = refs.flatten().filter_map(|r| r.name().map(str::to_string)).collect();
    names.into_iter().map(|n| n.trim_start_matches(TRIAL_REF_PREFIX).to_string()).filter(|id| !keep.contains(id)).collect()
}

/// What recovery would say of trial refs that no journaled trial owns (`ratchet status`).
pub fn plan_stray_trial_refs(repo: &Repo) -> Option<String> {
    let stray = stray_trial_refs(repo, &journaled_trials(&repo.state_dir()));
    (!stray.is_empty()).then(|| format!("delete the refs of trials no parallel sweep tracks ({})", stray.join(", ")))
}

/// Whether a trial's worker wrote a result that counts (not one of a stopped worker).
fn has_result(out_dir: &Path) -> bool {
    TrialResult::read(out_dir).ok().flatten().is_some_and(|r| r.end != TrialEnd::Interrupted)
}

/// Cancel, through the engine that took them, the journaled trials without a result (local
/// workers are otherwise stopped by their worker.pid). Returns their engine ids. An engine that
/// cannot cancel is an error, and the journal is kept, so that a later recovery tries again.
fn cancel_unfinished(repo: &Repo, j: &Journal, engine: Option<&mut dyn Engine>, spare: &[String]) -> Result<Vec<String>> {
    // Local trials too where the local engine is given (it also knows a worker that was killed
    // before it wrote its worker.pid); `kill_orphans` stops the rest. A trial of an external
    // engine without a handle (the controller died as it submitted it) is looked up by name.
    let local = engine.as_ref().is_some_and(|e| e.name() == "local");
    let unfinished: Vec<&Tracked> = j
        .trials
        .iter()
        .filter(|t| !t.engine.is_empty() && (t.engine != "local" || local))
        .filter(|t| !has_result(&t.spec.out_dir) && !spare.contains(&t.spec.id))
        .filter(|t| t.handle.is_some() || t.engine != "local")
        .collect();
    let Some(kind) = unfinished.first().map(|t| t.engine.as_str()) else { return Ok(vec![]) };
    let mut built: Option<Box<dyn Engine>>;
    let engine: Option<&mut dyn Engine> = match engine {
        Some(e) => Some(e),
        None => {
            let cfg = Config::load(&config::path_in(repo.root())).map_err(|e| {
                let hint = format!(
                    "fix ratchet.toml, then run `ratchet recover`: {} trial(s) of a stopped parallel sweep may still run on the {kind} engine",
                    unfinished.len()
                );
                e.hint(hint)
            })?;
            built = super::engine_from_config(&cfg.engine, repo.root(), &repo.state_dir())?;
            built.as_deref_mut()
        }
    };
    let engine = match engine {
        Some(e) if unfinished.iter().all(|t| t.engine == e.name()) => e,
        other => {
            return Err(Error::config(format!(
                "a stopped parallel sweep left {} trial(s) on the {kind} engine, but [engine] in ratchet.toml is {} now",
                unfinished.len(),
                other.map(|e| e.name().to_string()).unwrap_or_else(|| "local".into())
            ))
            .hint("restore the [engine] table the sweep ran with and run `ratchet recover`, or cancel its jobs yourself and delete .ratchet/scale.json"))
        }
    };
    let mut done = vec![];
    for t in unfinished {
        let h = match &t.handle {
            Some(h) => h.clone(),
            None => match engine.find(&t.spec)? {
                Some(h) => h,
                None => continue,
            },
        };
        let h = &h;
        engine.cancel(h).map_err(|e| {
            let hint = format!("job {} (trial {}) may still run; {}", h.engine_id, h.trial, e.hint.clone().unwrap_or_default());
            e.hint(hint)
        })?;
        done.push(h.engine_id.clone());
    }
    Ok(done)
}

/// The trial ids a parallel sweep's journal still tracks (their run directories are in use).
pub fn journaled_trials(state_dir: &Path) -> Vec<String> {
    Journal::load(state_dir).map(|j| j.trials.iter().map(|t| t.spec.id.clone()).collect()).unwrap_or_default()
}

/// What a parallel sweep's journal holds that recovery acts on (`ratchet status`): trials
/// without a result (running, or left by a dead controller) and a recording under way. Finished
/// trials kept for the next parallel sweep are not pending work, so they are not named.
pub fn in_flight(state_dir: &Path) -> Option<String> {
    let j = Journal::load(state_dir).ok()?;
    let open = j.trials.iter().filter(|t| !has_result(&t.spec.out_dir)).count();
    let recording = j.recording.as_ref().map(|r| format!(" and the recording of experiment {}", r.row.id));
    (open > 0 || recording.is_some())
        .then(|| format!("{open} unfinished trial(s){} of a parallel sweep journaled in {JOURNAL}", recording.unwrap_or_default()))
}

/// The worker's command line for a trial (`argv[0]` is this ratchet).
pub fn worker_argv(
    exe: &Path,
    spec: &TrialSpec,
    config: &Path,
    pairs: Option<u32>,
    noise: Option<crate::stats::sequential::NoiseScale>,
    recheck: bool,
    deep: bool,
) -> Vec<String> {
    let mut v = vec![
        exe.display().to_string(),
        "worker".into(),
        "--repo".into(),
        spec.repo.display().to_string(),
        "--incumbent".into(),
        spec.incumbent.clone(),
        "--candidate".into(),
        spec.candidate.clone(),
        "--out".into(),
        spec.out_dir.display().to_string(),
        "--id".into(),
        spec.id.clone(),
        "--config".into(),
        config.display().to_string(),
    ];
    if let Some(p) = pairs {
        v.extend(["--pairs".into(), p.to_string()]);
    }
    if let Some(n) = noise {
        v.extend(["--noise-scale".into(), format!("{},{}", n.sd, n.df)]);
    }
    if recheck {
        v.push("--recheck".into());
    }
    if deep {
        v.push("--deep".into());
    }
    v
}

/// The ratchet binary workers run (`RATCHET_WORKER_EXE` overrides, for tests and wrappers).
fn worker_exe() -> Result<PathBuf> {
    match std::env::var_os("RATCHET_WORKER_EXE") {
        // Absolute: a Slurm task runs from its batch directory, a hook from wherever it likes.
        Some(p) if Path::new(&p).is_relative() => Ok(std::env::current_dir()?.join(p)),
        Some(p) => Ok(PathBuf::from(p)),
        None => Ok(std::env::current_exe()?),
    }
}

/// Run the sweep on `engine`'s slots.
pub fn run(ws: &Locked, opts: &SweepOptions, engine: &mut dyn Engine, fx: &mut Effects) -> Result<SweepOutcome> {
    let started = Instant::now();
    let repo = &ws.repo;
    let root = repo.root().to_path_buf();
    // Trials of a controller that died: those without a result are cancelled through the engine
    // that ran them (a cluster's too), then forgotten.
    let queue = crate::sweep::open_queue(ws, opts, fx, |fx| {
        for what in recover_with(repo, &ws.store, Some(&mut *engine), true)? {
            fx.emit(Event::Recovered { what });
        }
        Ok(())
    })?;
    let crate::sweep::Queue { hyps, branch, cfg, done } = &queue;
    let state_dir = ws.state_dir.clone();
    let mut j = Journal::load(&state_dir)?;
    let python_dir = crate::pyhelper::install(&state_dir)?;
    crate::bench::infra::preflight(cfg, &root, &state_dir, &python_dir)?;

    // Journaled trials of hypotheses recorded since, or no longer queued, are dropped.
    let keys: HashMap<String, usize> = hyps.iter().enumerate().map(|(i, h)| (h.key(), i)).collect();
    let stale_entries: Vec<String> = j
        .trials
        .iter()
        .filter(|t| done.contains_key(&t.hypothesis) || !keys.contains_key(&t.hypothesis))
        .map(|t| t.spec.id.clone())
        .collect();
    if !stale_entries.is_empty() {
        // A re-attached job of a hypothesis no longer queued is stopped, not left running.
        for t in j.trials.iter().filter(|t| stale_entries.contains(&t.spec.id) && !has_result(&t.spec.out_dir)) {
            if let Some(h) = &t.handle {
                engine.cancel(h)?;
            }
        }
        j.trials.retain(|t| !stale_entries.contains(&t.spec.id));
        for id in &stale_entries {
            drop_trial_ref(repo, id);
        }
        j.save(&state_dir)?;
    }
    let todo = queue.todo();
    queue.announce(opts, fx);
    for (i, h) in hyps.iter().enumerate() {
        if let Some(id) = done.get(&h.key()) {
            fx.emit(Event::HypothesisDone { index: i, total: hyps.len(), name: h.name.clone(), id: *id });
        }
    }
    let mut c = Controller {
        ws,
        cfg,
        opts,
        hyps,
        keys,
        branch: branch.clone(),
        state_dir: state_dir.clone(),
        config_path: ws.config_path(),
        exe: worker_exe()?,
        journal: j,
        out: SweepOutcome { rows: vec![], already_done: hyps.len() - todo, not_started: 0, stopped_by: None },
        winners: VecDeque::new(),
        lane: None,
        requeue: VecDeque::new(),
        retries: cfg.engine.retries.unwrap_or(DEFAULT_RETRIES),
        runs_spent: 0,
        walls: vec![],
        started,
    };
    let in_journal: Vec<String> = c.journal.trials.iter().map(|t| t.hypothesis.clone()).collect();
    let mut queue: VecDeque<usize> =
        (0..hyps.len()).filter(|&i| !done.contains_key(&hyps[i].key()) && !in_journal.contains(&hyps[i].key())).collect();
    let result = c.drive(engine, &mut queue, fx);
    if result.is_err() || fx.cancel.is_cancelled() {
        c.stop_all(engine);
    }
    let gain = ws.store.rows().ok().and_then(|all| crate::report::gain_line(&all));
    fx.emit(Event::SweepFinished { outcome: c.out.clone(), runs: c.runs_spent, wall_s: started.elapsed().as_secs_f64(), gain });
    result.map(|_| c.out)
}

struct Controller<'a> {
    ws: &'a Locked,
    cfg: &'a Config,
    opts: &'a SweepOptions,
    hyps: &'a [Hypothesis],
    keys: HashMap<String, usize>,
    branch: String,
    state_dir: PathBuf,
    config_path: PathBuf,
    exe: PathBuf,
    journal: Journal,
    out: SweepOutcome,
    /// Winners waiting for the merge lane, in the order they won.
    winners: VecDeque<(Tracked, Assessed)>,
    /// The recheck in the lane (its trial id): no merge happens until it is decided.
    lane: Option<String>,
    /// Hypotheses whose trial was lost (by its key), to start again before new ones; with the
    /// first win of a lost recheck, which starts again as the lane's recheck.
    requeue: VecDeque<(String, Option<FirstWin>)>,
    /// How often a hypothesis's lost trial is started again before it is recorded as lost.
    retries: u32,
    runs_spent: u64,
    walls: Vec<f64>,
    started: Instant,
}

impl<'a> Controller<'a> {
    fn repo(&self) -> &'a Repo {
        let ws: &'a Locked = self.ws;
        &ws.repo
    }

    fn hyp(&self, key: &str) -> Option<&'a Hypothesis> {
        let hyps: &'a [Hypothesis] = self.hyps;
        self.keys.get(key).map(|&i| &hyps[i])
    }

    fn drive(&mut self, engine: &mut dyn Engine, queue: &mut VecDeque<usize>, fx: &mut Effects) -> Result<()> {
        let mut stopping: Option<Error> = None;
        loop {
            if fx.cancel.is_cancelled() {
                return Err(
                    Error::interrupted().hint("the workers were stopped; start the sweep again to resume it (finished trials are kept)")
                );
            }
            // Finished trials, in the order the engine reports them.
            let ids: Vec<String> = self.journal.trials.iter().map(|t| t.spec.id.clone()).collect();
            for id in ids {
                let Some(t) = self.journal.trials.iter().find(|t| t.spec.id == id).cloned() else { continue };
                if self.winners.iter().any(|(w, _)| w.spec.id == id) {
                    continue;
                }
                let lost = match &t.handle {
                    Some(h) => match engine.poll(h)? {
                        JobState::Queued | JobState::Running => continue,
                        JobState::Failed(why) => Some(why),
                        JobState::Finished => None,
                    },
                    // Re-attached from the journal with its result already there.
                    None => None,
                };
                if let Some(h) = &t.handle {
                    engine.fetch(h, &t.spec)?;
                }
                if let Err(e) = self.finished(t, lost, fx) {
                    stopping.get_or_insert(e);
                }
            }
            if let Some(e) = stopping {
                // As a serial sweep stops on an error: nothing new starts, trials in flight stop
                // (they run again on resume), finished winners stay journaled.
                return Err(e);
            }
            // Lost trials start again first; a lost recheck only while the lane is free.
            while self.running() < engine.capacity() {
                let Some(i) = self.requeue.iter().position(|(_, first)| first.is_none() || self.lane.is_none()) else { break };
                let (key, first) = self.requeue.remove(i).expect("position is in range");
                let Some(h) = self.hyp(&key) else { continue };
                let recheck = first.is_some();
                if let Some(id) = self.start(engine, h, first, fx)? {
                    if recheck {
                        self.lane = Some(id);
                    }
                }
            }
            self.lane_step(engine, fx)?;
            while self.running() < engine.capacity() && self.lane_waits_for_slot().is_none() {
                let Some(&i) = queue.front() else { break };
                let h = &self.hyps[i];
                let pairs = self.cfg.decision.params(h.pairs.or(self.opts.pairs)).max_total_pairs() as u64;
                if let Some(why) = crate::sweep::over_budget(self.opts, self.started.elapsed(), self.runs_spent, 2 * pairs, &self.walls) {
                    self.out.not_started = queue.len();
                    self.out.stopped_by = Some(why);
                    queue.clear();
                    break;
                }
                queue.pop_front();
                fx.emit(Event::HypothesisStarted {
                    index: i,
                    total: self.hyps.len(),
                    name: h.name.clone(),
                    elapsed_s: self.started.elapsed().as_secs_f64(),
                });
                self.start(engine, h, None, fx)?;
            }
            if self.journal.trials.is_empty()
                && self.winners.is_empty()
                && self.lane.is_none()
                && queue.is_empty()
                && self.requeue.is_empty()
            {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Trials the engine is running (journaled, not waiting in the winners' FIFO).
    fn running(&self) -> usize {
        self.journal.trials.iter().filter(|t| !self.winners.iter().any(|(w, _)| w.spec.id == t.spec.id)).count()
    }

    /// The stale winner at the head of the FIFO, when it waits for a slot for its recheck.
    fn lane_waits_for_slot(&self) -> Option<()> {
        let (w, _) = self.winners.front()?;
        (self.lane.is_none() && self.head().ok()? != w.spec.incumbent).then_some(())
    }

    fn head(&self) -> Result<String> {
        Ok(self.repo().head_oid()?.to_string())
    }

    /// Merge fresh winners; send the first stale one to its recheck (the lane then blocks merges).
    fn lane_step(&mut self, engine: &mut dyn Engine, fx: &mut Effects) -> Result<()> {
        while self.lane.is_none() {
            let Some((w, _)) = self.winners.front() else { return Ok(()) };
            let head = self.head()?;
            if w.spec.incumbent == head {
                let (w, a) = self.winners.pop_front().expect("front");
                self.record(&w, a, true, fx)?;
                continue;
            }
            if self.running() >= engine.capacity() {
                return Ok(());
            }
            let (w, a) = self.winners.pop_front().expect("front");
            if !self.journal.trials.iter().any(|t| t.spec.id == w.spec.id) {
                // Recorded meanwhile (its recheck, journaled before a restart, decided it).
                continue;
            }
            fx.emit(Event::StaleWinner {
                name: self.hyp(&w.hypothesis).map(|h| h.name.clone()).unwrap_or_default(),
                won_against: w.spec.incumbent.clone(),
                head: head.clone(),
            });
            let Some(h) = self.hyp(&w.hypothesis) else {
                self.forget(&w.spec.id)?;
                continue;
            };
            // A winner that no longer applies to the head (another keep edited the same lines)
            // is recorded with what its trial measured and its candidate parked, not as an
            // unmeasured skip.
            let conflict = match h.plan(self.repo()) {
                Ok(p) if p.changes.is_empty() => Some("applying it to the head changes nothing (the head already has it)".to_string()),
                Ok(_) => None,
                Err(e) => Some(format!("it no longer applies to {}: {}", short(&head), e.0)),
            };
            if let Some(why) = conflict {
                let mut a = a;
                a.row.status = Status::Skipped;
                a.row.note = format!(
                    "stale winner, not merged: kept against {}, then the trunk moved and {why}; its measurement is the first trial's: {}",
                    short(&w.spec.incumbent),
                    a.row.note
                );
                self.record(&w, a, false, fx)?;
                continue;
            }
            let first = FirstWin {
                trial: w.spec.id.clone(),
                incumbent: w.spec.incumbent.clone(),
                candidate: w.spec.candidate.clone(),
                runs: a.row.runs,
                wall_s: a.row.wall_s,
                out_dir: w.spec.out_dir.clone(),
            };
            // The first trial's journal entry goes once the recheck is journaled.
            let old = w.spec.id.clone();
            if let Some(id) = self.start(engine, h, Some(first), fx)? {
                self.lane = Some(id);
            }
            self.journal.trials.retain(|t| t.spec.id != old);
            self.journal.save(&self.state_dir)?;
            drop_trial_ref(self.repo(), &old);
        }
        Ok(())
    }

    /// Plan `h` on the head, commit its candidate (on no branch) and submit its trial. Returns
    /// the trial's id, or `None` when the hypothesis was recorded without measuring.
    fn start(&mut self, engine: &mut dyn Engine, h: &Hypothesis, first: Option<FirstWin>, fx: &mut Effects) -> Result<Option<String>> {
        let repo = self.repo();
        let head = repo.head_oid()?;
        let won = first.as_ref().map(|f| format!("won against {}, then ", short(&f.incumbent))).unwrap_or_default();
        if let crate::sweep::hypothesis::Change::Malformed(why) = &h.change {
            return self.unmeasured(h, head, Status::Refused, format!("refused: {why}"), fx);
        }
        let plan = match h.plan(repo) {
            Ok(p) if p.changes.is_empty() => {
                return self.unmeasured(
                    h,
                    head,
                    Status::Skipped,
                    format!("{won}applying it changes nothing (the incumbent already has it)"),
                    fx,
                );
            }
            Ok(p) => p,
            Err(e) => {
                return self.unmeasured(
                    h,
                    head,
                    Status::Skipped,
                    format!("{won}does not apply to {}: {}", short(&head.to_string()), e.0),
                    fx,
                )
            }
        };
        let protected = config::protected_paths(self.cfg, repo.root());
        let touched: Vec<&str> = plan.files.iter().filter(|p| config::is_protected(p, &protected)).map(String::as_str).collect();
        if !touched.is_empty() {
            let why = format!(
                "refused: it changes the benchmark harness ({}); a gain could then come from the measuring stick, not the kernel",
                touched.join(", ")
            );
            return self.unmeasured(h, head, Status::Refused, why, fx);
        }
        if let Some(why) = crate::bench::shadow::check(self.cfg, &repo.repo, repo.root(), head, &plan.files) {
            return self.unmeasured(h, head, Status::Refused, format!("refused: {why}"), fx);
        }
        let n = self.journal.next_trial + 1;
        self.journal.next_trial = n;
        let id = format!("t{n}");
        let out_dir = crate::layout::trials_dir(&self.state_dir).join(&id);
        if out_dir.exists() {
            std::fs::remove_dir_all(&out_dir).with_path(&out_dir)?;
        }
        let candidate = candidate_commit(repo, head, &plan, &h.message)?;
        repo.repo.reference(&format!("{TRIAL_REF_PREFIX}{id}"), candidate, true, "ratchet: trial candidate")?;
        let spec = TrialSpec {
            id: id.clone(),
            repo: repo.root().to_path_buf(),
            incumbent: head.to_string(),
            candidate: candidate.to_string(),
            out_dir,
        };
        let recheck = first.is_some();
        // The noise of the device the trial will run on, where the engine can tell it before
        // the trial starts (a local slot); a cluster's node is not known yet, so its trials
        // use their own spread only. Never a scale pooled over other devices.
        let noise = engine
            .next_device()
            .and_then(|d| history::estimate(&history::load(&self.state_dir, &device_history_key(self.cfg, &d)).entries));
        let argv =
            worker_argv(&self.exe, &spec, &self.config_path, h.pairs.or(self.opts.pairs), noise, recheck, h.deep.unwrap_or(self.opts.deep));
        // Journaled before it is submitted, and its handle before it is waited on.
        self.journal.trials.push(Tracked {
            spec: spec.clone(),
            handle: None,
            engine: engine.name().to_string(),
            hypothesis: h.key(),
            first,
        });
        self.journal.save(&self.state_dir)?;
        let handle = engine
            .submit(std::slice::from_ref(&spec), std::slice::from_ref(&argv))?
            .pop()
            .ok_or_else(|| Error::failure("the engine returned no job"))?;
        // The window a restarted controller closes by finding the job by its name.
        crate::fault::point("scale-after-submit");
        let slot = handle.slot;
        if let Some(t) = self.journal.trials.iter_mut().find(|t| t.spec.id == id) {
            t.handle = Some(handle);
        }
        self.journal.save(&self.state_dir)?;
        fx.emit(Event::TrialSubmitted {
            trial: id.clone(),
            name: h.name.clone(),
            slot,
            device: engine.name().to_string(),
            incumbent: spec.incumbent,
            recheck,
        });
        Ok(Some(id))
    }

    /// A skipped or refused hypothesis: its row at once, as a serial sweep records it.
    fn unmeasured(&mut self, h: &Hypothesis, head: git2::Oid, status: Status, note: String, fx: &mut Effects) -> Result<Option<String>> {
        let id = crate::journal::allocate_id(self.repo(), &self.ws.store)?;
        let row = ResultRow {
            metric: self.cfg.score.metric.as_str().into(),
            hypothesis: h.key(),
            tags: h.tags.join(";"),
            note,
            ..ResultRow::unmeasured(id, status, &h.message, String::new(), head.to_string())
        };
        self.ws.store.append_row(&row)?;
        fx.emit(Event::Unmeasured { row: Box::new(row.clone()) });
        self.out.rows.push(row);
        Ok(None)
    }

    /// A trial's worker ended: decide it and record it, or queue a winner for the lane.
    /// `lost`: why the engine says the job failed (a Slurm TIMEOUT, a hook's reason).
    fn finished(&mut self, t: Tracked, lost: Option<String>, fx: &mut Effects) -> Result<()> {
        let name = self.hyp(&t.hypothesis).map(|h| h.name.clone()).unwrap_or_default();
        let result = TrialResult::read(&t.spec.out_dir)?;
        let Some(result) = result else {
            // The local engine's log, or Slurm's stderr file.
            let log = ["worker.log", "slurm.err"].iter().map(|f| t.spec.out_dir.join(f)).find(|p| p.exists());
            let log = log.unwrap_or_else(|| t.spec.out_dir.join("worker.log"));
            let why = lost.unwrap_or_else(|| "its worker ended without a result".into());
            let why = if log.exists() { format!("{why}; see {}", log.display()) } else { why };
            return self.lost_trial(t, why, fx);
        };
        fx.emit(Event::TrialFinished {
            trial: t.spec.id.clone(),
            name: name.clone(),
            slot: result.slot,
            end: end_text(&result.end),
            wall_s: result.wall_s,
        });
        match &result.end {
            TrialEnd::Interrupted if fx.cancel.is_cancelled() => {
                self.forget(&t.spec.id)?;
                return Err(
                    Error::interrupted().hint(format!("the worker of trial {} was stopped; start the sweep again to resume", t.spec.id))
                );
            }
            // Stopped by a signal this controller did not send: preempted or cancelled by the
            // cluster, or killed on its host.
            TrialEnd::Interrupted => {
                let why = lost.unwrap_or_else(|| "its worker was stopped by a signal".into());
                return self.lost_trial(t, why, fx);
            }
            TrialEnd::Infrastructure { why } => {
                self.forget(&t.spec.id)?;
                return Err(Error::new(crate::error::Kind::Infrastructure, format!("not the hypothesis's fault: {why}"))
                    .hint(format!("{}; then start the sweep again (nothing was recorded for {name})", crate::bench::infra::fix_for(why))));
            }
            _ => {}
        }
        let Some(h) = self.hyp(&t.hypothesis) else {
            self.forget(&t.spec.id)?;
            return Ok(());
        };
        let a = assess(self.cfg, self.opts, h, &t.spec, result)?;
        if t.first.is_some() {
            self.lane = None;
        }
        if a.row.status == Status::Keep && t.first.is_none() {
            self.winners.push_back((t, a));
            return Ok(());
        }
        let merge = a.row.status == Status::Keep;
        let stop = a.row.status == Status::Error;
        self.record(&t, a, merge, fx)?;
        if stop {
            return Err(Error::failure(format!("{name} could not be decided: the incumbent's benchmark failed"))
                .hint("check that the incumbent's benchmark runs (its logs are under .ratchet/trials/)"));
        }
        Ok(())
    }

    /// A trial the engine lost (preempted, cancelled, out of memory, a node failure, its time
    /// limit, a killed worker): its hypothesis starts again, up to `retries` times, and is then
    /// recorded as lost (`interrupted`, the reasons in its note); the rest of the sweep goes on.
    fn lost_trial(&mut self, t: Tracked, why: String, fx: &mut Effects) -> Result<()> {
        self.forget(&t.spec.id)?;
        if t.first.is_some() {
            self.lane = None;
        }
        let Some(h) = self.hyp(&t.hypothesis) else { return Ok(()) };
        let reasons = self.journal.lost.entry(t.hypothesis.clone()).or_default();
        reasons.push(why.clone());
        let n = reasons.len();
        if n as u32 <= self.retries {
            self.journal.save(&self.state_dir)?;
            fx.note(format!("trial {} of {} was lost ({why}); it starts again ({n} of {} retries)", t.spec.id, h.name, self.retries));
            self.requeue.push_back((t.hypothesis, t.first));
            return Ok(());
        }
        let reasons = self.journal.lost.remove(&t.hypothesis).unwrap_or_default();
        self.journal.save(&self.state_dir)?;
        fx.note(format!("trial {} of {} was lost ({why}); not started again after {} retries", t.spec.id, h.name, self.retries));
        let won = t.first.as_ref().map(|f| format!("won against {}, then ", short(&f.incumbent))).unwrap_or_default();
        let note = format!(
            "{won}lost: its trial was lost {n} times, not started again ([engine] retries = {}): {}; the next sweep runs it again",
            self.retries,
            reasons.join("; ")
        );
        let head = self.repo().head_oid()?;
        self.unmeasured(h, head, Status::Interrupted, note, fx).map(|_| ())
    }

    /// Forget a trial that recorded nothing (its hypothesis runs again).
    fn forget(&mut self, id: &str) -> Result<()> {
        self.journal.trials.retain(|t| t.spec.id != id);
        self.journal.save(&self.state_dir)?;
        drop_trial_ref(self.repo(), id);
        Ok(())
    }

    /// Record a decided trial: its row, and the merge (a keep whose incumbent is the head) or
    /// the parked candidate.
    fn record(&mut self, t: &Tracked, a: Assessed, merge: bool, fx: &mut Effects) -> Result<()> {
        let mut row = a.row;
        row.id = crate::journal::allocate_id(self.repo(), &self.ws.store)?;
        let mut out_dirs = vec![t.spec.out_dir.clone()];
        let mut trials = vec![t.spec.id.clone()];
        if let Some(f) = &t.first {
            row.runs += f.runs;
            row.wall_s += f.wall_s;
            row.note = format!(
                "stale winner: kept against {}, then the trunk moved; rechecked against {} ({} pairs at the confirmation's level): {}",
                short(&f.incumbent),
                short(&row.incumbent),
                a.decision.as_ref().map(|d| d.pairs).unwrap_or(0),
                row.note
            );
            out_dirs.insert(0, f.out_dir.clone());
            trials.insert(0, f.trial.clone());
        }
        let where_ = match (a.result.slot, a.result.device_env.iter().next()) {
            (Some(s), Some((k, v))) => format!(" [slot {s}, {k}={v}]"),
            (Some(s), None) => format!(" [slot {s}]"),
            (None, Some((k, v))) => format!(" [host {}, {k}={v}]", a.result.host),
            (None, None) => format!(" [host {}]", a.result.host),
        };
        row.note.push_str(&where_);
        // A winner whose recheck (journaled before a restart) decides it leaves the FIFO too.
        self.winners.retain(|(w, _)| !trials.contains(&w.spec.id));
        let first_candidate = t.first.as_ref().map(|f| f.candidate.clone()).filter(|c| !c.is_empty());
        let rec = Recording { row: row.clone(), branch: self.branch.clone(), out_dirs, merge, trials, first_candidate };
        self.journal.recording = Some(rec.clone());
        self.journal.save(&self.state_dir)?;
        crate::fault::point("scale-before-record");
        finish_recording(self.repo(), &self.ws.store, &mut self.journal, &rec)?;
        if a.decision.is_some() {
            let key = device_history_key(self.cfg, &device_of(&a.result));
            if let Some(e) = history::entry(&row.time, &format!("experiment {}", row.id), &[&a.result.main, &a.result.confirm]) {
                if let Err(err) = history::record(&self.state_dir, &key, e) {
                    fx.note(format!("could not record the noise history: {}", err.message));
                }
            }
        }
        self.runs_spent += row.runs as u64;
        self.walls.push(row.wall_s);
        let outcome = Outcome {
            row: row.clone(),
            decision: a.decision,
            discarded_ref: (!merge).then(|| crate::vcs::discarded_ref(&row.id.to_string())),
            runs_dir: Some(t.spec.out_dir.join("runs")),
            elasticity: crate::stats::elasticity(self.cfg.score.metric),
            signalled: false,
        };
        fx.emit(Event::ExperimentFinished { outcome: Box::new(outcome) });
        self.out.rows.push(row);
        Ok(())
    }

    /// Stop every trial in flight (Ctrl-C, an error): their workers are cancelled and the trials
    /// forgotten (they run again on resume); finished winners stay journaled.
    fn stop_all(&mut self, engine: &mut dyn Engine) {
        let waiting: Vec<String> = self.winners.iter().map(|(w, _)| w.spec.id.clone()).collect();
        let inflight: Vec<Tracked> = self.journal.trials.iter().filter(|t| !waiting.contains(&t.spec.id)).cloned().collect();
        for t in inflight {
            // Read before the cancel: a result written while the worker is being stopped (its
            // benchmark killed by the same signal reads as a crash) must not count.
            let finished = has_result(&t.spec.out_dir);
            if let Some(h) = &t.handle {
                let _ = engine.cancel(h);
            }
            if !finished {
                let _ = self.forget(&t.spec.id);
            }
        }
    }
}

/// The device a trial measured on, as the noise history names it: its host and local slot
/// where the slot binds a device (`[devices]`), the host alone for a slot that binds none (it
/// measures on the host, as the serial loop does), or the host and its device-binding variables
/// (a cluster node's GPU).
fn device_of(r: &TrialResult) -> String {
    let bound: Vec<String> = r
        .device_env
        .iter()
        .filter(|(k, _)| k.ends_with("VISIBLE_DEVICES") || k.ends_with("VISIBLE_CHIPS"))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    match r.slot {
        Some(i) => super::engine::slot_device(&r.host, i, !bound.is_empty()),
        None => format!("{} {}", r.host, bound.join(" ")).trim_end().to_string(),
    }
}

/// The noise history's key for a benchmark on one device: a number measured on one GPU says
/// nothing of another's noise.
fn device_history_key(cfg: &Config, device: &str) -> String {
    format!("{} on {device}", experiment::history_key(cfg))
}

fn end_text(e: &TrialEnd) -> String {
    match e {
        TrialEnd::Decided => "decided".into(),
        TrialEnd::NoOp { .. } => "no-op".into(),
        TrialEnd::Candidate { status, .. } => status.as_str().into(),
        TrialEnd::Incumbent { .. } => "incumbent failed".into(),
        TrialEnd::Infrastructure { .. } => "infrastructure".into(),
        TrialEnd::Interrupted => "interrupted".into(),
    }
}

/// The row and decision of a finished trial, from its run directory, by the experiments' code:
/// the stopping rule is rebuilt from this controller's config (it must be the one the worker
/// used) and asked to decide on the trial's pairs.
fn assess(cfg: &Config, opts: &SweepOptions, h: &Hypothesis, spec: &TrialSpec, result: TrialResult) -> Result<Assessed> {
    let pairs = h.pairs.or(opts.pairs);
    let seq = super::worker::stopping_rule(cfg, pairs, result.noise_scale);
    if serde_json::to_value(&seq.params).expect("params serialize") != result.params {
        return Err(Error::failure(format!(
            "trial {} was measured with another stopping rule than this ratchet.toml gives ({})",
            spec.id,
            spec.out_dir.display()
        ))
        .hint("ratchet.toml changed while the sweep ran; restore it, or delete the trial's directory to run it again"));
    }
    let records = TrialResult::records(&spec.out_dir)?;
    let ended = match &result.end {
        TrialEnd::Decided => match seq.next(&result.main, &result.confirm) {
            Next::Done(d) => Ended::Decided(d),
            Next::Measure { .. } => {
                return Err(Error::failure(format!(
                    "trial {} stopped before its stopping rule decided ({})",
                    spec.id,
                    spec.out_dir.display()
                )))
            }
        },
        TrialEnd::NoOp { why } => Ended::NoOp(why.clone()),
        TrialEnd::Candidate { status, why } => Ended::Stopped(Stop::Candidate(*status, why.clone())),
        TrialEnd::Incumbent { why } => Ended::Stopped(Stop::Incumbent(why.clone())),
        TrialEnd::Infrastructure { why } => Ended::Stopped(Stop::Infrastructure(why.clone())),
        TrialEnd::Interrupted => Ended::Stopped(Stop::Interrupted),
    };
    let eopts = experiment::Options {
        message: h.message.clone(),
        deep: h.deep.unwrap_or(opts.deep),
        allow_empty: false,
        pairs,
        hypothesis: Some(h.key()),
        tags: h.tags.clone(),
        allow_large: false,
    };
    let ctx = RowContext {
        id: 0,
        candidate: spec.candidate.clone(),
        incumbent: spec.incumbent.clone(),
        opts: &eopts,
        cfg,
        elasticity: crate::stats::elasticity(cfg.score.metric),
        wall_s: result.wall_s,
    };
    let (row, decision) = experiment::summarize(&ctx, &records, ended);
    Ok(Assessed { row, decision, result })
}

/// Complete a recording (idempotent: a restarted controller redoes it): merge or park, then the
/// runs and the row, then forget its trials.
fn finish_recording(repo: &Repo, store: &Store, j: &mut Journal, rec: &Recording) -> Result<()> {
    let state_dir = repo.state_dir();
    let row = &rec.row;
    let candidate = git2::Oid::from_str(&row.commit)?;
    let incumbent = git2::Oid::from_str(&row.incumbent)?;
    let recorded = store.rows()?.iter().any(|r| r.id == row.id);
    if rec.merge {
        let head = repo.head_oid()?;
        if head == incumbent {
            repo.reset_to(candidate)?;
        } else if head != candidate && !recorded {
            return Err(Error::repo(format!(
                "a parallel sweep was merging {} onto {}, but HEAD is {} now",
                short(&row.commit),
                short(&row.incumbent),
                short(&head.to_string())
            ))
            .hint(format!("check `git log`; then delete {} to start afresh", state_dir.join(JOURNAL).display())));
        }
        crate::fault::point("scale-after-merge");
        let mut state = State::load(&state_dir);
        state.incumbents.insert(rec.branch.clone(), row.commit.clone());
        state.save(&state_dir)?;
    } else {
        repo.mark_discarded(&row.id.to_string(), candidate)?;
    }
    if let Some(c) = &rec.first_candidate {
        repo.repo.reference(
            &format!("{STALE_REF_PREFIX}{}", row.id),
            git2::Oid::from_str(c)?,
            true,
            "ratchet: a stale winner's first candidate",
        )?;
    }
    if !recorded {
        let id = row.id.to_string();
        // A recording redone after a kill mid-append starts its runs afresh.
        store.drop_runs(&id)?;
        for d in &rec.out_dirs {
            // A stale winner's row holds two trials' runs, each numbered from 1: the trial tells
            // them apart.
            let trial = d.file_name().map(|n| n.to_string_lossy().into_owned());
            for mut r in TrialResult::records(d).unwrap_or_default() {
                r.experiment = id.clone();
                r.trial = trial.clone();
                store.append_run(&r)?;
            }
            // Which experiment the trial's run directory belongs to, for `ratchet gc`'s retention.
            let _ = crate::fsutil::write_atomic(&d.join(RECORDED_AS), id.as_bytes());
        }
        crate::fault::point("scale-before-append");
        store.append_row(row)?;
    }
    j.trials.retain(|t| !rec.trials.contains(&t.spec.id));
    j.recording = None;
    j.save(&state_dir)?;
    for t in &rec.trials {
        drop_trial_ref(repo, t);
    }
    Ok(())
}

fn drop_trial_ref(repo: &Repo, id: &str) {
    if let Ok(mut r) = repo.repo.find_reference(&format!("{TRIAL_REF_PREFIX}{id}")) {
        let _ = r.delete();
    }
}

/// The hypothesis's commit on top of `head`, on no branch: `head`'s tree with the plan's blobs.
fn candidate_commit(repo: &Repo, head: git2::Oid, plan: &Plan, message: &str) -> Result<git2::Oid> {
    let r = &repo.repo;
    let parent = r.find_commit(head)?;
    let base = parent.tree()?;
    let mut b = git2::build::TreeUpdateBuilder::new();
    for c in &plan.changes {
        match &c.after {
            Some(blob) => {
                let mode = match c.mode {
                    0o100755 => git2::FileMode::BlobExecutable,
                    0o120000 => git2::FileMode::Link,
                    _ => git2::FileMode::Blob,
                };
                b.upsert(c.path.as_str(), git2::Oid::from_str(blob)?, mode);
            }
            None => {
                b.remove(c.path.as_str());
            }
        }
    }
    let tree = r.find_tree(b.create_updated(r, &base)?)?;
    let sig = match r.signature() {
        Ok(s) => s.to_owned(),
        Err(_) => git2::Signature::now("ratchet", "ratchet@localhost")?,
    };
    Ok(r.commit(None, &sig, &sig, message, &tree, &[&parent])?)
}
