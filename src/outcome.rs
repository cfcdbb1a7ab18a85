//! What an experiment or a sweep ended with, as data: the recorded row and the decision behind
//! it. The process's exit status is derived here, in one place ([`Outcome::error`]), from the
//! row's status. The sequential test's looks are also kept on disk, beside the runs
//! ([`LooksRecord`]), for `ratchet plot`.

use crate::error::{Error, Result};
use crate::stats::{Decision, Look, Verdict};
use crate::store::{ResultRow, Status};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// How one recorded experiment ended.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub row: ResultRow,
    pub decision: Option<Decision>,
    /// Where the reverted hypothesis was parked (`refs/ratchet/discarded/<id>`).
    pub discarded_ref: Option<String>,
    /// The directory of the runs' outputs, when any ran.
    pub runs_dir: Option<PathBuf>,
    /// How the deciding metric scales with speed (`stats::elasticity`): 1 for latency.
    pub elasticity: f64,
    /// A stop signal arrived while the decision was being recorded: it was recorded, and the
    /// exit status still says the user stopped ratchet.
    pub signalled: bool,
}

impl Outcome {
    /// The error this outcome exits with, if any: interrupted (by a signal, before or while
    /// deciding) or undecidable (the incumbent could not run). Every other recorded outcome,
    /// a crashed or reverted hypothesis included, is a success of ratchet's.
    pub fn error(&self) -> Option<Error> {
        let row = &self.row;
        if row.status == Status::Interrupted {
            return Some(Error::interrupted().hint("the hypothesis was reverted and recorded as interrupted"));
        }
        if self.signalled {
            return Some(Error::interrupted().hint(format!(
                "experiment {} was decided and recorded ({}) before stopping",
                row.id,
                row.status.as_str()
            )));
        }
        if row.status == Status::Error {
            return Some(
                Error::failure(format!("experiment {} could not be decided: {}", row.id, row.note))
                    .hint("check that the incumbent's benchmark runs (its logs are under .ratchet/experiments/)"),
            );
        }
        None
    }

    /// `Ok(self)`, or the error of [`Outcome::error`].
    pub fn into_result(self) -> Result<Outcome> {
        match self.error() {
            Some(e) => Err(e),
            None => Ok(self),
        }
    }
}

/// How a sweep ended.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SweepOutcome {
    /// The rows this invocation recorded.
    pub rows: Vec<ResultRow>,
    /// Hypotheses found already finished.
    pub already_done: usize,
    /// Hypotheses not started because the budget ran out.
    pub not_started: usize,
    pub stopped_by: Option<String>,
}

/// The file, in an experiment's directory (`.ratchet/experiments/<id>/`, beside `runs/`), that
/// keeps the sequential test's looks: what was tested at each look cannot be redrawn from
/// runs.jsonl (the noise history borrowed at decision time is not kept).
pub const LOOKS_FILE: &str = "looks.json";
/// The version of [`LooksRecord`]'s format; a reader refuses others.
pub const LOOKS_VERSION: u32 = 1;

/// One experiment's looks, as written to [`LOOKS_FILE`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LooksRecord {
    pub version: u32,
    pub experiment: u64,
    pub verdict: Verdict,
    /// The decision's estimate (percent speed-up) and its confidence level.
    pub effect_pct: f64,
    pub ci_level: f64,
    pub looks: Vec<Look>,
}

impl Outcome {
    /// The experiment's looks record, when it was decided by the sequential test.
    pub fn looks_record(&self) -> Option<LooksRecord> {
        let d = self.decision.as_ref().filter(|d| !d.trail.is_empty())?;
        Some(LooksRecord {
            version: LOOKS_VERSION,
            experiment: self.row.id,
            verdict: d.verdict,
            effect_pct: d.effect_pct,
            ci_level: d.ci_level,
            looks: d.trail.clone(),
        })
    }

    /// Write [`LooksRecord`] into the experiment's directory (the parent of `runs_dir`).
    /// Returns the path written, `None` when there is nothing to write.
    pub fn write_looks(&self) -> Result<Option<PathBuf>> {
        let (Some(rec), Some(exp_dir)) = (self.looks_record(), self.runs_dir.as_deref().and_then(Path::parent)) else {
            return Ok(None);
        };
        let path = exp_dir.join(LOOKS_FILE);
        let text = serde_json::to_string_pretty(&rec).map_err(|e| Error::failure(format!("encoding the looks: {e}")))?;
        crate::fsutil::write_atomic(&path, format!("{text}\n").as_bytes())?;
        Ok(Some(path))
    }
}

/// The looks record of the experiment whose directory is `exp_dir`: `Ok(None)` when it has none
/// (decided before looks were recorded, not decided by the test, or removed by `ratchet gc`).
pub fn read_looks(exp_dir: &Path) -> Result<Option<LooksRecord>> {
    let path = exp_dir.join(LOOKS_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::failure(format!("reading {}: {e}", path.display()))),
    };
    let bad = |why: String| {
        Error::failure(format!("{}: {why}", path.display())).hint(format!(
            "the file is ratchet's own record of the test's looks; delete it to draw without it (format version {LOOKS_VERSION})"
        ))
    };
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(format!("not JSON: {e}")))?;
    match v.get("version").and_then(|x| x.as_u64()) {
        Some(n) if n == LOOKS_VERSION as u64 => {}
        other => return Err(bad(format!("format version {other:?}, this ratchet reads version {LOOKS_VERSION}"))),
    }
    serde_json::from_value(v).map(Some).map_err(|e| bad(e.to_string()))
}
