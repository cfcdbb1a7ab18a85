//! The article's diagnosis rules at their thresholds (pure functions, exact), and
//! `ratchet inspect` printing the findings on the committed CPU example capture and on the
//! example kernel lowered for TPU (Mosaic) and GPU (Triton) by tests/helpers/lower_kernel_bodies.py.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use ratchet::diagnose::{self, cliff, environment, Finding, Inputs, Level, RooflineView};
use ratchet::trace::kernel_body::KernelOps;
use ratchet::trace::HloStats;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(rel)
}

fn inspect(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let o = Command::cargo_bin("ratchet").unwrap().current_dir(dir.path()).arg("inspect").args(args).output().unwrap();
    assert!(o.status.success(), "inspect failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// A roofline with compute-only 1 ms and the given memory-only and actual times, on a chip
/// whose ridge is 240 FLOPs/byte.
fn view(memory_only_ms: f64, actual_ms: f64) -> RooflineView {
    let memory_bound = memory_only_ms > 1.0;
    RooflineView {
        memory_bound,
        intensity: 240.0 / memory_only_ms,
        ridge: 240.0,
        compute_only_ms: 1.0,
        memory_only_ms,
        actual_ms,
        util: 1.0 / actual_ms,
        bw: memory_only_ms / actual_ms,
    }
}

fn rule<'a>(f: &'a [Finding], rule: &str) -> Vec<&'a Finding> {
    f.iter().filter(|x| x.rule == rule).collect()
}

#[test]
fn gap_findings_follow_the_articles_bands() {
    // Floor 1 ms: actual 1.0999 ms is a 9.1% gap (near), 1.2 ms 16.7% (between), 1.5 ms 33% (significant).
    let near = diagnose::diagnose(&Inputs { roofline: Some(view(0.5, 1.0 / 0.91)), ..Default::default() });
    let g = rule(&near, "gap");
    assert_eq!(g[0].level, Level::Good, "{g:?}");
    assert!(g[0].what.contains("near the roofline"));
    let mid = diagnose::diagnose(&Inputs { roofline: Some(view(0.5, 1.2)), ..Default::default() });
    assert_eq!(rule(&mid, "gap")[0].level, Level::Note);
    let big = diagnose::diagnose(&Inputs { roofline: Some(view(0.5, 1.5)), ..Default::default() });
    let g = rule(&big, "gap");
    assert_eq!(g[0].level, Level::Warn);
    // The likely causes, in the article's order (section 3.3).
    let w = &g[0].what;
    let order: Vec<usize> =
        ["register spilling", "pipeline bubbles", "defensive copies", "VPU bottleneck"].iter().map(|c| w.find(c).unwrap()).collect();
    assert!(order.windows(2).all(|p| p[0] < p[1]), "{w}");
    assert!(w.contains("reaches 66.7% of its roofline"), "{w}");
}

#[test]
fn regime_word_does_not_call_an_idle_kernel_compute_bound() {
    // 0.2% util, 99.8% gap (the issue's example): latency-bound, with the roofline side named.
    let r = RooflineView {
        memory_bound: false,
        intensity: 1000.0,
        ridge: 240.0,
        compute_only_ms: 0.002,
        memory_only_ms: 0.0005,
        actual_ms: 1.0,
        util: 0.002,
        bw: 0.0005,
    };
    let f = diagnose::diagnose(&Inputs { roofline: Some(r), ..Default::default() });
    let reg = rule(&f, "regime");
    assert!(reg[0].what.starts_with("LATENCY-BOUND"), "{:?}", reg[0]);
    assert!(reg[0].what.contains("roofline side is COMPUTE-BOUND"));
    assert_eq!(reg[0].level, Level::Warn);
    // At exactly 30% gap it is still the roofline's word.
    let at30 = diagnose::diagnose(&Inputs { roofline: Some(view(2.0, 2.0 / 0.7)), ..Default::default() });
    assert!(rule(&at30, "regime")[0].what.starts_with("MEMORY-BOUND"), "{at30:?}");
}

#[test]
fn memory_bound_with_block_tunables_prescribes_bq_first_then_bkv() {
    let meta = serde_json::json!({"BQ": 128, "BKV": 256, "grid_steps": 8192});
    let f = diagnose::diagnose(&Inputs {
        roofline: Some(view(2.0, 2.2)),
        bytes: Some(32e6),
        min_bytes: Some(1e6),
        meta: Some(&meta),
        ..Default::default()
    });
    let rr = rule(&f, "re-reads");
    assert!(rr[0].what.starts_with("re-read factor 32.0x"), "{rr:?}");
    assert_eq!(rr[0].level, Level::Warn);
    assert!(rr[0].prescription.as_deref().unwrap().contains("BQ first, then BKV"));
    // Without block tunables there is no block prescription; a factor of 2 is only a note.
    let f = diagnose::diagnose(&Inputs { roofline: Some(view(2.0, 2.2)), bytes: Some(2e6), min_bytes: Some(1e6), ..Default::default() });
    let rr = rule(&f, "re-reads");
    assert_eq!((rr[0].level, rr[0].prescription.is_none()), (Level::Note, true));
}

#[test]
fn copy_alarm_only_for_copies_that_are_not_loop_state() {
    let loop_only = HloStats { copy: 13, loop_copies: 13, ..Default::default() };
    let f = diagnose::diagnose(&Inputs { hlo: Some(&loop_only), backend: Some("cpu"), ..Default::default() });
    let c = rule(&f, "copies");
    assert_eq!(c[0].level, Level::Good);
    assert!(c[0].what.contains("Pallas interpreter"), "{c:?}");
    let one_more = HloStats { copy: 14, loop_copies: 13, ..Default::default() };
    let f = diagnose::diagnose(&Inputs { hlo: Some(&one_more), ..Default::default() });
    let c = rule(&f, "copies");
    assert_eq!(c[0].level, Level::Warn);
    assert!(c[0].prescription.as_deref().unwrap().contains("scratch_shapes"));
    // Copy events in the trace (section 4.4): a warning only when the HLO has suspect copies.
    let f = diagnose::diagnose(&Inputs { hlo: Some(&one_more), copy_share: Some(0.09), ..Default::default() });
    assert!(rule(&f, "copies").iter().any(|x| x.level == Level::Warn && x.what.starts_with("copy events take 9.0%")), "{f:?}");
    let f = diagnose::diagnose(&Inputs { hlo: Some(&loop_only), copy_share: Some(0.09), ..Default::default() });
    assert!(rule(&f, "copies").iter().all(|x| x.level != Level::Warn), "{f:?}");
    // A copy inside the kernel body is flagged too.
    let k = KernelOps { dialect: "mosaic".into(), name: "fa".into(), copy: 1, ..Default::default() };
    let f = diagnose::diagnose(&Inputs { kernel_ops: std::slice::from_ref(&k), ..Default::default() });
    assert_eq!(rule(&f, "copies")[0].level, Level::Warn);
}

#[test]
fn op_counts_against_the_articles_expectations() {
    let meta = serde_json::json!({"BQ": 128, "BKV": 128});
    let ok = KernelOps { dialect: "mosaic".into(), matmul: 2, exp: 2, reduce: 4, ..Default::default() };
    let f = diagnose::diagnose(&Inputs { meta: Some(&meta), kernel_ops: std::slice::from_ref(&ok), ..Default::default() });
    assert_eq!(rule(&f, "op-counts")[0].level, Level::Good);
    let split = KernelOps { matmul: 3, exp: 3, reduce: 5, ..ok.clone() };
    let f = diagnose::diagnose(&Inputs { meta: Some(&meta), kernel_ops: std::slice::from_ref(&split), ..Default::default() });
    let w: Vec<&str> = rule(&f, "op-counts").iter().map(|x| x.what.as_str()).collect();
    assert_eq!(w.len(), 3, "{w:?}");
    assert!(w[0].starts_with("3 matmuls") && w[1].starts_with("3 exponentials") && w[2].starts_with("5 reductions"), "{w:?}");
    // An HLO with a custom call and no body: the counts are blind, and it says so.
    let h = HloStats { custom_call: 1, ..Default::default() };
    let f = diagnose::diagnose(&Inputs { meta: Some(&meta), hlo: Some(&h), ..Default::default() });
    assert!(rule(&f, "op-counts")[0].what.contains("sees nothing inside a Pallas kernel"));
}

#[test]
fn pipeline_thresholds_bubbles_exp_share_and_grid() {
    let level = |b: f64| rule(&diagnose::diagnose(&Inputs { bubble_fraction: Some(b), ..Default::default() }), "bubbles")[0].level;
    assert_eq!(level(0.0499), Level::Good);
    assert_eq!(level(0.05), Level::Note);
    assert_eq!(level(0.10), Level::Note);
    assert_eq!(level(0.1001), Level::Warn);
    // DMA/compute overlap from TRACE_COMPUTE rows: the bands are ours (the article gives none).
    let overlap = |o: f64| rule(&diagnose::diagnose(&Inputs { dma_overlap: Some(o), ..Default::default() }), "overlap")[0].clone();
    assert_eq!(overlap(0.4999).level, Level::Warn);
    assert!(overlap(0.2).prescription.as_deref().unwrap().contains("PrefetchScalarGridSpec"));
    assert_eq!(overlap(0.5).level, Level::Note);
    assert_eq!(overlap(0.8999).level, Level::Note);
    assert_eq!(overlap(0.9).level, Level::Good);
    assert!(rule(&diagnose::diagnose(&Inputs::default()), "overlap").is_empty(), "no rows, no finding");
    let vpu = |s: f64| rule(&diagnose::diagnose(&Inputs { exp_share: Some(s), ..Default::default() }), "vpu").len();
    assert_eq!((vpu(0.10), vpu(0.11)), (0, 1));
    let meta = serde_json::json!({"grid_steps": 512});
    let k = KernelOps { grid: vec![1, 16, 16], ..Default::default() };
    let f = diagnose::diagnose(&Inputs { meta: Some(&meta), kernel_ops: std::slice::from_ref(&k), ..Default::default() });
    assert!(rule(&f, "grid")[0].what.contains("256 steps, meta.grid_steps says 512"));
    let f = diagnose::diagnose(&Inputs { meta: Some(&meta), blocks_seen: Some(512), ..Default::default() });
    assert_eq!(rule(&f, "grid")[0].level, Level::Good);
}

fn row(id: u64, meta: &str, latency: f64, gap: f64) -> ratchet::store::ResultRow {
    ratchet::store::ResultRow {
        latency_ms: Some(latency),
        gap_ms: Some(gap),
        meta: meta.into(),
        ..ratchet::store::ResultRow::unmeasured(id, ratchet::store::Status::Revert, "m", "c".into(), "i".into())
    }
}

#[test]
fn spill_cliff_between_neighbouring_block_sizes() {
    let rows = vec![
        row(1, "BKV=128;BQ=128;dtype=bf16;seq=512", 1.00, 0.5),
        row(2, "BKV=256;BQ=128;dtype=bf16;seq=512", 0.90, 0.45),
        row(3, "BKV=512;BQ=128;dtype=bf16;seq=512", 1.20, 0.70),
        row(4, "BKV=1024;BQ=128;dtype=bf16;seq=512", 1.10, 0.60),
        // Another BQ: its own sweep, no cliff.
        row(5, "BKV=512;BQ=256;dtype=bf16;seq=512", 0.80, 0.40),
    ];
    let c = cliff::detect(&rows);
    // 0.90 -> 1.20 ms is +33% (>= 25%): a cliff; 1.00 -> 0.90 and 1.20 -> 1.10 are not.
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!((c[0].key.as_str(), c[0].from, c[0].to, c[0].others.as_str()), ("BKV", 256, 512, "BQ=128"));
    assert_eq!(c[0].ids, vec![3]);
    assert!(c[0].message().starts_with("spill cliff between BKV=256 and BKV=512 (BQ=128)"), "{}", c[0].message());
    assert!(c[0].message().contains("back off BKV to 256"));
    // Another problem size is another sweep; derived counts (grid_steps, num_*) are not.
    let c = cliff::detect(&[row(1, "BKV=64;seq=512;grid_steps=64", 1.0, 0.4), row(2, "BKV=128;seq=1024;grid_steps=64", 3.0, 2.0)]);
    assert!(c.is_empty(), "{c:?}");
    let c = cliff::detect(&[row(1, "BKV=64;seq=512;grid_steps=64", 1.0, 0.4), row(2, "BKV=128;seq=512;grid_steps=32", 3.0, 2.0)]);
    assert_eq!(c.len(), 1, "{c:?}");
    // +24% latency alone is no cliff; a gap 1.5x with a slower kernel is.
    let c = cliff::detect(&[row(1, "BKV=64", 1.0, 0.5), row(2, "BKV=128", 1.24, 0.6)]);
    assert!(c.is_empty(), "{c:?}");
    let c = cliff::detect(&[row(1, "BKV=64", 1.0, 0.4), row(2, "BKV=128", 1.05, 0.62)]);
    assert_eq!(c.len(), 1);
    // Failed or unmeasured rows do not take part.
    let mut crashed = row(2, "BKV=128", 9.0, 9.0);
    crashed.status = ratchet::store::Status::Crash;
    assert!(cliff::detect(&[row(1, "BKV=64", 1.0, 0.4), crashed]).is_empty());
}

#[test]
fn environments_that_differ_are_named() {
    let a: environment::Environment =
        serde_json::from_str(r#"{"jax":"0.10.2","jaxlib":"0.10.2","device_kind":"TPU v5 lite","device_count":4,"python":"3.11.7"}"#)
            .unwrap();
    let mut b = a.clone();
    b.insert("python".into(), "3.12.1".into());
    assert!(environment::difference_warning(&a, &b).is_none());
    b.insert("jax".into(), "0.10.3".into());
    b.insert("XLA_FLAGS".into(), "--xla_foo".into());
    let w = environment::difference_warning(&a, &b).unwrap();
    assert!(w.contains("XLA_FLAGS: - -> --xla_foo") && w.contains("jax: 0.10.2 -> 0.10.3"), "{w}");
    assert_eq!(environment::summary(&a), "jax 0.10.2, jaxlib 0.10.2, TPU v5 lite x4");
}

#[test]
fn inspect_cpu_example_has_no_false_copy_alarm() {
    let out = inspect(&[fixture("example-cpu").to_str().unwrap()]);
    assert!(out.contains("Diagnosis (KernelForge part 2):"), "{out}");
    assert!(out.contains("13 HLO copies, all while-loop state of the Pallas interpreter's grid loop"), "{out}");
    assert!(!out.contains("possibly defensive copies"), "{out}");
    // The interpreter's grid loop: 16 blocks per execution (BQ=BKV=128, seq=512).
    assert!(out.contains("the trace shows 16 kernel blocks per execution = the grid product"), "{out}");
    // Idle time between a CPU executor's ops is no pipeline bubble.
    assert!(out.contains("CPU executor idle") && !out.contains("bubble fraction"), "{out}");
}

#[test]
fn inspect_lowered_tpu_kernel_counts_the_mosaic_body_and_diagnoses() {
    // Peaks from the result file's device kind ("TPU v5 lite": 197 TFLOP/s, 819 GB/s).
    let out = inspect(&[fixture("lowered/tpu-v5e-bq128-bkv256").to_str().unwrap()]);
    assert!(out.contains("custom-call 1"), "{out}");
    assert!(out.contains("flash_attention (mosaic): matmul 2  exp 2  reduce 2  dma 0  copy 0"), "{out}");
    assert!(out.contains("grid 1x128x64 = 8192 steps"), "{out}");
    assert!(out.contains("Chip ridge point:        240.5 FLOPs/byte"), "{out}");
    // The article's own configuration (section 3.4) keeps the article's word: memory-bound, with
    // the 75% gap as a finding of its own.
    assert!(out.contains("[note] MEMORY-BOUND, 1.9x below the ridge") && !out.contains("LATENCY-BOUND"), "{out}");
    assert!(out.contains("significant overhead (gap > 30%)"), "{out}");
    assert!(out.contains("re-read factor 64.5x"), "{out}");
    assert!(out.contains("BQ first, then BKV"), "{out}");
    assert!(out.contains("2 matmul, 2 exp, 2 reduce in the mosaic kernel body: as expected"), "{out}");
}

#[test]
fn inspect_lowered_gpu_kernel_counts_the_triton_body_as_json() {
    let out = inspect(&[fixture("lowered/h100-bq128-bkv256").to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let k = &v["kernel_ops"][0];
    assert_eq!(
        (k["dialect"].as_str(), k["matmul"].as_u64(), k["exp"].as_u64(), k["loops"].as_u64()),
        (Some("triton"), Some(2), Some(2), Some(1))
    );
    assert_eq!(v["hbm_gbps"].as_f64(), Some(3350.0));
    let rules: Vec<&str> = v["findings"].as_array().unwrap().iter().map(|f| f["rule"].as_str().unwrap()).collect();
    assert!(rules.contains(&"regime") && rules.contains(&"gap") && rules.contains(&"op-counts"), "{rules:?}");
}

#[test]
fn cost_estimate_of_a_mosaic_kernel_is_checked_against_the_benchmarks_flops() {
    let k = KernelOps { dialect: "mosaic".into(), name: "fa".into(), ..Default::default() };
    let f = diagnose::diagnose(&Inputs { kernel_ops: std::slice::from_ref(&k), ..Default::default() });
    assert!(rule(&f, "cost-estimate")[0].what.contains("carries no cost_estimate"), "{f:?}");
    let k = KernelOps { cost_flops: Some(1_000_000), ..k };
    let same = diagnose::diagnose(&Inputs { kernel_ops: std::slice::from_ref(&k), flops: Some(1.005e6), ..Default::default() });
    assert_eq!(rule(&same, "cost-estimate")[0].level, Level::Good);
    let off = diagnose::diagnose(&Inputs { kernel_ops: std::slice::from_ref(&k), flops: Some(2e6), ..Default::default() });
    assert!(rule(&off, "cost-estimate")[0].what.contains("disagree"), "{off:?}");
    // Only Mosaic kernels are checked: the estimate is read from the tpu_custom_call config.
    let t = KernelOps { dialect: "triton".into(), ..Default::default() };
    assert!(rule(&diagnose::diagnose(&Inputs { kernel_ops: std::slice::from_ref(&t), ..Default::default() }), "cost-estimate").is_empty());
}
