//! `ratchet calibrate`: A/A runs of HEAD against itself, interleaved exactly as an experiment
//! runs its pairs, to measure the noise floor of this benchmark on this machine. Nothing is
//! committed and no results row is written; the figures go to `results/calibration.json`.

use crate::bench::executor::Executor;
use crate::cli::CalibrateArgs;
use crate::config::{self, Config};
use crate::error::{Error, Result};
use crate::session::{Checkout, Session, Stop};
use crate::stats::noise::noise_floor;
use crate::stats::sequential::{incumbent_first, Phase};
use crate::vcs::{self, Repo};
use std::path::Path;

pub fn run(dir: &Path, args: &CalibrateArgs, exec: &mut dyn Executor) -> Result<()> {
    let repo = Repo::discover(dir)?;
    // It moves the incumbent checkout: never while an experiment measures from it.
    let argv: Vec<String> = std::env::args().collect();
    let _lock = crate::lock::RepoLock::for_repo(&repo, &argv.join(" "))?;
    let (branch, head) = repo.check_safe()?;
    let cfg = Config::load(&config::path_in(repo.root()))?;
    let params = cfg.decision.params(None);
    let pairs = args.pairs.unwrap_or(params.max_pairs as u32) as usize;
    if pairs < 2 {
        return Err(Error::usage(format!("--pairs {pairs}: the noise floor needs at least 2 pairs")));
    }
    repo.ensure_excludes()?;
    let state_dir = repo.state_dir();
    let cal_dir = state_dir.join("calibration");
    if cal_dir.exists() {
        std::fs::remove_dir_all(&cal_dir)?;
    }
    let python_dir = crate::pyhelper::install(&state_dir)?;
    // Both sides run HEAD from the same checkout: any difference is noise.
    let wt = repo.incumbent_worktree(head)?;
    let commit = head.to_string();
    println!("calibrate: {pairs} A/A pairs of {} on {branch}, interleaved as an experiment", &commit[..8]);
    let mut s = Session::new(
        &cfg,
        exec,
        "calibration",
        cal_dir.join("runs"),
        repo.root(),
        &state_dir,
        &python_dir,
        false,
        None,
        Checkout { dir: &wt, commit: commit.clone() },
        Checkout { dir: &wt, commit: commit.clone() },
        2 * pairs,
    );
    let mut pair_values = vec![];
    for i in 0..pairs {
        match s.pair(incumbent_first(Phase::Main, i), &format!("A/A pair {}", i + 1))? {
            Ok((a, b)) => pair_values.push((s.records[a].value.unwrap_or(f64::NAN), s.records[b].value.unwrap_or(f64::NAN))),
            Err(stop) => {
                s.finish();
                let why = match stop {
                    Stop::Interrupted => return Err(Error::interrupted()),
                    Stop::Candidate(_, w) | Stop::Incumbent(w) | Stop::Infrastructure(w) => w,
                };
                return Err(Error::failure(format!("a calibration run failed: {why}"))
                    .hint("the benchmark must run cleanly on HEAD; its logs are under .ratchet/calibration/runs/"));
            }
        }
    }
    s.finish();
    let values: Vec<f64> = s.records.iter().filter(|r| !r.superseded).filter_map(|r| r.value).collect();
    // In speed-up terms (the metric's value to the power 1/elasticity), the unit of
    // min_effect_pct, so the detectable and suggested gains compare with it whatever the metric.
    let el = crate::stats::elasticity(cfg.score.metric);
    let lat_terms = |v: f64| v.powf(1.0 / el);
    let f = noise_floor(
        &values.iter().map(|&v| lat_terms(v)).collect::<Vec<_>>(),
        &pair_values.iter().map(|&(a, b)| (lat_terms(a), lat_terms(b))).collect::<Vec<_>>(),
        &params,
    );
    let metric = cfg.score.metric.as_str();
    println!(
        "  {} runs of {metric}: run-to-run CV {:.2}% in speed-up terms (from the pairs; {:.2}% over all runs)",
        f.runs, f.pair_cv_pct, f.run_cv_pct
    );
    println!("  drift {:+.3}%/run over the session; A/A difference {:+.2}% (should be near 0)", f.drift_pct_per_run, f.aa_effect_pct);
    println!(
        "  smallest gain the budget keeps with ~95% probability: {:.2}% (max_pairs {}, alpha {}, min_effect_pct {}{})",
        f.detectable_pct,
        params.max_pairs,
        params.alpha,
        params.min_effect_pct,
        if params.confirm { format!(", confirmed by {} pairs at {}", params.confirm_pairs, params.confirm_alpha) } else { String::new() }
    );
    println!("  suggested [decision] min_effect_pct = {:.1}", f.suggested_min_effect_pct);
    if f.suggested_min_effect_pct > params.min_effect_pct {
        println!(
            "  note: min_effect_pct {} is below what this budget can see; raise it, or raise max_pairs and confirm_pairs",
            params.min_effect_pct
        );
    }
    let out = repo.root().join(vcs::RESULTS_DIR).join("calibration.json");
    let json = serde_json::json!({
        "commit": commit,
        "metric": metric,
        "values": values,
        "pairs": pair_values,
        "noise": f,
    });
    crate::store::write_atomic(&out, serde_json::to_string_pretty(&json).expect("json").as_bytes())?;
    println!("  wrote {}", out.display());
    // The A/A pairs feed the noise history that later experiments borrow their scale from
    // (in speed-up terms, as experiments see them).
    let d: Vec<f64> = pair_values.iter().map(|(a, b)| (b / a).ln() / el).collect();
    let key = crate::experiment::history_key(&cfg);
    if let Some(entry) = crate::stats::history::entry(&crate::store::now(), "calibrate", &[&d]) {
        crate::stats::history::record(&state_dir, &key, entry)?;
    }
    println!("  {}", crate::stats::history::describe(&crate::stats::history::load(&state_dir, &key)));
    Ok(())
}
