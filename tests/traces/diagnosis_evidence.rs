//! The diagnosis follows the evidence: a cause is named only when the capture, the HLO or the
//! kernel body shows it, with the figure that showed it, across kernel shapes (attention,
//! matmul+GELU, Triton bodies, vendor library calls, CPU runs, host-offload transfers).
//!
//! Shared-fixture figures: the v6e capture's copy-done share (96.9%) and the MI300X conv
//! capture's transpose fusion share (54.4%) are its op tables as `ratchet inspect` prints them,
//! checked against tests/helpers/xplane_reference.py.

use crate::support;

use std::path::PathBuf;
use support::{fixture, own_fixture};

use ratchet::cli::inspect::{build_inspect, render_text, InspectArgs};
use ratchet::diagnose::{self, Finding, Inputs, Level, RooflineView};
use ratchet::trace::kernel_body::KernelOps;
use ratchet::trace::{CategoryStat, HloStats, KernelStats, OpStat};

fn args(path: PathBuf) -> InspectArgs {
    InspectArgs::of(path)
}

/// A memory-bound roofline with a 75% gap (floor 1 ms, actual 4 ms).
fn big_gap() -> RooflineView {
    RooflineView {
        memory_bound: true,
        intensity: 100.0,
        ridge: 240.0,
        compute_only_ms: 0.4,
        memory_only_ms: 1.0,
        actual_ms: 4.0,
        util: 0.1,
        bw: 0.25,
    }
}

fn text(f: &[Finding]) -> String {
    diagnose::render(f)
}

fn rule<'a>(f: &'a [Finding], rule: &str) -> Vec<&'a Finding> {
    f.iter().filter(|x| x.rule == rule).collect()
}

/// One op: name, category, total us, count, FLOPs and bytes of one occurrence.
type Op<'a> = (&'a str, &'a str, f64, u64, Option<f64>, Option<f64>);

/// A kernel's trace figures from its ops.
fn kernel(device: Option<&str>, ops: &[Op<'_>], host: &[&str]) -> KernelStats {
    let total: f64 = ops.iter().map(|o| o.2).sum();
    let op_breakdown: Vec<OpStat> = ops
        .iter()
        .map(|&(name, category, us, count, flops, bytes)| OpStat {
            name: name.into(),
            category: category.into(),
            count,
            total_us: us,
            inclusive_us: us,
            per_execution_us: us,
            fraction: us / total,
            flops,
            bytes,
        })
        .collect();
    let mut cats: Vec<CategoryStat> = Vec::new();
    for o in &op_breakdown {
        match cats.iter_mut().find(|c| c.category == o.category) {
            Some(c) => {
                c.total_us += o.total_us;
                c.fraction += o.fraction;
            }
            None => cats.push(CategoryStat {
                category: o.category.clone(),
                total_us: o.total_us,
                per_execution_us: o.total_us,
                count: o.count,
                fraction: o.fraction,
            }),
        }
    }
    cats.sort_by(|a, b| b.total_us.total_cmp(&a.total_us));
    KernelStats {
        name: "jit_k".into(),
        executions: 1,
        per_execution_us: vec![total],
        median_us: total,
        mean_us: total,
        min_us: total,
        max_us: total,
        device: device.map(str::to_string),
        op_time: "event duration".into(),
        cost_model_flops: None,
        cost_model_bytes: None,
        host_memory_ops: host.iter().map(|s| s.to_string()).collect(),
        op_breakdown,
        category_breakdown: cats,
        pipeline: None,
    }
}

#[test]
fn host_offload_transfers_are_data_movement_not_spilling_or_loop_state() {
    need_fixtures!();
    // v6e: 96.9% of the op time in copy-done of host-offload copies (S(5)); no dot, no exp.
    let out = build_inspect(&args(fixture("tpu-v6e-xprof/tpu_inference_2.xplane.pb"))).unwrap();
    let f = &out.findings;
    let dm = rule(f, "data-movement");
    assert_eq!(dm.len(), 1, "{f:#?}");
    assert_eq!(dm[0].level, Level::Warn);
    assert!(dm[0].what.contains("96.9%") && dm[0].what.contains("S(5)"), "{:?}", dm[0]);
    let all = text(f);
    for wrong in ["register spilling", "score tile", "BQ", "loop state", "VPU", "MXU", "grid iterations"] {
        assert!(!all.contains(wrong), "{wrong:?} in\n{all}");
    }
    let gap = rule(f, "gap");
    assert!(gap[0].what.contains("1. data movement: copy-start/copy-done take 96.9%"), "{}", gap[0].what);
    // Each large op against its own roofline: the host copies are far off it, and say why.
    let op = rule(f, "op-roofline");
    assert!(op[0].what.contains("copy-done.2: 1.7% of its roofline") && op[0].what.contains("host transfer"), "{:?}", op[0]);
}

#[test]
fn vendor_calls_are_not_pallas_kernels_and_launch_gaps_are_not_bubbles() {
    need_fixtures!();
    // MI300X conv: a `__cudnn$convForward` custom call, a transpose fusion taking 54.4%, and
    // 43.5% of each execution with no kernel running.
    let out = build_inspect(&args(fixture("amd-mi300x-conv-8gpu/conv_legacy.xplane.pb"))).unwrap();
    let f = &out.findings;
    let all = text(f);
    let v = rule(f, "vendor");
    assert!(v[0].what.contains("__cudnn$convForward") && v[0].what.contains("not Pallas kernels"), "{all}");
    assert!(!all.contains("sees nothing inside a Pallas kernel"), "{all}");
    let gaps = rule(f, "launch-gaps");
    assert!(gaps[0].what.contains("43.5%") && gaps[0].level == Level::Warn, "{all}");
    for wrong in ["bubble", "grid iterations", "double buffering"] {
        assert!(!all.contains(wrong), "{wrong:?} in\n{all}");
    }
    let layout = rule(f, "layout");
    assert!(layout[0].what.contains("input_transpose_fusion alone 54.4%"), "{all}");

    let out = build_inspect(&args(fixture("amd-mi300x-jax0.8/attention.xplane.pb"))).unwrap();
    assert!(rule(&out.findings, "vendor")[0].what.contains("__cublas$gemm"), "{}", text(&out.findings));
}

#[test]
fn a_matmul_gelu_kernel_gets_its_own_tunables_not_attentions() {
    // A Pallas matmul+GELU kernel: one matmul, no exp, tunables BM/BN/BK.
    let meta = serde_json::json!({"BM": 256, "BN": 128, "BK": 512});
    let body = KernelOps { dialect: "mosaic".into(), name: "matmul_gelu".into(), matmul: 1, ..Default::default() };
    let hlo = HloStats { custom_call: 1, custom_call_targets: [("tpu_custom_call".to_string(), 1)].into(), ..Default::default() };
    let f = diagnose::diagnose(&Inputs {
        roofline: Some(big_gap()),
        meta: Some(&meta),
        hlo: Some(&hlo),
        kernel_ops: std::slice::from_ref(&body),
        backend: Some("tpu"),
        ..Default::default()
    });
    let gap = &rule(&f, "gap")[0].what;
    // 256x128 f32 is 32 x 1 vector registers of 8x128.
    assert!(gap.contains("register spilling: the tiles (BK=512, BM=256, BN=128): the BM x BN = 256x128 f32 accumulator"), "{gap}");
    assert!(gap.contains("fills 32 vector registers of 8x128"), "{gap}");
    for wrong in ["score tile", "BQ", "BKV", "VPU", "pipeline bubbles", "defensive copies"] {
        assert!(!gap.contains(wrong), "{wrong:?} in\n{gap}");
    }
}

#[test]
fn an_attention_kernel_gets_the_score_tile_and_its_measured_vpu_share_first() {
    let meta = serde_json::json!({"BQ": 128, "BKV": 256});
    let body = KernelOps { dialect: "mosaic".into(), name: "fa".into(), matmul: 2, exp: 2, reduce: 2, ..Default::default() };
    let f = diagnose::diagnose(&Inputs {
        roofline: Some(big_gap()),
        meta: Some(&meta),
        kernel_ops: std::slice::from_ref(&body),
        exp_share: Some(0.2),
        backend: Some("tpu"),
        ..Default::default()
    });
    let gap = &rule(&f, "gap")[0].what;
    let vpu = gap.find("1. VPU bottleneck: exp takes 20.0% of the op time").expect(gap);
    let spill = gap.find("2. register spilling: the score tile BQ x BKV = 128x256 in f32").expect(gap);
    assert!(gap.contains("fills 32 vector registers of 8x128"), "{gap}");
    assert!(vpu < spill, "{gap}");
    assert!(!gap.contains("pipeline bubbles") && !gap.contains("defensive copies"), "{gap}");
}

#[test]
fn a_triton_body_without_exp_gets_no_softmax_or_tpu_advice() {
    let meta = serde_json::json!({"BLOCK_M": 128, "BLOCK_N": 64});
    let body = KernelOps { dialect: "triton".into(), name: "mm".into(), matmul: 1, ..Default::default() };
    let k = kernel(Some("/device:GPU:0"), &[("triton_mm", "custom-call", 90.0, 10, None, None)], &[]);
    let f = diagnose::diagnose(&Inputs {
        roofline: Some(big_gap()),
        meta: Some(&meta),
        kernel_ops: std::slice::from_ref(&body),
        kernel: Some(&k),
        bubble_fraction: Some(0.02),
        exp_share: Some(0.0),
        ..Default::default()
    });
    let all = text(&f);
    assert!(all.contains("register spilling: the tiles (BLOCK_M=128, BLOCK_N=64)"), "{all}");
    for wrong in ["score tile", "VPU", "MXU", "PrefetchScalarGridSpec", "bubble"] {
        assert!(!all.contains(wrong), "{wrong:?} in\n{all}");
    }
}

#[test]
fn a_cpu_run_gets_no_accelerator_unit_advice() {
    // The interpreter on CPU: dot and exp in the HLO, BQ/BKV in meta, no Pallas kernel.
    let mut a = args(own_fixture("example-cpu"));
    (a.peak_tflops, a.hbm_gbps) = (Some(1.0), Some(10.0));
    let out = build_inspect(&a).unwrap();
    let all = text(&out.findings);
    // (The gap may list the article's causes as absent, never as a cause: "name: evidence".)
    for wrong in ["register spilling:", "score tile", "MXU", "VPU bottleneck:", "pipeline bubbles:", "bubble fraction", "grid iterations"] {
        assert!(!all.contains(wrong), "{wrong:?} in\n{all}");
    }
    let gap = &rule(&out.findings, "gap")[0].what;
    assert!(gap.contains("the largest op category is fusion"), "{gap}");
}

#[test]
fn without_evidence_no_cause_is_named() {
    let f = diagnose::diagnose(&Inputs { roofline: Some(big_gap()), ..Default::default() });
    let gap = &rule(&f, "gap")[0].what;
    assert!(gap.contains("the evidence shows none of the article's causes"), "{gap}");
    assert!(!gap.contains("score tile") && !gap.contains("1."), "{gap}");
    // The regime's prescription points at the gap's causes, no fixed remedies.
    let reg = rule(&f, "regime");
    assert!(!reg[0].prescription.as_deref().unwrap().contains("grid steps"), "{reg:?}");
}

#[test]
fn layout_reduce_collective_and_wait_shares_are_rules_with_their_figures() {
    let k = kernel(
        Some("/device:TPU:0"),
        &[
            ("convolution_fusion.1", "convolution fusion", 50.0, 1, Some(1e9), Some(1e6)),
            ("transpose.3", "data formatting", 6.0, 1, None, None),
            ("reduce_fusion", "loop fusion", 12.0, 1, None, None),
            ("all-reduce.1", "all-reduce", 20.0, 1, None, None),
            ("all-reduce-done.1", "async-done", 12.0, 1, None, None),
        ],
        &[],
    );
    let f = diagnose::diagnose(&Inputs { kernel: Some(&k), backend: Some("tpu"), roofline: Some(big_gap()), ..Default::default() });
    let all = text(&f);
    assert!(rule(&f, "layout")[0].what.contains("6.0% (transpose.3 alone 6.0%): above 5%"), "{all}");
    assert!(rule(&f, "reduce")[0].what.contains("12.0%"), "{all}");
    assert!(rule(&f, "reduce")[0].prescription.as_deref().unwrap().contains("second-to-last"), "{all}");
    // all-reduce and all-reduce-done are both collectives; the -done one is the wait.
    assert!(rule(&f, "collectives")[0].what.starts_with("collectives take 32.0% of the op time: the interconnect"), "{all}");
    assert!(rule(&f, "waits")[0].what.contains("wait 12.0%"), "{all}");
    // Below 5% a layout op is no finding.
    let small = kernel(
        Some("/device:TPU:0"),
        &[("fusion", "loop fusion", 96.0, 1, None, None), ("transpose", "data formatting", 4.0, 1, None, None)],
        &[],
    );
    assert!(rule(&diagnose::diagnose(&Inputs { kernel: Some(&small), ..Default::default() }), "layout").is_empty());
}

#[test]
fn each_op_against_its_own_roofline() {
    // 100 TFLOP/s, 1000 GB/s: a 1e9-FLOP, 1e6-byte op has a 10 us floor.
    let near = kernel(Some("/device:TPU:0"), &[("dot.1", "dot", 10.5, 1, Some(1e9), Some(1e6))], &[]);
    let f = diagnose::diagnose(&Inputs { kernel: Some(&near), peaks: Some((100.0, 1000.0)), ..Default::default() });
    let op = rule(&f, "op-roofline");
    assert_eq!(op[0].level, Level::Good, "{op:?}");
    assert!(op[0].what.contains("dot.1: 95.2% of its roofline (10.0 us floor, 10.5 us each"), "{op:?}");
    // A matmul more than 2x its roofline is seed 001's red flag; another op that far is a note.
    let far = kernel(Some("/device:TPU:0"), &[("dot.1", "dot", 40.0, 1, Some(1e9), Some(1e6))], &[]);
    let f = diagnose::diagnose(&Inputs { kernel: Some(&far), peaks: Some((100.0, 1000.0)), ..Default::default() });
    let op = rule(&f, "op-roofline");
    assert_eq!(op[0].level, Level::Warn);
    assert!(op[0].what.contains("dot.1: 25.0% of its roofline") && op[0].what.contains("a matmul more than 2x its roofline"), "{op:?}");
    let slow = kernel(Some("/device:TPU:0"), &[("fusion.1", "loop fusion", 40.0, 1, Some(1e9), Some(1e6))], &[]);
    let f = diagnose::diagnose(&Inputs { kernel: Some(&slow), peaks: Some((100.0, 1000.0)), ..Default::default() });
    assert_eq!(rule(&f, "op-roofline")[0].level, Level::Note);
    let at_half = kernel(Some("/device:TPU:0"), &[("dot.1", "dot", 20.0, 1, Some(1e9), Some(1e6))], &[]);
    let f = diagnose::diagnose(&Inputs { kernel: Some(&at_half), peaks: Some((100.0, 1000.0)), ..Default::default() });
    assert_eq!(rule(&f, "op-roofline")[0].level, Level::Note, "exactly 2x is not more than 2x");
    // Faster than its floor is an impossible figure: flagged, not praised.
    let odd = kernel(Some("/device:TPU:0"), &[("dot.1", "dot", 5.0, 1, Some(1e9), Some(1e6))], &[]);
    let f = diagnose::diagnose(&Inputs { kernel: Some(&odd), peaks: Some((100.0, 1000.0)), ..Default::default() });
    let op = rule(&f, "op-roofline");
    assert_eq!(op[0].level, Level::Warn);
    assert!(op[0].what.contains("faster than its roofline"), "{op:?}");
}

#[test]
fn inspect_text_prints_the_evidence_led_diagnosis_of_the_v6e_capture() {
    need_fixtures!();
    let out = build_inspect(&args(fixture("tpu-v6e-xprof/tpu_inference_2.xplane.pb"))).unwrap();
    let t = render_text(&out);
    assert!(t.contains("async copies (copy-start/copy-done, 96.9% of the op time) set the time"), "{t}");
    assert!(!t.contains("overhead, not bandwidth"), "{t}");
}

#[test]
fn a_spill_cliff_needs_decisive_experiments() {
    use ratchet::diagnose::cliff;
    let row = |id: u64, meta: &str, latency: f64, ci: Option<(f64, f64)>| ratchet::store::ResultRow {
        latency_ms: Some(latency),
        meta: meta.into(),
        ci_low_pct: ci.map(|c| c.0),
        ci_high_pct: ci.map(|c| c.1),
        ..ratchet::store::ResultRow::unmeasured(id, ratchet::store::Status::Revert, "m", "c".into(), "i".into())
    };
    // +40% at BKV=512, from an experiment whose interval ran from -61% to +83%: noise.
    let noisy = [row(1, "BKV=256;BQ=128", 1.0, Some((-3.0, 2.0))), row(2, "BKV=512;BQ=128", 1.4, Some((-61.0, 83.0)))];
    assert!(cliff::detect(&noisy).is_empty(), "{:?}", cliff::detect(&noisy));
    // The same jump measured within [+30%, +50%] is a cliff.
    let clear = [row(1, "BKV=256;BQ=128", 1.0, Some((-3.0, 2.0))), row(2, "BKV=512;BQ=128", 1.4, Some((30.0, 50.0)))];
    assert_eq!(cliff::detect(&clear).len(), 1);
}

#[test]
fn impossible_roofline_figures_are_flagged_not_banded() {
    // 1 ms of compute at peak done in 0.5 ms: util 200%, a negative gap.
    let r = RooflineView {
        memory_bound: false,
        intensity: 500.0,
        ridge: 240.0,
        compute_only_ms: 1.0,
        memory_only_ms: 0.2,
        actual_ms: 0.5,
        util: 2.0,
        bw: 0.4,
    };
    let f = diagnose::diagnose(&Inputs { roofline: Some(r), ..Default::default() });
    let imp = rule(&f, "impossible");
    assert_eq!(imp.len(), 1, "{f:?}");
    assert!(imp[0].what.contains("util 200.0%") && imp[0].what.contains("gap -0.500 ms"), "{:?}", imp[0]);
    assert!(rule(&f, "gap").is_empty() && rule(&f, "regime").is_empty(), "{f:?}");
}

#[test]
fn inspect_marks_impossible_roofline_figures() {
    need_fixtures!();
    // 1e18 FLOPs per execution in 784 ms on a 918 TFLOP/s chip cannot be.
    let mut a = args(fixture("tpu-v6e-xprof/tpu_inference_2.xplane.pb"));
    (a.flops, a.bytes) = (Some(1e18), Some(1e6));
    let out = build_inspect(&a).unwrap();
    let t = render_text(&out);
    assert!(t.contains("IMPOSSIBLE figures below"), "{t}");
    assert!(rule(&out.findings, "impossible")[0].what.contains("gap -"), "{t}");
    assert!(!t.contains("COMPUTE-BOUND,"), "{t}");
}

/// The GPU causes over a range of tilings and grids, on the Triton body of the H200 fixture
/// (tests/fixtures/example-gpu): spilling is named only where the tiles fill more than
/// `GPU_TILE_REGISTERS` of a thread, and the grid only where it has fewer programs than SMs.
#[test]
fn gpu_spilling_and_grid_fill_follow_the_tiling_warps_and_sms() {
    let body = std::fs::read_to_string(own_fixture("example-gpu").join("flash_attention_bq128_bkv64.body.mlir")).unwrap();
    let ops = ratchet::trace::kernel_body::parse_kernel_bodies(&body).unwrap();
    let causes = |bq: u64, bkv: u64, warps: Option<u64>, sms: Option<u32>| -> Vec<(String, String)> {
        let mut meta = serde_json::json!({"BQ": bq, "BKV": bkv, "head_dim": 128});
        if let Some(w) = warps {
            meta["num_warps"] = w.into();
        }
        let inp = Inputs { meta: Some(&meta), kernel_ops: &ops, backend: Some("gpu"), sms, ..Default::default() };
        let ev = diagnose::evidence::gather(None, None, &ops, Some("gpu"));
        diagnose::gap_causes(&inp, &ev).into_iter().map(|c| (c.name.to_string(), c.evidence)).collect()
    };
    let spill = |c: &[(String, String)]| c.iter().find(|(n, _)| n == "register spilling").map(|(_, e)| e.clone());
    // (BQ x BKV + BQ x 128) / (32 x warps) f32 values a thread: 96, 128 and 64 fit; 160, 192, 256 do not.
    for (bq, bkv, w, values) in [
        (64, 64, 4, None),
        (64, 128, 4, None),
        (128, 128, 8, None),
        (128, 32, 4, Some(160)),
        (128, 64, 4, Some(192)),
        (256, 128, 8, Some(256)),
    ] {
        let got = spill(&causes(bq, bkv, Some(w), None));
        match values {
            None => assert!(got.is_none(), "{bq}x{bkv} on {w} warps: {got:?}"),
            Some(v) => assert!(got.as_deref().is_some_and(|e| e.contains(&format!("{v} f32 values a thread"))), "{bq}x{bkv}/{w}: {got:?}"),
        }
    }
    // Without the warps the estimate cannot be made: the generic tile cause, in a GPU's words.
    let generic = spill(&causes(128, 64, None, None)).unwrap();
    assert!(generic.contains("may overflow the registers") && !generic.contains("vector"), "{generic}");
    // The fixture's grid is 1x32x1: under-filled on 132 SMs, not on 16, unknown without an SM count.
    let grid = |sms| causes(128, 128, Some(8), sms).into_iter().find(|(n, _)| n == "under-filled grid").map(|(_, e)| e);
    assert!(grid(Some(132)).is_some_and(|e| e.contains("32 programs for 132 SMs")));
    assert!(grid(Some(16)).is_none());
    assert!(grid(None).is_none());
}

#[test]
fn custom_calls_the_cost_model_cannot_see_make_util_a_lower_bound() {
    let ops: [Op<'_>; 3] = [
        ("convolution_fusion.1", "convolution fusion", 70.0, 1, Some(1e9), Some(1e6)),
        ("custom-call.7", "custom-call", 25.0, 1, Some(0.0), Some(0.0)),
        ("fusion.2", "loop fusion", 5.0, 1, Some(1e6), Some(1e6)),
    ];
    let mut k = kernel(Some("/device:TPU:0"), &ops, &[]);
    k.cost_model_flops = Some(1e9);
    let f = diagnose::diagnose(&Inputs { kernel: Some(&k), ..Default::default() });
    let c = rule(&f, "cost-model");
    assert_eq!(c[0].level, Level::Warn, "{c:?}");
    assert!(c[0].what.contains("1 custom call(s) the capture's cost model counts at 0 FLOPs and 0 bytes take 25.0%"), "{c:?}");
    // Without a cost model (the benchmark gave its figures) there is nothing to qualify.
    k.cost_model_flops = None;
    assert!(rule(&diagnose::diagnose(&Inputs { kernel: Some(&k), ..Default::default() }), "cost-model").is_empty());
}

#[test]
fn the_same_module_on_several_devices_is_checked_for_balance() {
    let dev =
        |d: &str, m: f64| ratchet::trace::DeviceStats { device: d.into(), executions: 3, median_us: m, mean_us: m, min_us: m, max_us: m };
    let spread = [dev("/device:GPU:0", 129.9), dev("/device:GPU:1", 150.0), dev("/device:GPU:2", 235.4)];
    let f = diagnose::diagnose(&Inputs { devices: &spread, ..Default::default() });
    let b = rule(&f, "load-imbalance");
    assert_eq!(b[0].level, Level::Warn);
    // (235.4 - 129.9) / 150.0 = 70.3% of the median.
    assert!(b[0].what.contains("129.9 to 235.4 us over 3 devices: a spread of 70.3% of the median (slowest /device:GPU:2)"), "{b:?}");
    let even = [dev("/device:TPU:0", 100.0), dev("/device:TPU:1", 104.9)];
    assert_eq!(rule(&diagnose::diagnose(&Inputs { devices: &even, ..Default::default() }), "load-imbalance")[0].level, Level::Good);
    assert!(rule(&diagnose::diagnose(&Inputs { devices: &even[..1], ..Default::default() }), "load-imbalance").is_empty());
}

#[test]
fn a_step_the_device_mostly_idles_is_host_bound() {
    let k = kernel(Some("/device:GPU:0"), &[("fusion.1", "loop fusion", 158.5, 1, None, None)], &[]);
    let steps = [500.6, 480.0, 520.0];
    let f = diagnose::diagnose(&Inputs { kernel: Some(&k), host_steps_us: &steps, ..Default::default() });
    let h = rule(&f, "host-bound");
    // 1 - 158.5 / 500.6 = 68.3% idle.
    assert!(h[0].what.contains("takes 500.6 us per 158.5 us of kernel: the device idles 68.3% of each step"), "{h:?}");
    // Four calls a step (a kernel inside a module) fill 634 us of a 700 us step: not host-bound.
    let mut four = k.clone();
    four.executions = 12;
    assert!(rule(
        &diagnose::diagnose(&Inputs { kernel: Some(&four), host_steps_us: &[700.0, 690.0, 710.0], ..Default::default() }),
        "host-bound"
    )
    .is_empty());
    // On CPU the host is the device.
    let cpu = kernel(None, &[("fusion.1", "loop fusion", 158.5, 1, None, None)], &[]);
    assert!(rule(&diagnose::diagnose(&Inputs { kernel: Some(&cpu), host_steps_us: &steps, ..Default::default() }), "host-bound").is_empty());
}

#[test]
fn idle_time_is_named_for_what_the_capture_shows() {
    // One op per execution covers its execution by construction: no bubble figure at all.
    let one = kernel(Some("/device:TPU:0"), &[("fusion.1", "loop fusion", 100.0, 1, None, None)], &[]);
    assert_eq!(diagnose::bubble_fraction(&one), None);
    // A module of XLA ops running collectives idles waiting, not in a Pallas pipeline.
    let mut k = kernel(
        Some("/device:TPU:0"),
        &[("fusion.1", "loop fusion", 60.0, 1, None, None), ("all-reduce.1", "all-reduce", 20.0, 1, None, None)],
        &[],
    );
    k.per_execution_us = vec![100.0];
    let b = diagnose::bubble_fraction(&k).unwrap();
    assert!((b - 0.2).abs() < 1e-12);
    let f = diagnose::diagnose(&Inputs { kernel: Some(&k), bubble_fraction: Some(b), backend: Some("tpu"), ..Default::default() });
    assert!(rule(&f, "bubbles").is_empty(), "{f:?}");
    assert_eq!(rule(&f, "idle")[0].what, "20.0% of the executions' span runs no op (it waits: the module runs collectives)");
}

#[test]
fn a_layout_finding_names_transposes_only_when_there_are_some() {
    let slicing = kernel(
        Some("/device:GPU:0"),
        &[("fusion.1", "loop fusion", 80.0, 1, None, None), ("dynamic-slice.2", "data formatting", 20.0, 1, None, None)],
        &[],
    );
    let f = diagnose::diagnose(&Inputs { kernel: Some(&slicing), ..Default::default() });
    let l = rule(&f, "layout");
    assert!(!l[0].prescription.as_deref().unwrap().contains("transpose"), "{l:?}");
    let transposing = kernel(
        Some("/device:GPU:0"),
        &[("fusion.1", "loop fusion", 80.0, 1, None, None), ("transpose.2", "data formatting", 20.0, 1, None, None)],
        &[],
    );
    let f = diagnose::diagnose(&Inputs { kernel: Some(&transposing), ..Default::default() });
    assert!(rule(&f, "layout")[0].prescription.as_deref().unwrap().contains("fold the transpose"));
}

#[test]
fn many_small_ops_are_judged_against_the_roofline_by_category() {
    // 40 matmuls of 2.5% each: none reaches 5%, so the category is judged, its ops summed.
    // Each: 1e9 FLOPs, 1e6 bytes, 25 us against a 10 us floor (100 TFLOP/s): 40% of it.
    let names: Vec<String> = (0..40).map(|i| format!("convolution_fusion.{i}")).collect();
    let ops: Vec<Op<'_>> = names.iter().map(|n| (n.as_str(), "convolution fusion", 25.0, 1, Some(1e9), Some(1e6))).collect();
    let k = kernel(Some("/device:TPU:0"), &ops, &[]);
    let f = diagnose::diagnose(&Inputs { kernel: Some(&k), peaks: Some((100.0, 1000.0)), ..Default::default() });
    let op = rule(&f, "op-roofline");
    assert!(op[0].what.contains("convolution fusion (40 ops): 40.0% of its roofline (10.0 us floor, 25.0 us an op"), "{op:?}");
    assert_eq!(op[0].level, Level::Warn, "a matmul category more than 2x its roofline");
    // A collective is never held to the HBM roofline.
    let k = kernel(Some("/device:TPU:0"), &[("all-reduce.1", "all-reduce", 100.0, 1, Some(0.0), Some(1.07e10))], &[]);
    assert!(rule(&diagnose::diagnose(&Inputs { kernel: Some(&k), peaks: Some((100.0, 1000.0)), ..Default::default() }), "op-roofline")
        .is_empty());
}

#[test]
fn a_tpu_tile_of_one_vector_register_cannot_spill() {
    let body = KernelOps { dialect: "mosaic".into(), name: "fa".into(), matmul: 2, exp: 2, reduce: 2, ..Default::default() };
    let gap_of = |meta: serde_json::Value| {
        let f = diagnose::diagnose(&Inputs {
            roofline: Some(big_gap()),
            meta: Some(&meta),
            kernel_ops: std::slice::from_ref(&body),
            backend: Some("tpu"),
            ..Default::default()
        });
        rule(&f, "gap")[0].what.clone()
    };
    // 8x128 f32 is exactly one vreg: not a cause.
    let one = gap_of(serde_json::json!({"BQ": 8, "BKV": 128}));
    assert!(!one.contains("register spilling:"), "{one}");
    // 16x128 is two.
    assert!(gap_of(serde_json::json!({"BQ": 16, "BKV": 128})).contains("fills 2 vector registers"));
    // Tunables that give no tile to count (no BQ/BKV with an exp, no BM/BN) name nothing on TPU.
    let other = gap_of(serde_json::json!({"CHUNK": 512}));
    assert!(!other.contains("register spilling:"), "{other}");
}
