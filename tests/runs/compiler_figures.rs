//! Figures the benchmark took from the compiler (the result file's `compiler_figures`) are
//! estimates, not claims: XLA's "bytes accessed" counts every operand from HBM, and a kernel
//! whose data stays in a cache beats it. The physics gate holds a run to the FLOPs it reports
//! and to the floor of bytes it gave itself (`min_bytes`, else its `bytes`), never to the
//! compiler's bytes or to modelled re-reads a cache serves. Runs `bench::measure` on an
//! executor that writes the result file.

use crate::support::measure::{measure_once, Writes};
use ratchet::bench::{RunRecord, RunStatus};
use ratchet::config::Config;

fn run(result: &str) -> RunRecord {
    let cfg = Config::parse("[benchmark]\ncommand = \"x\"\n[hardware]\npreset = \"h100\"\n[score]\nmetric = \"latency\"\n").unwrap();
    measure_once(&mut Writes::result(result), &cfg)
}

// 1 ms on an H100 (3350 GB/s): 10 GB is three times what HBM can move in that time.
const CACHE_FAST: &str = r#"{"version": 1, "latencies_ms": [1.0, 1.0, 1.0], "flops": 1e9, "bytes": 1e10"#;

#[test]
fn bytes_the_benchmark_gave_are_held_to_the_roofline() {
    let rec = run(&format!("{CACHE_FAST}}}"));
    assert_eq!(rec.status, RunStatus::Invalid);
    assert!(rec.error.as_deref().unwrap().contains("physics gate"), "{:?}", rec.error);
}

#[test]
fn bytes_the_compiler_estimated_are_not() {
    let rec = run(&format!(r#"{CACHE_FAST}, "compiler_figures": {{"bytes": "XLA's cost analysis"}}}}"#));
    assert_eq!(rec.status, RunStatus::Ok, "{:?}", rec.error);
    assert!(rec.compiler_bytes);
    // Still the figure every view computes the roofline from.
    assert_eq!(rec.bytes, Some(1e10));
}

#[test]
fn flops_bound_a_run_whatever_their_source() {
    // 1e16 FLOPs in 1 ms is 10 000 TFLOP/s, ten times an H100's peak.
    let rec = run(
        r#"{"version": 1, "latencies_ms": [1.0], "flops": 1e16, "bytes": 1e6, "compiler_figures": {"flops": "XLA's cost analysis", "bytes": "XLA's cost analysis"}}"#,
    );
    assert_eq!(rec.status, RunStatus::Invalid, "{:?}", rec.error);
}

// A model of the traffic with re-reads is not a floor either: the example's Triton form on an
// H200 re-reads K and V once per Q block, from L2, and measured 0.37 ms where those modelled
// bytes need 0.45 ms. With `min_bytes` given, the run is held to that floor alone.
#[test]
fn modelled_re_reads_a_cache_serves_do_not_invalidate_a_run_with_a_floor() {
    let rec = run(&format!(r#"{CACHE_FAST}, "min_bytes": 1e9}}"#));
    assert_eq!(rec.status, RunStatus::Ok, "{:?}", rec.error);
    assert_eq!((rec.bytes, rec.min_bytes), (Some(1e10), Some(1e9)));
}

#[test]
fn a_floor_beyond_the_roofline_still_invalidates() {
    // 5 GB at least in 1 ms: 5000 GB/s on a 3350 GB/s chip.
    let rec = run(&format!(r#"{CACHE_FAST}, "min_bytes": 5e9}}"#));
    assert_eq!(rec.status, RunStatus::Invalid);
    let err = rec.error.as_deref().unwrap();
    assert!(err.contains("physics gate") && err.contains("minimum bytes"), "{err}");
}
