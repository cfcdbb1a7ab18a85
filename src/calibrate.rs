//! `ratchet calibrate`: A/A runs of HEAD against itself, interleaved exactly as an experiment
//! runs its pairs, to measure the noise floor of this benchmark on this machine. Nothing is
//! committed and no results row is written; the figures go to `results/calibration.json`.

use crate::bench::executor::Executor;
use crate::error::WithPath;
use crate::error::{Error, Result};
use crate::events::{Effects, Event};
use crate::session::{Checkout, Session, Stop};
use crate::stats::noise::noise_floor;
use crate::stats::sequential::Phase;
use crate::vcs;
use crate::workspace::Locked;

/// What the user asked for.
#[derive(Debug, Clone, Default)]
pub struct CalibrateOptions {
    /// A/A pairs to run (default: `history::CALIBRATION_PAIRS`).
    pub pairs: Option<u32>,
}

/// Measure the noise floor in the locked workspace (the lock matters: calibrating moves the
/// incumbent checkout, which an experiment may be measuring from).
pub fn run(ws: &Locked, args: &CalibrateOptions, exec: &mut dyn Executor, fx: &mut Effects) -> Result<()> {
    ws.require_recovered("calibrate::run")?;
    let repo = &ws.repo;
    let (branch, head) = repo.check_safe()?;
    let cfg = ws.config()?;
    let params = cfg.decision.params(None);
    let pairs = args.pairs.map_or(crate::stats::history::CALIBRATION_PAIRS, |p| p as usize);
    if pairs < 2 {
        return Err(Error::usage(format!("--pairs {pairs}: the noise floor needs at least 2 pairs")));
    }
    repo.ensure_excludes()?;
    let state_dir = ws.state_dir.clone();
    let cal_dir = state_dir.join("calibration");
    if cal_dir.exists() {
        std::fs::remove_dir_all(&cal_dir).with_path(&cal_dir)?;
    }
    let python_dir = crate::pyhelper::install(&state_dir)?;
    // Both sides run HEAD from the same checkout: any difference is noise.
    let wt = repo.incumbent_worktree(head)?;
    let commit = head.to_string();
    fx.emit(Event::CalibrationStarted { pairs, commit: commit.clone(), branch: branch.clone() });
    let mut s = Session {
        cfg: &cfg,
        exec,
        events: &mut *fx.events,
        cancel: fx.cancel.clone(),
        id: "calibration",
        runs_dir: cal_dir.join("runs"),
        repo_root: repo.root(),
        state_dir: &state_dir,
        python_dir: &python_dir,
        deep: false,
        store: None,
        incumbent: Checkout { dir: &wt, commit: commit.clone() },
        candidate: Checkout { dir: &wt, commit: commit.clone() },
        records: vec![],
    }
    .start(2 * pairs);
    let mut pair_values = vec![];
    for i in 0..pairs {
        match s.pair(Phase::Main, i, &format!("A/A pair {i}"))? {
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
    // The A/A pairs feed the noise history that later experiments borrow their scale from
    // (in speed-up terms, as experiments see them), and that history says which rule decides
    // next, whose budget the detectable gain is.
    let d: Vec<f64> = pair_values.iter().map(|(a, b)| (b / a).ln() / el).collect();
    // The pairs' log-sums too: the variance guard's second look at the noise (A with A, B with B).
    let sums = crate::stats::sequential::log_sums(&pair_values, cfg.score.direction(), el);
    let key = crate::experiment::history_key(&cfg);
    let entry = crate::stats::history::entry_runs(&crate::fsutil::now(), crate::stats::history::CALIBRATE_SOURCE, &[(&d, &sums)]);
    // This session's spread with its gross outliers set aside, as the history keeps it: the
    // scale a decision would use where the history is too short to borrow from.
    let trimmed_sd = entry.as_ref().map(|e| e.sd());
    if let Some(entry) = entry {
        crate::stats::history::record(&state_dir, &key, entry)?;
    }
    let hist = crate::stats::history::load(&state_dir, &key);
    let history = crate::stats::history::borrowed(&hist.entries);
    let lat_terms = |v: f64| v.powf(1.0 / el);
    let f = noise_floor(
        &values.iter().map(|&v| lat_terms(v)).collect::<Vec<_>>(),
        &pair_values.iter().map(|&(a, b)| (lat_terms(a), lat_terms(b))).collect::<Vec<_>>(),
        &params,
        history.as_ref(),
        trimmed_sd,
    );
    let metric = cfg.score.metric.as_str();
    let out = repo.root().join(vcs::RESULTS_DIR).join("calibration.json");
    let json = serde_json::json!({
        "commit": commit,
        "metric": metric,
        "values": values,
        "pairs": pair_values,
        "noise": f,
    });
    crate::fsutil::write_atomic(&out, serde_json::to_string_pretty(&json).expect("json").as_bytes())?;
    fx.emit(Event::CalibrationFinished { metric: metric.to_string(), noise: f.clone(), params: params.clone(), path: out.clone() });
    fx.emit(Event::NoiseHistory { text: crate::stats::history::describe(&hist, &params) });
    Ok(())
}
