//! Reader for `<host>.trace.json.gz` (Chrome trace format, times in microseconds), used when a
//! profile has no `.xplane.pb`. Two shapes are read:
//! - TPU exports: `/device:TPU:N` processes with `XLA Modules` (one event per execution) and
//!   `XLA Ops` threads (ops, charged their `device_duration_ps` as XProf does; Pallas kernels
//!   are the `tpu_custom_call` custom calls);
//! - CPU captures: op events carrying `hlo_op` and `hlo_module`, grouped by (`hlo_module`,
//!   `run_id`).
//!
//! jax caps this file at 1,000,000 events and drops the rest silently, so a file at the cap is
//! reported as likely truncated.

use std::collections::HashMap;
use std::path::Path;

use anyhow::Context;
use serde::Deserialize;

use super::analysis::{nest_sorted, Mode, Rec};
use super::locate::CaptureFormat;
use super::scan::{self, SlotKey, State, TpuOpMeta, TpuOps};
use super::{AnalyzeOptions, TraceReport};

/// jax's cap on the events of a `.trace.json.gz`.
pub const JSON_EVENT_CAP: usize = 1_000_000;

#[derive(Deserialize)]
struct TraceFile {
    #[serde(rename = "traceEvents", default)]
    trace_events: Vec<Event>,
    /// Written by PyTorch's profiler (Kineto), never by jax: how such a trace is told apart.
    #[serde(rename = "schemaVersion", default)]
    schema_version: Option<serde::de::IgnoredAny>,
    #[serde(rename = "deviceProperties", default)]
    device_properties: Option<serde::de::IgnoredAny>,
}

/// A process or thread id: a number, or a string as some writers use (PyTorch's "Spans"
/// process), which stands for a number of its own.
fn lenient_id<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Ok(match Option::<Lenient>::deserialize(d)? {
        Some(Lenient::Num(v)) if v.fract() == 0.0 && v >= 0.0 => Some(v as u64),
        Some(Lenient::Num(v)) => Some(v.to_bits()),
        Some(Lenient::Str(s)) => Some(s.trim().parse().unwrap_or_else(|_| {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            s.hash(&mut h);
            h.finish() | 1 << 63
        })),
        _ => None,
    })
}

/// A number, or a string holding one (jax writes `run_id` and TPU stats as strings); any other
/// JSON value is accepted and ignored, so one odd argument never rejects the file.
#[derive(Deserialize)]
#[serde(untagged)]
enum Lenient {
    Num(f64),
    Str(String),
    Other(serde::de::IgnoredAny),
}

impl Lenient {
    fn as_i64(&self) -> Option<i64> {
        match self {
            Lenient::Num(v) if v.fract() == 0.0 => Some(*v as i64),
            Lenient::Str(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    fn as_u64(&self) -> Option<u64> {
        match self {
            Lenient::Num(v) if v.fract() == 0.0 && *v >= 0.0 => Some(*v as u64),
            Lenient::Str(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    fn as_f64(&self) -> Option<f64> {
        match self {
            Lenient::Num(v) => Some(*v),
            Lenient::Str(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    fn as_str(&self) -> Option<&str> {
        match self {
            Lenient::Str(s) => Some(s),
            _ => None,
        }
    }
}

#[derive(Deserialize, Default)]
struct Args {
    hlo_op: Option<Lenient>,
    hlo_module: Option<Lenient>,
    run_id: Option<Lenient>,
    correlation_id: Option<Lenient>,
    program_id: Option<Lenient>,
    device_duration_ps: Option<Lenient>,
    hlo_category: Option<Lenient>,
    long_name: Option<Lenient>,
    flops: Option<Lenient>,
    model_flops: Option<Lenient>,
    bytes_accessed: Option<Lenient>,
    /// The process or thread name of `M` events.
    name: Option<Lenient>,
}

#[derive(Deserialize)]
struct Event {
    ph: Option<String>,
    #[serde(default, deserialize_with = "lenient_id")]
    pid: Option<u64>,
    #[serde(default, deserialize_with = "lenient_id")]
    tid: Option<u64>,
    cat: Option<String>,
    ts: Option<f64>,
    dur: Option<f64>,
    name: Option<String>,
    #[serde(default)]
    args: Args,
}

impl TraceFile {
    /// PyTorch's profiler writes `schemaVersion` and `deviceProperties` at the top, and events of
    /// categories jax never uses (`cpu_op`, `cuda_runtime`, `python_function`, ...).
    fn is_pytorch(&self) -> bool {
        const TORCH_CATS: [&str; 5] = ["cpu_op", "cuda_runtime", "python_function", "user_annotation", "gpu_memcpy"];
        self.schema_version.is_some() && self.device_properties.is_some()
            || self.trace_events.iter().any(|e| e.cat.as_deref().is_some_and(|c| TORCH_CATS.contains(&c)))
    }
}

fn us_to_ps(us: f64) -> i64 {
    (us * 1e6).round() as i64
}

/// The text of a `.trace.json.gz`: the one place the file is opened and inflated, never
/// blocking on a non-regular file and stopping at a cap (a gzip bomb is an error naming it).
fn read_trace_text(path: &Path) -> anyhow::Result<String> {
    Ok(crate::safe_read::read_gzip_text_capped(path, crate::safe_read::MAX_TRACE_JSON_BYTES)?)
}

/// Reads and analyses a `.trace.json.gz`.
pub fn analyze_json(path: &Path, opts: &AnalyzeOptions) -> anyhow::Result<TraceReport> {
    analyze_json_with(path, opts, true)
}

pub(crate) fn analyze_json_with(path: &Path, opts: &AnalyzeOptions, require_kernel: bool) -> anyhow::Result<TraceReport> {
    let text = read_trace_text(path)?;
    let trace: TraceFile = serde_json::from_str(&text).with_context(|| format!("{} is not a Chrome trace JSON", path.display()))?;
    if trace.is_pytorch() {
        anyhow::bail!(
            "{} is a PyTorch profiler trace (Kineto), not a JAX capture: ratchet reads what jax.profiler writes \
             (<host>.xplane.pb, or its <host>.trace.json.gz); profile the kernel with jax.profiler.trace",
            path.display()
        );
    }
    drop(text);
    analyze_events(path, trace, opts, require_kernel)
}

fn analyze_events(path: &Path, mut trace: TraceFile, opts: &AnalyzeOptions, require_kernel: bool) -> anyhow::Result<TraceReport> {
    let mut warnings = Vec::new();
    // Impossible durations (negative, NaN, beyond 7 days) count as 0, with a warning.
    let max_us = super::xplane::MAX_EVENT_PS as f64 / 1e6;
    let mut impossible = 0usize;
    for e in &mut trace.trace_events {
        if e.dur.is_some_and(|d| !(0.0..=max_us).contains(&d)) {
            e.dur = Some(0.0);
            impossible += 1;
        }
    }
    if impossible > 0 {
        warnings.push(scan::impossible_warning(impossible));
    }
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
    for e in trace.trace_events.iter().filter(|e| e.ph.as_deref() == Some("M")) {
        let (Some(pid), Some(name)) = (e.pid, e.args.name.as_ref().and_then(Lenient::as_str)) else {
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
    let with_ops = !opts.times_only;
    let mut st = State::default();
    st.events = trace.trace_events.len() as u64;
    let complete_events = || trace.trace_events.iter().filter(|e| e.ph.as_deref() == Some("X") && e.ts.is_some());

    // TPU devices: `XLA Modules` then `XLA Ops` of each `/device:TPU:N` process.
    let mut tpus: Vec<(u32, u64, &str)> = process
        .iter()
        .filter_map(|(&pid, &name)| name.strip_prefix("/device:TPU:").and_then(|n| n.parse().ok()).map(|n| (n, pid, name)))
        .collect();
    tpus.sort_unstable();
    for &(n, pid, name) in &tpus {
        let tid_named = |want: &str| thread.iter().filter(|(k, v)| k.0 == pid && **v == want).map(|(k, _)| k.1).collect::<Vec<u64>>();
        let (module_tids, op_tids) = (tid_named("XLA Modules"), tid_named("XLA Ops"));
        let module_events: Vec<(&str, i64, i64)> = complete_events()
            .filter(|e| e.pid == Some(pid) && module_tids.contains(&e.tid.unwrap_or(0)))
            .map(|e| (e.name.as_deref().unwrap_or(""), us_to_ps(e.ts.unwrap_or(0.0)), us_to_ps(e.dur.unwrap_or(0.0))))
            .collect();
        if module_events.is_empty() {
            continue;
        }
        let device = st.device(name, Mode::Tpu, n);
        st.used_line(device, "XLA Modules");
        let windows = scan::tpu_modules(&mut st, device, &module_events);
        let mut ops = TpuOps::new(&windows, with_ops, true);
        let mut metas: HashMap<(&str, Option<u64>), TpuOpMeta> = HashMap::new();
        for &tid in &op_tids {
            for e in complete_events().filter(|e| e.pid == Some(pid) && e.tid == Some(tid)) {
                let short = e.name.as_deref().unwrap_or("");
                let a = &e.args;
                let num = |v: &Option<Lenient>| v.as_ref().and_then(Lenient::as_f64);
                // Ops of different modules share short names: an op is the one of the module
                // whose execution holds it.
                let (start, span) = (us_to_ps(e.ts.unwrap_or(0.0)), us_to_ps(e.dur.unwrap_or(0.0)));
                let program = a.program_id.as_ref().and_then(Lenient::as_u64).or_else(|| ops.program_at(start, span));
                let meta = metas.entry((short, program)).or_insert_with(|| {
                    TpuOpMeta::new(
                        &mut st,
                        short,
                        a.long_name.as_ref().and_then(Lenient::as_str).unwrap_or(""),
                        a.hlo_category.as_ref().and_then(Lenient::as_str),
                        num(&a.flops).or_else(|| num(&a.model_flops)),
                        num(&a.bytes_accessed),
                        program,
                    )
                });
                let dd = a.device_duration_ps.as_ref().and_then(Lenient::as_i64);
                ops.push(meta, start, span, dd);
            }
            ops.end_line(&mut st);
        }
        ops.finish(&mut st, device);
    }

    // CPU: op events with `hlo_op` and `hlo_module` (a `correlation_id` marks a GPU launch
    // instead), on any thread, one execution per (module, run_id); without a run_id, split by
    // the host's dispatches as the xplane reader does.
    let host = st.device("/host:CPU", Mode::Cpu, 0);
    let mut lines: HashMap<(u64, u64), Vec<Rec>> = HashMap::new();
    let mut dispatch_end: HashMap<(u64, u64), i64> = HashMap::new();
    for e in complete_events() {
        let a = &e.args;
        let thread = (e.pid.unwrap_or(0), e.tid.unwrap_or(0));
        let (start, dur) = (us_to_ps(e.ts.unwrap_or(0.0)), us_to_ps(e.dur.unwrap_or(0.0)));
        if e.name.as_deref().is_some_and(scan::is_dispatch) {
            let end = dispatch_end.entry(thread).or_insert(i64::MIN);
            if start >= *end {
                st.dispatches.push(start);
                *end = start.saturating_add(dur);
            }
        }
        if a.correlation_id.is_some() {
            continue;
        }
        let (Some(op), Some(module)) = (a.hlo_op.as_ref().and_then(Lenient::as_str), a.hlo_module.as_ref().and_then(Lenient::as_str))
        else {
            continue;
        };
        let program = a.program_id.as_ref().and_then(Lenient::as_u64);
        let slot = st.slot(SlotKey { pallas: false, name: module.to_string(), program });
        let group = st.group(slot, host);
        match a.run_id.as_ref().and_then(Lenient::as_i64) {
            Some(run) => st.add_exec(group, run, start, start.saturating_add(dur)),
            None => st.unnumbered.push((group, start, start.saturating_add(dur))),
        }
        let op = st.ops.intern(program, op, None, None, None);
        lines.entry(thread).or_default().push(Rec { start, span: dur, time: dur, group, op });
    }
    let mut threads: Vec<(u64, u64)> = lines.keys().copied().collect();
    threads.sort_unstable();
    if with_ops {
        for recs in lines.values_mut() {
            nest_sorted(recs, &mut st.table);
        }
    }
    // Named as the xplane reader names its lines: per process, its threads.
    let mut per_process: Vec<(u64, Vec<String>)> = Vec::new();
    for k in &threads {
        let name = thread.get(k).copied().unwrap_or("?").to_string();
        match per_process.iter_mut().find(|p| p.0 == k.0) {
            Some(p) => p.1.push(name),
            None => per_process.push((k.0, vec![name])),
        }
    }
    let names: Vec<String> = per_process
        .iter()
        .map(|(pid, ts)| format!("{} / {}", process.get(pid).copied().unwrap_or("?"), scan::cpu_line_names(ts)))
        .collect();
    st.cpu_source = Some(names.join("; "));

    // The user's `kernel_step` annotations.
    let re = regex::Regex::new(r"^kernel_step(_\d+)?$").expect("static regex");
    for e in complete_events().filter(|e| e.name.as_deref().is_some_and(|n| re.is_match(n))) {
        let start = us_to_ps(e.ts.unwrap_or(0.0));
        st.steps.push((start, start.saturating_add(us_to_ps(e.dur.unwrap_or(0.0)))));
    }

    warnings.extend(st.split_unnumbered());
    let dispatch = trace.trace_events.iter().filter_map(|e| e.name.as_deref()).find(|n| scan::is_dispatch(n));
    let collected = scan::finish(st, warnings);
    if let (true, Some(name)) = (collected.modules.is_empty(), dispatch) {
        return Err(super::no_op_events(&path.display().to_string(), name));
    }
    if collected.modules.is_empty() {
        anyhow::bail!(
            "{} holds neither TPU module events (`/device:TPU:N` processes with an `XLA Modules` thread) \
             nor op events with hlo_op and hlo_module",
            path.display()
        );
    }
    super::build_report(collected, &path.display().to_string(), CaptureFormat::TraceJson, opts, require_kernel, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ts: f64, dur: f64, op: &str, run: &str) -> String {
        format!(
            r#"{{"ph":"X","pid":1,"tid":2,"ts":{ts},"dur":{dur},"name":"{op}","args":{{"hlo_op":"{op}","hlo_module":"jit_k","run_id":"{run}"}}}}"#
        )
    }

    fn analyze_str(json: &str, opts: &AnalyzeOptions) -> anyhow::Result<TraceReport> {
        let trace: TraceFile = serde_json::from_str(json).unwrap();
        analyze_events(Path::new("x.trace.json.gz"), trace, opts, true)
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
        let r = analyze_str(&json, &AnalyzeOptions::default()).unwrap();
        assert_eq!(r.modules.len(), 1);
        assert_eq!(r.modules[0].executions, 2);
        let k = r.kernel.unwrap();
        assert_eq!(k.per_execution_us, vec![10.0, 6.0]);
        assert_eq!(k.median_us, 8.0);
        assert!(r.source.contains("/host:CPU / tf_XLAPjRtCpuClient/*"), "{}", r.source);
        let dot = k.op_breakdown.iter().find(|o| o.name == "dot.2").unwrap();
        assert_eq!((dot.count, dot.total_us, dot.category.as_str()), (2, 7.0, "dot"));
    }

    #[test]
    fn tpu_modules_ops_device_durations_and_a_pallas_kernel() {
        let m = |name: &str, ts: f64, dur: f64| {
            format!(r#"{{"ph":"X","pid":3,"tid":2,"ts":{ts},"dur":{dur},"name":"{name}","args":{{"run_id":"1"}}}}"#)
        };
        let op = |name: &str, ts: f64, dur: f64, dd: &str, text: &str| {
            format!(
                r#"{{"ph":"X","pid":3,"tid":3,"ts":{ts},"dur":{dur},"name":"{name}","args":{{"device_duration_ps":"{dd}","hlo_category":"custom-call","long_name":"{}"}}}}"#,
                text.replace('"', "\\\"")
            )
        };
        let pallas = r#"%k.1 = f32[8] custom-call(%a), custom_call_target="tpu_custom_call""#;
        let events = [
            r#"{"ph":"M","pid":3,"name":"process_name","args":{"name":"/device:TPU:0"}}"#.to_string(),
            r#"{"ph":"M","pid":3,"tid":2,"name":"thread_name","args":{"name":"XLA Modules"}}"#.to_string(),
            r#"{"ph":"M","pid":3,"tid":3,"name":"thread_name","args":{"name":"XLA Ops"}}"#.to_string(),
            m("jit_a(1)", 0.0, 100.0),
            m("jit_b(2)", 200.0, 50.0),
            op("attn.1", 10.0, 20.0, "21000000", pallas),
            op("attn.2", 40.0, 20.0, "19000000", pallas),
            op("custom-call.3", 210.0, 5.0, "4000000", "%custom-call.3 = f32[8] custom-call(), custom_call_target=\"ConcatBitcast\""),
        ];
        let json = format!(r#"{{"traceEvents":[{}]}}"#, events.join(","));
        // Two modules that ran once each: no default kernel for a decision...
        assert!(analyze_str(&json, &AnalyzeOptions::default()).is_err());
        // ... and the Pallas kernel by name, its calls charged their device durations.
        let r = analyze_str(&json, &AnalyzeOptions { kernel: Some("attn".into()), ..Default::default() }).unwrap();
        let k = r.kernel.unwrap();
        assert_eq!(k.name, "attn");
        assert_eq!(k.per_execution_us, vec![21.0, 19.0]);
        assert_eq!(k.op_time, "device_duration_ps stat (as XProf)");
        assert_eq!(k.device.as_deref(), Some("/device:TPU:0"));
        let pk = r.modules.iter().find(|m| m.kind == "pallas_kernel").unwrap();
        assert_eq!(pk.within.as_deref(), Some("jit_a(1)"));
        // The module's op breakdown charges device durations too.
        let r = analyze_str(&json, &AnalyzeOptions { kernel: Some("jit_a".into()), ..Default::default() }).unwrap();
        let k = r.kernel.unwrap();
        assert_eq!(k.per_execution_us, vec![100.0]);
        let total: f64 = k.op_breakdown.iter().map(|o| o.total_us).sum();
        assert_eq!(total, 40.0);
        assert_eq!(r.source, "/device:TPU:0 / XLA Modules");
    }
}
