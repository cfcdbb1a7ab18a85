//! One repository as ratchet works on it, discovered once: the git repo, its state directory,
//! the results store and the config's path. [`Workspace::lock`] turns it into the [`Locked`]
//! handle that every operation changing the branch or the results (experiment, sweep,
//! calibrate) takes, so none can run without the repository's lock.

use crate::config::{self, Config};
use crate::error::Result;
use crate::events::{Event, Events};
use crate::lock::RepoLock;
use crate::store::Store;
use crate::vcs::{self, Repo};
use std::path::{Path, PathBuf};

/// A discovered repository (not locked: fine for reading).
pub struct Workspace {
    pub repo: Repo,
    /// `.ratchet/` of this worktree.
    pub state_dir: PathBuf,
    /// `results/`.
    pub store: Store,
}

impl Workspace {
    /// The repository containing `dir`.
    pub fn discover(dir: &Path) -> Result<Workspace> {
        let repo = Repo::discover(dir)?;
        let state_dir = repo.state_dir();
        let store = Store::new(&repo.root().join(vcs::RESULTS_DIR));
        Ok(Workspace { repo, state_dir, store })
    }

    pub fn root(&self) -> &Path {
        self.repo.root()
    }

    pub fn config_path(&self) -> PathBuf {
        config::path_in(self.root())
    }

    /// `ratchet.toml`, validated.
    pub fn config(&self) -> Result<Config> {
        Config::load(&self.config_path())
    }

    /// Take the repository's lock (all its worktrees) for `command`; a lock left by a dead
    /// process is cleared, with a note.
    pub fn lock(self, command: &str, events: &mut dyn Events) -> Result<Locked> {
        let lock = RepoLock::for_repo(&self.repo, command)?;
        if let Some(h) = lock.stale() {
            events.emit(Event::Note { text: h.stale_note() });
        }
        Ok(Locked { ws: self, _lock: lock, recovered: std::cell::Cell::new(false) })
    }
}

/// A workspace whose lock this process holds, until dropped.
pub struct Locked {
    ws: Workspace,
    _lock: RepoLock,
    /// Whether `sweep::recover` has run under this lock: what a stopped ratchet left (an
    /// unfinished experiment, a sweep's edit) must be settled before anything is measured.
    recovered: std::cell::Cell<bool>,
}

impl Locked {
    /// Record that the recoveries ran (called by `sweep::recover`).
    pub fn mark_recovered(&self) {
        self.recovered.set(true);
    }

    /// `Err` unless the recoveries ran under this lock: measuring on top of a stopped sweep's
    /// edit would commit it under another message, or calibrate a hypothesis as the incumbent.
    pub fn require_recovered(&self, what: &str) -> Result<()> {
        if self.recovered.get() {
            return Ok(());
        }
        Err(crate::error::Error::failure(format!("{what} was called before the workspace's recoveries ran"))
            .hint("call ratchet::sweep::recover(&locked, &mut effects) after taking the lock, as the command line does"))
    }
}

impl std::ops::Deref for Locked {
    type Target = Workspace;
    fn deref(&self) -> &Workspace {
        &self.ws
    }
}

/// The command line as the lock records it (who holds the lock).
pub fn command_line() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}
