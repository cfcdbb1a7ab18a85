//! `ratchet status`: the incumbent, whether a ratchet is running, an unfinished experiment or
//! sweep hypothesis (recovered when no ratchet holds the lock), and the last result.

use crate::error::Result;
use crate::store::Store;
use crate::vcs::{self, Repo};
use std::path::Path;

/// The state of ratchet in this repo. Takes the lock when it is free, and then finishes or
/// rolls back an experiment a dead ratchet left unfinished.
pub fn run(dir: &Path) -> Result<()> {
    let repo = Repo::discover(dir)?;
    let state_dir = repo.state_dir();
    let store = Store::new(&repo.root().join(vcs::RESULTS_DIR));
    let args: Vec<String> = std::env::args().collect();
    match crate::lock::RepoLock::for_repo(&repo, &args.join(" ")) {
        Ok(_lock) => {
            println!("no ratchet is running here");
            match crate::journal::recover(&repo, &store)? {
                Some(what) => println!("recovered: {what}"),
                None => println!("no unfinished experiment"),
            }
            // A sweep killed before its commit: its edit is undone here, not left for the next
            // experiment to commit under another message.
            if let Some(what) = crate::sweep::undo_stopped_sweep(&repo, &store)? {
                println!("recovered: {what}");
            }
        }
        Err(e) if e.kind == crate::error::Kind::Locked => {
            println!("{}", e.message);
            if let Some(j) = crate::journal::load(&state_dir) {
                println!("  experiment {} ({:?}): {}", j.id, j.phase, j.message);
            }
            if let Some(h) = crate::sweep::in_flight(&state_dir) {
                println!("  sweep hypothesis in flight: {h}");
            }
        }
        Err(e) => return Err(e),
    }
    let head = repo.repo.head().ok();
    let branch = head.as_ref().and_then(|h| h.shorthand().map(str::to_string)).unwrap_or_else(|| "HEAD".into());
    let state = crate::store::State::load(&state_dir);
    match state.incumbents.get(&branch) {
        Some(inc) => println!("incumbent on {branch}: {}", &inc[..inc.len().min(12)]),
        None => println!("incumbent on {branch}: HEAD (no experiment yet)"),
    }
    if let Ok(cfg) = crate::config::Config::load(&crate::config::path_in(repo.root())) {
        let key = crate::experiment::history_key(&cfg);
        println!("{}", crate::stats::history::describe(&crate::stats::history::load(&state_dir, &key)));
    }
    let rows = store.rows()?;
    match rows.last() {
        Some(r) => println!("last experiment: {} {} ({}): {}", r.id, r.status.as_str(), r.time, r.message),
        None => println!("no experiments yet"),
    }
    if !rows.is_empty() {
        let kept = rows.iter().filter(|r| r.status == crate::store::Status::Keep).count();
        println!("{} experiments, {} kept", rows.len(), kept);
    }
    println!("{}", crate::commands::gc::disk_line(&repo, &rows));
    Ok(())
}
