//! Where ratchet's own files are, for the paths that several layers share (ground floor: it
//! imports nothing of ratchet's).

use std::path::{Path, PathBuf};

/// Where the executor records the running benchmark's process group, for recovery to kill.
pub fn pgid_path(state_dir: &Path) -> PathBuf {
    state_dir.join("run.pgid")
}

/// Every experiment's own directory (its runs, logs and looks) lives under this one.
pub fn experiments_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("experiments")
}

/// Experiment `id`'s directory: written by the loop, read by `plot`, pruned by `gc`.
pub fn experiment_dir(state_dir: &Path, id: &str) -> PathBuf {
    experiments_dir(state_dir).join(id)
}

/// A parallel sweep's trial directories live under this one (the controller writes, `gc` prunes).
pub fn trials_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("trials")
}

/// `ratchet gate`'s throw-away checkouts (`base`, `head`), which `status` and `recover` also find.
pub fn gate_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("gate")
}
