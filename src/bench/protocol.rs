//! What a benchmark run reports: the versioned result file (`ratchet-result.json`, see
//! docs/protocol.md) and, for legacy benchmarks, the article's `RESULT:` / `REGIME:` lines.

use serde::{Deserialize, Serialize};
use std::path::Path;

pub const RESULT_FILE: &str = "ratchet-result.json";
pub const SCHEMA_VERSION: u32 = 1;
use crate::safe_read::MAX_RESULT_BYTES;

/// The benchmark's correctness check against its reference.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Check {
    pub passed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_abs_err: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerance: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One continuous-profiling snapshot a `RATCHET_DEEP=1` run took (docs/protocol.md).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotEntry {
    /// The snapshot's profile log directory (or `.xplane.pb`), relative to `RATCHET_OUT`.
    pub path: String,
    /// Iteration of the extra, snapshotted iterations at which the window opened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u64>,
    /// Seconds since the first snapshot window opened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_s: Option<f64>,
    /// How it was taken: `continuous` (XProf's continuous-profiling API) or `trace` (a short
    /// jax.profiler trace window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// Version 1 of the result file.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ResultFile {
    pub version: u32,
    pub latencies_ms: Vec<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flops: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_bytes: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Check>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hlo: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<serde_json::Value>,
    /// Continuous-profiling snapshots (only when `RATCHET_DEEP=1`), in the order taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshots: Option<Vec<SnapshotEntry>>,
    /// The Pallas kernels' bodies as MLIR text (`kernel.body.mlir`; TPU and GPU only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_body: Option<String>,
    /// What the run was measured with: versions, device kind and count, XLA flags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<std::collections::BTreeMap<String, serde_json::Value>>,
    /// Which of `flops` / `bytes` the benchmark did not give and took from the compiler, with
    /// where from (`{"bytes": "XLA's cost analysis"}`): estimates, not the benchmark's claims.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compiler_figures: Option<std::collections::BTreeMap<String, String>>,
    /// Where the process's seconds went, by phase (`imports`, `compile`, `measured`, ...):
    /// wall-clock seconds, each finite and non-negative. Names are free: a newer helper's
    /// phase is kept, not refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases_s: Option<std::collections::BTreeMap<String, f64>>,
    /// How many times the process called the kernel (warmup, measured, profiled, snapshots).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_calls: Option<u64>,
    /// The device's peak memory in use over the run, bytes (jax's `memory_stats()`
    /// `peak_bytes_in_use`; GPU and TPU give it, CPU does not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_memory_bytes: Option<f64>,
}

/// The shortest time a run may report: 1 ps. Below it a time is a unit mistake or a denormal
/// (1e-320) whose ratios overflow.
pub const MIN_LATENCY_MS: f64 = 1e-9;
/// The longest: 10^9 ms, about 11.6 days, far past any timeout.
pub const MAX_LATENCY_MS: f64 = 1e9;
/// The largest FLOP or byte count of one call (10^24): products with it stay finite.
pub const MAX_COUNT: f64 = 1e24;

/// Whether `ms` is a time the statistics can use (finite, in [MIN_LATENCY_MS, MAX_LATENCY_MS]).
pub fn latency_in_range(ms: f64) -> bool {
    (MIN_LATENCY_MS..=MAX_LATENCY_MS).contains(&ms)
}

/// Why a result file is unusable; the message names the field and the fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ProtocolError(pub String);

fn perr(msg: impl Into<String>) -> ProtocolError {
    ProtocolError(msg.into())
}

/// Read and validate a result file (a regular file of at most 64 MiB, opened without blocking).
pub fn read_result_file(path: &Path) -> Result<ResultFile, ProtocolError> {
    let text = crate::safe_read::read_text_capped(path, MAX_RESULT_BYTES).map_err(|e| perr(e.0))?;
    parse_result_file(&text)
}

/// Parse and validate the text of a result file.
pub fn parse_result_file(text: &str) -> Result<ResultFile, ProtocolError> {
    // Look at the version first so an unknown version gets a clear message, not a field error.
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| perr(format!("{RESULT_FILE} is not valid JSON: {e}")))?;
    let obj = value.as_object().ok_or_else(|| perr(format!("{RESULT_FILE} must hold a JSON object")))?;
    match obj.get("version").and_then(|v| v.as_u64()) {
        Some(v) if v == SCHEMA_VERSION as u64 => {}
        Some(v) => return Err(perr(format!("{RESULT_FILE} has version {v}; this ratchet reads version {SCHEMA_VERSION}"))),
        None => return Err(perr(format!("{RESULT_FILE} has no integer \"version\" field; write \"version\": {SCHEMA_VERSION}"))),
    }
    let r: ResultFile = serde_json::from_value(value).map_err(|e| perr(format!("{RESULT_FILE}: {e}")))?;
    if r.latencies_ms.is_empty() {
        return Err(perr(format!("{RESULT_FILE}: \"latencies_ms\" is empty; record each measured iteration's time")));
    }
    if let Some((i, v)) = r.latencies_ms.iter().enumerate().find(|(_, v)| !latency_in_range(**v)) {
        return Err(perr(format!(
            "{RESULT_FILE}: latencies_ms[{i}] = {v:e} is not a usable time; each must lie in [{MIN_LATENCY_MS:e}, {MAX_LATENCY_MS:e}] ms"
        )));
    }
    for (name, v) in [("flops", r.flops), ("bytes", r.bytes), ("min_bytes", r.min_bytes), ("peak_memory_bytes", r.peak_memory_bytes)] {
        if let Some(v) = v {
            if !(v.is_finite() && v > 0.0 && v <= MAX_COUNT) {
                return Err(perr(format!("{RESULT_FILE}: \"{name}\" = {v:e} must be a positive number of at most {MAX_COUNT:e}")));
            }
        }
    }
    for (name, v) in r.phases_s.iter().flatten() {
        if !(v.is_finite() && (0.0..=MAX_PHASE_S).contains(v)) {
            return Err(perr(format!("{RESULT_FILE}: phases_s.{name} = {v:e} must be seconds in [0, {MAX_PHASE_S:e}]")));
        }
    }
    Ok(r)
}

/// The longest phase a result file may report, in seconds (about 11.6 days, as MAX_LATENCY_MS).
pub const MAX_PHASE_S: f64 = 1e6;

/// Figures from the article's summary lines, taken as reported.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LegacyResult {
    pub latency_ms: f64,
    pub score: Option<f64>,
    pub util_pct: Option<f64>,
    pub tflops: Option<f64>,
    pub regime: Option<String>,
    pub bw_pct: Option<f64>,
    pub intensity: Option<f64>,
}

/// Parse `RESULT:` / `REGIME:` lines from a benchmark's stdout (the last of each wins).
/// `Ok(None)` when there is no RESULT line; an error when one is there but unusable.
pub fn parse_legacy(stdout: &str) -> Result<Option<LegacyResult>, ProtocolError> {
    let result_line = stdout.lines().rev().find_map(|l| l.trim().strip_prefix("RESULT:"));
    let Some(line) = result_line else { return Ok(None) };
    let mut out = LegacyResult::default();
    let mut latency = None;
    let fields = key_values(line);
    once_each("RESULT", &fields)?;
    for (k, v) in &fields {
        match k.as_str() {
            "latency" => {
                latency = Some(parse_time_ms(v).ok_or_else(|| perr(format!("RESULT line: latency={v} is not a time (e.g. 2.12ms)")))?)
            }
            "score" => out.score = Some(non_negative(v, "score")?),
            "util" => out.util_pct = Some(non_negative(v.trim_end_matches('%'), "util")?),
            "tflops" => out.tflops = Some(non_negative(v, "tflops")?),
            _ => {} // other figures are the benchmark's own business
        }
    }
    out.latency_ms = latency.ok_or_else(|| perr("RESULT line has no latency=...ms field"))?;
    if !latency_in_range(out.latency_ms) {
        return Err(perr(format!(
            "RESULT line: latency {:e} ms is not a usable time; it must lie in [{MIN_LATENCY_MS:e}, {MAX_LATENCY_MS:e}] ms",
            out.latency_ms
        )));
    }
    if let Some(line) = stdout.lines().rev().find_map(|l| l.trim().strip_prefix("REGIME:")) {
        let mut words = line.split_whitespace();
        if let Some(first) = words.next() {
            if !first.contains('=') {
                if !REGIME_WORDS.contains(&first) {
                    return Err(perr(format!("REGIME line: {first:?} is not a regime; write one of {}", REGIME_WORDS.join(", "))));
                }
                out.regime = Some(first.to_string());
            }
        }
        let fields = key_values(line);
        once_each("REGIME", &fields)?;
        for (k, v) in &fields {
            match k.as_str() {
                "bw" => out.bw_pct = Some(non_negative(v.trim_end_matches('%'), "BW")?),
                "intensity" => out.intensity = Some(non_negative(v, "intensity")?),
                _ => {}
            }
        }
    }
    Ok(Some(out))
}

/// The words a REGIME line may start with: the seed's two sides of the roofline, the
/// latency-bound word every view of ratchet uses (`metrics::regime_word`), and the UNKNOWN
/// that ratchet_bench.py prints without the chip's peaks.
const REGIME_WORDS: [&str; 4] = ["COMPUTE-BOUND", "MEMORY-BOUND", "LATENCY-BOUND", "UNKNOWN"];

/// A figure given twice on one line is ambiguous, whichever wins.
fn once_each(what: &str, fields: &[(String, String)]) -> Result<(), ProtocolError> {
    for (i, (k, v)) in fields.iter().enumerate() {
        if let Some((_, w)) = fields[..i].iter().find(|(j, _)| j == k) {
            return Err(perr(format!("{what} line gives {k} twice ({k}={w} and {k}={v}); give each figure once")));
        }
    }
    Ok(())
}

/// A figure that cannot be negative (a score, a share of peak, a throughput, an intensity).
fn non_negative(s: &str, what: &str) -> Result<f64, ProtocolError> {
    let v = parse_number(s, what)?;
    if v < 0.0 {
        return Err(perr(format!("summary line: {what}={s} is negative; it cannot be")));
    }
    Ok(v)
}

/// `key=value` tokens of a summary line, keys lower-cased.
fn key_values(line: &str) -> Vec<(String, String)> {
    line.split_whitespace()
        .filter_map(|tok| tok.split_once('='))
        .map(|(k, v)| (k.to_ascii_lowercase(), v.trim_end_matches(',').to_string()))
        .collect()
}

fn parse_number(s: &str, what: &str) -> Result<f64, ProtocolError> {
    s.trim().parse::<f64>().ok().filter(|v| v.is_finite()).ok_or_else(|| perr(format!("summary line: {what}={s} is not a number")))
}

/// A time with its unit (`2.12ms`, `2120us`, `0.002s`; bare numbers are ms) in ms.
fn parse_time_ms(s: &str) -> Option<f64> {
    let s = s.trim();
    let (num, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix("us").or_else(|| s.strip_suffix("µs")) {
        (n, 1e-3)
    } else if let Some(n) = s.strip_suffix("ns") {
        (n, 1e-6)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1e3)
    } else {
        (s, 1.0)
    };
    num.trim().parse::<f64>().ok().filter(|v| v.is_finite()).map(|v| v * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn article_lines_parse() {
        let out = "warming up\nRESULT: score=847.3  latency=2.12ms  util=64.8%  tflops=127.4\nREGIME: COMPUTE-BOUND  BW=38.2%  intensity=682 FLOPs/byte\n";
        let r = parse_legacy(out).unwrap().unwrap();
        assert_eq!(r.latency_ms, 2.12);
        assert_eq!(r.score, Some(847.3));
        assert_eq!(r.util_pct, Some(64.8));
        assert_eq!(r.tflops, Some(127.4));
        assert_eq!(r.regime.as_deref(), Some("COMPUTE-BOUND"));
        assert_eq!(r.bw_pct, Some(38.2));
        assert_eq!(r.intensity, Some(682.0));
    }

    #[test]
    fn last_result_line_wins_and_units_convert() {
        let out = "RESULT: latency=5ms\nRESULT: latency=2120us score=1\n";
        let r = parse_legacy(out).unwrap().unwrap();
        assert!((r.latency_ms - 2.12).abs() < 1e-12);
        assert_eq!(r.regime, None);
    }

    #[test]
    fn missing_or_broken_result_lines() {
        assert_eq!(parse_legacy("nothing here\n").unwrap(), None);
        assert!(parse_legacy("RESULT: score=3\n").unwrap_err().0.contains("latency"));
        assert!(parse_legacy("RESULT: latency=fast\n").unwrap_err().0.contains("latency=fast"));
        assert!(parse_legacy("RESULT: latency=-1ms\n").is_err());
    }

    #[test]
    fn legacy_lines_are_held_to_their_fields() {
        let err = |out: &str| parse_legacy(out).unwrap_err().0;
        assert!(err("RESULT: latency=2ms util=-3%\n").contains("util=-3 is negative"));
        assert!(err("RESULT: latency=2ms tflops=-1\n").contains("tflops=-1 is negative"));
        assert!(err("RESULT: latency=2ms score=-5\n").contains("score=-5 is negative"));
        assert!(err("RESULT: latency=2ms latency=3ms\n").contains("gives latency twice (latency=2ms and latency=3ms)"));
        assert!(err("RESULT: latency=2ms\nREGIME: FAST  BW=3%\n").contains("\"FAST\" is not a regime; write one of COMPUTE-BOUND"));
        assert!(err("RESULT: latency=2ms\nREGIME: MEMORY-BOUND  BW=-3%\n").contains("BW=-3 is negative"));
        assert!(err("RESULT: latency=2ms\nREGIME: MEMORY-BOUND  intensity=1 intensity=2\n").contains("gives intensity twice"));
        // The seed's own lines still read.
        let r = parse_legacy("RESULT: score=847.3  latency=2.12ms  util=64.8%  tflops=127.4\nREGIME: LATENCY-BOUND  BW=38.2%\n")
            .unwrap()
            .unwrap();
        assert_eq!(r.regime.as_deref(), Some("LATENCY-BOUND"));
    }

    #[test]
    fn result_file_round_trip_and_validation() {
        let ok = r#"{"version":1,"latencies_ms":[1.0,2.0],"flops":1e9,"check":{"passed":true},"meta":{"BQ":128}}"#;
        let r = parse_result_file(ok).unwrap();
        assert_eq!(r.latencies_ms, vec![1.0, 2.0]);
        let deep = r#"{"version":1,"latencies_ms":[1.0],"snapshots":[{"path":"snapshots/0","step":0,"time_s":0.0,"source":"trace"}]}"#;
        assert_eq!(parse_result_file(deep).unwrap().snapshots.unwrap()[0].path, "snapshots/0");
        let e = parse_result_file(r#"{"version":1,"latencies_ms":[1.0],"snapshots":[{"dir":"x"}]}"#).unwrap_err();
        assert!(e.0.contains("unknown field `dir`"), "{e}");
        assert!(r.check.unwrap().passed);
        let cases = [
            ("{", "not valid JSON"),
            ("[1]", "JSON object"),
            (r#"{"latencies_ms":[1]}"#, "\"version\""),
            (r#"{"version":2,"latencies_ms":[1]}"#, "version 2"),
            (r#"{"version":1,"latencies_ms":[]}"#, "empty"),
            (r#"{"version":1,"latencies_ms":[1,0]}"#, "latencies_ms[1]"),
            (r#"{"version":1,"latencies_ms":[1],"flops":-3}"#, "flops"),
            (r#"{"version":1,"latencies_ms":[1],"flop":3}"#, "unknown field `flop`"),
            (r#"{"version":1}"#, "latencies_ms"),
        ];
        for (text, needle) in cases {
            let e = parse_result_file(text).unwrap_err();
            assert!(e.0.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn phases_are_optional_named_freely_and_never_negative() {
        let old = parse_result_file(r#"{"version":1,"latencies_ms":[1.0]}"#).unwrap();
        assert!(old.phases_s.is_none() && old.kernel_calls.is_none());
        let r = parse_result_file(
            r#"{"version":1,"latencies_ms":[1.0],"kernel_calls":35,"phases_s":{"imports":1.4,"compile":0.0,"a_later_phase":2}}"#,
        )
        .unwrap();
        let phases = r.phases_s.unwrap();
        assert_eq!((phases["imports"], phases["compile"], phases["a_later_phase"]), (1.4, 0.0, 2.0));
        assert_eq!(r.kernel_calls, Some(35));
        let with = |phases: &str| parse_result_file(&format!(r#"{{"version":1,"latencies_ms":[1.0],"phases_s":{phases}}}"#));
        for bad in [r#"{"imports":-0.1}"#, r#"{"imports":1e300}"#] {
            assert!(with(bad).unwrap_err().0.contains("phases_s.imports"), "{bad}");
        }
        assert!(with(r#"{"imports":"1"}"#).is_err());
    }
}
