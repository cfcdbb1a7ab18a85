//! `ratchet recover`: finish or roll back what a dead ratchet left (an unfinished experiment, a
//! sweep's edit in flight, an orphaned benchmark). `plan` says the same without doing it, for
//! `ratchet status`, which only reports; the next experiment or sweep recovers by itself too.

use crate::error::Result;
use crate::journal::{self, Phase};
use crate::store::{Status, Store};
use crate::vcs::{self, short, Repo};
use crate::workspace::Locked;

/// What recovery will do here, one sentence per step, without changing anything. Call with the
/// lock held (otherwise the journal may belong to a running ratchet).
pub fn plan(repo: &Repo, store: &Store) -> Vec<String> {
    let state_dir = repo.state_dir();
    let mut steps = vec![];
    if journal::pgid_path(&state_dir).exists() {
        steps.push("kill the benchmark process group a dead ratchet recorded in .ratchet/run.pgid, if it still runs".to_string());
    }
    if let Some(e) = journal::load(&state_dir) {
        steps.push(plan_experiment(repo, store, &e));
    }
    let gate = super::gate::leftovers(&repo.repo, &crate::layout::gate_dir(&repo.state_dir()));
    if !gate.is_empty() {
        steps.push(format!("remove the throw-away checkouts a stopped `ratchet gate` left ({})", gate.join(", ")));
    }
    if let Some(h) = crate::sweep::in_flight(&state_dir) {
        steps.push(format!(
            "take back the sweep hypothesis in flight {h}: undo its uncommitted edit, or park and revert its commit; the sweep runs it again"
        ));
    }
    steps.extend(crate::scale::controller::plan_stray_trial_refs(repo));
    if let Some(p) = crate::scale::controller::in_flight(&state_dir) {
        steps.push(format!(
            "settle the {p}: finish a recording under way, cancel unfinished trials through their engine and stop leftover workers; finished trials are kept for the next parallel sweep"
        ));
    }
    steps
}

fn plan_experiment(repo: &Repo, store: &Store, e: &journal::Entry) -> String {
    let id = e.id;
    let head = repo.head_oid().ok().map(|h| h.to_string());
    let committed = e.candidate.is_some() || head.as_deref().is_some_and(|h| h != e.incumbent);
    if !committed {
        return format!(
            "experiment {id} ({:?}) stopped before committing: clear its journal; its change stays in the working tree",
            e.message
        );
    }
    let recorded = store.has_row(id).unwrap_or(false);
    let status = match (e.phase, &e.row) {
        (Phase::Decided, Some(row)) => row.status,
        _ => Status::Interrupted,
    };
    let record = if recorded { String::new() } else { format!(", and record it as {}", status.as_str()) };
    if status == Status::Keep {
        format!("experiment {id} ({:?}) was decided keep: its commit stays the incumbent{record}", e.message)
    } else {
        format!(
            "experiment {id} ({:?}, {}): roll the branch back to the incumbent {}, keep the hypothesis at {}{record}; \
             files changed since its commit stay in the work tree",
            e.message,
            status.as_str(),
            short(&e.incumbent),
            vcs::discarded_ref(&id.to_string())
        )
    }
}

/// Recover, holding the lock; returns what was done (empty: there was nothing to recover).
pub fn recover(repo: &Repo, store: &Store) -> Result<Vec<String>> {
    let mut done = vec![];
    if let Some(what) = journal::recover(repo, store)? {
        done.push(what);
    }
    // A sweep killed before its commit: its edit is undone here, not left for the next
    // experiment to commit under another message.
    if let Some(what) = crate::sweep::undo_stopped_sweep(repo, store)? {
        done.push(what);
    }
    done.extend(super::gate::remove_leftovers(repo));
    // A parallel sweep's workers, recording and unfinished trials.
    done.extend(crate::scale::controller::recover_steps(repo, store)?);
    Ok(done)
}

/// `ratchet recover`.
/// `ratchet recover`, in the locked workspace.
pub fn run(ws: &Locked) -> Result<()> {
    let done = recover(&ws.repo, &ws.store)?;
    if done.is_empty() {
        println!("nothing to recover");
    }
    for what in done {
        println!("recovered: {}", crate::printable::block(&what));
    }
    Ok(())
}
