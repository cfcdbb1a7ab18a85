//! Crash safety: before each step of an experiment that changes git or the results, ratchet
//! writes its intent to `.ratchet/journal.json`. A ratchet that starts and finds a journal
//! finishes or rolls back that experiment (saying what it did), so a kill at any point leaves a
//! consistent incumbent, the hypothesis preserved, and no torn or duplicate results row.

use crate::error::Result;
use crate::error::WithPath;
use crate::store::{ResultRow, State, Status, Store};
use crate::vcs::short;
use crate::vcs::{self, Repo};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

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
    state_dir.join("journal.json")
}

/// Moved to `crate::layout`.
pub use crate::layout::pgid_path;

pub fn load(state_dir: &Path) -> Option<Entry> {
    let text = std::fs::read_to_string(path(state_dir)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Record `entry` (atomically: a reader sees the old intent or the new one).
pub fn write(state_dir: &Path, entry: &Entry) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(entry).expect("journal serializes");
    crate::fsutil::write_atomic(&path(state_dir), &bytes)
}

pub fn clear(state_dir: &Path) -> Result<()> {
    match std::fs::remove_file(path(state_dir)) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The next experiment id, reserved for good: one more than any id this repository has used, in
/// any of its worktrees, whether it is in results.csv, a parked ref or only the counter kept in
/// the common git dir (`.git/ratchet/last-id`). Moving results.csv aside (or deleting the counter)
/// therefore never reuses an id nor lets a parked hypothesis be overwritten. Call with the lock.
pub fn allocate_id(repo: &Repo, store: &Store) -> Result<u64> {
    let counter = repo.common_state_dir().join("last-id");
    let last = std::fs::read_to_string(&counter).ok().and_then(|t| t.trim().parse::<u64>().ok()).unwrap_or(0);
    let rows = store.rows()?.iter().map(|r| r.id).max().unwrap_or(0);
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
    let id = last.max(rows).max(parked) + 1;
    std::fs::create_dir_all(repo.common_state_dir()).with_path(repo.common_state_dir())?;
    crate::fsutil::write_atomic(&counter, id.to_string().as_bytes())?;
    Ok(id)
}

/// Hand back the id [`allocate_id`] just reserved, for an experiment that is given back whole
/// (nothing recorded, nothing parked): the next experiment takes the same id. Only the newest id
/// is handed back, so an id that anything may name is never reused. Call with the lock.
pub fn release_id(repo: &Repo, id: u64) -> Result<()> {
    let counter = repo.common_state_dir().join("last-id");
    let last = std::fs::read_to_string(&counter).ok().and_then(|t| t.trim().parse::<u64>().ok());
    if last == Some(id) {
        crate::fsutil::write_atomic(&counter, (id - 1).to_string().as_bytes())?;
    }
    Ok(())
}

/// Kill a benchmark process group left behind by a ratchet that died mid-run.
pub fn kill_orphaned_benchmark(state_dir: &Path) -> Option<i32> {
    crate::bench::executor::kill_recorded_run(&pgid_path(state_dir))
}

/// Finish or roll back an experiment a dead ratchet left unfinished. Returns what was done, for
/// the user, or `None` when there was nothing to recover.
pub fn recover(repo: &Repo, store: &Store) -> Result<Option<String>> {
    let state_dir = repo.state_dir();
    repo.clean_leftovers();
    crate::cleanup::remove_stale_temp_files(&[&state_dir, &repo.root().join(vcs::RESULTS_DIR)]);
    let mut said = vec![];
    if let Some(pgid) = kill_orphaned_benchmark(&state_dir) {
        said.push(format!("killed the benchmark process group {pgid} it left running"));
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
    let already_recorded = store.rows()?.iter().any(|r| r.id == id);
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
