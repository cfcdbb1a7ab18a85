//! Where ratchet's own files are, for the paths that several layers share (ground floor: it
//! imports nothing of ratchet's).

use std::path::{Path, PathBuf};

/// Where the executor records the running benchmark's process group, for recovery to kill.
pub fn pgid_path(state_dir: &Path) -> PathBuf {
    state_dir.join("run.pgid")
}
