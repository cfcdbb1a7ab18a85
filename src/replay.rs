//! Every keep and revert recomputed from the records: a decided row's runs (`runs.jsonl`, each
//! with its trial, phase and pair) and the rule that decided it (`decisions.jsonl`: the levels,
//! the exact borrowed scale) are fed to the same sequential procedure again, and what it decides
//! is held against what the row says (`ratchet replay`).

use crate::bench::{RunRecord, RunStatus, Side};
use crate::stats::sequential::{Borrowed, Next, NoiseScale, Params, Phase, Sequential, Warmup};
use crate::stats::{Decision, Direction, Verdict};
use crate::store::{ResultRow, Status};
use serde::{Deserialize, Serialize};

pub use crate::store::DECISIONS_JSONL;

/// What decided one row, besides its runs: appended to `decisions.jsonl` before the row is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    /// The row's id and candidate commit (a record whose row never landed is told apart by them).
    pub id: u64,
    pub commit: String,
    /// The version that decided: the procedure's constants (`stats::sequential::levels`) are
    /// that version's.
    pub ratchet: String,
    pub params: Params,
    /// The history's scale exactly as borrowed (before the safety factor), and the log-sums'.
    pub borrowed: Option<NoiseScale>,
    #[serde(default)]
    pub sums: Option<NoiseScale>,
    /// The warm-up profile the guard read the first phase's sums around (none before it
    /// existed, and in a parallel trial).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<Warmup>,
    /// The history's pooled sessions that saw a gross outlier: whether the likelihood ratio
    /// decided (`OnePhase::WithoutOutliers`, `UntilOutlier`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub outliers: usize,
    /// Of the history's pooled sessions that could tell, how many showed two modes in their runs
    /// (none recorded: none could tell, or recorded before it): the likelihood ratio's keep level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modes: Option<usize>,
    /// Pairs of the kept sessions that showed one mode, none two (`Borrowed::modes_pairs`): below
    /// `ONE_MODE_TOLD_PAIRS` the ratio does not keep at its one-mode level. 0 in records written
    /// before it, whose rules (`Levels::ratio_one_mode_told_pairs` 0) do not read it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub modes_pairs: usize,
    /// Whether the pairs' log-sums entered the variance guard (they do, except in a parallel
    /// trial measured by an older worker, which recorded none).
    pub with_sums: bool,
    /// How a pair becomes a log-ratio: the metric's direction and its elasticity to latency.
    pub direction: Direction,
    pub elasticity: f64,
    /// The parallel sweep's trial whose runs decided (a re-checked winner's row holds two).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trial: Option<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Every decision record in `store`, oldest first.
pub fn records(store: &crate::store::Store) -> crate::error::Result<Vec<DecisionRecord>> {
    store.decisions()
}

impl DecisionRecord {
    /// The record of a decision made by `seq` on a row with this id and candidate.
    pub fn new(id: u64, commit: &str, seq: &Sequential, direction: Direction, elasticity: f64, with_sums: bool) -> DecisionRecord {
        DecisionRecord {
            id,
            commit: commit.to_string(),
            ratchet: env!("CARGO_PKG_VERSION").to_string(),
            params: seq.params.clone(),
            borrowed: seq.borrowed.as_ref().map(|b| b.scale),
            sums: seq.borrowed.as_ref().and_then(|b| b.sums),
            warmup: seq.borrowed.as_ref().and_then(|b| b.warmup.clone()),
            outliers: seq.borrowed.as_ref().map_or(0, |b| b.outliers),
            modes: seq.borrowed.as_ref().and_then(|b| b.modes),
            modes_pairs: seq.borrowed.as_ref().map_or(0, |b| b.modes_pairs),
            with_sums,
            direction,
            elasticity,
            trial: None,
        }
    }

    /// The procedure this record describes.
    pub fn sequential(&self) -> Sequential {
        let borrowed = self.borrowed.map(|s| Borrowed {
            warmup: self.warmup.clone(),
            outliers: self.outliers,
            modes: self.modes,
            modes_pairs: self.modes_pairs,
            ..Borrowed::new(s).with_sums(self.sums)
        });
        Sequential::new(self.params.clone()).with_history(borrowed)
    }
}

/// One pair of runs as the decision read it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RecordedPair {
    pub incumbent: f64,
    pub candidate: f64,
}

/// Each phase's pairs of a row's runs, in pair order: the runs of `trial` (all runs when
/// `None`), successful and not superseded, matched by their recorded phase and pair. `Err` when
/// the runs do not carry their pair and phase (recorded before they did), or a pair lacks a side.
pub fn batches(runs: &[&RunRecord], trial: Option<&str>) -> Result<(Vec<RecordedPair>, Vec<RecordedPair>), String> {
    let used: Vec<&RunRecord> = runs
        .iter()
        .copied()
        .filter(|r| r.status == RunStatus::Ok && !r.superseded && (trial.is_none() || r.trial.as_deref() == trial))
        .collect();
    if used.is_empty() {
        return Err("no successful runs of it are in runs.jsonl".into());
    }
    let mut out: [Vec<Option<RecordedPair>>; 2] = [vec![], vec![]];
    for r in &used {
        let (Some(pair), Some(phase)) = (r.pair, r.phase.as_deref()) else {
            return Err(format!("run {} carries no pair and phase (recorded before runs did)", r.run));
        };
        let k = match phase {
            "main" => 0,
            "confirmation" => 1,
            other => return Err(format!("run {} has an unknown phase {other:?}", r.run)),
        };
        if out[k].len() <= pair {
            out[k].resize(pair + 1, None);
        }
        // Missing values enter as NaN, as the loop reads them.
        let v = r.value.unwrap_or(f64::NAN);
        let slot = out[k][pair].get_or_insert(RecordedPair { incumbent: f64::NAN, candidate: f64::NAN });
        let side = match r.side {
            Side::Incumbent => &mut slot.incumbent,
            Side::Candidate => &mut slot.candidate,
        };
        if !side.is_nan() {
            return Err(format!("{} pair {pair} has two {} runs", phase, r.side.as_str()));
        }
        *side = v;
    }
    let finish = |v: Vec<Option<RecordedPair>>, phase: &str| -> Result<Vec<RecordedPair>, String> {
        v.into_iter()
            .enumerate()
            .map(|(i, p)| match p {
                Some(p) if !p.incumbent.is_nan() && !p.candidate.is_nan() => Ok(p),
                _ => Err(format!("{phase} pair {i} lacks a run of one side")),
            })
            .collect()
    };
    let [main, confirm] = out;
    Ok((finish(main, "main")?, finish(confirm, "confirmation")?))
}

/// Run the recorded rule on the recorded pairs. `Err` when the procedure asks for a pair the
/// records do not hold (the records end before the decision did).
pub fn decide(rec: &DecisionRecord, main: &[RecordedPair], confirm: &[RecordedPair]) -> Result<Decision, String> {
    let seq = rec.sequential();
    let logs = |ps: &[RecordedPair]| -> (Vec<f64>, Vec<f64>) {
        let pairs: Vec<(f64, f64)> = ps.iter().map(|p| (p.incumbent, p.candidate)).collect();
        let ratios = crate::stats::log_ratios(&pairs, rec.direction).into_iter().map(|x| x / rec.elasticity).collect();
        let sums = if rec.with_sums { crate::stats::sequential::log_sums(&pairs, rec.direction, rec.elasticity) } else { vec![] };
        (ratios, sums)
    };
    let ((m, ms), (c, cs)) = (logs(main), logs(confirm));
    // Feed the pairs as the loop measured them: only as many as the procedure asked for so far.
    let (mut nm, mut nc) = (0, 0);
    loop {
        let sums = |s: &[f64], n: usize| s[..n.min(s.len())].to_vec();
        match seq.next_runs(&m[..nm], &c[..nc], &sums(&ms, nm), &sums(&cs, nc)) {
            Next::Done(d) => {
                if nm != m.len() || nc != c.len() {
                    return Err(format!("the procedure decided after {nm} + {nc} pairs, but {} + {} were recorded", m.len(), c.len()));
                }
                return Ok(d);
            }
            Next::Measure { phase, pairs } => {
                let (n, have, what) = match phase {
                    Phase::Main => (&mut nm, m.len(), "main"),
                    Phase::Confirm => (&mut nc, c.len(), "confirmation"),
                };
                if *n + pairs > have {
                    return Err(format!("the procedure asks for {what} pair {} but the records hold {have}", *n + pairs - 1));
                }
                *n += pairs;
            }
        }
    }
}

/// How one row's replay came out.
#[derive(Debug, Clone, PartialEq)]
pub enum Replayed {
    /// The procedure decided what the row says, with the same p-value, level and pairs.
    Same(Decision),
    /// It decided otherwise, or the records end before (or go on past) its decision: what
    /// differs, and the replayed decision where there was one.
    Differs { decision: Option<Decision>, what: Vec<String> },
    /// It could not be replayed (no record of its rule, runs recorded without their pairs): why.
    Cannot(String),
}

/// The row's status for a verdict.
pub fn status_of(v: Verdict) -> Status {
    match v {
        Verdict::Keep => Status::Keep,
        Verdict::Revert => Status::Revert,
        Verdict::Inconclusive => Status::Inconclusive,
        Verdict::Unconfirmed => Status::Unconfirmed,
    }
}

/// Whether a row was decided by the sequential test (the rows a replay covers).
pub fn is_decided(row: &ResultRow) -> bool {
    matches!(row.status, Status::Keep | Status::Revert | Status::Inconclusive | Status::Unconfirmed) && row.p_value.is_some()
}

/// Replay one decided row from its runs and its decision record (the last one for its id and
/// commit, if any).
pub fn replay(row: &ResultRow, runs: &[&RunRecord], records: &[DecisionRecord]) -> Replayed {
    let Some(rec) = records.iter().rev().find(|r| r.id == row.id && r.commit == row.commit) else {
        return Replayed::Cannot("no record of its rule in decisions.jsonl (decided before ratchet kept one)".into());
    };
    let (main, confirm) = match batches(runs, rec.trial.as_deref()) {
        Ok(b) => b,
        Err(why) => return Replayed::Cannot(why),
    };
    let d = match decide(rec, &main, &confirm) {
        Ok(d) => d,
        Err(why) => return Replayed::Differs { decision: None, what: vec![why] },
    };
    let mut what = vec![];
    if status_of(d.verdict) != row.status {
        what.push(format!("status: recorded {}, replayed {}", row.status.as_str(), status_of(d.verdict).as_str()));
    }
    let close = |a: f64, b: f64| a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs());
    for (name, recorded, replayed) in
        [("p", row.p_value, d.p_value), ("p_threshold", row.p_threshold, d.p_threshold), ("p_adjusted", row.p_adjusted, d.p_adjusted)]
    {
        match recorded {
            Some(r) if close(r, replayed) => {}
            r => what.push(format!("{name}: recorded {}, replayed {replayed:e}", r.map_or("none".into(), |r| format!("{r:e}")))),
        }
    }
    if what.is_empty() {
        Replayed::Same(d)
    } else {
        Replayed::Differs { decision: Some(d), what }
    }
}
