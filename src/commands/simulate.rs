//! `ratchet simulate`: the decision procedure, unchanged, against synthetic benchmarks with known
//! true effects; prints false-keep rate, power and runs per decision beside a fixed 10+10
//! Mann-Whitney baseline.

use crate::cli::SimulateArgs;
use crate::config;
use crate::error::{Error, Result};
use crate::vcs::Repo;
use std::path::Path;

/// `ratchet simulate`: the decision procedure of this repo's `[decision]` (or the defaults)
/// against synthetic benchmarks; see `stats::simulate`.
pub fn run(dir: &Path, args: &SimulateArgs) -> Result<()> {
    if args.trials == 0 {
        return Err(Error::usage("--trials 0: give at least one trial per scenario"));
    }
    let decision = match Repo::discover(dir) {
        Ok(repo) if !args.defaults && config::path_in(repo.root()).exists() => {
            println!("[decision] of {}", config::path_in(repo.root()).display());
            config::Config::load(&config::path_in(repo.root()))?.decision
        }
        _ => {
            println!("[decision] defaults");
            config::DecisionConfig::default()
        }
    };
    let seq = crate::stats::sequential::Sequential::new(decision.params(None));
    let p = &seq.params;
    println!(
        "method {:?}: pairs {}..{} every {}, alpha {} ({:?} spending), min effect {}%, futility beta {:?}, confirm {} ({} pairs at {})",
        decision.method,
        p.min_pairs,
        p.max_pairs,
        p.look_every,
        p.alpha,
        p.spending,
        p.min_effect_pct,
        p.futility_beta,
        p.confirm,
        p.confirm_pairs,
        p.confirm_alpha
    );
    println!("{} trials per cell, seed {}; keeps of a +0% change are false keeps\n", args.trials, args.seed);
    print!("{}", crate::stats::simulate::table(&seq, args.trials, args.seed));
    Ok(())
}
