//! The subcommands other than the experiment itself: `init` and `results`.

use crate::cli::{InitArgs, ResultsArgs};
use crate::config;
use crate::error::{Error, Result};
use crate::report;
use crate::store::Store;
use crate::vcs::{self, Repo};
use std::io::IsTerminal;
use std::path::Path;

pub fn init(dir: &Path, args: &InitArgs) -> Result<()> {
    let root = match Repo::discover(dir) {
        Ok(r) => r.root().to_path_buf(),
        Err(_) => dir.to_path_buf(),
    };
    let path = config::path_in(&root);
    if path.exists() && !args.force {
        return Err(Error::config(format!("{} already exists", path.display())).hint("pass --force to overwrite it"));
    }
    if crate::hardware::preset(&args.preset).is_none() {
        return Err(Error::usage(format!(
            "unknown hardware preset {:?}; known: {}",
            args.preset,
            crate::hardware::preset_names().join(", ")
        )));
    }
    let has_prepare = root.join("prepare.py").exists();
    let command = match (&args.command, has_prepare) {
        (Some(c), _) => c.clone(),
        (None, true) => "python3 prepare.py".to_string(),
        (None, false) => {
            return Err(Error::usage(format!("no prepare.py in {}, so ratchet cannot guess the benchmark command", root.display()))
                .hint("pass it: ratchet init --command \"python3 bench.py\""))
        }
    };
    let text = config::template(&command, &args.preset);
    crate::store::write_atomic(&path, text.as_bytes())?;
    println!("wrote {} (benchmark: {command}; hardware: {})", path.display(), args.preset);
    if has_prepare {
        println!("found prepare.py: it should follow the benchmark protocol (docs/protocol.md), or print RESULT: lines");
    }
    Ok(())
}

/// The state of ratchet in this repo. Takes the lock when it is free, and then finishes or
/// rolls back an experiment a dead ratchet left unfinished.
pub fn status(dir: &Path) -> Result<()> {
    let repo = Repo::discover(dir)?;
    let state_dir = repo.state_dir();
    let store = Store::new(&repo.root().join(vcs::RESULTS_DIR));
    let args: Vec<String> = std::env::args().collect();
    match crate::lock::RepoLock::acquire(&state_dir, &args.join(" ")) {
        Ok(_lock) => {
            println!("no ratchet is running here");
            match crate::journal::recover(&repo, &store)? {
                Some(what) => println!("recovered: {what}"),
                None => println!("no unfinished experiment"),
            }
        }
        Err(e) if e.kind == crate::error::Kind::Locked => {
            println!("{}", e.message);
            if let Some(j) = crate::journal::load(&state_dir) {
                println!("  experiment {} ({:?}): {}", j.id, j.phase, j.message);
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
    let rows = store.rows()?;
    match rows.last() {
        Some(r) => println!("last experiment: {} {} ({}): {}", r.id, r.status.as_str(), r.time, r.message),
        None => println!("no experiments yet"),
    }
    if !rows.is_empty() {
        let kept = rows.iter().filter(|r| r.status == crate::store::Status::Keep).count();
        println!("{} experiments, {} kept", rows.len(), kept);
    }
    Ok(())
}

pub fn results(dir: &Path, args: &ResultsArgs) -> Result<()> {
    let repo = Repo::discover(dir)?;
    let store = Store::new(&repo.root().join(vcs::RESULTS_DIR));
    let rows = store.rows()?;
    let color = std::io::stdout().is_terminal();
    println!("{}", report::render(&rows, args.format, color).trim_end());
    Ok(())
}
