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
    let params = decision.params(None);
    let seq = crate::stats::sequential::Sequential::new(params);
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
    let plan = crate::stats::simulate::Plan {
        trials: args.trials,
        null_trials: args.null_trials.unwrap_or(args.trials.saturating_mul(25)),
        seed: args.seed,
        grid_only: args.grid,
    };
    if plan.null_trials == 0 {
        return Err(Error::usage("--null-trials 0: give at least one trial per scenario"));
    }
    let b = crate::stats::sequential::Borrowed::new(crate::stats::sequential::NoiseScale { sd: 0.0, df: 0.0 });
    println!(
        "with history: first look at {} pairs, scale x{} safety pooled with the pairs' own, variance guard at F level {}, outliers beyond {} history sds set aside, futility beta {} ({} before min_pairs), confirmation looks every {} pairs (O'Brien-Fleming spending)",
        b.first_look, b.safety, b.guard, b.outlier_k, b.futility_beta, b.early_beta, p.look_every
    );
    println!(
        "{} trials per cell with a gain, {} per cell without (keeps of a +0% change are false keeps), seed {}; gains are speed-ups",
        plan.trials, plan.null_trials, plan.seed
    );
    let started = std::time::Instant::now();
    print!("{}", crate::stats::simulate::table(&seq, &plan));
    println!("\nsimulated in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}
