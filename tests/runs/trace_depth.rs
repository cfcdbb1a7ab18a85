//! `[trace] depth` sets the TPU profiler depth the benchmark captures with (the
//! article's tpu_trace_mode, section 2.4), passed to it as RATCHET_TRACE_MODE.

use ratchet::config::{Config, TraceDepth};

const BASE: &str = "[benchmark]\ncommand = \"python3 prepare.py\"\n[hardware]\npreset = \"tpu-v7x\"\n";

#[test]
fn trace_depth_defaults_to_trace_compute_and_is_checked() {
    assert_eq!(Config::parse(BASE).unwrap().trace.depth, TraceDepth::TraceCompute);
    let c = Config::parse(&format!("{BASE}[trace]\ndepth = \"TRACE_COMPUTE_AND_SYNC\"\n")).unwrap();
    assert_eq!(c.trace.depth.as_str(), "TRACE_COMPUTE_AND_SYNC");
    let err = Config::parse(&format!("{BASE}[trace]\ndepth = \"EVERYTHING\"\n")).unwrap_err().to_string();
    assert!(err.contains("TRACE_COMPUTE_AND_SYNC") || err.contains("depth"), "{err}");
}

#[test]
fn the_python_helper_knows_every_depth() {
    for d in [TraceDepth::TraceOnlyHost, TraceDepth::TraceOnlyXla, TraceDepth::TraceCompute, TraceDepth::TraceComputeAndSync] {
        assert!(ratchet::pyhelper::SOURCE.contains(&format!("\"{}\"", d.as_str())), "{}", d.as_str());
    }
}
