//! `ratchet pythonpath`: write the `ratchet_bench` helper where benchmark runs find it and print
//! that directory, so prepare.py runs by hand the same way:
//! `PYTHONPATH=$(ratchet pythonpath) python3 prepare.py`.

use crate::error::Result;
use crate::vcs::Repo;
use std::path::Path;

pub fn run(dir: &Path) -> Result<()> {
    let repo = Repo::discover(dir)?;
    repo.ensure_excludes()?;
    let python_dir = crate::pyhelper::install(&repo.state_dir())?;
    println!("{}", python_dir.display());
    Ok(())
}
