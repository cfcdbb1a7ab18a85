//! `ratchet-lab`: the lab's command line. `ratchet-lab simulate` runs the decision procedure,
//! unchanged, against synthetic benchmarks with known true effects; prints false-keep rate, power
//! and runs per decision beside a fixed 10+10 Mann-Whitney baseline.

use clap::{Args, Parser, Subcommand};
use ratchet::config;
use ratchet::error::{Error, Result};
use ratchet::stats::sequential::{OnePhase, Sequential};
use ratchet::workspace::Workspace;
use std::path::Path;

#[derive(Debug, Parser)]
#[command(name = "ratchet-lab", version, about = "The research behind ratchet's decision levels")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the decision procedure against synthetic benchmarks with known true effects: false
    /// keeps, power and runs per decision, per noise model.
    Simulate(SimulateArgs),
}

fn main() {
    let Command::Simulate(args) = Cli::parse().command;
    let dir = std::env::current_dir().unwrap_or_else(|_| ".".into());
    if let Err(e) = run(&dir, &args) {
        eprintln!("error: {e}");
        std::process::exit(e.exit_code());
    }
}

/// A `[decision] method` as the config spells it.
fn parse_method(s: &str) -> Result<ratchet::config::Method, String> {
    s.parse()
}

#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// Trials per scenario and true gain (cells with a gain).
    #[arg(long, default_value_t = 4000)]
    pub trials: usize,
    /// Trials per scenario with no gain (the false-keep cells; default 25 x --trials).
    #[arg(long, value_name = "N")]
    pub null_trials: Option<usize>,
    /// Only the project's grid of 7 scenarios, not the harder ones (correlated noise, tails,
    /// outliers, noise above history).
    #[arg(long)]
    pub grid: bool,
    /// Seed of the synthetic draws (the table is deterministic for a seed).
    #[arg(long, default_value_t = 20_260_522)]
    pub seed: u64,
    /// Pairs of the calibration each trial's history comes from (models that fix their own keep
    /// it). The default, 16, is a short history, on which the bound is shown; `ratchet
    /// calibrate` runs 61 by default, which tells one mode of runs from two and decides faster.
    #[arg(long, value_name = "N", default_value_t = ratchet_lab::simulate::HISTORY_PAIRS, value_parser = clap::value_parser!(usize))]
    pub history_pairs: usize,
    /// Use the built-in [decision] defaults even inside a repo with a ratchet.toml.
    #[arg(long)]
    pub defaults: bool,
    /// Simulate this [decision] method in place of the config's (robust-ratio, the default;
    /// auto, sequential, likelihood-ratio, fixed: the earlier rule and its parts).
    #[arg(long, value_name = "METHOD", value_parser = parse_method)]
    pub method: Option<ratchet::config::Method>,
    /// Only the noise models whose names contain this (any case; repeat for several; --help
    /// lists them); `=NAME`: that model alone.
    #[arg(long, value_name = "NAME", long_help = ratchet_lab::simulate::models_help())]
    pub only: Vec<String>,
    /// The rule at other levels than today's: a JSON object of `Levels` fields to replace, e.g.
    /// '{"ratio_keep_at": 6.91}' (the field names `results/decisions.jsonl` records).
    #[arg(long, value_name = "JSON")]
    pub levels: Option<String>,
    /// Simulate a night on a serial trunk with this many device slots running trials at once
    /// (a comma-separated list, e.g. 1,2,4,8) instead of the per-scenario tables.
    #[arg(long, value_name = "K,...", value_delimiter = ',')]
    pub jobs: Vec<usize>,
    /// Hypotheses in the simulated night's queue (with --jobs).
    #[arg(long, value_name = "N", default_value_t = 20_000)]
    pub hypotheses: usize,
    /// With --jobs: a winner must also keep on a second device before it merges.
    #[arg(long)]
    pub second_device: bool,
    /// With --jobs: the mix of true effects the queue is drawn from: mix (30% real gains, most
    /// of them small) or win30 (30% of the hypotheses win: +3% and +10%).
    #[arg(long, value_name = "QUEUE", default_value = "mix")]
    pub queue: ratchet_lab::parallel::Queue,
}

/// `levels` with the fields `json` names replaced.
fn other_levels(levels: ratchet::stats::sequential::Levels, json: &str) -> Result<ratchet::stats::sequential::Levels> {
    let bad = |e: serde_json::Error| {
        Error::usage(format!("--levels {json}: {e}"))
            .hint("give a JSON object of level names and numbers, e.g. '{\"ratio_keep_at\": 6.91}'")
    };
    let mut all = serde_json::to_value(levels).expect("levels");
    let serde_json::Value::Object(changes) = serde_json::from_str(json).map_err(bad)? else {
        return Err(Error::usage(format!("--levels {json}: not a JSON object")).hint("e.g. '{\"ratio_keep_at\": 6.91}'"));
    };
    for (k, v) in changes {
        if all.get(&k).is_none() {
            return Err(Error::usage(format!("--levels: no level {k}"))
                .hint(format!("the levels: {}", all.as_object().expect("object").keys().cloned().collect::<Vec<_>>().join(", "))));
        }
        all[&k] = v;
    }
    serde_json::from_value(all).map_err(bad)
}

/// `ratchet-lab simulate`: the decision procedure of this repo's `[decision]` (or the defaults)
/// against synthetic benchmarks; see `ratchet_lab::simulate`.
pub fn run(dir: &Path, args: &SimulateArgs) -> Result<()> {
    if args.trials == 0 {
        return Err(Error::usage("--trials 0: give at least one trial per scenario"));
    }
    let decision = match Workspace::discover(dir) {
        Ok(ws) if !args.defaults && ws.config_path().exists() => {
            println!("[decision] of {}", ws.config_path().display());
            ws.config()?.decision
        }
        _ => {
            println!("[decision] defaults");
            config::DecisionConfig::default()
        }
    };
    let decision = config::DecisionConfig { method: args.method.unwrap_or(decision.method), ..decision };
    let mut params = decision.params(None);
    if let Some(json) = &args.levels {
        params.levels = other_levels(params.levels, json)?;
        println!("levels {}", serde_json::to_string(&params.levels).expect("levels"));
    }
    let seq = Sequential::new(params);
    let p = &seq.params;
    if let Some(l) = p.robust {
        // The robust ratio reads none of the two phases' keys: its own levels, as recorded.
        println!("method {:?}: min effect {}%, levels {}", decision.method, p.min_effect_pct, serde_json::to_string(&l).expect("levels"));
    } else {
        print_earlier_rule(&decision, p);
    }
    if !args.jobs.is_empty() {
        return run_parallel(&seq, args);
    }
    let plan = ratchet_lab::simulate::Plan {
        trials: args.trials,
        null_trials: args.null_trials.unwrap_or(args.trials.saturating_mul(25)),
        seed: args.seed,
        grid_only: args.grid,
        only: args.only.clone(),
        history_pairs: args.history_pairs,
    };
    let least = ratchet::stats::history::MIN_DF as usize + 1;
    if plan.history_pairs < least {
        return Err(Error::usage(format!(
            "--history-pairs {}: a history is used from {least} pairs ({} df); give at least {least}",
            plan.history_pairs,
            ratchet::stats::history::MIN_DF
        )));
    }
    if plan.null_trials == 0 {
        return Err(Error::usage("--null-trials 0: give at least one trial per scenario"));
    }
    println!(
        "{} trials per cell with a gain, {} per cell without (keeps of a +0% change are false keeps), seed {}; gains are speed-ups",
        plan.trials, plan.null_trials, plan.seed
    );
    let started = std::time::Instant::now();
    print!("{}", ratchet_lab::simulate::table(&seq, &plan));
    println!("\nsimulated in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// `simulate --jobs`: the same queue of hypotheses on 1, 2, 4, ... device slots.
fn run_parallel(seq: &ratchet::stats::sequential::Sequential, args: &SimulateArgs) -> Result<()> {
    if args.jobs.contains(&0) || args.hypotheses == 0 {
        return Err(Error::usage("--jobs and --hypotheses take counts of at least 1").hint("e.g. ratchet-lab simulate --jobs 1,2,4,8"));
    }
    println!(
        "{} hypotheses (true effects {}), each run one time unit, seed {}; every trial on one device, merged through the merge lane's chain, stale winners rechecked by the serial rule",
        args.hypotheses,
        args.queue.describe(),
        args.seed
    );
    let cv1 = ratchet_lab::simulate::scenario("cv 1%");
    let started = std::time::Instant::now();
    let night = ratchet_lab::chain_sim::Night {
        slots: &args.jobs,
        hypotheses: args.hypotheses,
        queue: args.queue,
        seed: args.seed,
        second_device: args.second_device,
        scenario: &cv1,
        test: ratchet_lab::parallel::TrialTest::Procedure,
        speculate: false,
    };
    print!("{}", ratchet_lab::chain_sim::table(seq, &night));
    println!("\nsimulated in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// The earlier rule's plan in one line (`method` auto, sequential, likelihood-ratio, fixed).
fn print_earlier_rule(decision: &config::DecisionConfig, p: &ratchet::stats::sequential::Params) {
    println!(
        "method {:?}: pairs {}..{} every {}, alpha {} ({:?} spending), min effect {}%, futility beta {:?}, confirm {} ({} pairs at {}){}",
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
        p.confirm_alpha,
        if p.rescues() {
            format!(
                ", rescue: an unconfirmed or inconclusive decision measures on to {} pairs in all and keeps when their t-test passes at {}{}",
                p.max_total_pairs(),
                p.rescue_alpha,
                match (p.levels.rescue_outlier_k, p.levels.ratio_rescued) {
                    (k, ratio) if k > 0.0 => format!(
                        " (pairs over {k} {} from their median set aside){}",
                        if p.levels.rescue_band_floor > 0.0 { "sds" } else { "of their robust sds" },
                        if ratio { ", the likelihood ratio's inconclusive end too" } else { "" }
                    ),
                    (_, true) => ", the likelihood ratio's inconclusive end too".to_string(),
                    _ => String::new(),
                }
            )
        } else {
            String::new()
        }
    );
    // An unbounded sd: the grid before its scaling to a quiet machine, which the words give.
    let b = ratchet::stats::sequential::Borrowed::new(ratchet::stats::sequential::NoiseScale { sd: f64::INFINITY, df: 0.0 });
    if let Some((_, t)) = Sequential::new(p.clone()).with_history(Some(b.clone())).likelihood_ratio() {
        println!(
            "with history{}: the likelihood ratio of whole pairs after every pair from the second, one phase, at most {} pairs: a gain (mixture of {} x {:+.1}%{} at weight {}, and a wide half-normal of sd {} over larger gains at {}; gain-side scales {}) against no gain's best fit; keep at ln LR >= {}{} with a mean of at least the minimum effect, futile at a ratio <= e^{} against no gain over the same scales; the first {} pair set aside where the history shows a warm-up",
            match p.likelihood_ratio {
                OnePhase::WithoutOutliers => " and no gross outlier in it (else the two phases)".to_string(),
                OnePhase::UntilOutlier => format!(
                    " and no gross outlier in it, until one of the first {} pairs lies over {} sds from their median (from there, and with one in the history, the two phases)",
                    p.max_pairs,
                    ratchet::stats::sequential::OUTLIER_K
                ),
                _ => String::new(),
            },
            t.max_pairs,
            ratchet::stats::sequential::MIXTURE.iter().map(|(m, w)| format!("{m}:{w}")).collect::<Vec<_>>().join(","),
            ratchet::stats::pct(t.mu1),
            if p.levels.ratio_powered_for_sds > 0.0 {
                format!(
                    " or {} calibrated sds of one pair where smaller (never under the minimum effect)",
                    p.levels.ratio_powered_for_sds
                )
            } else {
                String::new()
            },
            1.0 - ratchet::stats::sequential::LR_WIDE_WEIGHT,
            ratchet::stats::sequential::LR_WIDE_SD,
            ratchet::stats::sequential::LR_WIDE_WEIGHT,
            t.scales.iter().filter(|s| s.1 > 0.0).map(|(c, w)| format!("{c}x:{w}")).collect::<Vec<_>>().join(","),
            t.keep_at,
            if t.keep_at_one_mode != t.keep_at {
                format!(
                    " ({} where every session of the history that could tell, {} pairs or more, ran in one mode{}{})",
                    t.keep_at_one_mode,
                    ratchet::stats::sequential::MODES_MIN_PAIRS,
                    if t.one_mode_told_pairs > 0 {
                        format!(
                            ", on {} pairs in all (on fewer, a keep before {} used pairs needs a mean of {} calibrated sds)",
                            t.one_mode_told_pairs, t.early_until, t.early_sds
                        )
                    } else {
                        String::new()
                    },
                    if t.keep_from_two_modes > 0 {
                        format!(
                            "; elsewhere no keep before {} used pairs{}",
                            t.keep_from_two_modes,
                            if p.levels.ratio_keep_from_two_modes_shown > 0 {
                                format!(", {} where a session showed two modes", p.levels.ratio_keep_from_two_modes_shown)
                            } else {
                                String::new()
                            }
                        )
                    } else {
                        String::new()
                    }
                )
            } else {
                String::new()
            },
            t.futile_at,
            t.skip
        );
    }
    if p.likelihood_ratio != OnePhase::WithHistory {
        println!(
        "{}: first look at {} pairs ({} where the history saw a gross outlier or does not show one mode, {} where it showed two modes; at {} of its alpha increment), scale x{} safety pooled with the pairs' own, variance guard on the log-ratios and the runs' sums at F level {} ({} in the confirmation; at {} the first phase is re-read on the pairs' own scale), outliers beyond {} sds (the history's, or the batch's robust sd when larger) set aside, futility beta {} ({} before min_pairs, {} in the confirmation; it must hold by the mean and without {} of the pairs at each end), confirmation of {} pairs looking every {} (O'Brien-Fleming spending)",
        match p.likelihood_ratio {
            OnePhase::WithoutOutliers => "with a gross outlier in the history",
            OnePhase::UntilOutlier => "with a gross outlier in the history or the first phase's pairs",
            _ => "with history",
        },
        b.first_look,
        ratchet::stats::sequential::Borrowed { outliers: 1, modes: Some(0), ..b.clone() }
            .main_first_look(&p.levels),
        ratchet::stats::sequential::Borrowed { modes: Some(1), ..b.clone() }.main_first_look(&p.levels),
        b.first_share,
        b.safety,
        b.guard,
        b.confirm_guard,
        b.retest_guard,
        b.outlier_k,
        b.futility_beta,
        b.early_beta,
        b.confirm_beta,
        if p.levels.futility_trim_share > 0.0 { format!("{} (at least one)", p.levels.futility_trim_share) } else { "one".to_string() },
            p.confirm_pairs + b.confirm_extra,
            p.look_every
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratchet::stats::sequential::Levels;

    #[test]
    fn other_levels_replace_the_named_levels_and_name_a_wrong_one() {
        let l = other_levels(Levels::current(), r#"{"ratio_keep_at": 6.91, "ratio_early_sds": 0}"#).unwrap();
        assert_eq!(l, Levels { ratio_keep_at: 6.91, ratio_early_sds: 0.0, ..Levels::current() });
        let e = other_levels(Levels::current(), r#"{"keep_at": 6.91}"#).unwrap_err().to_string();
        assert!(e.contains("no level keep_at"), "{e}");
        assert!(other_levels(Levels::current(), "[1]").is_err());
        assert!(other_levels(Levels::current(), r#"{"ratio_keep_from_two_modes": -1}"#).is_err());
    }

    #[test]
    fn simulate_args_parse_counts_and_methods() {
        let c = Cli::try_parse_from(["ratchet-lab", "simulate", "--trials", "10"]).unwrap();
        assert!(matches!(c.command, Command::Simulate(SimulateArgs { trials: 10, .. })));
        let c = Cli::try_parse_from(["ratchet-lab", "simulate", "--method", "auto"]).unwrap();
        assert!(matches!(c.command, Command::Simulate(SimulateArgs { method: Some(ratchet::config::Method::Auto), .. })));
        let e = Cli::try_parse_from(["ratchet-lab", "simulate", "--method", "lr"]).unwrap_err().to_string();
        assert!(e.contains("one of sequential, fixed, likelihood-ratio, robust-ratio, auto"), "{e}");
        let c = Cli::try_parse_from(["ratchet-lab", "simulate", "--method", "robust-ratio"]).unwrap();
        assert!(matches!(c.command, Command::Simulate(SimulateArgs { method: Some(ratchet::config::Method::RobustRatio), .. })));
    }
}
