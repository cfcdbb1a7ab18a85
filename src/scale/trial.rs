//! A worker's result file (`trial.json`, schema [`SCHEMA`]): what one trial measured, written
//! last and atomically into its run directory. It records how the measuring ended and the pairs'
//! log-ratios; the controller re-decides from them with its own decision procedure.

use crate::error::{Error, Result};
use crate::stats::sequential::NoiseScale;
use crate::store::Status;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The result file's name in a run directory.
pub const RESULT_FILE: &str = "trial.json";
/// Every run's record, one JSON object a line (`bench::RunRecord`).
pub const RUNS_FILE: &str = "runs.jsonl";
/// The trace/HLO/kernel-body paths of every run.
pub const TRACES_FILE: &str = "traces.json";
/// The worker's pid, process group and state directory, written when it starts.
pub const PID_FILE: &str = "worker.pid";
/// Raise when a field changes meaning; a controller refuses a result of another schema.
pub const SCHEMA: u32 = 1;

/// How the measuring ended, as the worker saw it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TrialEnd {
    /// The stopping rule said the procedure is done: the controller decides from `main`/`confirm`.
    Decided,
    /// Identical compiled HLO on both sides.
    NoOp { why: String },
    /// The candidate's run failed with this status.
    Candidate { status: Status, why: String },
    /// The incumbent's run failed: nothing could be compared.
    Incumbent { why: String },
    /// The machine's fault (no disk, both sides crash alike): nothing is recorded, the trial runs again.
    Infrastructure { why: String },
    /// Stopped by a signal.
    Interrupted,
}

/// `trial.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrialResult {
    pub schema: u32,
    pub id: String,
    pub incumbent: String,
    pub candidate: String,
    pub repo: PathBuf,
    pub host: String,
    /// The device-binding environment the worker ran with (`CUDA_VISIBLE_DEVICES`, `TPU_*`, ...).
    pub device_env: std::collections::BTreeMap<String, String>,
    /// The local slot (`RATCHET_SLOT`), where the engine has slots.
    pub slot: Option<usize>,
    pub started: String,
    pub finished: String,
    pub wall_s: f64,
    /// The stopping rule's parameters (`stats::sequential::Params`), as used.
    pub params: serde_json::Value,
    /// Whether this was a stale winner's recheck (one confirmation-sized look).
    pub recheck: bool,
    /// `--pairs`, if given.
    pub pairs: Option<u32>,
    /// The borrowed noise scale the stopping rule used, if any.
    pub noise_scale: Option<NoiseScale>,
    /// The history's spread of the log-sums the variance guard read beside it, if any.
    #[serde(default)]
    pub sums_scale: Option<NoiseScale>,
    pub end: TrialEnd,
    /// Log-ratios (speed-up terms) of the main phase's pairs and of the confirmation's.
    pub main: Vec<f64>,
    pub confirm: Vec<f64>,
    /// Each pair's log-sum (`stats::sequential::log_sums`), phase by phase: the guard's second
    /// reading of the noise, which the decision and the noise history use as the serial loop
    /// does.
    #[serde(default)]
    pub main_sums: Vec<f64>,
    #[serde(default)]
    pub confirm_sums: Vec<f64>,
    /// Benchmark processes run (`runs.jsonl` lines).
    pub runs: usize,
}

#[cfg(test)]
impl TrialResult {
    /// A decided trial `t1` of `a...` against `b...` on host `h` with no runs: the unit tests'
    /// starting point, changed field by field.
    pub(crate) fn for_tests() -> TrialResult {
        TrialResult {
            schema: SCHEMA,
            id: "t1".into(),
            incumbent: "a".repeat(40),
            candidate: "b".repeat(40),
            repo: "/r".into(),
            host: "h".into(),
            device_env: Default::default(),
            slot: None,
            started: String::new(),
            finished: String::new(),
            wall_s: 1.0,
            params: serde_json::Value::Null,
            recheck: false,
            pairs: None,
            noise_scale: None,
            sums_scale: None,
            end: TrialEnd::Decided,
            main: vec![],
            confirm: vec![],
            main_sums: vec![],
            confirm_sums: vec![],
            runs: 0,
        }
    }
}

impl TrialResult {
    /// Read a run directory's result; `Ok(None)` when the worker has not written it (yet).
    pub fn read(out_dir: &Path) -> Result<Option<TrialResult>> {
        let p = out_dir.join(RESULT_FILE);
        let text = match std::fs::read_to_string(&p) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::failure(format!("cannot read {}: {e}", p.display()))),
        };
        let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| Error::failure(format!("{} is not JSON: {e}", p.display())))?;
        let schema = v.get("schema").and_then(|s| s.as_u64());
        if schema != Some(SCHEMA as u64) {
            return Err(Error::failure(format!("{} has schema {schema:?}; this ratchet reads schema {SCHEMA}", p.display()))
                .hint("run the same ratchet version for the controller and its workers"));
        }
        serde_json::from_value(v).map(Some).map_err(|e| Error::failure(format!("{} is malformed: {e}", p.display())))
    }

    /// Write it last, atomically: a reader sees no result or the whole one.
    pub fn write(&self, out_dir: &Path) -> Result<()> {
        crate::fsutil::write_atomic(&out_dir.join(RESULT_FILE), &serde_json::to_vec_pretty(self).expect("trial serializes"))
    }

    /// The run records the worker wrote beside it.
    pub fn records(out_dir: &Path) -> Result<Vec<crate::bench::RunRecord>> {
        let p = out_dir.join(RUNS_FILE);
        let text = std::fs::read_to_string(&p).map_err(|e| Error::failure(format!("cannot read {}: {e}", p.display())))?;
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).map_err(|e| Error::failure(format!("{}: a malformed run record: {e}", p.display()))))
            .collect()
    }
}

/// What `worker.pid` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerPid {
    pub pid: i32,
    /// The process's start time (clock ticks since boot), so a reused pid is never killed.
    pub start: u64,
    /// The worker's own state directory (its benchmark's `run.pgid` is there).
    pub state_dir: PathBuf,
}
