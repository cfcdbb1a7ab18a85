//! Results on disk: one row per experiment in `results/results.csv` (rewritten atomically, so a
//! crash never leaves a torn row), every raw run in `results/runs.jsonl`, and ratchet's memory of
//! the incumbent in `.ratchet/state.json`.

use crate::bench::RunRecord;
use crate::error::WithPath;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

pub const RESULTS_CSV: &str = "results.csv";
pub const RUNS_JSONL: &str = "runs.jsonl";
/// What decided each row besides its runs (`replay::DecisionRecord`), one JSON object a line.
pub const DECISIONS_JSONL: &str = "decisions.jsonl";

/// How an experiment ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Significant gain above the minimum effect: the commit stays.
    Keep,
    /// No such gain (or the keep was not confirmed): back to the incumbent.
    Revert,
    /// The budget of pairs ran out while a worthwhile gain was still plausible: reverted, but
    /// it may deserve a rerun with more pairs.
    Inconclusive,
    /// The first phase showed a worthwhile gain that the confirmation batch did not: reverted;
    /// rerun it with more pairs to settle it.
    Unconfirmed,
    /// The candidate compiles to the incumbent's HLO (metadata and source tables aside): it
    /// cannot change the kernel. Reverted after the first pair.
    #[serde(rename = "no-op")]
    NoOp,
    /// The candidate's benchmark exited non-zero or was killed.
    Crash,
    Timeout,
    /// The candidate reported nothing usable, or failed its correctness check.
    Invalid,
    Interrupted,
    /// ratchet could not finish the comparison (e.g. the incumbent's benchmark failed).
    Error,
    /// A sweep's hypothesis that did not apply to the incumbent: nothing was run or committed.
    Skipped,
    /// A sweep's hypothesis that breaks a rule (it changes the benchmark harness): nothing was
    /// run or committed.
    Refused,
}

/// What a status means for the review: the one grouping every table, footer and chart uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StatusClass {
    /// The commit stayed: `keep`.
    Kept,
    /// Measured and not kept, the kernel ran fine: `revert`, `inconclusive`, `unconfirmed`,
    /// `no-op`. Never drawn as a failure.
    NotKept,
    /// The candidate itself failed: `crash`, `timeout`, `invalid`.
    Failed,
    /// Nothing was decided about the kernel: `interrupted`, `error`, `skipped`, `refused`.
    NotRun,
}

impl Status {
    pub fn class(self) -> StatusClass {
        match self {
            Status::Keep => StatusClass::Kept,
            Status::Revert | Status::Inconclusive | Status::Unconfirmed | Status::NoOp => StatusClass::NotKept,
            Status::Crash | Status::Timeout | Status::Invalid => StatusClass::Failed,
            Status::Interrupted | Status::Error | Status::Skipped | Status::Refused => StatusClass::NotRun,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Keep => "keep",
            Status::Revert => "revert",
            Status::Inconclusive => "inconclusive",
            Status::Unconfirmed => "unconfirmed",
            Status::NoOp => "no-op",
            Status::Crash => "crash",
            Status::Timeout => "timeout",
            Status::Invalid => "invalid",
            Status::Interrupted => "interrupted",
            Status::Error => "error",
            Status::Skipped => "skipped",
            Status::Refused => "refused",
        }
    }

    /// Every status, in the order the README and docs/experiments.md list them (`statuses_are_all_listed` checks).
    pub const ALL: [Status; 12] = [
        Status::Keep,
        Status::Revert,
        Status::Inconclusive,
        Status::Unconfirmed,
        Status::NoOp,
        Status::Crash,
        Status::Timeout,
        Status::Invalid,
        Status::Interrupted,
        Status::Error,
        Status::Skipped,
        Status::Refused,
    ];

    pub fn parse(s: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|x| x.as_str().eq_ignore_ascii_case(s.trim()))
    }
}

/// One row of `results/results.csv`. Column names are stable (documented in docs/results.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultRow {
    pub id: u64,
    pub time: String,
    pub commit: String,
    pub incumbent: String,
    pub message: String,
    pub status: Status,
    /// The deciding metric (score, latency, tflops).
    pub metric: String,
    /// Candidate's value of the deciding metric (median over its runs).
    pub value: Option<f64>,
    pub incumbent_value: Option<f64>,
    /// Estimated change of the deciding metric in percent, positive = better.
    pub delta_pct: Option<f64>,
    pub ci_low_pct: Option<f64>,
    pub ci_high_pct: Option<f64>,
    pub p_value: Option<f64>,
    pub score: Option<f64>,
    pub latency_ms: Option<f64>,
    pub util_pct: Option<f64>,
    pub tflops: Option<f64>,
    pub intensity: Option<f64>,
    pub bw_pct: Option<f64>,
    pub regime: Option<String>,
    pub gap_ms: Option<f64>,
    /// Benchmark processes run (both sides).
    pub runs: u32,
    pub wall_s: f64,
    pub latency_source: Option<String>,
    /// The candidate's median of its own per-iteration timings (beside a trace-derived latency).
    #[serde(default)]
    pub host_latency_ms: Option<f64>,
    /// The kernel's module in the trace, when the latency came from it.
    #[serde(default)]
    pub kernel: Option<String>,
    /// Op counts of the candidate's compiled HLO (the article's "HLO stats").
    #[serde(default)]
    pub hlo_dot: Option<u32>,
    #[serde(default)]
    pub hlo_exp: Option<u32>,
    #[serde(default)]
    pub hlo_reduce: Option<u32>,
    #[serde(default)]
    pub hlo_copy: Option<u32>,
    #[serde(default)]
    pub hlo_fusion: Option<u32>,
    #[serde(default)]
    pub hlo_custom_call: Option<u32>,
    /// The sweep hypothesis this row ran: `<file name>@<content hash>` (empty for `ratchet MSG`).
    #[serde(default)]
    pub hypothesis: String,
    /// The hypothesis's tags, separated by `;`.
    #[serde(default)]
    pub tags: String,
    /// Why: the decision's reason or the failure.
    pub note: String,
    /// The level the deciding look was tested at: `p_value` is significant when at most this.
    #[serde(default)]
    pub p_threshold: Option<f64>,
    /// `p_value` adjusted for the looks (`p_value * alpha / p_threshold`, at most 1).
    #[serde(default)]
    pub p_adjusted: Option<f64>,
    /// The estimate as a speed-up in percent (latency terms, whatever the metric): the unit of
    /// `min_effect_pct`.
    #[serde(default)]
    pub speedup_pct: Option<f64>,
    /// The confirmation batch's own estimate and interval of the deciding metric (free of the
    /// first phase's selection: the unbiased figure for a kept change).
    #[serde(default)]
    pub confirm_delta_pct: Option<f64>,
    #[serde(default)]
    pub confirm_ci_low_pct: Option<f64>,
    #[serde(default)]
    pub confirm_ci_high_pct: Option<f64>,
    /// The noise scale that decided: `history` (borrowed) or `own` (the pairs' own t-test), and
    /// the sd of one pair's log-ratio behind it, in percent (speed-up terms).
    #[serde(default)]
    pub noise_scale: String,
    #[serde(default)]
    pub noise_sd_pct: Option<f64>,
    /// Of `hlo_copy`, the copies that carry a while loop's state (the Pallas interpreter's grid
    /// loop on CPU), not defensive copies.
    #[serde(default)]
    pub hlo_loop_copy: Option<u32>,
    /// Op counts inside the candidate's Pallas kernel (TPU/GPU): `matmul=2;exp=2;...`.
    #[serde(default)]
    pub kernel_ops: String,
    /// The candidate's tunables and shapes as its benchmark reported them (`meta`):
    /// `BKV=128;BQ=128;...`, for spill-cliff detection across a sweep.
    #[serde(default)]
    pub meta: String,
    /// `p_value` and `p_adjusted` came from a look on the borrowed scale: they are p-values
    /// given that the noise is what the history says (the false-keep bound does not rest on it:
    /// docs/decisions.md, "What a row reports").
    #[serde(default)]
    pub p_conditional: bool,
    /// The scale the decision borrowed (sd of one pair's log-ratio before the safety factor, in
    /// percent, and df; the log-sums' spread the guard read; the history sessions pooled):
    /// with runs.jsonl, what replays the decision after noise.json has forgotten them.
    #[serde(default)]
    pub borrowed_sd_pct: Option<f64>,
    #[serde(default)]
    pub borrowed_df: Option<f64>,
    #[serde(default)]
    pub borrowed_sums_sd_pct: Option<f64>,
    #[serde(default)]
    pub borrowed_sums_df: Option<f64>,
    #[serde(default)]
    pub borrowed_from: String,
    /// The coverage, in percent, that `ci_low_pct`..`ci_high_pct` really has: the decision's
    /// level (96 by default) once there are pairs enough for it, less with fewer (the Walsh
    /// averages' whole range: 50 at 2 pairs, 87.5 at 4); `confirm_ci_level_pct` the same for
    /// the confirmation's own interval. Empty in rows written before it was recorded.
    #[serde(default)]
    pub ci_level_pct: Option<f64>,
    #[serde(default)]
    pub confirm_ci_level_pct: Option<f64>,
}

use crate::fsutil::write_atomic_then;
/// Moved to [`crate::fsutil`]; re-exported so `store::now` and `store::write_atomic` keep working.
pub use crate::fsutil::{now, write_atomic};

impl ResultRow {
    /// The row as results.csv stores it: line breaks in the message and the note escaped (`\n`,
    /// `\r`, `\\`), so every row is one line for line tools; [`ResultRow::from_csv`] undoes it.
    pub fn for_csv(&self) -> ResultRow {
        let esc = |s: &str| s.replace('\\', "\\\\").replace('\r', "\\r").replace('\n', "\\n");
        ResultRow { message: esc(&self.message), note: esc(&self.note), ..self.clone() }
    }

    /// The row as read from results.csv, its text fields unescaped.
    pub fn from_csv(self) -> ResultRow {
        ResultRow { message: unescape_line(&self.message), note: unescape_line(&self.note), ..self }
    }
}

/// Undo [`ResultRow::for_csv`]'s escapes; any other backslash stays as it is.
pub fn unescape_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('\\') => out.push('\\'),
            Some(o) => {
                out.push('\\');
                out.push(o);
            }
            None => out.push('\\'),
        }
    }
    out
}

impl ResultRow {
    /// A row with no measurement (skipped, or interrupted before a decision): figures empty,
    /// the time now.
    pub fn unmeasured(id: u64, status: Status, message: &str, commit: String, incumbent: String) -> ResultRow {
        ResultRow {
            id,
            time: now(),
            commit,
            incumbent,
            message: message.to_string(),
            status,
            metric: String::new(),
            value: None,
            incumbent_value: None,
            delta_pct: None,
            ci_low_pct: None,
            ci_high_pct: None,
            p_value: None,
            score: None,
            latency_ms: None,
            util_pct: None,
            tflops: None,
            intensity: None,
            bw_pct: None,
            regime: None,
            gap_ms: None,
            runs: 0,
            wall_s: 0.0,
            latency_source: None,
            host_latency_ms: None,
            kernel: None,
            hlo_dot: None,
            hlo_exp: None,
            hlo_reduce: None,
            hlo_copy: None,
            hlo_fusion: None,
            hlo_custom_call: None,
            hypothesis: String::new(),
            tags: String::new(),
            note: String::new(),
            p_threshold: None,
            p_adjusted: None,
            speedup_pct: None,
            confirm_delta_pct: None,
            confirm_ci_low_pct: None,
            confirm_ci_high_pct: None,
            noise_scale: String::new(),
            noise_sd_pct: None,
            hlo_loop_copy: None,
            kernel_ops: String::new(),
            meta: String::new(),
            p_conditional: false,
            borrowed_sd_pct: None,
            borrowed_df: None,
            borrowed_sums_sd_pct: None,
            borrowed_sums_df: None,
            borrowed_from: String::new(),
            ci_level_pct: None,
            confirm_ci_level_pct: None,
        }
    }
}

pub struct Store {
    dir: PathBuf,
}

impl Store {
    pub fn new(results_dir: &Path) -> Store {
        Store { dir: results_dir.to_path_buf() }
    }

    /// `results/`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn csv_path(&self) -> PathBuf {
        self.dir.join(RESULTS_CSV)
    }

    pub fn runs_path(&self) -> PathBuf {
        self.dir.join(RUNS_JSONL)
    }

    /// All rows, oldest first. A missing file is an empty table.
    pub fn rows(&self) -> Result<Vec<ResultRow>> {
        let path = self.csv_path();
        if !path.exists() {
            return Ok(vec![]);
        }
        let mut rdr = csv::Reader::from_path(&path).map_err(|e| Error::failure(format!("cannot read {}: {e}", path.display())))?;
        rdr.deserialize::<ResultRow>()
            .enumerate()
            .map(|(i, r)| {
                r.map(ResultRow::from_csv).map_err(|e| {
                    Error::failure(format!("{} row {}: {e}", path.display(), i + 1))
                        .hint("the file is written only by ratchet; restore it from a backup or move it aside")
                })
            })
            .collect()
    }

    /// The next experiment id.
    pub fn next_id(&self) -> Result<u64> {
        Ok(self.rows()?.iter().map(|r| r.id).max().unwrap_or(0) + 1)
    }

    /// Append a row: the whole file is written to a temporary file and renamed over the old one,
    /// so readers see the old table or the new one, never half a row.
    pub fn append_row(&self, row: &ResultRow) -> Result<()> {
        std::fs::create_dir_all(&self.dir).with_path(&self.dir)?;
        // Temporary files of an append that was killed before its rename.
        let stale = format!(".{RESULTS_CSV}.tmp.");
        for e in std::fs::read_dir(&self.dir).with_path(&self.dir)?.flatten() {
            if e.file_name().to_string_lossy().starts_with(&stale) {
                let _ = std::fs::remove_file(e.path());
            }
        }
        let mut rows = self.rows()?;
        rows.push(row.clone());
        let mut w = csv::Writer::from_writer(vec![]);
        for r in &rows {
            w.serialize(r.for_csv()).map_err(|e| Error::failure(format!("cannot encode a results row: {e}")))?;
        }
        let bytes = w.into_inner().map_err(|e| Error::failure(format!("cannot encode results: {e}")))?;
        write_atomic_then(&self.csv_path(), &bytes, || crate::fault::point("mid-append"))
    }

    /// Append one raw run to runs.jsonl in a single write. A torn last line left by a crash is cut
    /// off first, so the file stays one JSON object per line.
    pub fn append_run(&self, rec: &RunRecord) -> Result<()> {
        let line = serde_json::to_vec(rec).map_err(|e| Error::failure(format!("cannot encode a run: {e}")))?;
        self.append_line(&self.runs_path(), line)
    }

    /// Append the rule of one decision to decisions.jsonl (before its row: a row never lacks
    /// its record; a record whose row never landed is ignored by its id and commit).
    pub fn append_decision(&self, rec: &impl Serialize) -> Result<()> {
        let line = serde_json::to_vec(rec).map_err(|e| Error::failure(format!("cannot encode a decision record: {e}")))?;
        self.append_line(&self.dir.join(DECISIONS_JSONL), line)
    }

    /// Every decision record (lines that do not parse are skipped). A missing file is none.
    pub fn decisions<T: serde::de::DeserializeOwned>(&self) -> Result<Vec<T>> {
        let path = self.dir.join(DECISIONS_JSONL);
        match std::fs::read_to_string(&path) {
            Ok(t) => Ok(t.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(vec![]),
            Err(e) => Err(e.into()),
        }
    }

    /// One JSON line appended in a single write and synced, after cutting a torn last line.
    fn append_line(&self, path: &Path, mut line: Vec<u8>) -> Result<()> {
        std::fs::create_dir_all(&self.dir).with_path(&self.dir)?;
        line.push(b'\n');
        let mut f = std::fs::OpenOptions::new().read(true).append(true).create(true).open(path).with_path(path)?;
        truncate_torn_tail(&mut f)?;
        f.write_all(&line).with_path(path)?;
        f.sync_data().with_path(path)?;
        Ok(())
    }

    /// Remove the runs of `experiment` (left by one that was killed before it recorded its row,
    /// and is about to run again under the same id). The file is rewritten atomically.
    pub fn drop_runs(&self, experiment: &str) -> Result<()> {
        let path = self.runs_path();
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        let keep: String = text
            .lines()
            .filter(|l| {
                let v: Option<serde_json::Value> = serde_json::from_str(l).ok();
                v.is_some_and(|v| v.get("experiment").and_then(|e| e.as_str()) != Some(experiment))
            })
            .flat_map(|l| [l, "\n"])
            .collect();
        if keep.len() != text.len() {
            write_atomic(&path, keep.as_bytes())?;
        }
        Ok(())
    }

    /// All raw runs (lines that do not parse are skipped).
    pub fn runs(&self) -> Result<Vec<RunRecord>> {
        let path = self.runs_path();
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
            Err(e) => return Err(e.into()),
        };
        Ok(text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect())
    }
}

fn truncate_torn_tail(f: &mut std::fs::File) -> Result<()> {
    let len = f.metadata()?.len();
    if len == 0 {
        return Ok(());
    }
    let window = len.min(1 << 20);
    f.seek(SeekFrom::Start(len - window))?;
    let mut buf = vec![0; window as usize];
    f.read_exact(&mut buf)?;
    if buf.last() == Some(&b'\n') {
        return Ok(());
    }
    let keep = match buf.iter().rposition(|&b| b == b'\n') {
        Some(p) => len - window + p as u64 + 1,
        None if window == len => 0,
        None => return Ok(()), // one enormous line: leave it, readers skip it
    };
    f.set_len(keep)?;
    Ok(())
}

/// What ratchet remembers between experiments: the incumbent of each branch.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct State {
    #[serde(default)]
    pub incumbents: BTreeMap<String, String>,
}

impl State {
    pub fn load(state_dir: &Path) -> State {
        std::fs::read_to_string(state_dir.join("state.json")).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default()
    }

    pub fn save(&self, state_dir: &Path) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(self).expect("state serializes");
        write_atomic(&state_dir.join("state.json"), &bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: u64) -> ResultRow {
        ResultRow {
            id,
            time: "2026-11-22T00:00:00Z".into(),
            commit: "abc".into(),
            incumbent: "def".into(),
            message: "experiment: a, \"quoted\"\nmessage".into(),
            status: Status::Keep,
            metric: "score".into(),
            value: Some(1.5),
            incumbent_value: Some(1.0),
            delta_pct: Some(50.0),
            ci_low_pct: Some(40.0),
            ci_high_pct: Some(60.0),
            p_value: Some(0.001),
            score: Some(1.5),
            latency_ms: Some(2.0),
            util_pct: None,
            tflops: None,
            intensity: None,
            bw_pct: None,
            regime: None,
            gap_ms: None,
            runs: 10,
            wall_s: 3.5,
            latency_source: Some("host".into()),
            host_latency_ms: Some(2.1),
            kernel: Some("jit_flash_attention".into()),
            hlo_dot: Some(2),
            hlo_exp: Some(2),
            hlo_reduce: None,
            hlo_copy: Some(0),
            hlo_fusion: None,
            hlo_custom_call: None,
            hypothesis: "01-a.toml@0123456789ab".into(),
            tags: "block-size;bq".into(),
            note: "why".into(),
            p_threshold: Some(0.004),
            p_adjusted: Some(0.005),
            speedup_pct: Some(22.5),
            confirm_delta_pct: Some(45.0),
            confirm_ci_low_pct: Some(30.0),
            confirm_ci_high_pct: Some(60.0),
            noise_scale: "history".into(),
            noise_sd_pct: Some(1.4),
            hlo_loop_copy: None,
            kernel_ops: String::new(),
            meta: String::new(),
            p_conditional: true,
            borrowed_sd_pct: Some(1.12),
            borrowed_df: Some(15.0),
            borrowed_sums_sd_pct: Some(1.3),
            borrowed_sums_df: Some(15.0),
            borrowed_from: "calibrate@2026-11-26T01:00:00Z".into(),
            ci_level_pct: Some(96.875),
            confirm_ci_level_pct: Some(50.0),
        }
    }

    #[test]
    fn rows_round_trip_and_ids_increase() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::new(d.path());
        assert_eq!(s.next_id().unwrap(), 1);
        s.append_row(&row(1)).unwrap();
        s.append_row(&row(2)).unwrap();
        let rows = s.rows().unwrap();
        assert_eq!(rows, vec![row(1), row(2)]);
        assert_eq!(s.next_id().unwrap(), 3);
    }

    #[test]
    fn statuses_are_all_listed() {
        // Every variant parses back from its name through ALL (an exhaustive match, so a new
        // status that is not added here fails to compile, and one missing from ALL fails here).
        for s in Status::ALL {
            assert_eq!(Status::parse(s.as_str()), Some(s));
            match s {
                Status::Keep
                | Status::Revert
                | Status::Inconclusive
                | Status::Unconfirmed
                | Status::NoOp
                | Status::Crash
                | Status::Timeout
                | Status::Invalid
                | Status::Interrupted
                | Status::Error
                | Status::Skipped
                | Status::Refused => (),
            };
        }
        let mut names: Vec<&str> = Status::ALL.iter().map(|s| s.as_str()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 12, "{names:?}");
        // Measured-but-not-kept outcomes are never counted as failures.
        for s in [Status::Revert, Status::Inconclusive, Status::Unconfirmed, Status::NoOp] {
            assert_eq!(s.class(), StatusClass::NotKept);
        }
    }

    #[test]
    fn a_table_written_before_the_decision_columns_still_reads() {
        // The columns up to `note`, as results.csv had them before p_threshold and the others.
        let d = tempfile::tempdir().unwrap();
        let s = Store::new(d.path());
        let mut w = csv::Writer::from_writer(vec![]);
        w.serialize(row(1)).unwrap();
        let bytes = w.into_inner().unwrap();
        let mut rdr = csv::Reader::from_reader(bytes.as_slice());
        let header = rdr.headers().unwrap().clone();
        let n = header.iter().position(|h| h == "p_threshold").unwrap();
        let rec = rdr.records().next().unwrap().unwrap();
        let mut w = csv::Writer::from_writer(vec![]);
        w.write_record(header.iter().take(n)).unwrap();
        w.write_record(rec.iter().take(n)).unwrap();
        std::fs::write(s.csv_path(), w.into_inner().unwrap()).unwrap();
        let rows = s.rows().unwrap();
        assert_eq!(rows[0].note, "why");
        assert_eq!((rows[0].p_threshold, rows[0].noise_scale.as_str()), (None, ""));
    }

    #[test]
    fn torn_run_line_is_cut_before_append() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::new(d.path());
        std::fs::write(s.runs_path(), b"{\"torn\": tr").unwrap();
        let rec: RunRecord = serde_json::from_str(
            r#"{"experiment":"1","run":0,"side":"candidate","commit":"c","time":"t","status":"ok","wall_s":1.0,
            "latency_ms":1.0,"latency_source":"host","value":1.0,"flops":null,"bytes":null,"min_bytes":null,"out_dir":"/x"}"#,
        )
        .unwrap();
        s.append_run(&rec).unwrap();
        s.append_run(&rec).unwrap();
        let text = std::fs::read_to_string(s.runs_path()).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert_eq!(s.runs().unwrap().len(), 2);
    }
}
