//! The Python helper module `ratchet_bench` ships inside the ratchet binary and is written under
//! `.ratchet/python/`, which every benchmark run gets on its PYTHONPATH: a user's prepare.py can
//! `import ratchet_bench` with nothing to install.

use crate::error::Result;
use std::path::{Path, PathBuf};

/// The module's source, as built into this binary.
pub const SOURCE: &str = include_str!("../python/ratchet_bench.py");
pub const FILE_NAME: &str = "ratchet_bench.py";

/// Write the helper module (when its content changed) and return the directory holding it.
pub fn install(state_dir: &Path) -> Result<PathBuf> {
    let dir = state_dir.join("python");
    let path = dir.join(FILE_NAME);
    if std::fs::read_to_string(&path).ok().as_deref() != Some(SOURCE) {
        crate::fsutil::write_atomic(&path, SOURCE.as_bytes())?;
    }
    // The parent forked runs start from (crate::bench::preload).
    crate::bench::preload::install(&dir)?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    #[test]
    fn install_writes_the_module_once() {
        let d = tempfile::tempdir().unwrap();
        let dir = super::install(d.path()).unwrap();
        let path = dir.join(super::FILE_NAME);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), super::SOURCE);
        assert!(super::SOURCE.contains("def run("));
        super::install(d.path()).unwrap();
    }
}
