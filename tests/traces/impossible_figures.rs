//! Impossible figures in a capture (negative or 2^63 durations) are flagged and kept out of the
//! results: no negative execution time, no NaN share. Captures written by
//! tests/support/xspace.rs.

use crate::support::xspace;

use ratchet::trace::{analyze_space, xplane, AnalyzeOptions, TraceReport};
use xspace::{Plane, V};

fn read(data: &[u8]) -> TraceReport {
    let sp = xplane::parse_skeleton(data).unwrap();
    analyze_space(&sp, "damaged", &AnalyzeOptions::default()).unwrap()
}

#[test]
fn negative_and_huge_durations_are_flagged_not_results() {
    let mut p = Plane::new("/device:TPU:0");
    // Three executions of 1 us; one more with a negative duration, one with 2^63 ps.
    for (i, dur) in [1_000_000i64, 1_000_000, 1_000_000, -5_000_000, i64::MIN].iter().enumerate() {
        let t = i as i64 * 10_000_000;
        p.event("XLA Modules", "jit_g(3)", t, *dur, &[]);
        p.event("XLA Ops", "fusion", t, 500_000, &[("device_duration_ps", V::I(if i == 1 { -7 } else { 500_000 }))]);
    }
    let r = read(&xspace::space(vec![p]));
    assert!(r.warnings.iter().any(|w| w.contains("2 event(s) had an impossible duration")), "{:?}", r.warnings);
    let k = r.kernel.unwrap();
    assert!(k.per_execution_us.iter().all(|u| *u >= 0.0), "{:?}", k.per_execution_us);
    assert_eq!(k.max_us, 1.0);
    for m in &r.modules {
        assert!(m.share_of_device_time.is_finite() && (0.0..=1.0).contains(&m.share_of_device_time), "{m:?}");
    }
    // The op with a negative device_duration_ps is charged its event's duration instead.
    assert!(k.op_breakdown.iter().all(|o| o.total_us >= 0.0 && o.fraction.is_finite()), "{:?}", k.op_breakdown);
}

#[test]
fn a_negative_gpu_kernel_duration_is_flagged() {
    let mut host = Plane::new("/host:CPU");
    let mut gpu = Plane::new("/device:GPU:0");
    for e in 0..3i64 {
        let t = e * 10_000_000;
        host.event("py_xla_execute/1", "jit_h:XLA GPU module", t, 5_000_000, &[]);
        host.event("py_xla_execute/1", "hipLaunchKernel", t + 1000, 10, &[("correlation_id", V::I(e + 1))]);
        let dur = if e == 2 { -3_000_000 } else { 2_000_000 };
        gpu.event(
            "Stream #1(Kernel)",
            "k",
            t + 100_000,
            dur,
            &[
                ("hlo_module", xspace::s("jit_h")),
                ("program_id", V::I(1)),
                ("correlation_id", V::I(e + 1)),
                ("hlo_op", xspace::s("fusion")),
            ],
        );
    }
    let r = read(&xspace::space(vec![host, gpu]));
    assert!(r.warnings.iter().any(|w| w.contains("1 event(s) had an impossible duration")), "{:?}", r.warnings);
    let k = r.kernel.unwrap();
    assert_eq!(k.executions, 3);
    assert!(k.per_execution_us.iter().all(|u| *u >= 0.0), "{:?}", k.per_execution_us);
}
