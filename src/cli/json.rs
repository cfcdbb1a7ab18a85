//! `--json`: every object ratchet prints for a program carries the schema's version and its
//! type (docs/json.md, docs/json.schema.json). For commands whose core still prints text, the
//! text goes to stderr while the JSON lines go to the real stdout.

use crate::bench::RunRecord;
use crate::store::ResultRow;
use serde::Serialize;
use serde_json::{json, Value};
use std::io::Write;
use std::os::fd::{FromRawFd, OwnedFd};

/// The version of the JSON output's schema; raised on any change that is not an addition.
pub const SCHEMA_VERSION: u32 = 1;

/// `value` (an object) with `schema_version` and `type` added, as one line.
pub fn to_line(kind: &str, value: &impl Serialize) -> String {
    envelope(kind, serde_json::to_value(value).expect("serializable")).to_string()
}

pub fn envelope(kind: &str, value: Value) -> Value {
    let mut v = match value {
        Value::Object(m) => m,
        other => {
            let mut m = serde_json::Map::new();
            m.insert("value".into(), other);
            m
        }
    };
    v.insert("schema_version".into(), json!(SCHEMA_VERSION));
    v.insert("type".into(), json!(kind));
    Value::Object(v)
}

/// One benchmark run of an experiment, as its `run` event.
pub fn run_event(r: &RunRecord) -> Value {
    envelope(
        "run",
        json!({
            "experiment": r.experiment,
            "run": r.run,
            "side": r.side.as_str(),
            "commit": r.commit,
            "status": r.status.as_str(),
            "value": r.value,
            "latency_ms": r.latency_ms,
            "latency_source": r.latency_source,
            "wall_s": r.wall_s,
            "superseded": r.superseded,
            "pair": r.pair,
            "phase": r.phase,
            "error": r.error,
            // The evidence behind the figure: the run's directory (logs, result file) and its
            // trace, to open in XProf.
            "dir": r.out_dir,
            "trace": r.trace,
            "phases_s": r.phases_s,
            "kernel_calls": r.kernel_calls,
            "after_exit_s": r.after_exit_s,
            "forked": r.forked,
        }),
    )
}

/// The decision object of a recorded experiment: its row, plus what an agent acts on first
/// (`runs` are the experiment's run records, for its count of measured pairs).
pub fn decision(row: &ResultRow, discarded_ref: Option<&str>, runs: &[&RunRecord]) -> Value {
    let mut v = serde_json::to_value(row).expect("row serializes");
    use crate::store::StatusClass;
    let class = match row.status.class() {
        StatusClass::Kept => "kept",
        StatusClass::NotKept => "not_kept",
        StatusClass::Failed => "failed",
        StatusClass::NotRun => "not_run",
    };
    // Pairs measured (confirmation and rescue included): the pairs the row's estimate is made of.
    let pairs = crate::bench::pairs_of(runs.iter().copied()).len();
    // Reverted without evidence against the idea (too noisy to tell, the budget ran out, or the
    // confirmation did not settle it): an agent should run it again rather than drop it.
    let worth_rerun = crate::report::worth_rerun(row);
    if let Value::Object(m) = &mut v {
        m.insert("class".into(), json!(class));
        m.insert("kept".into(), json!(row.status == crate::store::Status::Keep));
        m.insert("discarded_ref".into(), json!(discarded_ref));
        m.insert("pairs".into(), json!(pairs));
        m.insert("worth_rerun".into(), json!(worth_rerun));
    }
    envelope("decision", v)
}

/// The error object printed (with `--json`) when a command fails.
pub fn error(e: &crate::error::Error) -> Value {
    envelope(
        "error",
        json!({"kind": format!("{:?}", e.kind).to_lowercase(), "message": e.message, "hint": e.hint, "exit_code": e.exit_code()}),
    )
}

/// The real stdout, for JSON lines, while `println!` goes to stderr; restored when dropped.
pub struct JsonOut {
    out: std::fs::File,
}

impl JsonOut {
    /// Point fd 1 at stderr and keep the original stdout for JSON. `None` if the fds cannot be
    /// duplicated (then JSON goes to stdout with the text, which is still parseable line by line
    /// only if the caller prints nothing else).
    pub fn take_stdout() -> Option<JsonOut> {
        let _ = std::io::stdout().flush();
        // SAFETY: plain fd syscalls on the standard fds; the duplicate is owned below.
        unsafe {
            let saved = libc::fcntl(1, libc::F_DUPFD_CLOEXEC, 3);
            if saved < 0 {
                return None;
            }
            let saved = OwnedFd::from_raw_fd(saved);
            if libc::dup2(2, 1) < 0 {
                return None;
            }
            Some(JsonOut { out: std::fs::File::from(saved) })
        }
    }

    pub fn emit(&mut self, v: &Value) {
        // A closed reader must not abort the experiment: a failed write is dropped.
        let _ = writeln!(self.out, "{v}");
        let _ = self.out.flush();
    }
}

impl Drop for JsonOut {
    fn drop(&mut self) {
        let _ = std::io::stdout().flush();
        // SAFETY: dup2 of a descriptor we own back onto fd 1.
        unsafe {
            libc::dup2(std::os::fd::AsRawFd::as_raw_fd(&self.out), 1);
        }
    }
}

/// Run `op` (an experiment, a sweep, a calibration) for `--json`: its text goes to stderr; then
/// every experiment it recorded comes out as its `run` events and its `decision` object, then
/// `tail`'s object for the whole operation, or the `error` object when it failed (a recorded
/// experiment still comes first: an interrupted one fails and is recorded).
pub fn recorded<T>(
    dir: &std::path::Path,
    json: bool,
    op: impl FnOnce() -> crate::error::Result<T>,
    tail: impl FnOnce(&T, &[ResultRow]) -> Option<Value>,
) -> crate::error::Result<T> {
    if !json {
        return op();
    }
    let mut out = JsonOut::take_stdout();
    let ws = crate::workspace::Workspace::discover(dir).ok();
    let (repo, store) = (ws.as_ref().map(|w| &w.repo), ws.as_ref().map(|w| &w.store));
    let last_id = |s: &crate::store::Store| s.rows().ok().and_then(|rows| rows.iter().map(|r| r.id).max()).unwrap_or(0);
    let before = store.map(last_id).unwrap_or(0);
    let result = op();
    let mut lines = vec![];
    let mut new_rows = vec![];
    if let (Some(repo), Some(store)) = (repo, store) {
        new_rows = store.rows().unwrap_or_default().into_iter().filter(|r| r.id > before).collect();
        let runs = store.runs().unwrap_or_default();
        for row in &new_rows {
            let id = row.id.to_string();
            let own: Vec<&RunRecord> = runs.iter().filter(|r| r.experiment == id).collect();
            lines.extend(own.iter().map(|r| run_event(r)));
            let parked = crate::vcs::discarded_ref(&id);
            let parked = (row.status != crate::store::Status::Keep && repo.repo.find_reference(&parked).is_ok()).then_some(parked);
            lines.push(decision(row, parked.as_deref(), &own));
        }
    }
    match &result {
        Ok(v) => lines.extend(tail(v, &new_rows)),
        Err(e) => lines.push(error(e)),
    }
    for l in &lines {
        match out.as_mut() {
            Some(o) => o.emit(l),
            None => println!("{l}"),
        }
    }
    result
}

/// `ratchet calibrate --json`: the text to stderr, then the calibration object.
pub fn calibrate(dir: &std::path::Path, args: &crate::cli::args::CalibrateArgs) -> crate::error::Result<()> {
    recorded(
        dir,
        args.json,
        || {
            let mut ui = crate::cli::ui::Text::new();
            let ws = super::lock_repo(dir, &mut ui)?;
            let opts = crate::calibrate::CalibrateOptions { pairs: args.pairs };
            let mut fx = crate::events::Effects::new(&mut ui, crate::signals::Cancel::signals());
            crate::sweep::recover(&ws, &mut fx)?;
            crate::calibrate::run(&ws, &opts, &mut crate::bench::executor::ProcessExecutor, &mut fx)
        },
        |_, _| {
            let ws = crate::workspace::Workspace::discover(dir).ok()?;
            let text = std::fs::read_to_string(ws.store.dir().join("calibration.json")).ok()?;
            Some(envelope("calibration", serde_json::from_str(&text).ok()?))
        },
    )
}

/// `ratchet show ID --json`: the experiment's decision object, its runs and its diff's summary.
/// `findings`: the candidate's diagnosis and `cliffs` the spill cliffs of the results, the
/// same lists the text prints ([`crate::diagnose::show`]).
pub fn show(
    repo: &crate::vcs::Repo,
    row: &ResultRow,
    runs: &[RunRecord],
    findings: &[crate::diagnose::Finding],
    cliffs: &[crate::diagnose::cliff::Cliff],
    ab: &crate::diagnose::compare::AbTable,
) -> Value {
    let id = row.id.to_string();
    let parked = crate::vcs::discarded_ref(&id);
    let parked = (row.status != crate::store::Status::Keep && repo.repo.find_reference(&parked).is_ok()).then_some(parked);
    let diff_stat = git2::Oid::from_str(&row.commit).ok().and_then(|c| repo.diff_stat(c).ok());
    envelope(
        "show",
        json!({
            "experiment": decision(row, parked.as_deref(), &runs.iter().collect::<Vec<_>>()),
            "runs": runs.iter().map(run_event).collect::<Vec<_>>(),
            // The figures `show` prints under "where a run's seconds go"; null without a run.
            "run_time": crate::bench::timing::breakdown(runs),
            "diff_stat": diff_stat,
            "findings": findings,
            // The seed's A/B table, incumbent against candidate (docs/json.md).
            "ab": ab,
            "cliffs": cliffs.iter().map(|c| json!({
                "message": c.message(),
                "this_experiment": c.ids.contains(&row.id),
                "cliff": c,
            })).collect::<Vec<_>>(),
        }),
    )
}

/// `ratchet show ID --vs OTHER --json`: the A/B table of the two experiments' candidates.
pub fn compare(baseline: &ResultRow, experiment: &ResultRow, table: &crate::diagnose::compare::AbTable) -> Value {
    envelope("compare", json!({"baseline": baseline.id, "experiment": experiment.id, "ab": table}))
}

/// The `sweep` object that ends `ratchet sweep --json`.
pub fn sweep(o: &crate::sweep::SweepOutcome, rows: &[ResultRow]) -> Value {
    envelope(
        "sweep",
        json!({
            "experiments": rows.iter().map(|r| r.id).collect::<Vec<_>>(),
            "kept": rows.iter().filter(|r| r.status == crate::store::Status::Keep).count(),
            "already_done": o.already_done,
            "not_started": o.not_started,
            "stopped_by": o.stopped_by,
        }),
    )
}
