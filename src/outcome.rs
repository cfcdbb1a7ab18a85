//! What an experiment or a sweep ended with, as data: the recorded row and the decision behind
//! it. The process's exit status is derived here, in one place ([`Outcome::error`]), from the
//! row's status.

use crate::error::{Error, Result};
use crate::stats::Decision;
use crate::store::{ResultRow, Status};
use serde::Serialize;
use std::path::PathBuf;

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
