//! Fallback reader for `<host>.trace.json.gz` (Chrome trace format, times in microseconds),
//! used only when a profile has no `.xplane.pb`. jax caps this file at 1,000,000 events and
//! drops the rest silently, so a file at the cap is reported as likely truncated.

use std::collections::HashMap;
use std::path::Path;

use anyhow::Context;
use serde::Deserialize;

use super::analysis::{kernel_from_table, select_kernel, ExecGroups, LineOp, OpTable};
use super::{AnalyzeOptions, TraceReport};

/// jax's cap on the events of a `.trace.json.gz`.
pub const JSON_EVENT_CAP: usize = 1_000_000;

#[derive(Deserialize)]
struct TraceFile {
    #[serde(rename = "traceEvents", default)]
    trace_events: Vec<Event>,
}

/// A number or a string holding one (jax writes `run_id` as a string).
#[derive(Deserialize)]
#[serde(untagged)]
enum NumOrStr {
    Num(f64),
    Str(String),
}

impl NumOrStr {
    fn as_i64(&self) -> Option<i64> {
        match self {
            NumOrStr::Num(v) => Some(*v as i64),
            NumOrStr::Str(s) => s.trim().parse().ok(),
        }
    }
}

#[derive(Deserialize, Default)]
struct Args {
    hlo_op: Option<String>,
    hlo_module: Option<String>,
    run_id: Option<NumOrStr>,
    program_id: Option<NumOrStr>,
    /// The process or thread name of `M` events.
    name: Option<String>,
}

#[derive(Deserialize)]
struct Event {
    ph: Option<String>,
    pid: Option<u64>,
    tid: Option<u64>,
    ts: Option<f64>,
    dur: Option<f64>,
    name: Option<String>,
    #[serde(default)]
    args: Args,
}

fn us_to_ps(us: f64) -> i64 {
    (us * 1e6).round() as i64
}

/// Reads and analyses a `.trace.json.gz`: op events carrying `hlo_op` and `hlo_module` are
/// grouped by (`hlo_module`, `run_id`), as on CPU.
pub fn analyze_json(path: &Path, opts: &AnalyzeOptions) -> anyhow::Result<TraceReport> {
    let text = crate::bench::safe_read::read_gzip_text_capped(path, crate::bench::safe_read::MAX_TRACE_JSON_BYTES)?;
    let trace: TraceFile = serde_json::from_str(&text).with_context(|| format!("{} is not a Chrome trace JSON", path.display()))?;
    drop(text);
    analyze_events(path, trace, opts)
}

fn analyze_events(path: &Path, trace: TraceFile, opts: &AnalyzeOptions) -> anyhow::Result<TraceReport> {
    let mut warnings = Vec::new();
    let complete = trace.trace_events.iter().filter(|e| e.ph.as_deref() == Some("X")).count();
    if trace.trace_events.len() >= JSON_EVENT_CAP || complete >= JSON_EVENT_CAP {
        warnings.push(format!(
            "{} holds {} events, jax's cap for .trace.json.gz: it is likely truncated \
             (later executions missing); read the .xplane.pb instead",
            path.display(),
            trace.trace_events.len()
        ));
    }
    let mut process: HashMap<u64, &str> = HashMap::new();
    let mut thread: HashMap<(u64, u64), &str> = HashMap::new();
    for e in &trace.trace_events {
        if e.ph.as_deref() == Some("M") {
            let (Some(pid), Some(name)) = (e.pid, e.args.name.as_deref()) else {
                continue;
            };
            match e.name.as_deref() {
                Some("process_name") => {
                    process.insert(pid, name);
                }
                Some("thread_name") => {
                    thread.insert((pid, e.tid.unwrap_or(0)), name);
                }
                _ => {}
            }
        }
    }
    let ops = || {
        trace.trace_events.iter().filter_map(|e| {
            if e.ph.as_deref() != Some("X") {
                return None;
            }
            let op = e.args.hlo_op.as_deref()?;
            let module = e.args.hlo_module.as_deref()?;
            let start = us_to_ps(e.ts?);
            let dur = us_to_ps(e.dur.unwrap_or(0.0));
            let program = e.args.program_id.as_ref().and_then(|p| p.as_i64()).map(|p| p as u64);
            let run = e.args.run_id.as_ref().and_then(NumOrStr::as_i64).unwrap_or(0);
            Some((e, op, module, program, run, start, dur))
        })
    };
    let mut groups = ExecGroups::default();
    let mut threads: Vec<(u64, u64)> = Vec::new();
    for (e, _, module, program, run, start, dur) in ops() {
        groups.add(module, program, run, start, start + dur);
        let key = (e.pid.unwrap_or(0), e.tid.unwrap_or(0));
        if !threads.contains(&key) {
            threads.push(key);
        }
    }
    if groups.is_empty() {
        anyhow::bail!("{} holds no op events with hlo_op and hlo_module", path.display());
    }
    let modules = groups.finish(true);
    let kernel_pattern = opts.kernel.as_deref();
    let idx = select_kernel(&modules, kernel_pattern, &[])?;
    let k = &modules[idx];
    let mut table = OpTable::default();
    for &(pid, tid) in &threads {
        let mut line: Vec<LineOp<'_>> = ops()
            .filter(|(e, _, m, p, ..)| e.pid.unwrap_or(0) == pid && e.tid.unwrap_or(0) == tid && *m == k.module && *p == k.program_id)
            .map(|(_, op, _, _, _, start, dur)| LineOp { start, dur, name: op, category: None, flops: None, bytes: None })
            .collect();
        table.add_line(&mut line);
    }
    let names: Vec<String> = threads
        .iter()
        .map(|k| format!("{} / {}", process.get(&k.0).copied().unwrap_or("?"), thread.get(k).copied().unwrap_or("?")))
        .collect();
    let kernel = kernel_from_table(k, table);
    let host_steps_us = {
        let re = regex::Regex::new(r"^kernel_step(_\d+)?$").expect("static regex");
        let mut v: Vec<(f64, f64)> = trace
            .trace_events
            .iter()
            .filter(|e| e.ph.as_deref() == Some("X") && e.name.as_deref().is_some_and(|n| re.is_match(n)))
            .map(|e| (e.ts.unwrap_or(0.0), e.dur.unwrap_or(0.0)))
            .collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        v.into_iter().map(|x| x.1).collect()
    };
    Ok(TraceReport {
        capture: path.display().to_string(),
        format: super::locate::CaptureFormat::TraceJson,
        events: trace.trace_events.len() as u64,
        source: format!("{} (trace.json.gz; op events grouped by hlo_module, run_id)", names.join(", ")),
        device: None,
        modules: modules.iter().map(|m| m.stats()).collect(),
        kernel: Some(kernel),
        hlo_ops_from_proto: None,
        host_steps_us,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ts: f64, dur: f64, op: &str, run: &str) -> String {
        format!(
            r#"{{"ph":"X","pid":1,"tid":2,"ts":{ts},"dur":{dur},"name":"{op}","args":{{"hlo_op":"{op}","hlo_module":"jit_k","run_id":"{run}"}}}}"#
        )
    }

    #[test]
    fn groups_json_ops_by_run_id() {
        let events = [
            r#"{"ph":"M","pid":1,"name":"process_name","args":{"name":"/host:CPU"}}"#.to_string(),
            r#"{"ph":"M","pid":1,"tid":2,"name":"thread_name","args":{"name":"tf_XLAPjRtCpuClient/1"}}"#.to_string(),
            ev(10.0, 5.0, "copy.1", "7"),
            ev(16.0, 4.0, "dot.2", "7"),
            ev(100.0, 2.0, "copy.1", "-8"),
            ev(103.0, 3.0, "dot.2", "-8"),
        ];
        let json = format!(r#"{{"traceEvents":[{}]}}"#, events.join(","));
        let trace: TraceFile = serde_json::from_str(&json).unwrap();
        let r = analyze_events(Path::new("x.trace.json.gz"), trace, &AnalyzeOptions::default()).unwrap();
        assert_eq!(r.modules.len(), 1);
        assert_eq!(r.modules[0].executions, 2);
        let k = r.kernel.unwrap();
        assert_eq!(k.per_execution_us, vec![10.0, 6.0]);
        assert_eq!(k.median_us, 8.0);
        assert!(r.source.contains("/host:CPU / tf_XLAPjRtCpuClient/1"));
        let dot = k.op_breakdown.iter().find(|o| o.name == "dot.2").unwrap();
        assert_eq!((dot.count, dot.total_us, dot.category.as_str()), (2, 7.0, "dot"));
    }
}
