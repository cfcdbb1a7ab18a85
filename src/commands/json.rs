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
            "error": r.error,
        }),
    )
}

/// The decision object of a recorded experiment: its row, plus what an agent acts on first.
pub fn decision(row: &ResultRow, discarded_ref: Option<&str>) -> Value {
    let mut v = serde_json::to_value(row).expect("row serializes");
    use crate::store::StatusClass;
    let class = match row.status.class() {
        StatusClass::Kept => "kept",
        StatusClass::NotKept => "not_kept",
        StatusClass::Failed => "failed",
        StatusClass::NotRun => "not_run",
    };
    let pairs = (row.runs / 2) as u64;
    if let Value::Object(m) = &mut v {
        m.insert("class".into(), json!(class));
        m.insert("kept".into(), json!(row.status == crate::store::Status::Keep));
        m.insert("discarded_ref".into(), json!(discarded_ref));
        m.insert("pairs".into(), json!(pairs));
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
