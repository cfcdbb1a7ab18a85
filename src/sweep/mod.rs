//! `ratchet sweep`: run a queue of hypothesis files unattended, one normal experiment each, on
//! top of whatever the previous ones kept, so kept gains compound. A hypothesis that no longer
//! applies becomes a `skipped` row; crashes, timeouts and invalid results are rows like any
//! other and the sweep goes on. A budget stops it between experiments.
//!
//! Resuming: a finished hypothesis is one with a results row (its `hypothesis` column holds
//! `<file>@<hash>`), so a restarted sweep skips it. The hypothesis in flight is written to
//! `.ratchet/sweep.json` *before* the tree is touched, so a sweep killed at any point (even with
//! SIGKILL) finds on restart exactly what it left behind: edits not yet committed are undone,
//! a hypothesis commit without a row is parked under `refs/ratchet/discarded/` and its stale
//! runs dropped, and the hypothesis is run again. Nothing is recorded twice.

pub mod hypothesis;

use crate::bench::executor::Executor;
use crate::config::{self, Config};
use crate::error::WithPath;
use crate::error::{Error, Result};
use crate::events::{Effects, Event};
use crate::experiment;
use crate::store::{ResultRow, Status, Store};
use crate::vcs::short;
use crate::vcs::Repo;
use crate::workspace::Locked;
use hypothesis::{FileChange, Hypothesis};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What the user asked for.
#[derive(Debug, Clone, Default)]
pub struct SweepOptions {
    /// Hypothesis files (or directories of them); empty: `experiments/*.toml`. A relative path
    /// is taken from the repository's root (the command line makes them absolute first).
    pub paths: Vec<PathBuf>,
    /// Stop before an experiment that would start after this much wall time.
    pub max_wall: Option<Duration>,
    /// Stop before an experiment that could take the benchmark runs past this count.
    pub max_runs: Option<u64>,
    /// Default for hypotheses that do not set `deep`.
    pub deep: bool,
    /// Default for hypotheses that do not set `pairs`.
    pub pairs: Option<u32>,
}

/// The hypothesis whose change may be in the tree or in a commit without a results row yet.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct InFlight {
    hypothesis: String,
    message: String,
    branch: String,
    incumbent: String,
    /// The experiment id it was going to get.
    id: u64,
    /// Repo-relative files the change writes.
    files: Vec<String>,
    /// Their blobs before and after the change, to tell the hypothesis's edit from the user's.
    #[serde(default)]
    changes: Vec<FileChange>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct SweepState {
    #[serde(default)]
    in_flight: Option<InFlight>,
}

impl SweepState {
    fn load(state_dir: &Path) -> Result<SweepState> {
        crate::journal::SWEEP.read_or_default(state_dir)
    }

    fn save(&self, state_dir: &Path) -> Result<()> {
        crate::journal::SWEEP.write(state_dir, self)
    }
}

/// Statuses after which a hypothesis counts as done: an interrupted or undecidable one runs again.
pub fn is_finished(s: Status) -> bool {
    !matches!(s, Status::Interrupted | Status::Error)
}

/// Parse a duration like `8h`, `30m`, `90s`, `1h30m`, `2d` (a bare number is seconds).
pub fn parse_duration(s: &str) -> std::result::Result<Duration, String> {
    let t = s.trim();
    let bad = || format!("{s:?} is not a duration; write e.g. 8h, 30m, 90s or 1h30m");
    if t.is_empty() {
        return Err(bad());
    }
    // A bare number has no unit: `--max-wall 8` meant as 8 hours must not run for 8 seconds.
    if let Ok(v) = t.parse::<f64>() {
        return if v == 0.0 { Ok(Duration::ZERO) } else { Err(format!("{s:?} has no unit; write {t}h, {t}m or {t}s")) };
    }
    let mut total = 0.0;
    let mut num = String::new();
    for c in t.chars() {
        if c.is_ascii_digit() || c == '.' {
            num.push(c);
            continue;
        }
        let unit = match c {
            'd' => 86400.0,
            'h' => 3600.0,
            'm' => 60.0,
            's' => 1.0,
            _ => return Err(bad()),
        };
        let v: f64 = num.parse().map_err(|_| bad())?;
        total += v * unit;
        num.clear();
    }
    if !num.is_empty() {
        return Err(bad());
    }
    Ok(Duration::from_secs_f64(total))
}

/// Moved to `crate::units`; re-exported so `sweep::fmt_duration` keeps working.
pub use crate::units::fmt_duration;

/// Moved to [`crate::outcome`].
pub use crate::outcome::SweepOutcome;

/// What every sweep starts from, serial or parallel (`scale::controller`): the queue, the
/// branch, the config and the hypotheses already recorded (by their `<file>@<hash>` key).
pub(crate) struct Queue {
    pub hyps: Vec<Hypothesis>,
    pub branch: String,
    pub cfg: Config,
    pub done: std::collections::HashMap<String, u64>,
    /// The results table as the queue opened (read once: it grows all night).
    pub rows: Vec<ResultRow>,
}

impl Queue {
    /// Hypotheses still to run.
    pub fn todo(&self) -> usize {
        self.hyps.iter().filter(|h| !self.done.contains_key(&h.key())).count()
    }

    /// Say what the sweep will do.
    pub fn announce(&self, opts: &SweepOptions, fx: &mut Effects) {
        let todo = self.todo();
        fx.emit(Event::SweepStarted {
            branch: self.branch.clone(),
            hypotheses: self.hyps.len(),
            already_done: self.hyps.len() - todo,
            to_run: todo,
            max_wall_s: opts.max_wall.map(|w| w.as_secs_f64()),
            max_runs: opts.max_runs,
        });
    }
}

/// Open a sweep's queue: the hypothesis files, a safe branch, the config, the recoveries (then
/// `also`, the caller's own), a clean tree, and what is already recorded.
pub(crate) fn open_queue(
    ws: &Locked,
    opts: &SweepOptions,
    fx: &mut Effects,
    also: impl FnOnce(&mut Effects) -> Result<()>,
) -> Result<Queue> {
    let repo = &ws.repo;
    let root = repo.root().to_path_buf();
    let paths: Vec<PathBuf> = opts.paths.iter().map(|p| if p.is_absolute() { p.clone() } else { root.join(p) }).collect();
    let hyps = hypothesis::collect(&root, &paths)?;
    for h in &hyps {
        if let hypothesis::Change::Malformed(why) = &h.change {
            // Said at the start, not only in its row: a typo is found before the night's runs.
            fx.note(format!("{why}; it is recorded as refused and the other hypotheses run"));
        }
    }
    let (branch, _) = repo.check_safe()?;
    let cfg = ws.config()?;
    repo.ensure_excludes()?;
    std::fs::create_dir_all(&ws.state_dir).with_path(&ws.state_dir)?;
    recover(ws, fx)?;
    also(fx)?;
    let dirty = repo.changes()?;
    if !dirty.is_empty() {
        return Err(Error::repo(format!(
            "the working tree has changes ({}), but a sweep's hypotheses must be the only change",
            dirty.iter().take(5).cloned().collect::<Vec<_>>().join(", ")
        ))
        .hint("commit them (git commit -am ...) or stash them (git stash -u), then start the sweep again"));
    }
    let submodules = repo.changed_submodules();
    if !submodules.is_empty() {
        let listed: Vec<String> = submodules.iter().map(|(p, what)| format!("{p} ({what})")).collect();
        return Err(Error::repo(format!(
            "submodules differ from their recorded commits ({}): every candidate would be measured with that change, and no \
             incumbent with it",
            listed.join(", ")
        ))
        .hint("commit it in the superproject (git add the submodule && git commit) or undo it (git submodule update), then start the sweep again"));
    }
    let rows = ws.store.rows()?;
    let done = rows.iter().filter(|r| !r.hypothesis.is_empty() && is_finished(r.status)).map(|r| (r.hypothesis.clone(), r.id)).collect();
    Ok(Queue { hyps, branch, cfg, done, rows })
}

/// Run the sweep in the locked workspace.
pub fn run(ws: &Locked, opts: &SweepOptions, exec: &mut dyn Executor, fx: &mut Effects) -> Result<SweepOutcome> {
    let started = Instant::now();
    let state_dir = ws.state_dir.clone();
    let store = &ws.store;
    let queue = open_queue(ws, opts, fx, |_| Ok(()))?;
    queue.announce(opts, fx);
    let todo = queue.todo();
    let Queue { hyps, branch, cfg, done, rows } = queue;
    let mut out = SweepOutcome { rows: vec![], already_done: hyps.len() - todo, not_started: 0, stopped_by: None };
    let mut runs_spent: u64 = 0;
    // The pace before this sweep has measured anything: past decisions in results.
    let record = crate::progress::record(&rows, cfg.score.metric.as_str());
    let mut result: Result<()> = Ok(());
    for (i, h) in hyps.iter().enumerate() {
        if let Some(id) = done.get(&h.key()) {
            fx.emit(Event::HypothesisDone { index: i, total: hyps.len(), name: h.name.clone(), id: *id });
            continue;
        }
        if fx.cancel.is_cancelled() {
            result = Err(Error::interrupted().hint("start the sweep again to resume it"));
            break;
        }
        // The most pairs this experiment may take, confirmation included.
        let pairs = cfg.decision.params(h.pairs.or(opts.pairs)).max_total_pairs() as u64;
        let left = hyps[i..].iter().filter(|h| !done.contains_key(&h.key())).count();
        let wall = opts.max_wall.map(|w| w.as_secs_f64());
        let eta = crate::progress::sweep_eta(i, hyps.len(), left, started.elapsed().as_secs_f64(), &out.rows, &record, wall);
        // The pace its progress line shows (this sweep's, else the record's) decides the wall
        // budget too, so the line never says "time for 0 more" over an experiment it starts.
        let pace = eta.runs_per_hypothesis.zip(eta.secs_per_run).map(|(r, s)| r * s);
        if let Some(why) = over_budget(opts, started.elapsed(), runs_spent, 2 * pairs, pace) {
            out.not_started = hyps[i..].iter().filter(|h| !done.contains_key(&h.key())).count();
            out.stopped_by = Some(why);
            break;
        }
        fx.emit(Event::HypothesisStarted { index: i, total: hyps.len(), name: h.name.clone(), elapsed_s: started.elapsed().as_secs_f64() });
        fx.emit(Event::SweepProgress(eta));
        match run_one(ws, &state_dir, &branch, &cfg, h, opts, exec, fx) {
            Ok((row, None)) => {
                runs_spent += row.runs as u64;
                out.rows.push(row);
            }
            Ok((row, Some(e))) => {
                // The experiment recorded its row (interrupted, or an incumbent that cannot run):
                // going on would only fail the same way, so the sweep stops here.
                runs_spent += row.runs as u64;
                out.rows.push(row);
                result = Err(e);
                break;
            }
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    let gain = store.rows().ok().and_then(|all| crate::report::gain_line(&all));
    fx.emit(Event::SweepFinished { outcome: out.clone(), runs: runs_spent, wall_s: started.elapsed().as_secs_f64(), gain });
    result.map(|_| out)
}

/// Why the next experiment must not start, if it must not. The wall budget also refuses an
/// experiment that, at `pace` (seconds a hypothesis, the sweep's estimate; none before it has
/// one), would end past it: an 8h budget means being done by morning, not starting a long
/// experiment at 7:59.
pub(crate) fn over_budget(o: &SweepOptions, elapsed: Duration, runs_spent: u64, next_runs: u64, pace: Option<f64>) -> Option<String> {
    if let Some(max) = o.max_runs {
        if runs_spent + next_runs > max {
            return Some(format!("run budget: {runs_spent} of {max} runs spent, the next experiment needs up to {next_runs}"));
        }
    }
    if let Some(max) = o.max_wall {
        let pace = pace.unwrap_or(0.0);
        if elapsed.as_secs_f64() + pace > max.as_secs_f64() {
            return Some(format!(
                "wall-time budget: {} of {} spent, an experiment takes about {}",
                fmt_duration(elapsed.as_secs_f64()),
                fmt_duration(max.as_secs_f64()),
                fmt_duration(pace)
            ));
        }
    }
    None
}

/// One hypothesis: its recorded row, and the error that stops the sweep after it, if any
/// (`Err`: nothing was recorded).
#[allow(clippy::too_many_arguments)]
fn run_one(
    ws: &Locked,
    state_dir: &Path,
    branch: &str,
    cfg: &Config,
    h: &Hypothesis,
    opts: &SweepOptions,
    exec: &mut dyn Executor,
    fx: &mut Effects,
) -> Result<(ResultRow, Option<Error>)> {
    let (repo, store) = (&ws.repo, &ws.store);
    let started = Instant::now();
    let head = repo.head_oid()?;
    let mut row_of = |status: Status, why: String| -> Result<(ResultRow, Option<Error>)> {
        // An id of its own, never reused (see journal::allocate_id).
        let id = crate::journal::allocate_id(repo, store)?;
        let row = ResultRow { status, ..skipped_row(id, head, cfg, h, why, started.elapsed().as_secs_f64()) };
        store.append_row(&row)?;
        fx.emit(Event::Unmeasured { row: Box::new(row.clone()) });
        Ok((row, None))
    };
    if let hypothesis::Change::Malformed(why) = &h.change {
        return row_of(Status::Refused, format!("refused: {why}"));
    }
    let plan = match h.plan(repo) {
        Ok(p) => p,
        Err(e) => return row_of(Status::Skipped, format!("does not apply to {}: {}", short(&head.to_string()), e.0)),
    };
    if plan.changes.is_empty() {
        return row_of(Status::Skipped, "applying it changes nothing (the incumbent already has it)".into());
    }
    // The same rule as a single experiment's, checked before the tree is touched: this one
    // hypothesis is refused and the sweep goes on.
    let protected = config::protected_paths(cfg, repo.root());
    let touched: Vec<&str> = plan.files.iter().filter(|p| config::is_protected(p, &protected)).map(String::as_str).collect();
    if !touched.is_empty() {
        return row_of(
            Status::Refused,
            format!(
                "refused: it changes the benchmark harness ({}); a gain could then come from the measuring stick, not the kernel",
                touched.join(", ")
            ),
        );
    }
    // The tree must hold nothing but the incumbent: whatever changed since the last experiment
    // (an edit made meanwhile, a write no check saw) would be committed under this hypothesis.
    let dirty = repo.changes()?;
    if !dirty.is_empty() {
        return Err(Error::repo(format!(
            "the working tree changed while the sweep ran ({}); it would be committed as part of the next hypothesis",
            crate::vcs::some_of(&dirty, 5)
        ))
        .hint("commit or stash those changes (git stash -u), then start the sweep again: it resumes where it stopped"));
    }
    if let Some(why) = crate::bench::shadow::check(cfg, &repo.repo, repo.root(), head, &plan.files) {
        return row_of(Status::Refused, format!("refused: {why}"));
    }
    let mut state = SweepState {
        in_flight: Some(InFlight {
            hypothesis: h.key(),
            message: h.message.clone(),
            branch: branch.to_string(),
            incumbent: head.to_string(),
            id: store.next_id()?,
            files: plan.files.clone(),
            changes: plan.changes.clone(),
        }),
    };
    // Recorded before the tree is touched: a kill from here on is undone by `recover`.
    state.save(state_dir)?;
    if let Err(e) = h.apply(repo, &plan) {
        SweepState::default().save(state_dir)?;
        return row_of(Status::Skipped, format!("does not apply to {}: {}", short(&head.to_string()), e.0));
    }
    let eopts = experiment::Options {
        message: h.message.clone(),
        deep: h.deep.unwrap_or(opts.deep),
        allow_empty: false,
        pairs: h.pairs.or(opts.pairs),
        hypothesis: Some(h.key()),
        tags: h.tags.clone(),
        allow_large: false,
    };
    let res = experiment::run(ws, &eopts, exec, fx);
    let failed = match &res {
        Ok(o) => o.error(),
        Err(_) => None,
    };
    if (res.is_err() || failed.is_some()) && repo.head_oid()? == head {
        // run() reverts what it committed; anything it left uncommitted is the hypothesis's.
        undo_edit(repo, &plan.changes)?;
    }
    state.in_flight = None;
    state.save(state_dir)?;
    Ok((res?.row, failed))
}

fn skipped_row(id: u64, head: git2::Oid, cfg: &Config, h: &Hypothesis, note: String, wall_s: f64) -> ResultRow {
    ResultRow {
        metric: cfg.score.metric.as_str().into(),
        wall_s,
        hypothesis: h.key(),
        tags: h.tags.join(";"),
        note,
        ..ResultRow::unmeasured(id, Status::Skipped, &h.message, String::new(), head.to_string())
    }
}

/// Take a hypothesis's edit back out of the work tree: each path that holds what the hypothesis
/// wrote gets its HEAD content back. A path that holds something else was changed since (by the
/// user): it is left alone and named in the error, never overwritten.
fn undo_edit(repo: &Repo, changes: &[FileChange]) -> Result<Vec<String>> {
    let mut undone = vec![];
    let mut changed_since = vec![];
    for c in changes {
        if hypothesis::holds(repo, &c.path, c.after.as_deref()) {
            hypothesis::put_file(repo, &c.path, c.before.as_deref(), c.mode_before)
                .map_err(|e| Error::failure(format!("cannot restore {}: {e}", c.path)))?;
            undone.push(c.path.clone());
        } else if !hypothesis::holds(repo, &c.path, c.before.as_deref()) {
            changed_since.push(c.path.clone());
        }
    }
    if !changed_since.is_empty() {
        return Err(Error::repo(format!(
            "a stopped sweep's hypothesis edited {}, and the file{} changed since; ratchet will not guess which content is wanted",
            changed_since.join(", "),
            if changed_since.len() == 1 { " has" } else { "s have" }
        ))
        .hint("keep what you want (git diff shows it; git checkout -- FILE drops it), then run ratchet again"));
    }
    Ok(undone)
}

/// Finish or roll back what a stopped ratchet left: an unfinished experiment (the journal's),
/// then a killed sweep's hypothesis in flight (see the module doc). Run before a sweep and
/// before a single experiment, which must never commit a sweep's edit under its own message.
pub fn recover(ws: &Locked, fx: &mut Effects) -> Result<()> {
    // An experiment that had committed is the journal's to finish or roll back: it records the
    // row (`interrupted` unless decided), which the check below then sees.
    if let Some(what) = crate::journal::recover(&ws.repo, &ws.store)? {
        fx.emit(Event::Recovered { what });
    }
    if let Some(what) = undo_stopped_sweep(&ws.repo, &ws.store)? {
        fx.emit(Event::Recovered { what });
    }
    ws.mark_recovered();
    Ok(())
}

/// What a sweep that was stopped left in flight, for `ratchet status`: the hypothesis, or `None`.
pub fn in_flight(state_dir: &Path) -> Option<String> {
    let f = SweepState::load(state_dir).ok()?.in_flight?;
    Some(format!("{} (\"{}\", on {} at {})", f.hypothesis, f.message, f.branch, short(&f.incumbent)))
}

/// Take back what a sweep that was stopped (killed) left of its hypothesis in flight: an edit
/// not yet committed is undone (only where the files still hold exactly what the hypothesis
/// wrote), a commit without a row is parked and reverted. Called by a resumed sweep, by a single
/// experiment (which must never commit the sweep's edit under its own message) and by `ratchet
/// recover`; the caller holds the lock and has run the journal's recovery. Returns what it did.
pub fn undo_stopped_sweep(repo: &Repo, store: &Store) -> Result<Option<String>> {
    let state_dir = repo.state_dir();
    let state = SweepState::load(&state_dir)?;
    let Some(f) = state.in_flight else { return Ok(None) };
    let recorded = store.rows()?.iter().any(|r| r.hypothesis == f.hypothesis && r.id >= f.id);
    let incumbent = git2::Oid::from_str(&f.incumbent).map_err(Error::from)?;
    let head = repo.head_oid()?;
    let mut said = None;
    if !recorded {
        if head == incumbent {
            if f.changes.is_empty() && !f.files.is_empty() {
                return Err(Error::repo(format!(
                    "a stopped sweep left {} in flight, recorded by an older ratchet without the content it wrote",
                    f.hypothesis
                ))
                .hint(format!(
                    "check {} (git diff), keep or drop the edit, then delete {}",
                    f.files.join(", "),
                    crate::journal::SWEEP.path(&state_dir).display()
                )));
            }
            let undone = undo_edit(repo, &f.changes)?;
            said = Some(format!(
                "undid the uncommitted edit of {} ({}), left by a sweep that was stopped before its commit; the sweep runs it again",
                f.hypothesis,
                if undone.is_empty() { "nothing was left".to_string() } else { undone.join(", ") }
            ));
        } else {
            let c = repo.repo.find_commit(head)?;
            let ours = c.parent_id(0).ok() == Some(incumbent) && c.message().map(str::trim) == Some(f.message.as_str());
            if !ours {
                return Err(Error::repo(format!(
                    "a stopped sweep was running {} on {}, but HEAD has moved to {} since",
                    f.hypothesis,
                    short(&f.incumbent),
                    short(&head.to_string())
                ))
                .hint(format!("check `git log`; then delete {} to start afresh", crate::journal::SWEEP.path(&state_dir).display())));
            }
            let id = crate::journal::allocate_id(repo, store)?;
            let name = repo.mark_discarded(&format!("{id}-stopped"), head)?;
            // An edit found now may have been made after the stop: it stays in the work tree.
            let later = repo.revert_keeping_edits(incumbent, head)?;
            let kept = if later.is_empty() {
                String::new()
            } else {
                format!(" ({} changed since its commit and stayed in the work tree, uncommitted)", later.join(", "))
            };
            said = Some(format!("a sweep was stopped while running {}; parked it at {name} and will run it again{kept}", f.hypothesis));
        }
    }
    SweepState::default().save(&state_dir)?;
    Ok(said)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::{sweep_eta, Record};

    #[test]
    fn the_wall_budget_starts_nothing_its_progress_line_says_does_not_fit() {
        // A measured experiment of 10 runs in 100 s, and one that ended before any run (an
        // error): the pace is 100 s a hypothesis, whatever the short row's wall.
        let measured = ResultRow { runs: 10, wall_s: 100.0, ..ResultRow::unmeasured(1, Status::Keep, "a", String::new(), String::new()) };
        let early = ResultRow { runs: 0, wall_s: 0.1, ..ResultRow::unmeasured(2, Status::Error, "b", String::new(), String::new()) };
        let rows = [measured, early];
        let opts = SweepOptions { max_wall: Some(Duration::from_secs(300)), ..Default::default() };
        let none = Record { decisions: 0, runs_per_decision: None, secs_per_run: None };
        for elapsed in [100.0, 150.0, 199.0, 201.0, 240.0, 290.0] {
            let eta = sweep_eta(2, 5, 3, elapsed, &rows, &none, Some(300.0));
            let pace = eta.runs_per_hypothesis.zip(eta.secs_per_run).map(|(r, s)| r * s);
            let refused = over_budget(&opts, Duration::from_secs_f64(elapsed), 10, 40, pace).is_some();
            // The line's "time for N more" and the budget agree: none fits exactly when refused.
            assert_eq!(eta.wall_fits == Some(0), refused, "at {elapsed} s: {eta:?}");
        }
    }
}
