//! The capture's own cost model: each op's category, FLOPs and bytes are those of the op in ITS
//! module (short names such as `fusion` repeat across modules), and the roofline comes from the
//! per-execution FLOPs and bytes and the chip's peaks the capture carries.
//!
//! Synthetic TPU captures are real `.xplane.pb` bytes written by tests/support/xspace.rs; the
//! shared-fixture figures were read with tests/helpers/trace_json_reference.py (gzip + json)
//! and tests/helpers/xplane_reference.py.

use crate::support::xspace;

use crate::support;

use std::path::Path;
use support::fixture;

use ratchet::cli::inspect::{build_inspect, render_text, InspectArgs};
use ratchet::trace::{analyze, analyze_space, xplane, AnalyzeOptions, TraceReport};
use xspace::{s, Plane, V};

/// One TPU with two modules, each executed twice, each holding an op named `fusion`: a
/// convolution fusion in `jit_b`, a gather (custom fusion, no FLOPs) in `jit_a`.
fn two_module_tpu(peaks: bool) -> Vec<u8> {
    let mut p = Plane::new("/device:TPU:0");
    if peaks {
        p.plane_stat("peak_teraflops_per_second", V::F(100.0)).plane_stat("peak_hbm_bw_gigabytes_per_second", V::F(1000.0));
    }
    let gather = "%fusion = bf16[8,16]{1,0} fusion(bf16[64,16]{1,0} %p0, s32[8]{0} %p1), kind=kCustom";
    let conv = "%fusion = bf16[8,64]{1,0} fusion(bf16[8,16]{1,0} %p0, bf16[16,64]{1,0} %p1), kind=kOutput";
    p.event_meta(
        gather,
        "fusion",
        &[("hlo_category", s("custom fusion")), ("flops", V::U(0)), ("bytes_accessed", V::U(20_000_000)), ("program_id", V::U(1))],
    );
    p.event_meta(
        conv,
        "fusion",
        &[
            ("hlo_category", s("convolution fusion")),
            ("flops", V::U(6_000_000_000)),
            ("bytes_accessed", V::U(700_000_000)),
            ("program_id", V::U(2)),
        ],
    );
    // jit_a at 0 and 4 ms, jit_b at 2 and 6 ms; each op takes 0.8 ms of its 1 ms execution.
    for (i, (module, op)) in [("jit_a(1)", gather), ("jit_b(2)", conv), ("jit_a(1)", gather), ("jit_b(2)", conv)].iter().enumerate() {
        let t = i as i64 * 2_000_000_000;
        p.event("XLA Modules", module, t, 1_000_000_000, &[]);
        p.event("XLA Ops", op, t + 100_000_000, 800_000_000, &[("device_duration_ps", V::U(800_000_000))]);
    }
    xspace::space(vec![p])
}

fn read(data: &[u8], kernel: &str) -> TraceReport {
    let sp = xplane::parse_skeleton(data).unwrap();
    analyze_space(&sp, "synthetic", &AnalyzeOptions { kernel: Some(kernel.into()), ..Default::default() }).unwrap()
}

#[test]
fn an_op_has_the_category_and_cost_of_its_own_module() {
    let data = two_module_tpu(false);
    for _ in 0..4 {
        // (The old reader kept whichever `fusion` it met first, in hash order: repeat.)
        let b = read(&data, "jit_b");
        let op = &b.kernel.as_ref().unwrap().op_breakdown[0];
        assert_eq!((op.name.as_str(), op.category.as_str(), op.flops, op.bytes), ("fusion", "convolution fusion", Some(6e9), Some(7e8)));
        let a = read(&data, "jit_a");
        let op = &a.kernel.as_ref().unwrap().op_breakdown[0];
        assert_eq!((op.name.as_str(), op.category.as_str(), op.flops, op.bytes), ("fusion", "custom fusion", Some(0.0), Some(2e7)));
    }
}

#[test]
fn chrome_export_ops_take_the_cost_of_the_module_holding_them() {
    need_fixtures!();
    // rpa_step: `fusion` is a gather (custom fusion, 0 FLOPs, 20975616 bytes) in jit_step_fun and
    // a 6228541440-FLOP convolution fusion (779866112 bytes) in jit_compute_logits_func (the
    // export's `model_flops` and `bytes_accessed` args; the ops carry no program id).
    let r = analyze(
        &fixture("tpu-v-vllm-json/rpa_step.trace.json.gz"),
        &AnalyzeOptions { kernel: Some("compute_logits".into()), ..Default::default() },
    )
    .unwrap();
    let k = r.kernel.unwrap();
    let f = k.op_breakdown.iter().find(|o| o.name == "fusion").unwrap();
    assert_eq!((f.category.as_str(), f.flops, f.bytes), ("convolution fusion", Some(6228541440.0), Some(779866112.0)));
    let r = analyze(
        &fixture("tpu-v-vllm-json/rpa_step.trace.json.gz"),
        &AnalyzeOptions { kernel: Some("step_fun".into()), ..Default::default() },
    )
    .unwrap();
    let f = r.kernel.unwrap().op_breakdown.into_iter().find(|o| o.name == "fusion").unwrap();
    assert_eq!((f.category.as_str(), f.flops, f.bytes), ("custom fusion", Some(0.0), Some(20975616.0)));
}

fn inspect_args(path: &Path, kernel: &str) -> InspectArgs {
    InspectArgs { kernel: Some(kernel.into()), ..InspectArgs::of(path.to_path_buf()) }
}

fn close(a: f64, b: f64) {
    assert!((a - b).abs() <= 1e-9 * b.abs().max(1e-12), "{a} vs {b}");
}

#[test]
fn roofline_from_the_captures_cost_model_and_peaks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tpu.xplane.pb");
    std::fs::write(&path, two_module_tpu(true)).unwrap();
    let out = build_inspect(&inspect_args(&path, "jit_b")).unwrap();
    // 6e9 FLOPs and 7e8 bytes per 1 ms execution on a 100 TFLOP/s, 1000 GB/s chip.
    assert_eq!(out.cost_source.as_deref(), Some("capture cost model"));
    let rf = out.roofline.as_ref().expect("a roofline without --flops/--bytes");
    close(rf.intensity, 6e9 / 7e8);
    close(rf.compute_only_ms, 0.06);
    close(rf.memory_only_ms, 0.7);
    close(rf.actual_ms, 1.0);
    close(rf.gap_ms, 0.3);
    assert_eq!(rf.regime, "MEMORY-BOUND");
    let text = render_text(&out);
    assert!(text.contains("Roofline from the capture's cost model"), "{text}");
    assert!(!text.contains("Roofline: not computed"), "{text}");
    let json = serde_json::to_value(&out).unwrap();
    assert_eq!(json["cost_source"], "capture cost model");
    close(json["roofline"]["gap_ms"].as_f64().unwrap(), 0.3);

    // The flags still override, as a pair.
    let mut args = inspect_args(&path, "jit_b");
    (args.flops, args.bytes) = (Some(1e9), Some(1e8));
    let out = build_inspect(&args).unwrap();
    assert_eq!(out.cost_source.as_deref(), Some("flags"));
    close(out.roofline.unwrap().intensity, 10.0);

    // Without the chip's peaks in the capture there is no roofline, and the text says why.
    std::fs::write(&path, two_module_tpu(false)).unwrap();
    let out = build_inspect(&inspect_args(&path, "jit_b")).unwrap();
    assert!(out.roofline.is_none());
    assert!(render_text(&out).contains("missing --peak-tflops, --hbm-gbps"), "{}", render_text(&out));
}

#[test]
fn v6e_capture_gives_its_roofline_from_its_own_figures() {
    need_fixtures!();
    let path = fixture("tpu-v6e-xprof/tpu_inference_2.xplane.pb");
    let out = build_inspect(&inspect_args(&path, "jit_f")).unwrap();
    let k = out.report.kernel.as_ref().unwrap();
    let (f, b) = (k.cost_model_flops.unwrap(), k.cost_model_bytes.unwrap());
    // The plane's peak_teraflops_per_second and peak_hbm_bw_gigabytes_per_second.
    assert_eq!((out.peak_tflops.map(f64::round), out.hbm_gbps.map(f64::round)), (Some(918.0), Some(1638.0)));
    let rf = out.roofline.as_ref().expect("roofline from the capture");
    assert_eq!(out.cost_source.as_deref(), Some("capture cost model"));
    close(rf.intensity, f / b);
    close(rf.memory_only_ms, b / (out.hbm_gbps.unwrap() * 1e9) * 1e3);
    close(rf.actual_ms, k.median_us / 1e3);
}

#[test]
fn a_pallas_kernel_is_one_op_row_over_its_calls() {
    need_fixtures!();
    // rpa_step: the ragged-paged-attention kernel is called 64 times (`RPA-...-.1` to `.64`).
    let r =
        analyze(&fixture("tpu-v-vllm-json/rpa_step.trace.json.gz"), &AnalyzeOptions { kernel: Some("RPA".into()), ..Default::default() })
            .unwrap();
    let k = r.kernel.unwrap();
    assert_eq!(k.op_breakdown.len(), 1, "{:?}", k.op_breakdown.iter().map(|o| &o.name).collect::<Vec<_>>());
    let op = &k.op_breakdown[0];
    assert_eq!((op.name.as_str(), op.category.as_str(), op.count), ("RPA-bq_32-bkvp_64-p_64-", "custom-call", 64));
    close(op.per_execution_us, k.mean_us);
}

#[test]
fn without_program_ids_an_op_is_told_apart_by_its_hlo_text() {
    // The same two modules, their op metadata carrying no program_id.
    let mut p = Plane::new("/device:TPU:0");
    let gather = "%fusion = bf16[8,16]{1,0} fusion(bf16[64,16]{1,0} %p0, s32[8]{0} %p1), kind=kCustom";
    let conv = "%fusion = bf16[8,64]{1,0} fusion(bf16[8,16]{1,0} %p0, bf16[16,64]{1,0} %p1), kind=kOutput";
    p.event_meta(gather, "fusion", &[("hlo_category", s("custom fusion")), ("flops", V::U(0))]);
    p.event_meta(conv, "fusion", &[("hlo_category", s("convolution fusion")), ("flops", V::U(6_000_000_000))]);
    for (i, (module, op)) in [("jit_a(1)", gather), ("jit_b(2)", conv), ("jit_a(1)", gather), ("jit_b(2)", conv)].iter().enumerate() {
        let t = i as i64 * 2_000_000_000;
        p.event("XLA Modules", module, t, 1_000_000_000, &[]);
        p.event("XLA Ops", op, t + 100_000_000, 800_000_000, &[]);
    }
    let data = xspace::space(vec![p]);
    for _ in 0..4 {
        let b = read(&data, "jit_b");
        let op = &b.kernel.as_ref().unwrap().op_breakdown[0];
        assert_eq!((op.category.as_str(), op.flops), ("convolution fusion", Some(6e9)));
        let a = read(&data, "jit_a");
        let op = &a.kernel.as_ref().unwrap().op_breakdown[0];
        assert_eq!((op.category.as_str(), op.flops), ("custom fusion", Some(0.0)));
    }
}
