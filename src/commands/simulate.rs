//! `ratchet simulate`: the decision procedure, unchanged, against synthetic benchmarks with known
//! true effects; prints false-keep rate, power and runs per decision beside a fixed 10+10
//! Mann-Whitney baseline.

use crate::cli::SimulateArgs;
use crate::config;
use crate::error::{Error, Result};
use crate::stats::sequential::{OnePhase, Sequential};
use crate::workspace::Workspace;
use std::path::Path;

/// `ratchet simulate`: the decision procedure of this repo's `[decision]` (or the defaults)
/// against synthetic benchmarks; see `stats::simulate`.
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
    let params = decision.params(None);
    let seq = Sequential::new(params);
    let p = &seq.params;
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
                ", rescue: an unconfirmed or inconclusive decision measures on to {} pairs in all and keeps when their t-test passes at {}",
                p.max_total_pairs(),
                p.rescue_alpha
            )
        } else {
            String::new()
        }
    );
    if !args.jobs.is_empty() {
        return run_parallel(&seq, args);
    }
    let plan = crate::stats::simulate::Plan {
        trials: args.trials,
        null_trials: args.null_trials.unwrap_or(args.trials.saturating_mul(25)),
        seed: args.seed,
        grid_only: args.grid,
        only: args.only.clone(),
        history_pairs: args.history_pairs,
    };
    let least = crate::stats::history::MIN_DF as usize + 1;
    if plan.history_pairs < least {
        return Err(Error::usage(format!(
            "--history-pairs {}: a history is used from {least} pairs ({} df); give at least {least}",
            plan.history_pairs,
            crate::stats::history::MIN_DF
        )));
    }
    if plan.null_trials == 0 {
        return Err(Error::usage("--null-trials 0: give at least one trial per scenario"));
    }
    // An unbounded sd: the grid before its scaling to a quiet machine, which the words give.
    let b = crate::stats::sequential::Borrowed::new(crate::stats::sequential::NoiseScale { sd: f64::INFINITY, df: 0.0 });
    if let Some((_, t)) = Sequential::new(p.clone()).with_history(Some(b.clone())).likelihood_ratio() {
        println!(
            "with history{}: the likelihood ratio of whole pairs after every pair from the second, one phase, at most {} pairs: a gain (mixture of {} x {:+.1}%{} at weight {}, and a wide half-normal of sd {} over larger gains at {}; gain-side scales {}) against no gain's best fit; keep at ln LR >= {}{} with a mean of at least the minimum effect, futile at a ratio <= e^{} against no gain {}; the first {} pair set aside where the history shows a warm-up",
            match p.likelihood_ratio {
                OnePhase::WithoutOutliers => " and no gross outlier in it (else the two phases)".to_string(),
                OnePhase::UntilOutlier => format!(
                    " and no gross outlier in it, until one of the first {} pairs lies over {} sds from their median (from there, and with one in the history, the two phases)",
                    p.max_pairs,
                    crate::stats::sequential::OUTLIER_K
                ),
                _ => String::new(),
            },
            t.max_pairs,
            crate::stats::sequential::MIXTURE.iter().map(|(m, w)| format!("{m}:{w}")).collect::<Vec<_>>().join(","),
            crate::stats::pct(t.mu1),
            if p.likelihood_ratio_scaled {
                format!(
                    " or {} calibrated sds of one pair where smaller (never under the minimum effect)",
                    crate::stats::sequential::LR_POWERED_FOR_SDS
                )
            } else {
                String::new()
            },
            1.0 - crate::stats::sequential::LR_WIDE_WEIGHT,
            crate::stats::sequential::LR_WIDE_SD,
            crate::stats::sequential::LR_WIDE_WEIGHT,
            t.scales.iter().filter(|s| s.1 > 0.0).map(|(c, w)| format!("{c}x:{w}")).collect::<Vec<_>>().join(","),
            t.keep_at,
            if t.keep_at_one_mode != t.keep_at {
                format!(
                    " ({} where every session of the history that could tell, {} pairs or more, ran in one mode{}{})",
                    t.keep_at_one_mode,
                    crate::stats::sequential::MODES_MIN_PAIRS,
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
                            if p.likelihood_ratio_streak_shown {
                                format!(", {} where a session showed two modes", crate::stats::sequential::LR_KEEP_FROM_TWO_MODES_SHOWN)
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
            if t.futile_mixed { "over the same scales" } else { "at the history's sd" },
            t.skip
        );
    }
    if p.likelihood_ratio != OnePhase::WithHistory {
        println!(
        "{}: first look at {} pairs ({} where the history saw a gross outlier or does not show one mode, {} where it showed two modes; at {} of its alpha increment), scale x{} safety pooled with the pairs' own, variance guard on the log-ratios and the runs' sums at F level {} ({} in the confirmation; at {} the first phase is re-read on the pairs' own scale), outliers beyond {} sds (the history's, or the batch's robust sd when larger) set aside, futility beta {} ({} before min_pairs, {} in the confirmation), confirmation of {} pairs looking every {} (O'Brien-Fleming spending)",
        match p.likelihood_ratio {
            OnePhase::WithoutOutliers => "with a gross outlier in the history",
            OnePhase::UntilOutlier => "with a gross outlier in the history or the first phase's pairs",
            _ => "with history",
        },
        b.first_look,
        crate::stats::sequential::Borrowed { outliers: 1, modes: Some(0), ..b.clone() }
            .main_first_look(p.outlier_first_look, p.outlier_first_look_later),
        crate::stats::sequential::Borrowed { modes: Some(1), ..b.clone() }.main_first_look(p.outlier_first_look, p.outlier_first_look_later),
        b.first_share,
        b.safety,
        b.guard,
        b.confirm_guard,
        b.retest_guard,
        b.outlier_k,
        b.futility_beta,
        b.early_beta,
        b.confirm_beta,
            p.confirm_pairs + b.confirm_extra,
            p.look_every
        );
    }
    println!(
        "{} trials per cell with a gain, {} per cell without (keeps of a +0% change are false keeps), seed {}; gains are speed-ups",
        plan.trials, plan.null_trials, plan.seed
    );
    let started = std::time::Instant::now();
    print!("{}", crate::stats::simulate::table(&seq, &plan));
    println!("\nsimulated in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// `simulate --jobs`: the same queue of hypotheses on 1, 2, 4, ... device slots.
fn run_parallel(seq: &crate::stats::sequential::Sequential, args: &SimulateArgs) -> Result<()> {
    if args.jobs.contains(&0) || args.hypotheses == 0 {
        return Err(Error::usage("--jobs and --hypotheses take counts of at least 1").hint("e.g. ratchet simulate --jobs 1,2,4,8"));
    }
    println!(
        "{} hypotheses (true effects {}), each run one time unit, seed {}; every trial on one device, merged through the merge lane's chain, stale winners rechecked by the serial rule",
        args.hypotheses,
        args.queue.describe(),
        args.seed
    );
    let cv1 = crate::stats::simulate::scenario("cv 1%");
    let started = std::time::Instant::now();
    let night = crate::scale::chain_sim::Night {
        slots: &args.jobs,
        hypotheses: args.hypotheses,
        queue: args.queue,
        seed: args.seed,
        second_device: args.second_device,
        scenario: &cv1,
        test: crate::stats::parallel::TrialTest::Procedure,
        speculate: false,
    };
    print!("{}", crate::scale::chain_sim::table(seq, &night));
    println!("\nsimulated in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}
