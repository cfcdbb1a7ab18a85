//! `ratchet sweep`: the command-line face of [`crate::sweep`].

use crate::cli::SweepArgs;
use crate::error::{Error, Result};
use crate::sweep::{self, SweepOptions};
use std::path::Path;

pub fn run(dir: &Path, args: &SweepArgs) -> Result<sweep::SweepOutcome> {
    crate::signals::install()?;
    let max_wall = args.max_wall.as_deref().map(sweep::parse_duration).transpose().map_err(|e| Error::usage(format!("--max-wall: {e}")))?;
    if args.pairs.is_some_and(|p| p < 2) {
        return Err(Error::usage("--pairs must be at least 2: a paired test needs two pairs"));
    }
    let opts = SweepOptions { paths: args.paths.clone(), max_wall, max_runs: args.max_runs, deep: args.deep, pairs: args.pairs };
    sweep::run(dir, &opts, &mut crate::bench::executor::ProcessExecutor)
}
