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

    /// All rows, oldest first. A missing file is an empty table. A last line without its line
    /// break is a row whose write was cut off (a kill, a power cut): it is not a row, and the
    /// next append cuts it off.
    pub fn rows(&self) -> Result<Vec<ResultRow>> {
        let path = self.csv_path();
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
            Err(e) => return Err(Error::failure(format!("cannot read {}: {e}", path.display()))),
        };
        let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
        let mut rdr = csv::Reader::from_reader(&bytes[..whole]);
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

    /// Whether a row with this id is recorded. Ids only grow down the table, so the last row
    /// answers for any id above it without reading the rest.
    pub fn has_row(&self, id: u64) -> Result<bool> {
        match self.last_row_id()? {
            None => Ok(false),
            Some(last) if last < id => Ok(false),
            Some(last) if last == id => Ok(true),
            Some(_) => Ok(self.rows()?.iter().any(|r| r.id == id)),
        }
    }

    /// The id of the table's last whole row, read from the file's end.
    pub fn last_row_id(&self) -> Result<Option<u64>> {
        let path = self.csv_path();
        let mut f = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::failure(format!("cannot read {}: {e}", path.display()))),
        };
        let Some(line) = last_whole_line(&mut f).with_path(&path)? else { return Ok(None) };
        // The header is not a row; `id` is the first column.
        let first = line.split(|&b| b == b',').next().unwrap_or_default();
        Ok(std::str::from_utf8(first).ok().and_then(|t| t.trim_matches('"').parse().ok()))
    }

    /// The next experiment id.
    pub fn next_id(&self) -> Result<u64> {
        Ok(self.rows()?.iter().map(|r| r.id).max().unwrap_or(0) + 1)
    }

    /// Append a row: one line in one write, synced, after cutting a torn last line (see
    /// [`Store::rows`]), so a row costs the same at any table size and a reader sees the old
    /// table or the new one. A table whose header is not this version's (written before a column
    /// was added) is rewritten whole, once, through a temporary file and a rename.
    pub fn append_row(&self, row: &ResultRow) -> Result<()> {
        std::fs::create_dir_all(&self.dir).with_path(&self.dir)?;
        // Temporary files of a rewrite that was killed before its rename.
        let stale = format!(".{RESULTS_CSV}.tmp.");
        for e in std::fs::read_dir(&self.dir).with_path(&self.dir)?.flatten() {
            if e.file_name().to_string_lossy().starts_with(&stale) {
                let _ = std::fs::remove_file(e.path());
            }
        }
        let encode = |rows: &[&ResultRow], header: bool| -> Result<Vec<u8>> {
            let mut w = csv::WriterBuilder::new().has_headers(header).from_writer(vec![]);
            for r in rows {
                w.serialize(r.for_csv()).map_err(|e| Error::failure(format!("cannot encode a results row: {e}")))?;
            }
            w.into_inner().map_err(|e| Error::failure(format!("cannot encode results: {e}")))
        };
        let line = encode(&[row], false)?;
        let with_header = encode(&[row], true)?;
        let header = &with_header[..with_header.len() - line.len()];
        let path = self.csv_path();
        let mut f = std::fs::OpenOptions::new().read(true).append(true).create(true).open(&path).with_path(&path)?;
        truncate_torn_tail(&mut f).with_path(&path)?;
        let len = f.metadata().with_path(&path)?.len();
        let mut start = vec![0; header.len().min(len as usize)];
        f.seek(SeekFrom::Start(0)).and_then(|_| f.read_exact(&mut start)).with_path(&path)?;
        if len > 0 && start != header {
            drop(f);
            let mut rows = self.rows()?;
            rows.push(row.clone());
            let bytes = encode(&rows.iter().collect::<Vec<_>>(), true)?;
            return write_atomic_then(&path, &bytes, || crate::fault::point("mid-append"));
        }
        let bytes = if len == 0 { with_header } else { line };
        let mut rest = &bytes[..];
        if crate::fault::armed("mid-append") {
            // What a kill in the middle of the write leaves: a torn row.
            let (first, second) = bytes.split_at(bytes.len() / 2);
            f.write_all(first).with_path(&path)?;
            crate::fault::point("mid-append");
            rest = second;
        }
        f.write_all(rest).with_path(&path)?;
        crate::fsutil::sync_data(&f).with_path(&path)?;
        Ok(())
    }

    /// Append one raw run to runs.jsonl in a single write. A torn last line left by a crash is cut
    /// off first, so the file stays one JSON object per line.
    pub fn append_run(&self, rec: &RunRecord) -> Result<()> {
        self.append_runs(std::slice::from_ref(rec))
    }

    /// Append runs in one write and one fsync (a parallel sweep records a trial's runs at once).
    pub fn append_runs(&self, recs: &[RunRecord]) -> Result<()> {
        let mut lines = vec![];
        for rec in recs {
            serde_json::to_writer(&mut lines, rec).map_err(|e| Error::failure(format!("cannot encode a run: {e}")))?;
            lines.push(b'\n');
        }
        if lines.is_empty() {
            return Ok(());
        }
        self.append_lines(&self.runs_path(), lines)
    }

    /// Append the rule of one decision to decisions.jsonl (before its row: a row never lacks
    /// its record; a record whose row never landed is ignored by its id and commit).
    pub fn append_decision(&self, rec: &impl Serialize) -> Result<()> {
        let mut line = serde_json::to_vec(rec).map_err(|e| Error::failure(format!("cannot encode a decision record: {e}")))?;
        line.push(b'\n');
        self.append_lines(&self.dir.join(DECISIONS_JSONL), line)
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

    /// Whole lines appended in a single write and synced, after cutting a torn last line.
    fn append_lines(&self, path: &Path, lines: Vec<u8>) -> Result<()> {
        std::fs::create_dir_all(&self.dir).with_path(&self.dir)?;
        let mut f = std::fs::OpenOptions::new().read(true).append(true).create(true).open(path).with_path(path)?;
        truncate_torn_tail(&mut f).with_path(path)?;
        f.write_all(&lines).with_path(path)?;
        crate::fsutil::sync_data(&f).with_path(path)?;
        Ok(())
    }

    /// Remove the runs of `experiment` (left by one that was killed before it recorded its row,
    /// and is about to run again under the same id, or given back whole). They are the file's
    /// last lines: runs are appended under the lock, and an experiment's come after those of
    /// every row before it. So only the end is read, and cut in place.
    pub fn drop_runs(&self, experiment: &str) -> Result<()> {
        let path = self.runs_path();
        let mut f = match std::fs::OpenOptions::new().read(true).write(true).open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e).with_path(&path),
        };
        truncate_torn_tail(&mut f).with_path(&path)?;
        let mut end = f.metadata().with_path(&path)?.len();
        let ours = |line: &[u8]| {
            let v: Option<serde_json::Value> = serde_json::from_slice(line).ok();
            v.is_some_and(|v| v.get("experiment").and_then(|e| e.as_str()) == Some(experiment))
        };
        while let Some((start, line)) = line_before(&mut f, end).with_path(&path)? {
            if !ours(&line) {
                break;
            }
            end = start;
        }
        if end < f.metadata().with_path(&path)?.len() {
            f.set_len(end).with_path(&path)?;
            crate::fsutil::sync_data(&f).with_path(&path)?;
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

/// Cut a last line that lacks its line break (a write cut off by a crash). Reads one byte when
/// the file is whole, so an append costs the same at any file size.
fn truncate_torn_tail(f: &mut std::fs::File) -> std::io::Result<()> {
    let len = f.metadata()?.len();
    if len == 0 || byte_at(f, len - 1)? == b'\n' {
        return Ok(());
    }
    let keep = match line_before(f, len)? {
        Some((start, _)) => start,
        None => 0,
    };
    f.set_len(keep)
}

fn byte_at(f: &mut std::fs::File, at: u64) -> std::io::Result<u8> {
    let mut b = [0];
    f.seek(SeekFrom::Start(at))?;
    f.read_exact(&mut b)?;
    Ok(b[0])
}

/// The line that ends at `end` (exclusive; the byte before `end` is its line break, or the
/// file's end): where it starts, and its bytes without the break. `None` at the file's start.
fn line_before(f: &mut std::fs::File, end: u64) -> std::io::Result<Option<(u64, Vec<u8>)>> {
    if end == 0 {
        return Ok(None);
    }
    let stop = if byte_at(f, end - 1)? == b'\n' { end - 1 } else { end };
    let mut start = stop;
    let mut line: Vec<u8> = vec![];
    const CHUNK: u64 = 64 * 1024;
    while start > 0 {
        let from = start.saturating_sub(CHUNK);
        let mut buf = vec![0; (start - from) as usize];
        f.seek(SeekFrom::Start(from))?;
        f.read_exact(&mut buf)?;
        match buf.iter().rposition(|&b| b == b'\n') {
            Some(p) => {
                line.splice(0..0, buf[p + 1..].iter().copied());
                start = from + p as u64 + 1;
                break;
            }
            None => {
                line.splice(0..0, buf);
                start = from;
            }
        }
    }
    Ok(Some((start, line)))
}

/// The file's last line that ends in a line break, without it.
fn last_whole_line(f: &mut std::fs::File) -> std::io::Result<Option<Vec<u8>>> {
    let len = f.metadata()?.len();
    let mut end = len;
    if len > 0 && byte_at(f, len - 1)? != b'\n' {
        // A torn last line is not a line.
        end = match line_before(f, len)? {
            Some((start, _)) => start,
            None => return Ok(None),
        };
    }
    Ok(line_before(f, end)?.map(|(_, l)| l))
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
        // The next append rewrites it once in today's columns; the one after appends a line.
        s.append_row(&row(2)).unwrap();
        assert_eq!(s.rows().unwrap().iter().map(|r| r.id).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(std::fs::read(s.csv_path()).unwrap(), rewritten(&s.rows().unwrap()));
    }

    /// The table as a whole rewrite writes it.
    fn rewritten(rows: &[ResultRow]) -> Vec<u8> {
        let mut w = csv::Writer::from_writer(vec![]);
        for r in rows {
            w.serialize(r.for_csv()).unwrap();
        }
        w.into_inner().unwrap()
    }

    #[test]
    fn an_appended_row_leaves_the_table_a_whole_rewrite_would_write() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::new(d.path());
        let mut rows = vec![];
        for id in 1..=3 {
            let mut r = row(id);
            r.message = format!("two\nlines {id}");
            s.append_row(&r).unwrap();
            rows.push(r);
        }
        assert_eq!(std::fs::read(s.csv_path()).unwrap(), rewritten(&rows));
        assert_eq!(s.rows().unwrap(), rows);
        assert_eq!(s.last_row_id().unwrap(), Some(3));
    }

    #[test]
    fn a_row_whose_write_was_cut_off_is_no_row_and_the_next_append_cuts_it() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::new(d.path());
        s.append_row(&row(1)).unwrap();
        let whole = std::fs::read(s.csv_path()).unwrap();
        let line = rewritten(&[row(2)]);
        let mut torn = whole.clone();
        // row(2)'s line, without the header before it.
        let second = &line[line.iter().position(|&b| b == b'\n').unwrap() + 1..];
        torn.extend_from_slice(&second[..second.len() / 2]);
        std::fs::write(s.csv_path(), &torn).unwrap();
        assert_eq!(s.rows().unwrap(), vec![row(1)], "a torn row is not read");
        assert_eq!(s.last_row_id().unwrap(), Some(1));
        assert!(!s.has_row(2).unwrap() && s.has_row(1).unwrap());
        s.append_row(&row(2)).unwrap();
        assert_eq!(std::fs::read(s.csv_path()).unwrap(), rewritten(&[row(1), row(2)]));
        // A table torn inside its header reads as empty and starts again with the header.
        std::fs::write(s.csv_path(), &whole[..10]).unwrap();
        assert!(s.rows().unwrap().is_empty() && s.last_row_id().unwrap().is_none());
        s.append_row(&row(3)).unwrap();
        assert_eq!(s.rows().unwrap(), vec![row(3)]);
    }

    #[test]
    fn has_row_answers_for_ids_below_above_and_at_the_last() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::new(d.path());
        assert!(!s.has_row(1).unwrap());
        for id in [1, 2, 5] {
            s.append_row(&row(id)).unwrap();
        }
        let has: Vec<bool> = (1..=6).map(|id| s.has_row(id).unwrap()).collect();
        assert_eq!(has, [true, true, false, false, true, false]);
    }

    fn run(experiment: &str, n: usize) -> RunRecord {
        serde_json::from_str(&format!(
            r#"{{"experiment":"{experiment}","run":{n},"side":"candidate","commit":"c","time":"t","status":"ok","wall_s":1.0,
            "latency_ms":1.0,"latency_source":"host","value":1.0,"flops":null,"bytes":null,"min_bytes":null,"out_dir":"/x"}}"#
        ))
        .unwrap()
    }

    #[test]
    fn dropping_an_experiments_runs_cuts_its_lines_at_the_end_and_nothing_before() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::new(d.path());
        s.drop_runs("1").unwrap();
        assert!(!s.runs_path().exists(), "no file, nothing to drop");
        s.append_runs(&[run("1", 1), run("1", 2), run("2", 1), run("3", 1), run("3", 2)]).unwrap();
        let ids = |s: &Store| s.runs().unwrap().iter().map(|r| format!("{}.{}", r.experiment, r.run)).collect::<Vec<_>>();
        s.drop_runs("4").unwrap();
        assert_eq!(ids(&s), ["1.1", "1.2", "2.1", "3.1", "3.2"], "none of 4's");
        s.drop_runs("3").unwrap();
        assert_eq!(ids(&s), ["1.1", "1.2", "2.1"]);
        // A torn line at the end goes with them.
        let mut text = std::fs::read(s.runs_path()).unwrap();
        text.extend_from_slice(br#"{"experiment":"2","ru"#);
        std::fs::write(s.runs_path(), &text).unwrap();
        s.drop_runs("2").unwrap();
        assert_eq!(ids(&s), ["1.1", "1.2"]);
        assert!(std::fs::read(s.runs_path()).unwrap().ends_with(b"\n"));
        // Lines longer than the chunk the end is read back in.
        let mut long = run("5", 1);
        long.iter_latencies_ms = vec![1.234_567_890_123; 20_000];
        s.append_runs(&[long.clone(), long]).unwrap();
        s.drop_runs("5").unwrap();
        assert_eq!(ids(&s), ["1.1", "1.2"]);
    }

    #[test]
    fn a_batch_of_runs_is_one_write_and_one_fsync() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::new(d.path());
        let before = crate::fsutil::syncs();
        s.append_runs(&(1..=16).map(|n| run("1", n)).collect::<Vec<_>>()).unwrap();
        assert_eq!(crate::fsutil::syncs() - before, 1);
        assert_eq!(s.runs().unwrap().len(), 16);
        s.append_runs(&[]).unwrap();
        assert_eq!(crate::fsutil::syncs() - before, 1, "nothing to append, nothing synced");
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
