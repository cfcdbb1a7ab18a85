//! The parallel sweep's journal (`.ratchet/scale.json`): every trial before it is submitted and
//! its engine handle before it is waited on, and every recording (row, merge, park) before it
//! starts; and the recovery that reads it, so that a controller killed at any point loses no
//! finished trial, merges nothing twice, and leaves no worker or job behind unseen.

use super::engine::{Engine, JobHandle, JobState, TrialSpec};
use super::trial::{TrialEnd, TrialResult};
use crate::config::{self, Config};
use crate::error::{Error, Result};
use crate::events::{Effects, Event};
use crate::store::{ResultRow, State, Store};
use crate::vcs::{short, Repo};
use crate::workspace::Workspace;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub(super) const JOURNAL: &str = crate::journal::SCALE.file;
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
pub(super) struct Tracked {
    pub(super) spec: TrialSpec,
    /// Set once the engine took it: what to poll or cancel.
    pub(super) handle: Option<JobHandle>,
    /// The engine that took it (`Engine::name`): a restarted controller cancels it through the
    /// same kind of engine (a Slurm job's worker may run on another node).
    #[serde(default)]
    pub(super) engine: String,
    pub(super) hypothesis: String,
    /// A stale winner's recheck: the trial it first won.
    pub(super) first: Option<FirstWin>,
    /// The device (or a cluster's kind of device) whose noise history it borrowed, and feeds
    /// ([`super::engine::Engine::next_device`]); absent: the device its result names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) device: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct FirstWin {
    pub(super) trial: String,
    pub(super) incumbent: String,
    /// The candidate it won with (on the old head): parked when its row is recorded.
    #[serde(default)]
    pub(super) candidate: String,
    pub(super) runs: u32,
    pub(super) wall_s: f64,
    pub(super) out_dir: PathBuf,
}

/// A row being recorded: what it changes is redone (idempotently) by a restarted controller.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Recording {
    pub(super) row: ResultRow,
    pub(super) branch: String,
    /// Run directories whose runs go to runs.jsonl under the row's id.
    pub(super) out_dirs: Vec<PathBuf>,
    /// Merge: move the branch from `row.incumbent` to `row.commit`. Otherwise park `row.commit`.
    pub(super) merge: bool,
    /// The trials this row ends (their journal entries and refs go).
    pub(super) trials: Vec<String>,
    /// A stale winner's first candidate (on the head it first won against), parked under
    /// [`STALE_REF_PREFIX`]`<row id>` so its measured commit stays reachable.
    #[serde(default)]
    pub(super) first_candidate: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct Journal {
    #[serde(default)]
    pub(super) next_trial: u64,
    #[serde(default)]
    pub(super) trials: Vec<Tracked>,
    #[serde(default)]
    pub(super) recording: Option<Recording>,
    /// Per hypothesis (its key): why each of its trials was lost (preempted, cancelled, killed)
    /// since it was last recorded; at `[engine] retries` + 1 losses it is recorded as lost.
    #[serde(default)]
    pub(super) lost: std::collections::BTreeMap<String, Vec<String>>,
    /// Trials whose jobs the controller stopped (a lost, stuck or cut trial) and the engine has
    /// not yet seen end: a recovery cancels them again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) stopping: Vec<Tracked>,
}

impl Journal {
    pub(super) fn load(state_dir: &Path) -> Result<Journal> {
        crate::journal::SCALE.read_or_default(state_dir)
    }

    pub(super) fn save(&self, state_dir: &Path) -> Result<()> {
        crate::journal::SCALE.write(state_dir, self)
    }
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
/// to the back of the queue, and a local worker still running would have its runs thrown away.
/// A trial whose handle was never journaled is looked up by its name (a local worker by the
/// `worker.pid` in its run directory).
pub(super) fn recover_with(repo: &Repo, store: &Store, mut engine: Option<&mut dyn Engine>, reattach: bool) -> Result<Vec<String>> {
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
    if let Some(e) = engine.as_deref_mut().filter(|_| reattach) {
        let name = e.name().to_string();
        let mut found = false;
        for t in j.trials.iter_mut().filter(|t| t.engine == name && !finished.contains(&t.spec.id)) {
            if t.handle.is_none() {
                t.handle = e.find(&t.spec)?;
                found |= t.handle.is_some();
            }
            let Some(h) = &t.handle else { continue };
            // A local worker is re-attached only while it still runs (its pid and start time
            // are the journal's): one that died with the controller is forgotten and runs
            // again, as before. A cluster's job is watched to its end either way (a job that
            // ended without a result is a lost trial, started again).
            if name == "local" && !matches!(e.poll(h)?, JobState::Running | JobState::Queued) {
                continue;
            }
            attached.push(t.spec.id.clone());
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
    // Their cancels were asked for again above.
    j.stopping.clear();
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
pub(super) fn has_result(out_dir: &Path) -> bool {
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
        .chain(&j.stopping)
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
    let open = j.trials.iter().filter(|t| !has_result(&t.spec.out_dir)).count() + j.stopping.len();
    let recording = j.recording.as_ref().map(|r| format!(" and the recording of experiment {}", r.row.id));
    (open > 0 || recording.is_some())
        .then(|| format!("{open} unfinished trial(s){} of a parallel sweep journaled in {JOURNAL}", recording.unwrap_or_default()))
}

/// Complete a recording (idempotent: a restarted controller redoes it): merge or park, then the
/// runs and the row, then forget its trials.
pub(super) fn finish_recording(repo: &Repo, store: &Store, j: &mut Journal, rec: &Recording) -> Result<()> {
    let state_dir = repo.state_dir();
    let row = &rec.row;
    let candidate = git2::Oid::from_str(&row.commit)?;
    let incumbent = git2::Oid::from_str(&row.incumbent)?;
    let recorded = store.has_row(row.id)?;
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
            let mut runs = TrialResult::records(d).unwrap_or_default();
            for r in &mut runs {
                r.experiment = id.clone();
                r.trial = trial.clone();
            }
            store.append_runs(&runs)?;
            // Which experiment the trial's run directory belongs to, for `ratchet gc`'s retention.
            // Unsynced: the runs just appended (synced) name the trial too.
            let _ = crate::fsutil::write_atomic_lazy(&d.join(RECORDED_AS), id.as_bytes());
        }
        crate::fault::point("scale-before-append");
        store.append_row(row)?;
    }
    j.trials.retain(|t| !rec.trials.contains(&t.spec.id));
    j.recording = None;
    // Unsynced: should a power cut undo it, recovery redoes this recording, which is idempotent
    // (the row is found recorded, and nothing is appended twice).
    crate::journal::SCALE.write_lazy(&state_dir, &*j)?;
    for t in &rec.trials {
        drop_trial_ref(repo, t);
    }
    Ok(())
}

pub(super) fn drop_trial_ref(repo: &Repo, id: &str) {
    if let Ok(mut r) = repo.repo.find_reference(&format!("{TRIAL_REF_PREFIX}{id}")) {
        let _ = r.delete();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracked(id: &str, out_dir: PathBuf) -> Tracked {
        Tracked {
            spec: TrialSpec { id: id.into(), repo: "/r".into(), incumbent: "a".repeat(40), candidate: "b".repeat(40), out_dir },
            handle: Some(JobHandle { trial: id.into(), engine_id: format!("{id}-job"), slot: Some(1) }),
            engine: "local".into(),
            hypothesis: format!("{id}.toml@x"),
            first: None,
            device: None,
        }
    }

    fn result(end: TrialEnd) -> TrialResult {
        TrialResult { end, ..TrialResult::for_tests() }
    }

    #[test]
    fn a_missing_journal_reads_as_empty_and_a_saved_one_reads_back_whole() {
        let d = tempfile::tempdir().unwrap();
        let j = Journal::load(d.path()).unwrap();
        assert_eq!((j.next_trial, j.trials.len(), j.recording.is_none(), j.lost.len()), (0, 0, true, 0));
        let mut j = Journal { next_trial: 7, ..Default::default() };
        j.trials.push(tracked("t7", d.path().join("t7")));
        j.lost.insert("h.toml@x".into(), vec!["PREEMPTED".into()]);
        j.save(d.path()).unwrap();
        let back = Journal::load(d.path()).unwrap();
        assert_eq!(back.next_trial, 7);
        assert_eq!(back.trials[0].spec.id, "t7");
        assert_eq!(back.trials[0].handle.as_ref().map(|h| h.engine_id.as_str()), Some("t7-job"));
        assert_eq!(back.lost["h.toml@x"], ["PREEMPTED"]);
        assert_eq!(journaled_trials(d.path()), ["t7"]);
    }

    #[test]
    fn an_unreadable_journal_is_an_error_that_says_how_to_start_afresh() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(JOURNAL), "{not json").unwrap();
        let e = Journal::load(d.path()).unwrap_err();
        assert!(e.message.contains("unreadable"), "{}", e.message);
        assert!(e.hint.unwrap_or_default().contains("delete it"));
        // What reads it for `status` and `gc` says nothing rather than fail.
        assert!(journaled_trials(d.path()).is_empty());
        assert_eq!(in_flight(d.path()), None);
    }

    #[test]
    fn only_a_result_a_stopped_worker_did_not_write_counts() {
        let d = tempfile::tempdir().unwrap();
        assert!(!has_result(d.path()), "no trial.json");
        result(TrialEnd::Interrupted).write(d.path()).unwrap();
        assert!(!has_result(d.path()), "an interrupted worker's result");
        result(TrialEnd::Decided).write(d.path()).unwrap();
        assert!(has_result(d.path()));
    }

    #[test]
    fn in_flight_names_the_unfinished_trials_and_a_recording_under_way() {
        let d = tempfile::tempdir().unwrap();
        let (done, open) = (d.path().join("t1"), d.path().join("t2"));
        std::fs::create_dir_all(&done).unwrap();
        result(TrialEnd::Decided).write(&done).unwrap();
        let mut j = Journal { trials: vec![tracked("t1", done)], ..Default::default() };
        j.save(d.path()).unwrap();
        assert_eq!(in_flight(d.path()), None, "a finished trial waiting to be decided is not pending work");
        j.trials.push(tracked("t2", open));
        j.save(d.path()).unwrap();
        assert_eq!(in_flight(d.path()).as_deref(), Some("1 unfinished trial(s) of a parallel sweep journaled in scale.json"));
    }
}
