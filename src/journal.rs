//! Crash journals, in one place: ratchet writes its intent to a JSON file under `.ratchet/`
//! before each step that changes git or the results, and a ratchet that starts under the lock and
//! finds one finishes or rolls back what it describes. Three files, one format (pretty JSON,
//! written atomically, fields added since read with their defaults, a missing file = nothing left):
//! - `journal.json`, one experiment ([`EXPERIMENT`]; [`recover`] below replays it),
//! - `sweep.json`, a sequential sweep's hypothesis in flight ([`SWEEP`]; `sweep::undo_stopped_sweep`),
//! - `scale.json`, a parallel sweep's trials and the row being recorded ([`SCALE`]; `scale::journal`).
//!
//! `sweep::recover` replays the first two in that order; the parallel sweep's own recovery, the third.
//! So a kill at any point leaves a consistent incumbent, the hypothesis preserved, and no torn or
//! duplicate results row.

use crate::error::WithPath;
use crate::error::{Error, Result};
use crate::store::{ResultRow, State, Status, Store};
use crate::vcs::short;
use crate::vcs::{self, Repo};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One crash journal: its file under the state directory and what to tell a user who finds it
/// unreadable.
#[derive(Debug, Clone, Copy)]
pub struct Journal {
    pub file: &'static str,
    /// The hint beside "is unreadable" (the file is ratchet's own: when deleting it is safe).
    pub unreadable_hint: &'static str,
}

/// An experiment's steps ([`Entry`]).
pub const EXPERIMENT: Journal = Journal {
    file: "journal.json",
    unreadable_hint: "it is ratchet's own; check `git log` and `git status`, then delete it to start afresh",
};
/// A sequential sweep's hypothesis in flight (`sweep`'s state).
pub const SWEEP: Journal = Journal { file: "sweep.json", unreadable_hint: "it is ratchet's own; delete it if the tree is clean" };
/// A parallel sweep's trials and recording (`scale::journal`).
pub const SCALE: Journal =
    Journal { file: "scale.json", unreadable_hint: "it is ratchet's own; delete it to start the parallel sweep afresh" };

impl Journal {
    pub fn path(&self, state_dir: &Path) -> PathBuf {
        state_dir.join(self.file)
    }

    pub fn exists(&self, state_dir: &Path) -> bool {
        self.path(state_dir).exists()
    }

    /// What the journal holds: `None` when there is no file; an error naming the file (and how
    /// to get past it) when it cannot be read or parsed.
    pub fn read<T: DeserializeOwned>(&self, state_dir: &Path) -> Result<Option<T>> {
        let p = self.path(state_dir);
        match std::fs::read_to_string(&p) {
            Ok(t) => serde_json::from_str(&t)
                .map(Some)
                .map_err(|e| Error::failure(format!("{} is unreadable: {e}", p.display())).hint(self.unreadable_hint)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_path(&p),
        }
    }

    /// [`Journal::read`], with an absent journal read as the empty one.
    pub fn read_or_default<T: DeserializeOwned + Default>(&self, state_dir: &Path) -> Result<T> {
        Ok(self.read(state_dir)?.unwrap_or_default())
    }

    /// Record `value` atomically (a reader sees the old intent or the new one, never half), making
    /// the state directory if need be.
    pub fn write<T: Serialize>(&self, state_dir: &Path, value: &T) -> Result<()> {
        crate::fsutil::write_atomic(&self.path(state_dir), &Self::encode(value))
    }

    fn encode<T: Serialize>(value: &T) -> Vec<u8> {
        serde_json::to_vec_pretty(value).expect("a journal serializes")
    }

    /// [`Journal::write`] without fsyncs ([`crate::fsutil::write_atomic_lazy`]): for a state
    /// whose loss to a power cut only makes recovery redo an idempotent step.
    pub fn write_lazy<T: Serialize>(&self, state_dir: &Path, value: &T) -> Result<()> {
        crate::fsutil::write_atomic_lazy(&self.path(state_dir), &Self::encode(value))
    }

    /// Remove the journal: what it described is finished (no file is no error).
    pub fn clear(&self, state_dir: &Path) -> Result<()> {
        match std::fs::remove_file(self.path(state_dir)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e).with_path(self.path(state_dir)),
        }
    }
}

/// How far the experiment got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// About to commit the hypothesis.
    Committing,
    /// The hypothesis is committed; benchmarks are running.
    Measuring,
    /// The decision is made (the row is in the journal); keep/revert and the row may be pending.
    Decided,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    pub id: u64,
    pub branch: String,
    pub incumbent: String,
    pub message: String,
    pub phase: Phase,
    pub candidate: Option<String>,
    pub row: Option<ResultRow>,
    pub pid: u32,
    pub started: String,
    /// The sweep hypothesis (`<file>@<hash>`) and tags, for the row a recovery records.
    #[serde(default)]
    pub hypothesis: String,
    #[serde(default)]
    pub tags: String,
}

pub fn path(state_dir: &Path) -> PathBuf {
    EXPERIMENT.path(state_dir)
}

/// Moved to `crate::layout`.
pub use crate::layout::pgid_path;

/// The experiment in flight, if any. An unreadable journal reads as none (it is written
/// atomically, so only a hand edit makes one), as it always has.
pub fn load(state_dir: &Path) -> Option<Entry> {
    EXPERIMENT.read(state_dir).ok().flatten()
}

/// Record `entry` (atomically: a reader sees the old intent or the new one).
pub fn write(state_dir: &Path, entry: &Entry) -> Result<()> {
    EXPERIMENT.write(state_dir, entry)
}

pub fn clear(state_dir: &Path) -> Result<()> {
    EXPERIMENT.clear(state_dir)
}

/// The next experiment id, reserved for good: one more than any id this repository has used, in
/// any of its worktrees, whether it is in results.csv, a parked ref or only the counter kept in
/// the common git dir (`.git/ratchet/last-id`). Moving results.csv aside (or deleting the counter)
/// therefore never reuses an id nor lets a parked hypothesis be overwritten. Call with the lock.
pub fn allocate_id(repo: &Repo, store: &Store) -> Result<u64> {
    let counter = repo.common_state_dir().join("last-id");
    let last = std::fs::read_to_string(&counter).ok().and_then(|t| t.trim().parse::<u64>().ok()).unwrap_or(0);
    // The table and the parked refs are read once per process and counter: ids above the
    // counter can appear in them only while it is missing or moved back, and every id this
    // process hands out after that first look is written to the counter first. (A parallel
    // sweep allocates one per trial; reading 10,000 rows and refs each time grew with the history.)
    let seen = CHECKED.lock().ok().and_then(|m| m.get(&counter).copied());
    let guard = match seen {
        Some(s) if last >= s => 0,
        _ => {
            // Ids only grow down the table (`Store::has_row`): its last row has the largest.
            let rows = store.last_row_id()?.unwrap_or(0);
            let parked = repo
                .repo
                .references_glob(&format!("{}*", vcs::DISCARDED_PREFIX))?
                .flatten()
                .filter_map(|r| {
                    let name = r.name()?.strip_prefix(vcs::DISCARDED_PREFIX)?.to_string();
                    let digits: String = name.chars().take_while(char::is_ascii_digit).collect();
                    digits.parse::<u64>().ok()
                })
                .max()
                .unwrap_or(0);
            rows.max(parked)
        }
    };
    let id = last.max(guard) + 1;
    // Unsynced: after a power cut the first look above finds every id a synced row or ref took.
    crate::fsutil::write_atomic_lazy(&counter, id.to_string().as_bytes())?;
    if let Ok(mut m) = CHECKED.lock() {
        m.insert(counter, id);
    }
    Ok(id)
}

/// Per id counter: the last id this process wrote to it after reading the table and refs.
static CHECKED: std::sync::Mutex<std::collections::BTreeMap<std::path::PathBuf, u64>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// Hand back the id [`allocate_id`] just reserved, for an experiment that is given back whole
/// (nothing recorded, nothing parked): the next experiment takes the same id. Only the newest id
/// is handed back, so an id that anything may name is never reused. Call with the lock.
pub fn release_id(repo: &Repo, id: u64) -> Result<()> {
    let counter = repo.common_state_dir().join("last-id");
    let last = std::fs::read_to_string(&counter).ok().and_then(|t| t.trim().parse::<u64>().ok());
    if last == Some(id) {
        crate::fsutil::write_atomic(&counter, (id - 1).to_string().as_bytes())?;
        if let Ok(mut m) = CHECKED.lock() {
            // Nothing took the id: the counter one below it is as good as the table and refs.
            m.insert(counter, id - 1);
        }
    }
    Ok(())
}

/// Kill a benchmark process group left behind by a ratchet that died mid-run.
pub fn kill_orphaned_benchmark(state_dir: &Path) -> Option<i32> {
    crate::bench::executor::kill_recorded_run(&pgid_path(state_dir))
}

/// What recovery says of a benchmark run it stopped: its process group where it had one of its
/// own still standing (0 means the group was gone and only its supervisor or stray processes
/// were stopped, found by their run token).
fn orphan_note(pgid: i32) -> String {
    if pgid > 0 {
        format!("killed the benchmark process group {pgid} it left running")
    } else {
        "stopped the benchmark run it left running (its processes, found by their run token)".to_string()
    }
}

/// Finish or roll back an experiment a dead ratchet left unfinished. Returns what was done, for
/// the user, or `None` when there was nothing to recover.
pub fn recover(repo: &Repo, store: &Store) -> Result<Option<String>> {
    let state_dir = repo.state_dir();
    repo.clean_leftovers();
    crate::cleanup::remove_stale_temp_files(&[&state_dir, &repo.root().join(vcs::RESULTS_DIR)]);
    crate::cleanup::remove_stale_checkouts(&state_dir);
    let mut said = vec![];
    if let Some(pgid) = kill_orphaned_benchmark(&state_dir) {
        said.push(orphan_note(pgid));
    }
    let Some(entry) = load(&state_dir) else {
        return Ok((!said.is_empty()).then(|| said.join("; ")));
    };
    // The caller holds the repo lock, so the ratchet that wrote this journal is gone.
    let incumbent = git2::Oid::from_str(&entry.incumbent)?;
    let head = repo.head_oid()?;
    let id = entry.id;
    // Did the commit happen? (killed between writing `Committing` and committing)
    let candidate = match entry.candidate.as_deref().map(git2::Oid::from_str).transpose()? {
        Some(c) => Some(c),
        None => {
            let c = repo.repo.find_commit(head)?;
            let is_ours = head != incumbent && c.message() == Some(entry.message.as_str()) && c.parent_id(0).ok() == Some(incumbent);
            is_ours.then_some(head)
        }
    };
    let Some(candidate) = candidate else {
        clear(&state_dir)?;
        said.push(format!("experiment {id} stopped before committing; its change is still in the working tree"));
        return Ok(Some(said.join("; ")));
    };
    let already_recorded = store.has_row(id)?;
    let mut row = match (&entry.phase, &entry.row) {
        (Phase::Decided, Some(row)) => row.clone(),
        _ => {
            let runs = store.runs()?.iter().filter(|r| r.experiment == id.to_string()).count() as u32;
            ResultRow { runs, ..interrupted_row(&entry, candidate) }
        }
    };
    let mut state = State::load(&state_dir);
    if row.status == Status::Keep {
        state.incumbents.insert(entry.branch.clone(), candidate.to_string());
        state.save(&state_dir)?;
        said.push(format!("experiment {id} had been decided keep; {} stays the incumbent", short(&candidate.to_string())));
    } else {
        let reference = vcs::discarded_ref(&id.to_string());
        let parked = repo.repo.find_reference(&reference).ok().and_then(|r| r.target());
        if head == candidate {
            // Parked already: the revert was under way when ratchet died, so the work tree may be
            // half reverted; the parked ref holds the hypothesis (and edits made meanwhile), and
            // a new snapshot would park the inverse. Finish the revert from it. Not parked: the
            // hypothesis commit alone is parked. Either way an uncommitted edit found now may
            // have been made after the crash, so none is taken out of the work tree.
            let tip = match parked {
                Some(tip) => tip,
                None => {
                    repo.mark_discarded(&id.to_string(), candidate)?;
                    candidate
                }
            };
            let later = repo.revert_keeping_edits(incumbent, tip)?;
            said.push(format!(
                "experiment {id} ({}) rolled back to the incumbent {}; the hypothesis is kept at {reference}",
                row.status.as_str(),
                short(&incumbent.to_string())
            ));
            if !later.is_empty() {
                said.push(format!(
                    "{} changed after experiment {id}'s commit (edited since, by you or by its benchmark): left in the work \
                     tree as found, uncommitted; the hypothesis alone is at {reference}, and git diff shows what differs from \
                     the incumbent",
                    later.join(", ")
                ));
            }
        } else {
            // Already reset (killed after the reset) or HEAD moved: only make sure the hypothesis is kept.
            if parked.is_none() {
                repo.mark_discarded(&id.to_string(), candidate)?;
            }
            said.push(format!("experiment {id} ({}) was already rolled back; the hypothesis is at {reference}", row.status.as_str()));
        }
        state.incumbents.insert(entry.branch.clone(), incumbent.to_string());
        state.save(&state_dir)?;
    }
    if !already_recorded {
        if row.status == Status::Interrupted {
            row.note = "ratchet stopped mid-experiment; rolled back when it next started".into();
        }
        store.append_row(&row)?;
    }
    clear(&state_dir)?;
    Ok(Some(said.join("; ")))
}

fn interrupted_row(entry: &Entry, candidate: git2::Oid) -> ResultRow {
    ResultRow {
        hypothesis: entry.hypothesis.clone(),
        tags: entry.tags.clone(),
        ..ResultRow::unmeasured(entry.id, Status::Interrupted, &entry.message, candidate.to_string(), entry.incumbent.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_run_without_a_group_of_its_own_names_no_process_group() {
        assert_eq!(orphan_note(4242), "killed the benchmark process group 4242 it left running");
        assert!(!orphan_note(0).contains("group 0") && orphan_note(0).contains("stopped the benchmark run"), "{}", orphan_note(0));
    }

    /// Each journal as the oldest ratchet that wrote it left it (fields added since missing):
    /// a ratchet started after an upgrade still reads and replays it.
    #[test]
    fn journals_written_by_older_ratchets_are_read() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        std::fs::write(
            dir.join("journal.json"),
            r#"{"id": 7, "branch": "main", "incumbent": "1111111111111111111111111111111111111111",
                "message": "experiment: bigger blocks", "phase": "measuring",
                "candidate": "2222222222222222222222222222222222222222", "row": null, "pid": 4242,
                "started": "2026-11-01T10:00:00Z"}"#,
        )
        .unwrap();
        let e = load(dir).expect("the experiment journal reads");
        assert_eq!((e.id, e.phase, e.hypothesis.as_str(), e.pid), (7, Phase::Measuring, "", 4242));

        std::fs::write(
            dir.join("sweep.json"),
            r#"{"in_flight": {"hypothesis": "01-bigger.toml@abc123", "message": "experiment: bigger",
                "branch": "main", "incumbent": "1111111111111111111111111111111111111111", "id": 3,
                "files": ["kernel.py"]}}"#,
        )
        .unwrap();
        let sweep = crate::sweep::in_flight(dir).expect("the sweep journal reads");
        assert!(sweep.starts_with("01-bigger.toml@abc123 (\"experiment: bigger\", on main at 1111111"), "{sweep}");

        std::fs::write(
            dir.join("scale.json"),
            r#"{"next_trial": 2, "trials": [{"spec": {"id": "5", "repo": "/r",
                "incumbent": "1111111111111111111111111111111111111111",
                "candidate": "3333333333333333333333333333333333333333", "out_dir": "/r/.ratchet/trials/5"},
                "handle": {"trial": "5", "engine_id": "999", "slot": 0}, "hypothesis": "02-kv.toml@def456",
                "first": null}], "recording": null}"#,
        )
        .unwrap();
        assert_eq!(crate::scale::controller::journaled_trials(dir), vec!["5".to_string()]);
        assert!(crate::scale::controller::in_flight(dir).is_some_and(|s| s.starts_with("1 unfinished trial(s)")));
    }

    #[test]
    fn a_journal_round_trips_and_clears() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("state");
        assert!(SWEEP.read::<serde_json::Value>(&dir).unwrap().is_none(), "no file: nothing left");
        SWEEP.write(&dir, &serde_json::json!({"in_flight": null})).unwrap();
        assert_eq!(SWEEP.read_or_default::<serde_json::Value>(&dir).unwrap(), serde_json::json!({"in_flight": null}));
        SWEEP.clear(&dir).unwrap();
        SWEEP.clear(&dir).unwrap();
        assert!(!SWEEP.exists(&dir));
        std::fs::write(SCALE.path(&dir), "{ torn").unwrap();
        let e = SCALE.read::<serde_json::Value>(&dir).unwrap_err();
        assert!(e.message.contains("scale.json is unreadable"), "{}", e.message);
    }
}
