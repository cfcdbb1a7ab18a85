//! The trace reader on real captures (../shared/fixtures: CPU jax 0.10.2, TPU v6e, AMD MI300X
//! single- and 8-GPU, a TPU Chrome-trace export).
//!
//! Expected figures come from independent decoders: tests/helpers/xplane_reference.py (Python
//! protobuf runtime with a hand-declared XSpace schema) for the .xplane.pb captures, and
//! tests/helpers/trace_json_reference.py (gzip + json) for the Chrome trace. Re-run them from
//! the repository root (`python3 tests/helpers/xplane_reference.py [FILE]`) and compare with
//! the constants below. Every test that needs ../shared skips with a note when it is absent.

use crate::support;

use support::fixture;

use ratchet::cli::inspect::{build_inspect, render_text, InspectArgs};
use ratchet::trace::{analyze, hlo_stats_from_text, AnalyzeOptions, TraceReport};

const CPU: &str = "jax-cpu-0.10.2/flash_attention_5iters.xplane.pb";
const CPU_JSON: &str = "jax-cpu-0.10.2/flash_attention_5iters.trace.json.gz";
const CPU_HLO: &str = "jax-cpu-0.10.2/flash_attention.hlo.txt";
const TPU: &str = "tpu-v6e-xprof/tpu_inference_2.xplane.pb";
const AMD: &str = "amd-mi300x-jax0.8/attention.xplane.pb";

fn close(a: f64, b: f64) {
    assert!((a - b).abs() < 1e-6, "{a} != {b}");
}

fn kernel_opts(p: &str) -> AnalyzeOptions {
    AnalyzeOptions { kernel: Some(p.to_string()), ..Default::default() }
}

fn module<'a>(r: &'a TraceReport, name: &str) -> &'a ratchet::trace::ModuleStats {
    r.modules.iter().find(|m| m.name == name).unwrap_or_else(|| panic!("no module {name}"))
}

// From xplane_reference.py, CPU fixture.
const CPU_EVENTS: u64 = 9598;
const CPU_FLASH_PER_EXEC_US: [f64; 5] = [1083.617, 1095.114, 1092.671, 1056.616, 1107.112];
const CPU_FLASH_MEDIAN_US: f64 = 1092.671;
const CPU_FLASH_MEAN_US: f64 = 1087.026;
const CPU_FLASH_OPS_PER_EXEC: f64 = 632.0;
const CPU_MATMUL_MEDIAN_US: f64 = 1270.508;
const CPU_MATMUL_MIN_US: f64 = 857.368;
const CPU_STEPS_US: [f64; 5] = [2764.02, 2258.862, 2718.562, 2616.709, 2765.783];

#[test]
fn cpu_capture_kernel_times_match_the_reference() {
    need_fixtures!();
    let r = analyze(&fixture(CPU), &kernel_opts("flash_attention")).unwrap();
    assert_eq!(r.events, CPU_EVENTS);
    assert!(r.source.starts_with("/host:CPU / tf_XLAPjRtCpuClient"), "{}", r.source);
    assert_eq!(r.modules.len(), 2);
    let flash = module(&r, "jit_flash_attention(12)");
    assert_eq!(flash.executions, 5);
    close(flash.median_us, CPU_FLASH_MEDIAN_US);
    close(flash.mean_us, CPU_FLASH_MEAN_US);
    close(flash.ops_per_execution.unwrap(), CPU_FLASH_OPS_PER_EXEC);
    let mm = module(&r, "jit_tiled_matmul(36)");
    close(mm.median_us, CPU_MATMUL_MEDIAN_US);
    close(mm.min_us, CPU_MATMUL_MIN_US);

    let k = r.kernel.as_ref().unwrap();
    assert_eq!(k.name, "jit_flash_attention(12)");
    for (a, b) in k.per_execution_us.iter().zip(CPU_FLASH_PER_EXEC_US) {
        close(*a, b);
    }
    // Every op event of the kernel lands in the breakdown exactly once.
    let ops: u64 = k.op_breakdown.iter().map(|o| o.count).sum();
    assert_eq!(ops as f64, CPU_FLASH_OPS_PER_EXEC * 5.0);
    // Self times never exceed the executions' spans (nested while bodies are not counted twice).
    let self_total: f64 = k.category_breakdown.iter().map(|c| c.total_us).sum();
    let span_total: f64 = CPU_FLASH_PER_EXEC_US.iter().sum();
    assert!(self_total > 0.5 * span_total && self_total <= span_total, "{self_total}");
    let cats: Vec<&str> = k.category_breakdown.iter().map(|c| c.category.as_str()).collect();
    for c in ["fusion", "while", "copy"] {
        assert!(cats.contains(&c), "{cats:?}");
    }
    let while30 = k.op_breakdown.iter().find(|o| o.name == "while.30").unwrap();
    assert_eq!(while30.count, 5);
    assert!(while30.inclusive_us > while30.total_us);

    for (a, b) in r.host_steps_us.iter().zip(CPU_STEPS_US) {
        close(*a, b);
    }
    // HloProto of jit_flash_attention(12), per the reference.
    let h = r.hlo_ops_from_proto.as_ref().unwrap();
    assert_eq!((h.dot, h.exponential, h.reduce, h.copy, h.fusion, h.custom_call, h.while_), (2, 2, 2, 13, 31, 0, 2));
    assert_eq!(h.total_instructions, 252);
    // All 13 are the interpreter's while-loop state copies (in the grid loop's body,
    // or building its initial state), so the defensive-copy warning stays quiet.
    assert_eq!(h.loop_copies, 13);
    assert!(!r.warnings.iter().any(|w| w.contains("copy op(s)")), "{:?}", r.warnings);
}

#[test]
fn cpu_capture_without_pattern_names_the_candidates() {
    need_fixtures!();
    let err = format!("{:#}", analyze(&fixture(CPU), &AnalyzeOptions::default()).unwrap_err());
    assert!(err.contains("jit_flash_attention(12) (5 executions)"), "{err}");
    assert!(err.contains("jit_tiled_matmul(36) (5 executions)"), "{err}");
    assert!(err.contains("--kernel"), "{err}");
}

#[test]
fn hlo_text_fixture_counts() {
    need_fixtures!();
    let text = std::fs::read_to_string(fixture(CPU_HLO)).unwrap();
    let h = hlo_stats_from_text(&text);
    // The figures of ../shared/xplane-format.md, and the reference's HloProto count (252).
    assert_eq!((h.dot, h.exponential, h.reduce, h.copy, h.fusion, h.custom_call, h.while_), (2, 2, 2, 13, 31, 0, 2));
    assert_eq!(h.total_instructions, 252);
}

#[test]
fn json_fallback_agrees_with_the_xplane() {
    need_fixtures!();
    let r = analyze(&fixture(CPU_JSON), &kernel_opts("flash_attention")).unwrap();
    assert!(r.source.contains("tf_XLAPjRtCpuClient"), "{}", r.source);
    let k = r.kernel.as_ref().unwrap();
    assert_eq!(k.name, "jit_flash_attention");
    for (a, b) in k.per_execution_us.iter().zip(CPU_FLASH_PER_EXEC_US) {
        assert!((a - b).abs() < 1e-3, "{a} != {b}");
    }
    assert!((k.median_us - CPU_FLASH_MEDIAN_US).abs() < 1e-3);
    assert_eq!(r.host_steps_us.len(), 5);
    // 9,605 events: far from jax's 1,000,000 cap, so no truncation warning.
    assert!(!r.warnings.iter().any(|w| w.contains("truncated")));
}

// From xplane_reference.py, TPU fixture.
const TPU_F_EXECS: usize = 100;
const TPU_F_MEDIAN_US: f64 = 784122.780625;
const TPU_F_MEAN_US: f64 = 784154.407716;
const TPU_F_MIN_US: f64 = 551121.306250;
const TPU_PSUM_MEDIAN_US: f64 = 123309.300078;

#[test]
fn tpu_capture_reads_xla_modules_and_cost_model() {
    need_fixtures!();
    let r = analyze(&fixture(TPU), &AnalyzeOptions::default()).unwrap();
    assert_eq!(r.source, "/device:TPU:0 / XLA Modules");
    let d = r.device.as_ref().unwrap();
    assert_eq!(d.device_type.as_deref(), Some("TPU v6 Lite"));
    assert_eq!(d.peak_tflops, Some(918.0));
    close(d.hbm_gbps.unwrap(), 1637.993152512);
    // Default choice: the module executed most (jit_f, a program id above 2^63).
    let k = r.kernel.as_ref().unwrap();
    assert_eq!(k.name, "jit_f(12190760917235803885)");
    assert_eq!(k.executions, TPU_F_EXECS);
    close(k.median_us, TPU_F_MEDIAN_US);
    assert!((k.mean_us - TPU_F_MEAN_US).abs() < 1e-5);
    close(k.min_us, TPU_F_MIN_US);
    close(module(&r, "jit__psum(9646411105960254074)").median_us, TPU_PSUM_MEDIAN_US);
    // Every module, per xplane_reference.py: (name, executions, median).
    assert_eq!(r.modules.len(), 4);
    for (name, n, median) in [
        ("jit__psum(9646411105960254074)", 3, 123309.300078),
        ("jit_broadcast_in_dim(11287434908481120160)", 1, 4444.277422),
        ("jit_convert_element_type(2433868464432466958)", 1, 0.961328),
    ] {
        let m = module(&r, name);
        assert_eq!(m.executions, n, "{name}");
        within(m.median_us, median);
    }
    assert_eq!(module(&r, "jit_f(12190760917235803885)").program_id, Some(12190760917235803885));
    // Categories come from the capture's hlo_category, costs from the op metadata.
    let fusion = k.op_breakdown.iter().find(|o| o.name == "broadcast_add_fusion").unwrap();
    assert_eq!(fusion.category, "loop fusion");
    assert_eq!(fusion.count, 100);
    assert!(fusion.flops.unwrap() > 0.0 && fusion.bytes.unwrap() > 0.0);
    assert!(k.cost_model_flops.unwrap() > 0.0);
    let h = r.hlo_ops_from_proto.as_ref().unwrap();
    assert_eq!((h.fusion, h.total_instructions), (3, 31));
}

#[test]
fn amd_gpu_capture_groups_kernels_by_host_execution() {
    need_fixtures!();
    let r = analyze(&fixture(AMD), &AnalyzeOptions::default()).unwrap();
    assert_eq!(r.source, "/device:GPU:0 / Stream #16(Kernel)");
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    // From xplane_reference.py: per (hlo_module, program_id) executions and medians, every module.
    let expect = [
        ("jit_matmul(19)", 12, 37.7, 1.0),
        ("jit_add(71)", 6, 14.64, 1.0),
        ("jit_multiply(86)", 6, 43.82, 1.0),
        ("jit__reduce_max(49)", 3, 16.52, 2.0),
        ("jit__reduce_sum(55)", 3, 8.92, 1.0),
        ("jit_add(88)", 3, 52.32, 1.0),
        ("jit_add(94)", 3, 49.12, 1.0),
        ("jit_convert_element_type(45)", 3, 2.0, 1.0),
        ("jit_exp(53)", 3, 18.08, 1.0),
        ("jit_integer_pow(84)", 3, 41.6, 1.0),
        ("jit_matmul(32)", 3, 75.84, 1.0),
        ("jit_matmul(59)", 3, 181.6, 2.0),
        ("jit_matmul(73)", 3, 139.6, 1.0),
        ("jit_matmul(98)", 3, 141.52, 1.0),
        ("jit_multiply(90)", 3, 43.6, 1.0),
        ("jit_multiply(96)", 3, 56.121, 1.0),
        ("jit_sqrt(43)", 3, 2.44, 1.0),
        ("jit_subtract(51)", 3, 21.0, 1.0),
        ("jit_swapaxes(30)", 3, 9.48, 1.0),
        ("jit_tanh(92)", 3, 45.36, 1.0),
        ("jit_true_divide(47)", 3, 26.84, 1.0),
        ("jit_true_divide(57)", 3, 15.4, 1.0),
    ];
    for (name, n, median, ops) in expect {
        let m = module(&r, name);
        assert_eq!(m.executions, n, "{name}");
        close(m.median_us, median);
        close(m.ops_per_execution.unwrap(), ops);
    }
    assert_eq!(r.modules.len(), 22);
    let k = r.kernel.as_ref().unwrap();
    assert_eq!(k.name, "jit_matmul(19)");
    assert_eq!(k.category_breakdown[0].category, "custom-call");
    let h = r.hlo_ops_from_proto.as_ref().unwrap();
    assert_eq!(h.custom_call, 1);
    // A kernel pattern picks a two-kernel module: both kernels are in its breakdown.
    let r = analyze(&fixture(AMD), &kernel_opts(r"^jit_matmul\(59\)$")).unwrap();
    let names: Vec<&str> = r.kernel.as_ref().unwrap().op_breakdown.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.contains(&"gemm_fusion_dot_general.1") && names.contains(&"loop_reduce_fusion"));
}

#[test]
fn truncated_capture_is_a_clear_error() {
    need_fixtures!();
    let data = std::fs::read(fixture(CPU)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for cut in [data.len() / 3, data.len() - 5] {
        let p = dir.path().join("cut.xplane.pb");
        std::fs::write(&p, &data[..cut]).unwrap();
        let err = format!("{:#}", analyze(&p, &AnalyzeOptions::default()).unwrap_err());
        assert!(err.contains("corrupt or truncated .xplane.pb"), "{err}");
        assert!(err.contains("cut.xplane.pb"), "{err}");
    }
}

#[test]
fn run_directory_drives_inspect() {
    need_fixtures!();
    let dir = tempfile::tempdir().unwrap();
    // A run directory whose profile log dir holds the CPU fixture.
    let session = dir.path().join("profile/plugins/profile/2026_01_01_00_00_00");
    std::fs::create_dir_all(&session).unwrap();
    std::fs::copy(fixture(CPU), session.join("host.xplane.pb")).unwrap();
    std::fs::copy(fixture(CPU_HLO), dir.path().join("kernel.hlo.txt")).unwrap();
    std::fs::write(
        dir.path().join("ratchet-result.json"),
        r#"{"version":1,"latencies_ms":[2.5,2.6],"flops":1.34e8,"bytes":4.0e6,"min_bytes":6.0e5,
            "trace":"profile","hlo":"kernel.hlo.txt","kernel":"flash_attention","backend":"cpu"}"#,
    )
    .unwrap();
    let args = InspectArgs { json: true, peak_tflops: Some(1.0), hbm_gbps: Some(10.0), ..InspectArgs::of(dir.path().to_path_buf()) };
    let out = build_inspect(&args).unwrap();
    assert_eq!(out.latency_source.as_deref(), Some("trace"));
    close(out.latency_ms.unwrap(), CPU_FLASH_MEDIAN_US / 1e3);
    let rf = out.roofline.as_ref().unwrap();
    close(rf.intensity, 1.34e8 / 4.0e6);
    assert_eq!(rf.regime, "MEMORY-BOUND");
    assert_eq!(out.hlo_from_text.as_ref().unwrap().copy, 13);

    let json: serde_json::Value = serde_json::to_value(&out).unwrap();
    let modules = json["modules"].as_array().unwrap();
    let flash = modules.iter().find(|m| m["name"] == "jit_flash_attention(12)").unwrap();
    assert_eq!(flash["executions"], 5);
    close(flash["median_us"].as_f64().unwrap(), CPU_FLASH_MEDIAN_US);
    assert!(json["roofline"]["gap_ms"].is_f64());

    let text = render_text(&out);
    // The roofline's side is memory, and 63% of the time gap is below the 90% at which the word
    // every view uses becomes LATENCY-BOUND (metrics::regime_word).
    for needle in ["Bottleneck:          MEMORY-BOUND", "Time decomposition:", "Gap:", "Bandwidth:", "copy 13", "Top ops"] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
}

// A capture made by this project's own example benchmark (examples/flash_attention/prepare.py,
// BQ=BKV=128, 2 profile iterations, jax 0.10.2 on CPU), kept with its result file and HLO
// dump as a ratchet run directory. Expected figures: tests/helpers/xplane_reference.py
// tests/fixtures/example-cpu/flash_attention_bq128_bkv128.xplane.pb
#[test]
fn own_example_capture_matches_the_reference_decoder() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/example-cpu");
    // The run directory: the kernel name and the trace path come from its ratchet-result.json.
    let report = ratchet::trace::analyze(&dir, &Default::default()).unwrap();
    assert_eq!(report.events, 2243);
    assert!(report.source.contains("/host:CPU"), "{}", report.source);
    let k = report.kernel.as_ref().unwrap();
    assert_eq!(k.name, "jit_flash_attention(18)");
    assert_eq!(k.executions, 2);
    close(k.median_us, 3215.9925);
    close(k.per_execution_us[0], 3239.7);
    close(k.per_execution_us[1], 3192.285);
    assert_eq!(report.host_steps_us.len(), 2);
    close(report.host_steps_us[0], 3516.193);
    close(report.host_steps_us[1], 3362.566);
    let proto = report.hlo_ops_from_proto.as_ref().unwrap();
    assert_eq!((proto.dot, proto.exponential, proto.reduce, proto.copy, proto.fusion, proto.while_), (2, 2, 2, 13, 33, 1));
    assert_eq!(proto.total_instructions, 283);
    // The HLO text the benchmark dumped is the same module.
    let text = std::fs::read_to_string(dir.join("flash_attention_bq128_bkv128.hlo.txt")).unwrap();
    let from_text = ratchet::trace::hlo_stats_from_text(&text);
    assert_eq!((from_text.dot, from_text.exponential, from_text.reduce, from_text.copy), (2, 2, 2, 13));
}

// A capture made by the same benchmark on an NVIDIA H200 (jax 0.11.2, the Triton form at the
// example's GPU defaults BQ=128, BKV=64, 4 warps, 2 stages; seq 4096, 3 profiled calls), made by
// scripts/gpu-check/run.sh and kept with its result file, HLO and kernel body. Expected figures:
// tests/helpers/xplane_reference.py tests/fixtures/example-gpu/flash_attention_bq128_bkv64.xplane.pb
const GPU_RUN: &str = "tests/fixtures/example-gpu";
const GPU_PER_EXEC_US: [f64; 3] = [158.623, 158.399, 158.528];
const GPU_STEPS_US: [f64; 3] = [706.553, 500.556, 475.98];

#[test]
fn own_gpu_capture_matches_the_reference_decoder() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(GPU_RUN);
    let report = analyze(&dir, &Default::default()).unwrap();
    assert_eq!(report.events, 85);
    assert_eq!(report.source, "/device:GPU:0 / Stream #14(Compute)");
    // jax 0.11 names the window `[0] GpuExecutable::ExecuteThunks` and the launch after the
    // kernel: every kernel is tied to its execution.
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    let k = report.kernel.as_ref().unwrap();
    assert_eq!(k.name, "jit_flash_attention(36389)");
    assert_eq!(k.executions, 3);
    for (a, b) in k.per_execution_us.iter().zip(GPU_PER_EXEC_US) {
        close(*a, b);
    }
    close(k.median_us, 158.528);
    for (a, b) in report.host_steps_us.iter().zip(GPU_STEPS_US) {
        close(*a, b);
    }
    let proto = report.hlo_ops_from_proto.as_ref().unwrap();
    assert_eq!((proto.custom_call, proto.dot, proto.total_instructions), (1, 0, 4));
}

#[test]
fn own_gpu_capture_is_diagnosed_from_its_evidence() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(GPU_RUN);
    let out = build_inspect(&InspectArgs { json: true, ..InspectArgs::of(dir) }).unwrap();
    // The chip: peak FLOP/s from the run's device kind (the H200 preset), bandwidth from the
    // capture's own device plane (4814 GB/s, preferred over the preset's datasheet 4800), SMs
    // from the device kind.
    assert_eq!(out.peak_tflops, Some(989.0));
    close(out.hbm_gbps.unwrap(), 4814.304);
    assert_eq!(out.latency_source.as_deref(), Some("trace"));
    close(out.latency_ms.unwrap(), 0.158528);
    let body = &out.kernel_ops[0];
    assert_eq!((body.dialect.as_str(), body.matmul, body.exp, body.grid_steps()), ("triton", 2, 2, Some(32)));
    // 8.67 GFLOP in 0.1585 ms: 54.7 TFLOP/s, 5.5% of 989; bytes = min_bytes (K/V re-reads from L2).
    let rf = out.roofline.as_ref().unwrap();
    close(rf.tflops, 8673820672.0 / 0.158528e-3 / 1e12);
    assert_eq!((rf.regime.as_str(), rf.side.as_str()), ("LATENCY-BOUND", "COMPUTE-BOUND"));
    let gap = out.findings.iter().find(|f| f.rule == "gap").expect("a gap finding");
    // Both causes the evidence shows, with their figures: 4 warps for 128x64 + 128x128 f32 tiles
    // (the sweep on the same GPU kept 4 -> 8 warps at 1.51x), and 32 programs for 132 SMs.
    assert!(gap.what.contains("192 f32 values a thread"), "{}", gap.what);
    assert!(gap.what.contains("32 programs for 132 SMs"), "{}", gap.what);
    // No TPU words on a GPU kernel.
    let text = render_text(&out);
    for tpu in ["VMEM", "vector registers", "MXU"] {
        assert!(!text.contains(tpu), "{tpu:?} in\n{text}");
    }
}

/// Relative difference within 0.5%, the tolerance for figures from an independent decoder.
fn within(a: f64, b: f64) {
    assert!((a - b).abs() <= 0.005 * b.abs().max(1e-12), "{a} vs {b}: more than 0.5% apart");
}

// From xplane_reference.py, the 8-GPU MI300X capture: the module ran 5 times on GPU:7; its
// kernels were launched by one of 8 host threads, each with its own `XLA GPU module` windows.
const CONV: &str = "amd-mi300x-conv-8gpu/conv_legacy.xplane.pb";
const CONV_PER_EXEC_US: [f64; 5] = [1558.3, 1308.171, 1041.698, 1105.312, 1331.285];
const CONV_MEDIAN_US: f64 = 1308.171;
const CONV_MEAN_US: f64 = 1268.9532;

#[test]
fn multi_gpu_capture_matches_each_launch_within_its_own_threads_windows() {
    need_fixtures!();
    let r = analyze(&fixture(CONV), &AnalyzeOptions::default()).unwrap();
    assert_eq!(r.events, 6024);
    assert_eq!(r.source, "/device:GPU:7 / Stream #1(Kernel)");
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    assert_eq!(r.modules.len(), 1);
    let m = module(&r, "jit_forward_3d_conv(15)");
    assert_eq!(m.executions, 5);
    assert_eq!(m.device.as_deref(), Some("/device:GPU:7"));
    within(m.median_us, CONV_MEDIAN_US);
    within(m.mean_us, CONV_MEAN_US);
    close(m.ops_per_execution.unwrap(), 5.0);
    let k = r.kernel.as_ref().unwrap();
    assert_eq!(k.per_execution_us.len(), 5);
    for (a, b) in k.per_execution_us.iter().zip(CONV_PER_EXEC_US) {
        within(*a, b);
    }
    // Every kernel of every execution is in the breakdown once: 5 kernels x 5 executions.
    assert_eq!(k.op_breakdown.iter().map(|o| o.count).sum::<u64>(), 25);
    assert_eq!(r.device.as_ref().unwrap().device_type.as_deref(), Some("AMD"));
}

// From xplane_reference.py, TPU v6e: jit_f ran 100 times on each of 4 chips.
const TPU_F_PER_DEVICE_MEDIAN_US: [(&str, f64); 4] = [
    ("/device:TPU:0", 784122.780625),
    ("/device:TPU:1", 784093.636578),
    ("/device:TPU:2", 783958.687742),
    ("/device:TPU:3", 783856.904844),
];
// Summed device_duration_ps of the XLA Ops inside jit_f's executions on TPU:0.
const TPU_F_OP_DEVICE_TIME_US: f64 = 78414219.04375;

#[test]
fn tpu_modules_are_reported_per_device_and_ops_charged_their_device_duration() {
    need_fixtures!();
    let r = analyze(&fixture(TPU), &kernel_opts(r"^jit_f\(")).unwrap();
    let m = module(&r, "jit_f(12190760917235803885)");
    assert_eq!(m.device.as_deref(), Some("/device:TPU:0"));
    assert_eq!(m.devices.len(), 4);
    for (d, (name, median)) in m.devices.iter().zip(TPU_F_PER_DEVICE_MEDIAN_US) {
        assert_eq!((d.device.as_str(), d.executions), (name, 100));
        within(d.median_us, median);
    }
    let k = r.kernel.as_ref().unwrap();
    assert_eq!(k.op_time, "device_duration_ps stat (as XProf)");
    let inclusive: f64 = k.op_breakdown.iter().map(|o| o.inclusive_us).sum();
    within(inclusive, TPU_F_OP_DEVICE_TIME_US);
    // Nested ops are not counted twice: self time stays within the executions' spans.
    let self_total: f64 = k.op_breakdown.iter().map(|o| o.total_us).sum();
    assert!(self_total <= k.per_execution_us.iter().sum::<f64>() * 1.0001, "{self_total}");
}

// From trace_json_reference.py, the vLLM TPU Chrome trace.
const VLLM: &str = "tpu-v-vllm-json/rpa_step.trace.json.gz";
const VLLM_MODULES_TPU0: [(&str, f64, f64); 4] = [
    ("jit__select_from_array_fn(2075894867643732319)", 10.756228, 7.480192),
    ("jit_compute_logits_func(14478353077513490656)", 295.455132, 291.147659),
    ("jit_sample(9401537312596110889)", 10.859394, 8.318127),
    ("jit_step_fun(5120112285394406626)", 66914.493397, 66902.440396),
];
const VLLM_RPA: (usize, f64, f64, f64, f64) = (64, 266.230492, 265.834596, 259.430972, 272.288115);
const VLLM_RPA_TPU1_MEDIAN_US: f64 = 266.117647;

#[test]
fn tpu_chrome_trace_gives_modules_ops_and_a_selectable_pallas_kernel() {
    need_fixtures!();
    let path = fixture(VLLM);
    // Four modules, each run once: a decision cannot pick one...
    let err = format!("{:#}", analyze(&path, &AnalyzeOptions::default()).unwrap_err());
    assert!(err.contains("cannot tell which module is the kernel"), "{err}");
    // ... but each is there, with its ops charged their device durations.
    for (name, median, op_time) in VLLM_MODULES_TPU0 {
        let r = analyze(&path, &kernel_opts(&regex::escape(name))).unwrap();
        let m = module(&r, name);
        assert_eq!((m.executions, m.device.as_deref()), (1, Some("/device:TPU:0")));
        assert_eq!(m.devices.len(), 2, "{name} ran on both chips");
        within(m.median_us, median);
        let k = r.kernel.as_ref().unwrap();
        assert_eq!(k.op_time, "device_duration_ps stat (as XProf)");
        within(k.op_breakdown.iter().map(|o| o.inclusive_us).sum::<f64>(), op_time);
    }
    // The ragged-paged-attention Pallas kernel, by name: one execution per call.
    let r = analyze(&path, &kernel_opts("RPA")).unwrap();
    let k = r.kernel.as_ref().unwrap();
    assert_eq!(k.name, "RPA-bq_32-bkvp_64-p_64-");
    let (n, median, mean, min, max) = VLLM_RPA;
    assert_eq!(k.executions, n);
    within(k.median_us, median);
    within(k.mean_us, mean);
    within(k.min_us, min);
    within(k.max_us, max);
    assert_eq!(r.source, "/device:TPU:0 / XLA Ops (custom call)");
    let pk = module(&r, "RPA-bq_32-bkvp_64-p_64-");
    assert_eq!((pk.kind.as_str(), pk.within.as_deref()), ("pallas_kernel", Some("jit_step_fun(5120112285394406626)")));
    within(pk.devices[1].median_us, VLLM_RPA_TPU1_MEDIAN_US);
    assert_eq!(k.category_breakdown[0].category, "custom-call");
}
