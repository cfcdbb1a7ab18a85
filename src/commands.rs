//! The subcommands other than the experiment itself: `init`, `results` and `simulate`.

use crate::cli::{InitArgs, ResultsArgs, SimulateArgs};
use crate::config;
use crate::error::{Error, Result};
use crate::report;
use crate::store::Store;
use crate::vcs::{self, Repo};
use std::io::IsTerminal;
use std::path::Path;

pub fn init(dir: &Path, args: &InitArgs) -> Result<()> {
    let root = match Repo::discover(dir) {
        Ok(r) => r.root().to_path_buf(),
        Err(_) => dir.to_path_buf(),
    };
    let path = config::path_in(&root);
    if path.exists() && !args.force {
        return Err(Error::config(format!("{} already exists", path.display())).hint("pass --force to overwrite it"));
    }
    if crate::hardware::preset(&args.preset).is_none() {
        return Err(Error::usage(format!(
            "unknown hardware preset {:?}; known: {}",
            args.preset,
            crate::hardware::preset_names().join(", ")
        )));
    }
    let has_prepare = root.join("prepare.py").exists();
    let command = match (&args.command, has_prepare) {
        (Some(c), _) => c.clone(),
        (None, true) => "python3 prepare.py".to_string(),
        (None, false) => {
            return Err(Error::usage(format!("no prepare.py in {}, so ratchet cannot guess the benchmark command", root.display()))
                .hint("pass it: ratchet init --command \"python3 bench.py\""))
        }
    };
    let text = config::template(&command, &args.preset);
    crate::store::write_atomic(&path, text.as_bytes())?;
    println!("wrote {} (benchmark: {command}; hardware: {})", path.display(), args.preset);
    if has_prepare {
        println!("found prepare.py: it should follow the benchmark protocol (docs/protocol.md), or print RESULT: lines");
    }
    Ok(())
}

pub fn results(dir: &Path, args: &ResultsArgs) -> Result<()> {
    let repo = Repo::discover(dir)?;
    let store = Store::new(&repo.root().join(vcs::RESULTS_DIR));
    let rows = store.rows()?;
    let color = std::io::stdout().is_terminal();
    println!("{}", report::render(&rows, args.format, color).trim_end());
    Ok(())
}

/// `ratchet simulate`: the decision procedure of this repo's `[decision]` (or the defaults)
/// against synthetic benchmarks; see `stats::simulate`.
pub fn simulate(dir: &Path, args: &SimulateArgs) -> Result<()> {
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
