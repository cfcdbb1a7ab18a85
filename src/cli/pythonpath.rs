//! `ratchet pythonpath`: write the `ratchet_bench` helper where benchmark runs find it and print
//! that directory, so prepare.py runs by hand the same way:
//! `PYTHONPATH=$(ratchet pythonpath) python3 prepare.py`.

use crate::error::Result;
use crate::workspace::Workspace;

pub fn run(ws: &Workspace) -> Result<()> {
    let repo = &ws.repo;
    repo.ensure_excludes()?;
    let python_dir = crate::pyhelper::install(&repo.state_dir())?;
    println!("{}", python_dir.display());
    Ok(())
}
