//! The controller of a parallel sweep (`ratchet sweep --jobs N`): hands hypotheses to free slots
//! of an [`Engine`] as trials, and decides them one at a time on one trunk through the merge
//! lane (docs/scale-out.md): a winner merges only if its incumbent is still the head; a stale
//! winner is rechecked against the head with the serial loop's rule. Every decision is the
//! experiments' own, made from the worker's run directory (`assess`); a worker decides nothing.
//! Everything it does is journaled first (`journal`).

use super::assess::{assess, device_history_key, device_of, end_text, Assessed};
use super::engine::{Engine, JobState, TrialSpec};
use super::journal::{drop_trial_ref, finish_recording, has_result, recover_with, FirstWin, Journal, Recording, Tracked};
pub use super::journal::{
    in_flight, journaled_trials, plan_stray_trial_refs, recover, recover_steps, DEFAULT_RETRIES, RECORDED_AS, STALE_REF_PREFIX,
    TRIAL_REF_PREFIX,
};
use super::lane::{Lane, Link, Place};
use super::trial::{TrialEnd, TrialResult};
use crate::config::{self, Config};
use crate::error::{Error, Result, WithPath};
use crate::events::{Effects, Event};
use crate::outcome::{Outcome, SweepOutcome};
use crate::stats::history;
use crate::store::{ResultRow, Status};
use crate::sweep::hypothesis::{Hypothesis, Plan};
use crate::sweep::SweepOptions;
use crate::vcs::{short, Repo};
use crate::workspace::Locked;
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The worker's command line for a trial (`argv[0]` is this ratchet).
pub fn worker_argv(
    exe: &Path,
    spec: &TrialSpec,
    config: &Path,
    pairs: Option<u32>,
    noise: Option<&crate::stats::sequential::Borrowed>,
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
    // Display writes the shortest text that parses back to the same f64: the worker borrows
    // exactly the history's figures.
    if let Some(b) = noise {
        v.extend(["--noise-scale".into(), format!("{},{}", b.scale.sd, b.scale.df)]);
        if let Some(s) = b.sums {
            v.extend(["--sums-scale".into(), format!("{},{}", s.sd, s.df)]);
        }
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
    let crate::sweep::Queue { hyps, branch, cfg, done, rows } = &queue;
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
        lane: Lane::default(),
        recheck_waits: false,
        requeue: VecDeque::new(),
        deferred: VecDeque::new(),
        retries: cfg.engine.retries.unwrap_or(DEFAULT_RETRIES),
        poll_grace: Duration::from_secs_f64(cfg.engine.poll_grace_s.unwrap_or(crate::config::DEFAULT_POLL_GRACE_S)),
        stuck_limit: Duration::from_secs_f64(cfg.engine.stuck_limit_s.unwrap_or(crate::config::DEFAULT_STUCK_LIMIT_S)),
        stuck: HashMap::new(),
        polls_failing_since: None,
        stop_failed: vec![],
        next_poll: None,
        runs_spent: 0,
        walls: vec![],
        started,
    };
    // The chain of a controller that died: its journaled rechecks, from the head in turn.
    let links: Vec<Link> = c.journal.trials.iter().filter(|t| t.first.is_some()).map(link).collect();
    c.lane = Lane::rebuild(&c.head()?, links.iter());
    let in_journal: Vec<String> = c.journal.trials.iter().map(|t| t.hypothesis.clone()).collect();
    let mut queue: VecDeque<usize> =
        (0..hyps.len()).filter(|&i| !done.contains_key(&hyps[i].key()) && !in_journal.contains(&hyps[i].key())).collect();
    let result = c.drive(engine, &mut queue, fx);
    if result.is_err() || fx.cancel.is_cancelled() {
        c.stop_all(engine);
    }
    // The table now: the rows it had (under the lock, only this sweep writes it) and its own.
    let gain = crate::report::gain_line(&[&rows[..], &c.out.rows[..]].concat());
    fx.emit(Event::SweepFinished { outcome: c.out.clone(), runs: c.runs_spent, wall_s: started.elapsed().as_secs_f64(), gain });
    result.map(|_| c.out)
}

/// While the engine's polls fail, the pause before it is asked again (a tenth of the grace when
/// that is shorter).
const POLL_RETRY_PAUSE: Duration = Duration::from_secs(5);

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
    /// Finished winners not merged yet, in the order they won: links of the chain waiting for
    /// their turn, and winners waiting to join it or to be rechecked.
    winners: VecDeque<(Tracked, Assessed)>,
    /// The merge lane's chain: rechecks and winners that merge one after another, each measured
    /// against the commit the one before it makes the head. New trials start on its tip.
    lane: Lane,
    /// A stale winner is waiting for a slot for its recheck (new hypotheses wait behind it).
    recheck_waits: bool,
    /// Hypotheses whose trial was lost (by its key), to start again before new ones; with the
    /// first win of a lost recheck (or of a recheck whose chain was cut), which starts again as a
    /// recheck.
    requeue: VecDeque<(String, Option<FirstWin>)>,
    /// Hypotheses that do not apply to the tip while the chain is undecided: asked again once it
    /// has merged (whether a change applies is the head's question).
    deferred: VecDeque<(String, Option<FirstWin>)>,
    /// How often a hypothesis's lost trial is started again before it is recorded as lost.
    retries: u32,
    /// How long polling the engine may keep failing before the sweep stops on it, and since
    /// when it has (`None`: the last poll answered).
    poll_grace: Duration,
    /// How long a job the engine will not start may wait, and the trials waiting so: since
    /// when, and the reason last shown.
    stuck_limit: Duration,
    stuck: HashMap<String, (Instant, String)>,
    polls_failing_since: Option<Instant>,
    /// Trials whose stop failed (journaled as stopping, for recovery): not asked again.
    stop_failed: Vec<String>,
    /// While polls fail: no poll before this (a failing scheduler is not asked 40 times a second).
    next_poll: Option<Instant>,
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
                    Some(h) => match self.poll(engine, h, fx)? {
                        None => continue,
                        Some(JobState::Queued | JobState::Running) => {
                            self.stuck.remove(&id);
                            continue;
                        }
                        Some(JobState::Stuck(why)) => match self.stuck_past_limit(&t, &why, engine.name(), fx) {
                            None => continue,
                            Some(lost) => {
                                self.stop(engine, &t)?;
                                Some(lost)
                            }
                        },
                        Some(JobState::Failed(why)) => Some(why),
                        Some(JobState::Finished) => None,
                    },
                    // Re-attached from the journal with its result already there.
                    None => None,
                };
                if let Some(h) = &t.handle {
                    engine.fetch(h, &t.spec)?;
                }
                if let Err(e) = self.finished(engine, t, lost, fx) {
                    stopping.get_or_insert(e);
                }
            }
            if let Err(e) = self.reap_stops(engine) {
                stopping.get_or_insert(e);
            }
            if let Some(e) = stopping {
                // As a serial sweep stops on an error: nothing new starts, trials in flight stop
                // (they run again on resume), finished winners stay journaled.
                return Err(e);
            }
            if self.lane.is_empty() {
                self.requeue.extend(self.deferred.drain(..));
            }
            // Lost trials start again first (a lost recheck as a recheck, on the tip).
            while self.running() < engine.capacity() {
                let Some((key, first)) = self.requeue.pop_front() else { break };
                let Some(h) = self.hyp(&key) else { continue };
                self.start(engine, h, first, fx)?;
            }
            self.lane_step(engine, fx)?;
            while self.running() < engine.capacity() && !self.recheck_waits {
                let Some(&i) = queue.front() else { break };
                let h = &self.hyps[i];
                let pairs = self.cfg.decision.params(h.pairs.or(self.opts.pairs)).max_total_pairs() as u64;
                let pace = (!self.walls.is_empty()).then(|| self.walls.iter().sum::<f64>() / self.walls.len() as f64);
                if let Some(why) = crate::sweep::over_budget(self.opts, self.started.elapsed(), self.runs_spent, 2 * pairs, pace) {
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
                && self.lane.is_empty()
                && queue.is_empty()
                && self.requeue.is_empty()
                && self.deferred.is_empty()
                && self.journal.stopping.is_empty()
            {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Trials the engine is running (journaled, not waiting in the winners' FIFO), and those it
    /// is stopping: they hold a device until they end.
    fn running(&self) -> usize {
        let live = self.journal.trials.iter().filter(|t| !self.winners.iter().any(|(w, _)| w.spec.id == t.spec.id)).count();
        live + self.journal.stopping.len()
    }

    /// Start stopping a trial's job (the engine's cancel runs beside the controller); it is
    /// journaled as stopping, with the next save, until the engine says the job has ended.
    fn stop(&mut self, engine: &mut dyn Engine, t: &Tracked) -> Result<()> {
        if let Some(h) = &t.handle {
            engine.stop(h)?;
            self.journal.stopping.push(t.clone());
        }
        Ok(())
    }

    /// Forget the stopped jobs that have ended. A stop that failed is the sweep's error, as a
    /// failed cancel was; its trial stays journaled as stopping, so recovery cancels it again.
    fn reap_stops(&mut self, engine: &mut dyn Engine) -> Result<()> {
        let mut failed = None;
        let mut changed = false;
        let mut keep = vec![];
        for t in std::mem::take(&mut self.journal.stopping) {
            let Some(h) = t.handle.clone() else {
                changed = true;
                continue;
            };
            if self.stop_failed.contains(&t.spec.id) {
                keep.push(t);
                continue;
            }
            match engine.stopped(&h) {
                Ok(true) => changed = true,
                Ok(false) => keep.push(t),
                Err(e) => {
                    let hint = format!("job {} (trial {}) may still run; {}", h.engine_id, h.trial, e.hint.clone().unwrap_or_default());
                    failed.get_or_insert(e.hint(hint));
                    self.stop_failed.push(t.spec.id.clone());
                    keep.push(t);
                }
            }
        }
        self.journal.stopping = keep;
        if changed {
            self.journal.save(&self.state_dir)?;
        }
        failed.map_or(Ok(()), Err)
    }

    /// Whether `commit` is the head or one of its ancestors.
    fn on_trunk(&self, commit: &str) -> bool {
        let r = &self.repo().repo;
        match (self.repo().head_oid(), git2::Oid::from_str(commit)) {
            (Ok(head), Ok(c)) => head == c || r.graph_descendant_of(head, c).unwrap_or(false),
            _ => false,
        }
    }

    fn head(&self) -> Result<String> {
        Ok(self.repo().head_oid()?.to_string())
    }

    /// Merge the chain's front once it is decided; let a winner measured against the tip join
    /// the chain; send a stale winner to its recheck on the tip (a free slot each, before new
    /// hypotheses). Nothing merges unless its incumbent is the head.
    fn lane_step(&mut self, engine: &mut dyn Engine, fx: &mut Effects) -> Result<()> {
        self.recheck_waits = false;
        'again: loop {
            let head = self.head()?;
            for i in 0..self.winners.len() {
                let w = link(&self.winners[i].0);
                match self.lane.place(&head, &w) {
                    Place::Wait => {}
                    Place::Merge => {
                        let (w, a) = self.winners.remove(i).expect("in range");
                        self.lane.pop_front();
                        self.record(&w, a, true, fx)?;
                        continue 'again;
                    }
                    Place::Join => {
                        self.lane.push(w);
                        continue 'again;
                    }
                    Place::Stale if self.running() >= engine.capacity() => self.recheck_waits = true,
                    Place::Stale => {
                        if let Some(at) = self.lane.position(&w.id) {
                            // Out of the chain, with what came after it; then placed afresh (the
                            // cut may also have taken winners out of the FIFO).
                            self.cut_lane(at, engine)?;
                            continue 'again;
                        }
                        if self.recheck(engine, i, &head, fx)? {
                            continue 'again;
                        }
                    }
                }
            }
            return Ok(());
        }
    }

    /// Start the recheck of the stale winner `winners[i]` on the tip. Returns false when it must
    /// wait instead: it does not apply to the tip while the chain may still change.
    fn recheck(&mut self, engine: &mut dyn Engine, i: usize, head: &str, fx: &mut Effects) -> Result<bool> {
        let tip = self.lane.tip(head).to_string();
        let w = self.winners[i].0.clone();
        let Some(h) = self.hyp(&w.hypothesis) else {
            self.winners.remove(i);
            self.forget(&w.spec.id)?;
            return Ok(true);
        };
        // A winner that no longer applies to the head (another keep edited the same lines)
        // is recorded with what its trial measured and its candidate parked, not as an
        // unmeasured skip; while the chain is undecided, it waits for the head to settle.
        let conflict = match self.plan_on(h, &tip) {
            Ok(p) if p.changes.is_empty() => Some("applying it to the head changes nothing (the head already has it)".to_string()),
            Ok(_) => None,
            Err(e) => Some(format!("it no longer applies to {}: {}", short(&tip), e)),
        };
        if conflict.is_some() && !self.lane.is_empty() {
            return Ok(false);
        }
        let (w, a) = self.winners.remove(i).expect("in range");
        fx.emit(Event::StaleWinner {
            name: h.name.clone(),
            won_against: w.first.as_ref().map_or(&w.spec.incumbent, |f| &f.incumbent).clone(),
            head: tip.clone(),
        });
        if let Some(why) = conflict {
            let mut a = a;
            a.row.status = Status::Skipped;
            a.row.note = format!(
                "stale winner, not merged: kept against {}, then the trunk moved and {why}; its measurement is the first trial's: {}",
                short(&w.spec.incumbent),
                a.row.note
            );
            self.record(&w, a, false, fx)?;
            return Ok(true);
        }
        // A recheck whose chain was cut after it won starts again from its first win (its own
        // runs were measured against a head that never came).
        let first = w.first.clone().unwrap_or_else(|| FirstWin {
            trial: w.spec.id.clone(),
            incumbent: w.spec.incumbent.clone(),
            candidate: w.spec.candidate.clone(),
            runs: a.row.runs,
            wall_s: a.row.wall_s,
            out_dir: w.spec.out_dir.clone(),
        });
        // The first trial's journal entry goes once the recheck is journaled.
        self.start(engine, h, Some(first), fx)?;
        self.forget(&w.spec.id)?;
        Ok(true)
    }

    /// The chain's link at `at` was not kept, was lost or turned stale: the links after it were
    /// measured against a commit that will now never be the head. Their rechecks in flight are
    /// stopped and start again on the new tip; a finished recheck among them starts again too;
    /// a first win among them waits again (stale now).
    fn cut_lane(&mut self, at: usize, engine: &mut dyn Engine) -> Result<()> {
        for l in self.lane.cut(at).into_iter().skip(1) {
            let Some(t) = self.journal.trials.iter().find(|t| t.spec.id == l.id).cloned() else { continue };
            let won = self.winners.iter().any(|(w, _)| w.spec.id == l.id);
            if won && t.first.is_none() {
                continue;
            }
            if !won {
                self.stop(engine, &t)?;
            }
            self.winners.retain(|(w, _)| w.spec.id != l.id);
            self.forget(&l.id)?;
            self.requeue.push_back((t.hypothesis.clone(), t.first.clone()));
        }
        Ok(())
    }

    /// `h`'s plan on `base`'s tree (the tip), its error as text.
    fn plan_on(&self, h: &Hypothesis, base: &str) -> std::result::Result<Plan, String> {
        let r = &self.repo().repo;
        let tree = git2::Oid::from_str(base).and_then(|o| r.find_commit(o)).and_then(|c| c.tree()).map_err(|e| e.message().to_string())?;
        h.plan_on(self.repo(), &tree).map_err(|e| e.0)
    }

    /// Plan `h` on the tip, commit its candidate (on no branch) and submit its trial. Returns
    /// the trial's id, or `None` when the hypothesis was recorded without measuring (or waits
    /// for the chain: it does not apply to the tip, which may still change).
    fn start(&mut self, engine: &mut dyn Engine, h: &Hypothesis, first: Option<FirstWin>, fx: &mut Effects) -> Result<Option<String>> {
        let repo = self.repo();
        let head = repo.head_oid()?;
        let tip = self.lane.tip(&head.to_string()).to_string();
        let base = git2::Oid::from_str(&tip)?;
        let won = first.as_ref().map(|f| format!("won against {}, then ", short(&f.incumbent))).unwrap_or_default();
        if let crate::sweep::hypothesis::Change::Malformed(why) = &h.change {
            return self.unmeasured(h, head, Status::Refused, format!("refused: {why}"), fx);
        }
        let plan = match self.plan_on(h, &tip) {
            Ok(p) if !p.changes.is_empty() => p,
            // Whether it applies is the head's question: ask again once the chain has merged.
            _ if base != head => {
                self.deferred.push_back((h.key(), first));
                return Ok(None);
            }
            Ok(_) => {
                return self.unmeasured(
                    h,
                    head,
                    Status::Skipped,
                    format!("{won}applying it changes nothing (the incumbent already has it)"),
                    fx,
                );
            }
            Err(e) => return self.unmeasured(h, head, Status::Skipped, format!("{won}does not apply to {}: {e}", short(&tip)), fx),
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
        if let Some(why) = crate::bench::shadow::check(self.cfg, &repo.repo, repo.root(), base, &plan.files) {
            return self.unmeasured(h, head, Status::Refused, format!("refused: {why}"), fx);
        }
        let n = self.journal.next_trial + 1;
        self.journal.next_trial = n;
        let id = format!("t{n}");
        let out_dir = crate::layout::trials_dir(&self.state_dir).join(&id);
        if out_dir.exists() {
            std::fs::remove_dir_all(&out_dir).with_path(&out_dir)?;
        }
        let candidate = candidate_commit(repo, base, &plan, &h.message)?;
        repo.repo.reference(&format!("{TRIAL_REF_PREFIX}{id}"), candidate, true, "ratchet: trial candidate")?;
        let spec = TrialSpec { id: id.clone(), repo: repo.root().to_path_buf(), incumbent: tip, candidate: candidate.to_string(), out_dir };
        let recheck = first.is_some();
        // The noise of the device the trial will run on (a local slot), or of the kind of device
        // a cluster's nodes have for its request: never a scale pooled over other kinds.
        let device = engine.next_device();
        let noise =
            device.as_ref().and_then(|d| history::borrowed(&history::load(&self.state_dir, &device_history_key(self.cfg, d)).entries));
        let argv = worker_argv(
            &self.exe,
            &spec,
            &self.config_path,
            h.pairs.or(self.opts.pairs),
            noise.as_ref(),
            recheck,
            h.deep.unwrap_or(self.opts.deep),
        );
        // Journaled before it is submitted, and its handle before it is waited on.
        self.journal.trials.push(Tracked {
            spec: spec.clone(),
            handle: None,
            engine: engine.name().to_string(),
            hypothesis: h.key(),
            first,
            device,
        });
        if recheck {
            self.lane.push(Link { id: id.clone(), incumbent: spec.incumbent.clone(), candidate: spec.candidate.clone() });
        }
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
    fn finished(&mut self, engine: &mut dyn Engine, t: Tracked, lost: Option<String>, fx: &mut Effects) -> Result<()> {
        let name = self.hyp(&t.hypothesis).map(|h| h.name.clone()).unwrap_or_default();
        let result = TrialResult::read(&t.spec.out_dir)?;
        let Some(result) = result else {
            // The local engine's log, or Slurm's stderr file.
            let log = ["worker.log", "slurm.err"].iter().map(|f| t.spec.out_dir.join(f)).find(|p| p.exists());
            let log = log.unwrap_or_else(|| t.spec.out_dir.join("worker.log"));
            let why = lost.unwrap_or_else(|| "its worker ended without a result".into());
            let why = match last_error(&log) {
                Some(said) => format!("{why}: {said}; see {}", log.display()),
                None if log.exists() => format!("{why}; see {}", log.display()),
                None => why,
            };
            return self.lost_trial(engine, t, why, fx);
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
                return self.lost_trial(engine, t, why, fx);
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
        if a.row.status == Status::Keep {
            // The lane decides when (and whether) it merges: now, when it can.
            self.winners.push_back((t, a));
            return self.lane_step(engine, fx);
        }
        if let Some(at) = self.lane.position(&t.spec.id) {
            self.cut_lane(at, engine)?;
        }
        let stop = a.row.status == Status::Error;
        self.record(&t, a, false, fx)?;
        if stop {
            return Err(Error::failure(format!("{name} could not be decided: the incumbent's benchmark failed"))
                .hint("check that the incumbent's benchmark runs (its logs are under .ratchet/trials/)"));
        }
        Ok(())
    }

    /// A trial the engine lost (preempted, cancelled, out of memory, a node failure, its time
    /// limit, a killed worker): its hypothesis starts again, up to `retries` times, and is then
    /// recorded as lost (`interrupted`, the reasons in its note); the rest of the sweep goes on.
    fn lost_trial(&mut self, engine: &mut dyn Engine, t: Tracked, why: String, fx: &mut Effects) -> Result<()> {
        if let Some(at) = self.lane.position(&t.spec.id) {
            self.cut_lane(at, engine)?;
        }
        self.forget(&t.spec.id)?;
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

    /// Poll one job. A poll that fails for the machine's reasons (a scheduler that timed out, a
    /// job server restarting) is `None` (ask again later) until polls have failed for
    /// `poll_grace`: one blip of the cluster must not end a night of trials.
    fn poll(&mut self, engine: &mut dyn Engine, h: &crate::scale::engine::JobHandle, fx: &mut Effects) -> Result<Option<JobState>> {
        if self.next_poll.is_some_and(|t| Instant::now() < t) {
            return Ok(None);
        }
        self.next_poll = None;
        match engine.poll(h) {
            Ok(state) => {
                if let Some(since) = self.polls_failing_since.take() {
                    fx.note(format!("{} answers again, after {:.0} s of failed polls", engine.name(), since.elapsed().as_secs_f64()));
                }
                Ok(Some(state))
            }
            Err(e) if e.kind == crate::error::Kind::Infrastructure => {
                let since = *self.polls_failing_since.get_or_insert_with(|| {
                    fx.note(format!(
                        "polling {} failed: {}; asking again for up to {:.0} s ([engine] poll_grace_s) before the sweep stops",
                        engine.name(),
                        e.message,
                        self.poll_grace.as_secs_f64()
                    ));
                    Instant::now()
                });
                self.next_poll = Some(Instant::now() + POLL_RETRY_PAUSE.min(self.poll_grace / 10));
                if since.elapsed() >= self.poll_grace {
                    let waited = since.elapsed().as_secs_f64();
                    return Err(Error::new(e.kind, format!("{} (polls failed for {waited:.0} s)", e.message))
                        .hint(e.hint.unwrap_or_else(|| "check the engine, then run the sweep again to resume it".into())));
                }
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// A trial whose job the engine will not start: said at once, and again when the reason
    /// changes; past `stuck_limit` the reason a lost trial is recorded with (the caller cancels
    /// the job), else `None` (it waits).
    fn stuck_past_limit(&mut self, t: &Tracked, why: &str, engine: &str, fx: &mut Effects) -> Option<String> {
        let limit = self.stuck_limit.as_secs_f64();
        let entry = self.stuck.entry(t.spec.id.clone()).or_insert_with(|| (Instant::now(), String::new()));
        if entry.1 != why {
            entry.1 = why.to_string();
            fx.note(format!(
                "trial {} ({}): the {engine} job will not start by itself: {why}; it counts as lost after {limit:.0} s of \
                 this ([engine] stuck_limit_s) unless it starts",
                t.spec.id,
                crate::printable::line(&t.hypothesis)
            ));
        }
        let waited = entry.0.elapsed();
        (waited >= self.stuck_limit).then(|| {
            self.stuck.remove(&t.spec.id);
            format!("{why}, for {:.0} s ([engine] stuck_limit_s = {limit:.0})", waited.as_secs_f64())
        })
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
        if !merge && !self.on_trunk(&row.incumbent) {
            // Started on the merge lane's tip: the head its pending keeps would make.
            row.note.push_str(&format!(" [measured against {}, the head the merge lane was about to make]", short(&row.incumbent)));
        }
        // A winner whose recheck (journaled before a restart) decides it leaves the FIFO too.
        self.winners.retain(|(w, _)| !trials.contains(&w.spec.id));
        let first_candidate = t.first.as_ref().map(|f| f.candidate.clone()).filter(|c| !c.is_empty());
        let rec = Recording { row: row.clone(), branch: self.branch.clone(), out_dirs, merge, trials, first_candidate };
        self.journal.recording = Some(rec.clone());
        self.journal.save(&self.state_dir)?;
        if let Some(rule) = a.rule {
            // Before the row, as the serial loop does: a row never lacks its rule.
            let rule = crate::replay::DecisionRecord { id: row.id, ..rule };
            if let Err(err) = self.ws.store.append_decision(&rule) {
                fx.note(format!("could not record the decision's rule in {}: {}", crate::replay::DECISIONS_JSONL, err.message));
            }
        }
        crate::fault::point("scale-before-record");
        finish_recording(self.repo(), &self.ws.store, &mut self.journal, &rec)?;
        if a.decision.is_some() {
            // Where it borrowed from, so the next trial of that device or kind borrows this one.
            let key = device_history_key(self.cfg, &t.device.clone().unwrap_or_else(|| device_of(&a.result)));
            let r = &a.result;
            let sd = a.decision.as_ref().and_then(|d| d.borrowed.as_ref()).map(|b| b.sd_pct / 100.0);
            let batches = [(&r.main[..], &r.main_sums[..]), (&r.confirm[..], &r.confirm_sums[..])];
            if let Some(e) = history::entry_beside(&row.time, &format!("experiment {}", row.id), &batches, sd) {
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
            if t.handle.is_some() && self.stop(engine, &t).is_err() {
                // Journaled as stopping all the same: recovery cancels it again.
                self.journal.stopping.push(t.clone());
                self.stop_failed.push(t.spec.id.clone());
            }
            if !finished {
                let _ = self.forget(&t.spec.id);
            }
        }
        // The stops run side by side, each within its engine's command limit.
        while self.journal.stopping.iter().any(|t| !self.stop_failed.contains(&t.spec.id)) {
            let _ = self.reap_stops(engine);
            std::thread::sleep(Duration::from_millis(25));
        }
        let _ = self.journal.save(&self.state_dir);
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

/// The last `error:` line of a worker's log (its end only: a log may be long), so that a lost
/// trial's note says why its worker failed (a checkout it could not make, say), not only that
/// it did.
fn last_error(log: &Path) -> Option<String> {
    let text = crate::bench::executor::tail(log, usize::MAX);
    let line = text.lines().rev().find_map(|l| l.trim().strip_prefix("error:"))?;
    Some(line.trim().chars().take(300).collect())
}

/// A trial as the merge lane sees it.
fn link(t: &Tracked) -> Link {
    Link { id: t.spec.id.clone(), incumbent: t.spec.incumbent.clone(), candidate: t.spec.candidate.clone() }
}
