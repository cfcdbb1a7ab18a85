//! `ratchet sweep`: the command-line face of [`crate::sweep`].

use crate::cli::SweepArgs;
use crate::error::{Error, Result};
use crate::events::Effects;
use crate::sweep::{self, SweepOptions};
use crate::workspace::Locked;
use std::path::Path;

pub fn run(dir: &Path, ws: &Locked, args: &SweepArgs, fx: &mut Effects) -> Result<sweep::SweepOutcome> {
    crate::signals::install()?;
    let max_wall = args.max_wall.as_deref().map(sweep::parse_duration).transpose().map_err(|e| Error::usage(format!("--max-wall: {e}")))?;
    if args.pairs.is_some_and(|p| p < 2) {
        return Err(Error::usage("--pairs must be at least 2: a paired test needs two pairs"));
    }
    // Relative paths are the user's, from where they ran ratchet.
    let paths = args.paths.iter().map(|p| if p.is_absolute() { p.clone() } else { dir.join(p) }).collect();
    let opts = SweepOptions { paths, max_wall, max_runs: args.max_runs, deep: args.deep, pairs: args.pairs };
    sweep::run(ws, &opts, &mut crate::bench::executor::ProcessExecutor, fx)
}
