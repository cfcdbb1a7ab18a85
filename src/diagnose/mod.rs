//! The article's diagnosis as rules: from the roofline figures, the HLO and kernel-body op
//! counts, the trace's pipeline figures and the benchmark's tunables, the findings the source
//! article (KernelForge part 2, "Deep-Dive into TPU Profiling") teaches, each with its
//! prescription. Pure functions; `ratchet inspect` and `ratchet show` print their output.
//!
//! Thresholds and their sources (section numbers of that article unless said otherwise):
//! gap below 10% of actual: near the roofline; above 30%: significant overhead (section 6, step
//! 2); likely causes of a gap, in order: register spilling, pipeline bubbles, defensive copies,
//! VPU bottleneck (3.3); bubble fraction above 10% a red flag, below 5% excellent (4.4); exp
//! above 10% of the time: VPU bottleneck (6, step 5); expected op counts 2 dot, 2 exp, 2-4
//! reduce, 0 copy (5.3); "low both FLOP rate and bandwidth" is latency-bound (the TPU profiling
//! skill notes, seed 003, "Bound Type" table).

pub mod cliff;
pub mod columns;
pub mod compare;
pub mod environment;
pub mod evidence;
pub mod show;

use std::fmt::Write as _;

use serde::Serialize;

use crate::trace::kernel_body::KernelOps;
use crate::trace::HloStats;

/// Gap share below which the kernel is near its roofline (section 6, step 2).
pub const NEAR_ROOFLINE_GAP: f64 = 0.10;
/// Gap share above which the overhead is significant (section 6, step 2).
pub const SIGNIFICANT_GAP: f64 = crate::metrics::SIGNIFICANT_GAP;
/// DMA/compute overlap bands. The article (4.2-4.4) describes the healthy pattern (each step's
/// DMA under the previous step's compute) but gives no number: below half hidden means the two
/// mostly alternate, 90% and more is the healthy picture. These two cut-offs are ours.
pub const OVERLAP_BROKEN: f64 = 0.5;
pub const OVERLAP_HEALTHY: f64 = 0.9;
/// Bubble fraction above which the pipeline is a red flag (section 4.4).
pub const BUBBLE_RED_FLAG: f64 = 0.10;
/// Bubble fraction below which the pipeline is excellent (section 4.4).
pub const BUBBLE_EXCELLENT: f64 = 0.05;
/// Share of the time in exp above which the VPU is the bottleneck (section 6, step 5).
pub const EXP_SHARE_VPU: f64 = 0.10;
/// Share of the time in layout ops ("data formatting") above which they are flagged (seed 003).
pub const LAYOUT_SHARE: f64 = 0.05;
/// An op within 10% of its own roofline is great (seed 001).
pub const OP_ROOFLINE_GREAT: f64 = 0.9;
/// Share of the time in async copies above which the kernel is data-movement dominated (ours).
pub const DATA_MOVEMENT_DOMINANT: f64 = 0.5;
/// Share of the time above which a measured cause is named in the gap (ours).
pub const CAUSE_SHARE: f64 = 0.05;
/// Share of the time in reductions, collectives or exposed waits that earns a warning (ours,
/// the article's 10% for exp applied to them).
pub const SHARE_WARN: f64 = 0.10;
/// Re-read factor (estimated over minimum traffic) above which a memory-bound kernel's re-reads
/// earn a warning (ours: the article, section 3.4, gives the factor but no cut-off; 2x is every
/// byte read twice).
pub const REREAD_WARN: f64 = 2.0;
/// Relative difference between a `pallas_call`'s cost_estimate and the benchmark's FLOPs past
/// which the two are said to disagree (ours: past rounding, short of any real mistake).
pub const COST_ESTIMATE_TOLERANCE: f64 = 0.01;
/// A GPU thread's f32 values for the score tile and the accumulator above which register
/// spilling is a likely cause: half of the 255 registers a thread can hold (NVIDIA's CUDA C++
/// Programming Guide, compute capability 9.0 table). Ours: on an H200 the example's Triton form
/// ran at 0.36-0.42 ms with 96 and 128 such values a thread, and 1.8-2.3x slower with 160 and
/// 192 (scripts/gpu-check/probe.py, 2026-11-26).
pub const GPU_TILE_REGISTERS: u64 = 128;
/// The article's expected counts for the attention kernel (section 5.3).
pub const EXPECTED_DOTS: usize = 2;
pub const EXPECTED_EXPS: usize = 2;
pub const MAX_EXPECTED_REDUCES: usize = 4;

/// How much a finding asks for attention.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// All is as it should be.
    Good,
    /// A figure to know.
    Note,
    /// Something to act on.
    Warn,
}

impl Level {
    pub fn mark(self) -> &'static str {
        match self {
            Level::Good => "ok  ",
            Level::Note => "note",
            Level::Warn => "WARN",
        }
    }
}

/// One diagnosis: what the numbers say and, where the article gives one, what to do.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Short rule name (`gap`, `regime`, `copies`, ...).
    pub rule: &'static str,
    pub level: Level,
    pub what: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prescription: Option<String>,
    /// Where the rule's threshold comes from ([`source`]).
    pub source: &'static str,
}

impl Finding {
    fn new(rule: &'static str, level: Level, what: String, prescription: Option<&str>) -> Finding {
        Finding { rule, level, what, prescription: prescription.map(str::to_string), source: source(rule) }
    }
}

/// The source of a rule's threshold, short: the seed and its section (000 is the profiling
/// article, 001 the profiling book, 003 the A/B comparison), "ours" where ratchet set the
/// number, "no threshold" where the finding is a fact of the capture. docs/diagnosis.md's rule
/// table says each in full (a test holds the two together).
pub fn source(rule: &str) -> &'static str {
    match rule {
        "gap" => "000 §6 step 2",
        "regime" => "003 \"Bound Type\"",
        "impossible" => "no threshold: physics",
        "data-movement" => "ours",
        "layout" => "003 \"data formatting\"",
        "reduce" => "ours",
        "collectives" => "001 chapter 3",
        "waits" => "003 communication overlap",
        "op-roofline" => "001 chapter 6",
        "cost-model" => "ours",
        "load-imbalance" => "003 \"Load imbalance\"",
        "host-bound" => "001 chapter 7",
        "vendor" => "no threshold",
        "re-reads" => "000 §3.4",
        "copies" => "000 §5.3",
        "op-counts" => "000 §5.3",
        "bubbles" => "000 §4.4 step 4",
        "launch-gaps" => "000 §4.4",
        "idle" => "no threshold",
        "overlap" => "ours",
        "vpu" => "000 §6 step 5",
        "cost-estimate" => "ours",
        "grid" => "000 §4.4 step 3",
        _ => "ours",
    }
}

/// The roofline figures the rules read (as `inspect` and `metrics` compute them).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RooflineView {
    pub memory_bound: bool,
    pub intensity: f64,
    pub ridge: f64,
    pub compute_only_ms: f64,
    pub memory_only_ms: f64,
    pub actual_ms: f64,
    /// Fractions of the peaks (0..1).
    pub util: f64,
    pub bw: f64,
}

impl RooflineView {
    pub fn gap_ms(&self) -> f64 {
        self.actual_ms - self.compute_only_ms.max(self.memory_only_ms)
    }
}

/// Where the gap puts the kernel (section 6, step 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum GapBand {
    /// Below 10% of actual: gains will be incremental.
    NearRoofline,
    /// Between 10% and 30%.
    Moderate,
    /// Above 30%: register spills, pipeline bubbles or defensive copies.
    Significant,
}

/// The gap as a share of the actual time (`None` without a positive actual time).
pub fn gap_share(gap_ms: f64, actual_ms: f64) -> Option<f64> {
    (actual_ms > 0.0 && gap_ms.is_finite()).then(|| (gap_ms / actual_ms).max(0.0))
}

/// The article's band for a gap share: < 10% near, > 30% significant, else between.
pub fn gap_band(share: f64) -> GapBand {
    if share < NEAR_ROOFLINE_GAP {
        GapBand::NearRoofline
    } else if share > SIGNIFICANT_GAP {
        GapBand::Significant
    } else {
        GapBand::Moderate
    }
}

/// The fraction of its roofline the kernel reaches: max(compute-only, memory-only) / actual.
/// Equal to 1 - gap share, and to the larger of util and BW.
pub fn achieved_fraction(compute_only_ms: f64, memory_only_ms: f64, actual_ms: f64) -> Option<f64> {
    (actual_ms > 0.0).then(|| compute_only_ms.max(memory_only_ms) / actual_ms)
}

/// Estimated over minimum traffic: how many times the tiling reads the data (section 3.4: an
/// actual intensity 32x below the perfect-reuse one means K and V are re-read ~32 times).
pub fn reread_factor(bytes: f64, min_bytes: f64) -> Option<f64> {
    (bytes > 0.0 && min_bytes > 0.0).then(|| bytes / min_bytes)
}

/// The regime word: decided in one place for every view, [`crate::metrics::regime_word`]
/// (`LATENCY-BOUND` above a 90% gap, else the roofline's side).
pub fn regime_word(memory_bound: bool, gap_share: f64) -> &'static str {
    crate::metrics::regime_word(memory_bound, gap_share)
}

/// The article's likely causes of a large gap, most probable first (section 3.3). Each is
/// named for a kernel only when its evidence is there ([`gap_causes`]).
pub const LIKELY_CAUSES: [&str; 4] = ["register spilling", "pipeline bubbles", "defensive copies", "VPU bottleneck"];

/// A cause of the gap the evidence shows: its name, the share of the op time it takes where
/// measured (`None`: present, not measured), and what showed it.
#[derive(Debug, Clone, PartialEq)]
pub struct Cause {
    pub name: &'static str,
    pub share: Option<f64>,
    pub evidence: String,
}

/// Everything the rules may read; each rule uses what is present.
#[derive(Debug, Clone, Default)]
pub struct Inputs<'a> {
    pub roofline: Option<RooflineView>,
    pub bytes: Option<f64>,
    pub min_bytes: Option<f64>,
    /// The benchmark's `meta` (BQ, BKV, grid_steps, ...).
    pub meta: Option<&'a serde_json::Value>,
    pub hlo: Option<&'a HloStats>,
    pub kernel_ops: &'a [KernelOps],
    /// Idle share inside the kernel's executions, from the trace.
    pub bubble_fraction: Option<f64>,
    /// Share of the steady state's DMA time hidden under compute, from a `TRACE_COMPUTE`
    /// capture's rows.
    pub dma_overlap: Option<f64>,
    /// Share of the kernel's op time in exponentials, from the trace.
    pub exp_share: Option<f64>,
    /// Kernel blocks per execution seen in the trace (most frequent per-execution op count).
    pub blocks_seen: Option<u64>,
    /// Share of the kernel's op time in copy events (copy, copy-start, copy-done), from the trace.
    pub copy_share: Option<f64>,
    /// The backend the run was on (`cpu`, `tpu`, `gpu`).
    pub backend: Option<&'a str>,
    /// The benchmark's FLOPs per call (the result file's `flops`).
    pub flops: Option<f64>,
    /// The trace's figures of the kernel (op breakdown, device, pipeline rows).
    pub kernel: Option<&'a crate::trace::KernelStats>,
    /// The chip's peaks (TFLOP/s, GB/s), for each op's own roofline.
    pub peaks: Option<(f64, f64)>,
    /// The GPU's streaming multiprocessors (`hardware::gpu_sms` of the run's device kind), for
    /// how much of the chip the kernel's grid fills.
    pub sms: Option<u32>,
    /// The kernel's module on each device that ran it (empty on one device).
    pub devices: &'a [crate::trace::DeviceStats],
    /// The capture's host-side steps (`kernel_step` annotations), us.
    pub host_steps_us: &'a [f64],
}

fn meta_u64(meta: Option<&serde_json::Value>, key: &str) -> Option<u64> {
    meta?.get(key)?.as_u64()
}

pub(crate) fn pct(x: f64) -> String {
    if x != 0.0 && x.abs() < 0.01 {
        format!("{:.2}%", x * 100.0)
    } else {
        format!("{:.1}%", x * 100.0)
    }
}

/// The findings, in the order of the article's protocol (section 6): regime and gap, traffic,
/// HLO and kernel body, trace.
pub fn diagnose(inp: &Inputs) -> Vec<Finding> {
    let mut out = Vec::new();
    let has_blocks = meta_u64(inp.meta, "BQ").is_some() && meta_u64(inp.meta, "BKV").is_some();
    let ev = evidence::gather(inp.kernel, inp.hlo, inp.kernel_ops, inp.backend);
    if let Some(r) = inp.roofline {
        roofline_findings(r, inp, &ev, has_blocks, &mut out);
    }
    movement_findings(&ev, &mut out);
    copy_findings(inp, &mut out);
    cost_estimate_findings(inp, &mut out);
    op_count_findings(inp, &ev, has_blocks, &mut out);
    share_findings(inp, &ev, &mut out);
    pipeline_findings(inp, &ev, &mut out);
    op_roofline_findings(inp, &mut out);
    cost_model_findings(inp, &mut out);
    balance_findings(inp, &mut out);
    host_findings(inp, &ev, &mut out);
    out
}

/// Cross-device spread of step time above which the devices are imbalanced (seed 003, "Load
/// imbalance: cross-device step time variance >5%").
pub const LOAD_IMBALANCE: f64 = 0.05;
/// Share of a step the device may idle before the step is host-bound (seed 001, "GPU idle 30%
/// of the time: gaps between ops in timeline").
pub const HOST_IDLE: f64 = 0.30;
/// A matmul slower than its roofline by more than this factor is a red flag (seed 001's
/// checklist: "More than 2x roofline: wrong sharding or layout").
pub const MATMUL_ROOFLINE_RED_FLAG: f64 = 2.0;

/// Custom calls the capture's cost model cannot see into (0 FLOPs, 0 bytes): util and BW
/// computed from the cost model leave their time out, so they are lower bounds.
fn cost_model_findings(inp: &Inputs, out: &mut Vec<Finding>) {
    let Some(k) = inp.kernel.filter(|k| k.cost_model_flops.is_some()) else { return };
    let total: f64 = k.op_breakdown.iter().map(|o| o.total_us).sum();
    let blind: Vec<&crate::trace::OpStat> = k
        .op_breakdown
        .iter()
        .filter(|o| o.category == "custom-call" || o.name.starts_with("custom-call"))
        .filter(|o| o.flops.unwrap_or(0.0) == 0.0 && o.bytes.unwrap_or(0.0) == 0.0)
        .collect();
    let share = blind.iter().map(|o| o.total_us).sum::<f64>() / total.max(f64::MIN_POSITIVE);
    if total > 0.0 && share > CAUSE_SHARE {
        out.push(Finding::new(
            "cost-model",
            Level::Warn,
            format!(
                "{} custom call(s) the capture's cost model counts at 0 FLOPs and 0 bytes take {} of the op time: util and BW \
                 from the cost model leave them out, so they are lower bounds",
                blind.len(),
                pct(share)
            ),
            Some("give the kernel's own FLOPs and bytes (--flops/--bytes, or a pallas_call cost_estimate)"),
        ));
    }
}

/// The same module's step time on each device (seed 003: a spread above 5% is load imbalance).
fn balance_findings(inp: &Inputs, out: &mut Vec<Finding>) {
    if inp.devices.len() < 2 {
        return;
    }
    let med: Vec<f64> = inp.devices.iter().map(|d| d.median_us).collect();
    let (lo, hi) = med.iter().fold((f64::INFINITY, 0.0_f64), |(a, b), &m| (a.min(m), b.max(m)));
    let Some(mid) = crate::metrics::median(&med).filter(|m| *m > 0.0) else { return };
    let spread = (hi - lo) / mid;
    let slow = inp.devices.iter().max_by(|a, b| a.median_us.total_cmp(&b.median_us)).map(|d| d.device.as_str()).unwrap_or("");
    let what = format!(
        "per-device time of the module {} to {} us over {} devices: a spread of {} of the median (slowest {slow})",
        us1(lo),
        us1(hi),
        inp.devices.len(),
        pct(spread)
    );
    if spread > LOAD_IMBALANCE {
        out.push(Finding::new(
            "load-imbalance",
            Level::Warn,
            format!("{what}: above seed 003's 5%, load imbalance"),
            Some("balance the work across devices: the sharding, MoE routing or pipeline stages (seed 003)"),
        ));
    } else {
        out.push(Finding::new("load-imbalance", Level::Good, format!("{what}: within seed 003's 5%"), None));
    }
}

/// A step the host spends mostly without the device: the kernel's time against the host's
/// `kernel_step` (seed 001: the device idle 30% of the time is the host's doing).
fn host_findings(inp: &Inputs, ev: &evidence::Evidence, out: &mut Vec<Finding>) {
    // On CPU the host is the device: its steps hold dispatch, not idle time.
    if matches!(ev.backend, evidence::Backend::Cpu) {
        return;
    }
    let (Some(step), Some(k)) = (crate::metrics::median(inp.host_steps_us), inp.kernel) else { return };
    if step <= 0.0 || k.median_us <= 0.0 {
        return;
    }
    // A step may call the kernel more than once (a Pallas kernel inside a module).
    let per_step = k.median_us * (k.executions as f64 / inp.host_steps_us.len() as f64).max(1.0);
    let idle = (1.0 - per_step / step).max(0.0);
    if idle > HOST_IDLE {
        out.push(Finding::new(
            "host-bound",
            Level::Warn,
            format!(
                "the host's step takes {} us per {} us of kernel: the device idles {} of each step, above seed 001's 30%",
                us1(step),
                us1(per_step),
                pct(idle)
            ),
            Some("the host sets the pace (dispatch, data, synchronisation): for a benchmark, time more work per call; for a step, prefetch its inputs (seeds 001, 003)"),
        ));
    }
}

fn us1(v: f64) -> String {
    format!("{v:.1}")
}

/// The kernel's block tunables from its `meta`: all-caps keys with whole-number values
/// (`BQ`, `BKV`, `BM`, `BLOCK_N`), the convention of the example's kernel.py.
pub fn tile_tunables(meta: Option<&serde_json::Value>) -> Vec<(String, u64)> {
    let Some(obj) = meta.and_then(|m| m.as_object()) else { return Vec::new() };
    obj.iter()
        .filter(|(k, _)| {
            k.chars().next().is_some_and(|c| c.is_ascii_uppercase())
                && k.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        })
        .filter_map(|(k, v)| v.as_u64().map(|v| (k.clone(), v)))
        .collect()
}

/// The f32 values each GPU thread holds for an attention kernel's score tile (BQ x BKV) and
/// accumulator (BQ x head_dim), spread over `num_warps` x 32 threads, with the sum spelled out;
/// None unless the meta gives all four.
fn gpu_tile_registers(meta: Option<&serde_json::Value>) -> Option<(u64, String)> {
    let (bq, bkv, d, warps) = (meta_u64(meta, "BQ")?, meta_u64(meta, "BKV")?, meta_u64(meta, "head_dim")?, meta_u64(meta, "num_warps")?);
    let threads = 32 * warps.max(1);
    let values = (bq * bkv + bq * d).div_ceil(threads);
    Some((values, format!("score tile {bq}x{bkv} + accumulator {bq}x{d} in f32 over {warps} warps ({threads} threads)")))
}

/// Whether the idle time inside the executions is a pipeline's bubbles (TPU, or rows of a
/// TRACE_COMPUTE capture), gaps between GPU kernel launches, or a CPU's idle time.
fn idle_kind(inp: &Inputs, ev: &evidence::Evidence) -> evidence::Backend {
    if inp.dma_overlap.is_some() || inp.kernel.is_some_and(|k| k.pipeline.is_some()) {
        return evidence::Backend::Tpu;
    }
    ev.backend
}

/// The causes of a gap that this kernel's evidence shows, measured ones by their share of the
/// op time (largest first), then the others in the article's order (section 3.3).
pub fn gap_causes(inp: &Inputs, ev: &evidence::Evidence) -> Vec<Cause> {
    let mut out: Vec<Cause> = Vec::new();
    let mut add = |name: &'static str, share: Option<f64>, evidence: String| out.push(Cause { name, share, evidence });
    let tiles = tile_tunables(inp.meta);
    // Register spilling (3.3, 5.5): a Pallas kernel's matmul tiles; the score tile only for a
    // kernel with both a matmul and an exponential (attention) and BQ/BKV tunables.
    let gpu_tiles = gpu_tile_registers(inp.meta).filter(|_| ev.backend == evidence::Backend::Gpu);
    if let (Some(p), Some(_), Some((per_thread, what))) = (&ev.pallas, &ev.dot, &gpu_tiles) {
        // A GPU kernel whose tiles and warps are known: spilling is a cause only when the
        // tiles alone fill most of a thread's registers.
        if *per_thread > GPU_TILE_REGISTERS {
            add(
                "register spilling",
                None,
                format!(
                    "{what}: {per_thread} f32 values a thread, over {GPU_TILE_REGISTERS} of the 255 registers it can hold; more \
                     warps or smaller tiles lower it [{p}]"
                ),
            );
        }
    } else if let (Some(p), Some(d), evidence::Backend::Tpu) = (&ev.pallas, &ev.dot, ev.backend) {
        // A TPU's tile is counted in vector registers of 8x128 32-bit values (000 §4.5's vreg
        // tile; §5.5: S = BQ x BKV x 4 bytes): a tile of one register cannot overflow them, and
        // only a spill cliff as the block grows shows that a larger one does.
        let (bq, bkv) = (meta_u64(inp.meta, "BQ"), meta_u64(inp.meta, "BKV"));
        let get = |k: &str| tiles.iter().find(|(n, _)| n == k).map(|(_, v)| *v);
        let counted = match (bq, bkv, &ev.exp) {
            (Some(q), Some(k), Some(e)) => Some((format!("the score tile BQ x BKV = {q}x{k} in f32 ({d}, {e})"), q, k)),
            _ => get("BM").zip(get("BN")).map(|(m, n)| {
                let names: Vec<String> = tiles.iter().map(|(k, v)| format!("{k}={v}")).collect();
                (format!("the tiles ({}): the BM x BN = {m}x{n} f32 accumulator ({d})", names.join(", ")), m, n)
            }),
        };
        if let Some((what, rows, cols)) = counted {
            let vregs = rows.div_ceil(8) * cols.div_ceil(128);
            if vregs > 1 {
                add(
                    "register spilling",
                    None,
                    format!(
                        "{what} fills {vregs} vector registers of 8x128; a spill cliff as the block grows shows whether they \
                         overflow [{p}]"
                    ),
                );
            }
        }
    } else if let (Some(p), Some(d)) = (&ev.pallas, &ev.dot) {
        if !tiles.is_empty() {
            let (bq, bkv) = (meta_u64(inp.meta, "BQ"), meta_u64(inp.meta, "BKV"));
            // A TPU's tiles live in vector registers, a GPU's in each thread's registers.
            let regs = if ev.backend == evidence::Backend::Gpu { "registers" } else { "vector registers" };
            let what = match (bq, bkv, &ev.exp) {
                (Some(q), Some(k), Some(e)) => {
                    format!("the score tile BQ x BKV = {q}x{k} may overflow the {regs} ({d}, {e}); look for a spill cliff as BKV grows")
                }
                _ => {
                    let names: Vec<String> = tiles.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    format!("the tiles ({}) may overflow the {regs} ({d}); look for a spill cliff as they grow", names.join(", "))
                }
            };
            add("register spilling", None, format!("{what} [{p}]"));
        }
    }
    // An under-filled grid: a GPU runs one program per SM at a time at best, so a grid of fewer
    // programs than SMs leaves the rest idle whatever the kernel does.
    if let (evidence::Backend::Gpu, Some(sms)) = (ev.backend, inp.sms) {
        if let Some((k, programs)) = inp.kernel_ops.iter().find_map(|k| k.grid_steps().map(|g| (k, g))) {
            if programs < u64::from(sms) {
                add(
                    "under-filled grid",
                    None,
                    format!(
                        "the grid ({}) launches {programs} programs for {sms} SMs, so at least {} of the SMs idle; more heads or \
                         batch per call, or smaller blocks, give more programs [{}]",
                        k.grid.iter().map(u64::to_string).collect::<Vec<_>>().join("x"),
                        pct(1.0 - programs as f64 / f64::from(sms)),
                        k.name
                    ),
                );
            }
        }
    }
    let b = inp.bubble_fraction.filter(|b| *b > BUBBLE_EXCELLENT);
    match (idle_kind(inp, ev), b) {
        (evidence::Backend::Tpu | evidence::Backend::Unknown, Some(b))
            if ev.pallas.is_some() || inp.dma_overlap.is_some() || inp.kernel.is_none() =>
        {
            add("pipeline bubbles", Some(b), format!("bubble fraction {} (idle inside the executions)", pct(b)))
        }
        (evidence::Backend::Tpu | evidence::Backend::Unknown, Some(b)) => {
            add("device idle", Some(b), format!("no op runs for {} of the executions' span", pct(b)))
        }
        (evidence::Backend::Gpu, Some(b)) => {
            add("launch gaps", Some(b), format!("no kernel runs for {} of the executions' span (between kernel launches)", pct(b)))
        }
        _ => {}
    }
    if let Some(o) = inp.dma_overlap.filter(|o| *o < OVERLAP_HEALTHY) {
        add("pipeline bubbles", None, format!("only {} of the DMA time is hidden under compute", pct(o)));
    }
    let suspect = inp.hlo.map(HloStats::suspect_copies).unwrap_or(0);
    let body_copies: usize = inp.kernel_ops.iter().map(|k| k.copy).sum();
    if suspect > 0 || body_copies > 0 {
        let share = ev.shares.as_ref().map(|s| s.sync_copy).filter(|s| *s > 0.0);
        let what = if suspect > 0 {
            format!("{suspect} copy op(s) in the HLO that are not loop state")
        } else {
            format!("{body_copies} copy op(s) in the kernel body")
        };
        add("defensive copies", share, what);
    }
    let vpu = if ev.backend == evidence::Backend::Tpu || ev.backend == evidence::Backend::Unknown { "VPU bottleneck" } else { "exp-bound" };
    if let Some(e) = inp.exp_share.filter(|s| *s > EXP_SHARE_VPU) {
        add(vpu, Some(e), format!("exp takes {} of the op time", pct(e)));
    }
    if let Some(s) = &ev.shares {
        if s.async_copy > CAUSE_SHARE {
            let host = if s.host_copy > 0.0 { format!(", {} to or from host memory (S(5))", pct(s.host_copy)) } else { String::new() };
            add("data movement", Some(s.async_copy), format!("copy-start/copy-done take {} of the op time{host}", pct(s.async_copy)));
        }
        if s.waits > CAUSE_SHARE {
            add("exposed waits", Some(s.waits), format!("async *-done ops wait {} of the op time", pct(s.waits)));
        }
        if s.layout > LAYOUT_SHARE {
            let top = ev.layout_top.as_ref().map(|(n, f)| format!(", {n} alone {}", pct(*f))).unwrap_or_default();
            add("layout ops", Some(s.layout), format!("data formatting / transposes take {}{top}", pct(s.layout)));
        }
        if s.collective > CAUSE_SHARE {
            add(
                "collectives",
                Some(s.collective),
                format!("collectives take {} of the op time (bounded by the interconnect, not HBM)", pct(s.collective)),
            );
        }
        if s.reduce > SHARE_WARN {
            add("reductions", Some(s.reduce), format!("reductions take {} of the op time", pct(s.reduce)));
        }
    }
    // Measured causes by share, then the unmeasured ones in the article's order (stable sort).
    out.sort_by(|a, b| match (a.share, b.share) {
        (Some(x), Some(y)) => y.total_cmp(&x),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    });
    out
}

fn roofline_findings(r: RooflineView, inp: &Inputs, ev: &evidence::Evidence, has_blocks: bool, out: &mut Vec<Finding>) {
    let gap = r.gap_ms();
    // Faster than the roofline allows: the FLOPs, bytes, peaks or time are wrong. No regime or
    // gap band is given for figures that cannot be.
    let mut impossible = Vec::new();
    if r.util > 1.0 {
        impossible.push(format!("util {}", pct(r.util)));
    }
    if r.bw > 1.0 {
        impossible.push(format!("BW {}", pct(r.bw)));
    }
    if gap < 0.0 {
        impossible.push(format!("gap {gap:.3} ms (the actual {:.3} ms is below the roofline's floor)", r.actual_ms));
    }
    if !impossible.is_empty() {
        out.push(Finding::new(
            "impossible",
            Level::Warn,
            format!("impossible figures: {}", impossible.join(", ")),
            Some("check --flops/--bytes (or the result file's), the peaks and the kernel time: one of them is wrong"),
        ));
        return;
    }
    let Some(share) = gap_share(gap, r.actual_ms) else { return };
    let side = if r.memory_bound { "MEMORY-BOUND" } else { "COMPUTE-BOUND" };
    let ridge_x = if r.memory_bound {
        format!("{:.1}x below the ridge", r.ridge / r.intensity)
    } else {
        format!("{:.1}x above the ridge", r.intensity / r.ridge)
    };
    if inp.backend == Some("cpu") {
        out.push(Finding::new(
            "regime",
            Level::Note,
            "CPU run: the peaks are nominal (the `cpu` preset), so util, BW and the regime word below only rank runs of this machine"
                .into(),
            None,
        ));
    }
    let word = regime_word(r.memory_bound, share);
    let moving = ev.shares.as_ref().map(|s| s.async_copy).filter(|s| *s > DATA_MOVEMENT_DOMINANT);
    if let (Some(m), "LATENCY-BOUND") = (moving, word) {
        // Not idle: busy moving data the roofline's FLOPs and HBM bytes do not describe.
        out.push(Finding::new(
            "regime",
            Level::Warn,
            format!(
                "util {} and BW {} are both low; the roofline side is {side} ({ridge_x}), but async copies (copy-start/copy-done, {} of the op time) set the time",
                pct(r.util),
                pct(r.bw),
                pct(m)
            ),
            Some("see `data-movement`: the time is transfers, not this roofline's compute or HBM traffic"),
        ));
    } else if word == "LATENCY-BOUND" {
        out.push(Finding::new(
            "regime",
            Level::Warn,
            format!(
                "LATENCY-BOUND: util {} and BW {} are both low; the roofline side is {side} ({ridge_x}), but overhead, not {}, sets the time",
                pct(r.util),
                pct(r.bw),
                if r.memory_bound { "bandwidth" } else { "compute" }
            ),
            Some("close the gap first: its causes, as far as the capture shows them, are under `gap`"),
        ));
    } else if r.memory_bound {
        out.push(Finding::new(
            "regime",
            Level::Note,
            format!("MEMORY-BOUND, {ridge_x}: BW {} of peak, util {}", pct(r.bw), pct(r.util)),
            Some("reduce HBM traffic: larger blocks, fewer re-reads, better tiling (section 6, step 2)"),
        ));
    } else {
        out.push(Finding::new(
            "regime",
            Level::Note,
            format!("COMPUTE-BOUND, {ridge_x}: util {} of peak, BW {}", pct(r.util), pct(r.bw)),
            Some(if ev.backend == evidence::Backend::Tpu {
                "reduce per-step VPU work, feed the MXU better, or change the algorithm (block skipping) (section 6, step 2)"
            } else {
                "fewer FLOPs (a better algorithm, block skipping) or better use of the matrix units (section 6, step 2)"
            }),
        ));
    }

    let band = gap_band(share);
    let achieved = achieved_fraction(r.compute_only_ms, r.memory_only_ms, r.actual_ms).unwrap_or(0.0);
    let what = format!(
        "gap {:.3} ms = {} of the actual {:.3} ms; the kernel reaches {} of its roofline",
        gap,
        pct(share),
        r.actual_ms,
        pct(achieved)
    );
    match band {
        GapBand::NearRoofline => out.push(Finding::new(
            "gap",
            Level::Good,
            format!("{what}: near the roofline (gap < 10%)"),
            Some("gains from here are incremental"),
        )),
        GapBand::Moderate => out.push(Finding::new("gap", Level::Note, format!("{what}: between the article's bands (10-30%)"), None)),
        GapBand::Significant => {
            let causes = gap_causes(inp, ev);
            let text = if causes.is_empty() {
                let largest = inp.kernel.and_then(|k| k.category_breakdown.first()).map_or_else(
                    || "a trace with op times or the kernel body would show more".to_string(),
                    |c| format!("the largest op category is {} ({} of the op time)", c.category, pct(c.fraction)),
                );
                format!(
                    "{what}: significant overhead (gap > 30%); the evidence shows none of the article's causes ({}) nor \
                     data movement, waits, layout ops or collectives; {largest}",
                    LIKELY_CAUSES.join(", ")
                )
            } else {
                let lines: Vec<String> = causes.iter().enumerate().map(|(i, c)| format!("{}. {}: {}", i + 1, c.name, c.evidence)).collect();
                format!(
                    "{what}: significant overhead (gap > 30%); causes the evidence shows, measured ones largest first:\n{}",
                    lines.join("\n")
                )
            };
            out.push(Finding::new("gap", Level::Warn, text, None));
        }
    }

    if let (Some(b), Some(mb)) = (inp.bytes, inp.min_bytes) {
        if let Some(f) = reread_factor(b, mb) {
            let level = if f > REREAD_WARN && r.memory_bound { Level::Warn } else { Level::Note };
            let rx = if r.memory_bound && f > 1.0 && has_blocks {
                Some("increase block sizes, BQ first, then BKV: fewer Q blocks mean fewer K/V re-reads (higher intensity) and bigger transfers (better bandwidth) (section 3.4)")
            } else {
                None
            };
            out.push(Finding::new(
                "re-reads",
                level,
                format!("re-read factor {f:.1}x: estimated traffic over the minimum (perfect reuse)"),
                rx,
            ));
        }
    }
}

fn copy_findings(inp: &Inputs, out: &mut Vec<Finding>) {
    const FIX: &str = "use dedicated scratch_shapes for every accumulator; never read an output ref before its final write (section 5.4)";
    if let Some(h) = inp.hlo {
        if h.suspect_copies() > 0 {
            out.push(Finding::new("copies", Level::Warn, h.copy_warning().unwrap_or_default(), Some(FIX)));
        } else if h.loop_copies > 0 {
            let why =
                if inp.backend == Some("cpu") || h.custom_call == 0 { "the Pallas interpreter's grid loop (CPU)" } else { "a while loop" };
            out.push(Finding::new(
                "copies",
                Level::Good,
                format!("{} HLO copies, all while-loop state of {why}: not defensive copies", h.loop_copies),
                None,
            ));
        }
    }
    // Section 4.4, step 5: copy events in the steady state. They cost what the HLO's copies
    // cost; whether they are defensive is the HLO's call (loop state and async copies are not).
    if let Some(share) = inp.copy_share.filter(|s| *s > 0.0) {
        let suspect = inp.hlo.map(HloStats::suspect_copies);
        let (level, why) = match (suspect, inp.hlo) {
            (Some(n), _) if n > 0 => (Level::Warn, format!("{n} of the HLO's copies may be defensive")),
            (_, Some(h)) if h.loop_copies > 0 => (Level::Note, "none of the HLO's copies is a defensive one (loop state)".to_string()),
            (_, Some(_)) => (Level::Note, "the HLO has no copy instruction to call defensive".to_string()),
            _ => (Level::Note, "no HLO to tell what they are".to_string()),
        };
        out.push(Finding::new("copies", level, format!("copy events take {} of the kernel's op time; {why}", pct(share)), None));
    }
    for k in inp.kernel_ops.iter().filter(|k| k.copy > 0) {
        out.push(Finding::new(
            "copies",
            Level::Warn,
            format!("{} copy op(s) inside the {} kernel {}: full-buffer read+write each", k.copy, k.dialect, k.name),
            Some(FIX),
        ));
    }
}

/// A Mosaic kernel is one custom call to XProf: its roofline tool sees the kernel's FLOPs and
/// bytes only through the `pallas_call`'s `cost_estimate` (the article's section 3.1 tool).
fn cost_estimate_findings(inp: &Inputs, out: &mut Vec<Finding>) {
    for k in inp.kernel_ops.iter().filter(|k| k.dialect == "mosaic") {
        match (k.cost_flops.map(|c| c as f64), inp.flops) {
            (None, _) => out.push(Finding::new(
                "cost-estimate",
                Level::Note,
                format!("the {} kernel's pallas_call carries no cost_estimate: XProf's roofline tool sees no FLOPs in it", k.name),
                Some("pass cost_estimate=pl.CostEstimate(flops=..., transcendentals=..., bytes_accessed=...) to pl.pallas_call"),
            )),
            (Some(c), Some(f)) if f > 0.0 && ((c - f) / f).abs() > COST_ESTIMATE_TOLERANCE => out.push(Finding::new(
                "cost-estimate",
                Level::Note,
                format!(
                    "the pallas_call's cost_estimate says {c:.4e} FLOPs, the benchmark {f:.4e}: XProf's roofline and ratchet's disagree"
                ),
                None,
            )),
            (Some(c), _) => out.push(Finding::new(
                "cost-estimate",
                Level::Good,
                format!(
                    "the pallas_call's cost_estimate gives XProf {c:.4e} FLOPs{}",
                    k.cost_bytes.map(|b| format!(", {:.4e} bytes", b as f64)).unwrap_or_default()
                ),
                None,
            )),
        }
    }
}

/// Section 5.3's expected counts, applied to the kernel body on accelerators (the HLO shows a
/// Pallas kernel as one custom call) and to the HLO where the kernel is plain HLO (interpreter).
/// Only for a kernel with BQ/BKV tunables: the expectations are the attention kernel's.
fn op_count_findings(inp: &Inputs, ev: &evidence::Evidence, has_blocks: bool, out: &mut Vec<Finding>) {
    let counts: Option<(String, usize, usize, usize)> = match (inp.kernel_ops.first(), inp.hlo) {
        (Some(k), _) => Some((format!("{} kernel body", k.dialect), k.matmul, k.exp, k.reduce)),
        (None, Some(h)) if h.custom_call == 0 => Some(("HLO".into(), h.dot, h.exponential, h.reduce)),
        (None, Some(_)) if ev.pallas.is_none() && !ev.vendor.is_empty() => {
            out.push(Finding::new(
                "vendor",
                Level::Note,
                format!(
                    "the module's custom call(s) are vendor library calls ({}), not Pallas kernels: their insides are the library's",
                    ev.vendor.join(", ")
                ),
                None,
            ));
            None
        }
        (None, Some(h)) => {
            out.push(Finding::new(
                "op-counts",
                Level::Note,
                format!(
                    "the HLO holds {} custom call(s) and sees nothing inside a Pallas kernel; the kernel body was not recorded",
                    h.custom_call
                ),
                Some("run with ratchet_bench on TPU/GPU: it writes kernel.body.mlir, whose ops ratchet counts"),
            ));
            None
        }
        _ => None,
    };
    let Some((src, dot, exp, reduce)) = counts else { return };
    if !has_blocks {
        return;
    }
    if dot > EXPECTED_DOTS {
        out.push(Finding::new(
            "op-counts",
            Level::Warn,
            format!("{dot} matmuls in the {src}, {EXPECTED_DOTS} expected (QK^T, PV)"),
            Some("the compiler is splitting the matmul: check that block shapes align with the MXU tile (128x128) (section 5.3)"),
        ));
    }
    if exp > EXPECTED_EXPS {
        out.push(Finding::new(
            "op-counts",
            Level::Warn,
            format!("{exp} exponentials in the {src}, {EXPECTED_EXPS} expected"),
            Some("redundant exp: check whether the computation is duplicated; can the math be simpler? (sections 5.3, 6)"),
        ));
    }
    if reduce > MAX_EXPECTED_REDUCES {
        out.push(Finding::new(
            "op-counts",
            Level::Warn,
            format!("{reduce} reductions in the {src}, 2-4 expected"),
            Some("the compiler is decomposing the reduction into stages (section 5.3)"),
        ));
    }
    if dot <= EXPECTED_DOTS && exp <= EXPECTED_EXPS && reduce <= MAX_EXPECTED_REDUCES {
        out.push(Finding::new(
            "op-counts",
            Level::Good,
            format!("{dot} matmul, {exp} exp, {reduce} reduce in the {src}: as expected (section 5.3)"),
            None,
        ));
    }
}

fn pipeline_findings(inp: &Inputs, ev: &evidence::Evidence, out: &mut Vec<Finding>) {
    let idle = idle_kind(inp, ev);
    if let (Some(b), evidence::Backend::Gpu) = (inp.bubble_fraction, idle) {
        // On GPU the idle time inside an execution lies between kernel launches, not inside a
        // Pallas pipeline: launch overhead (seed 001: many small ops, consider fusing).
        let what = format!("launch gaps: no kernel runs for {} of the executions' span (idle between kernel launches)", pct(b));
        let level = if b > BUBBLE_RED_FLAG {
            Level::Warn
        } else if b < BUBBLE_EXCELLENT {
            Level::Good
        } else {
            Level::Note
        };
        let rx = (b > BUBBLE_EXCELLENT)
            .then_some("fewer, larger kernels: fuse ops, or capture the launches in a graph (seed 001: launch overhead may dominate)");
        out.push(Finding::new("launch-gaps", level, what, rx));
    } else if let (Some(b), evidence::Backend::Cpu) = (inp.bubble_fraction, idle) {
        out.push(Finding::new("idle", Level::Note, format!("{} of the executions' span runs no op (CPU executor idle)", pct(b)), None));
    } else if let (Some(b), None, Some(_)) = (inp.bubble_fraction, &ev.pallas, inp.kernel) {
        // No Pallas pipeline here: the device idles between XLA ops (on collectives, the host,
        // synchronisation), which the article's bubble bands do not describe.
        let waits = ev.shares.as_ref().is_some_and(|s| s.collective > 0.0);
        let on = if waits { " (it waits: the module runs collectives)" } else { "" };
        out.push(Finding::new("idle", Level::Note, format!("{} of the executions' span runs no op{on}", pct(b)), None));
    } else if let Some(b) = inp.bubble_fraction {
        let what = format!("bubble fraction {} (idle time inside the kernel's executions)", pct(b));
        if b > BUBBLE_RED_FLAG {
            let rx = if ev.pallas.is_some() || inp.kernel.is_none() {
                Some("more grid iterations or bigger blocks; check that double buffering is active (section 4.3)")
            } else {
                Some("the device waits between ops: look for host round trips or synchronisation inside the module")
            };
            out.push(Finding::new("bubbles", Level::Warn, format!("{what}: above 10%, a red flag"), rx));
        } else if b < BUBBLE_EXCELLENT {
            out.push(Finding::new("bubbles", Level::Good, format!("{what}: below 5%, excellent"), None));
        } else {
            out.push(Finding::new("bubbles", Level::Note, format!("{what}: between 5% and 10%"), None));
        }
    }
    if let Some(o) = inp.dma_overlap {
        let what = format!("{} of the DMA time is hidden under compute (steady state, TRACE_COMPUTE rows)", pct(o));
        if o < OVERLAP_BROKEN {
            out.push(Finding::new(
                "overlap",
                Level::Warn,
                format!("{what}: DMA and compute mostly take turns, so the pipeline is not overlapping"),
                Some("double buffering disabled or broken: verify PrefetchScalarGridSpec; check in_specs/out_specs (section 4.3)"),
            ));
        } else if o >= OVERLAP_HEALTHY {
            out.push(Finding::new(
                "overlap",
                Level::Good,
                format!("{what}: transfers overlap compute (section 4.2's healthy pattern)"),
                None,
            ));
        } else {
            out.push(Finding::new(
                "overlap",
                Level::Note,
                format!("{what}: partly exposed"),
                Some("bigger blocks give each transfer more compute to hide under (section 4.2)"),
            ));
        }
    }
    if let Some(s) = inp.exp_share {
        if s > EXP_SHARE_VPU {
            let tpu = matches!(ev.backend, evidence::Backend::Tpu | evidence::Backend::Unknown);
            out.push(if tpu {
                Finding::new(
                    "vpu",
                    Level::Warn,
                    format!("exp takes {} of the kernel's op time: above 10%, a VPU bottleneck", pct(s)),
                    Some("the MXU waits for the softmax's exp; simplify the math or cut per-step VPU work (sections 4.5, 6)"),
                )
            } else {
                Finding::new(
                    "vpu",
                    Level::Warn,
                    format!("exp takes {} of the kernel's op time: above the article's 10%", pct(s)),
                    Some("cut the exponentials per step or simplify the math (sections 4.5, 6)"),
                )
            });
        }
    }
    let meta_steps = meta_u64(inp.meta, "grid_steps");
    let body_steps = inp.kernel_ops.iter().find_map(KernelOps::grid_steps);
    if let (Some(m), Some(b)) = (meta_steps, body_steps) {
        // The Triton form loops over KV inside the kernel: its launch grid is the Q blocks only.
        let loops_inside = inp.kernel_ops.iter().any(|k| k.loops > 0);
        if b != m && !loops_inside {
            out.push(Finding::new(
                "grid",
                Level::Warn,
                format!("the kernel's grid has {b} steps, meta.grid_steps says {m}"),
                Some("the benchmark's tiling meta does not describe the kernel it runs: its traffic estimate is off too"),
            ));
        }
    }
    if let (Some(m), Some(seen)) = (meta_steps, inp.blocks_seen) {
        if seen > 1 {
            let (level, what) = if seen == m {
                (Level::Good, format!("the trace shows {seen} kernel blocks per execution = the grid product (meta.grid_steps)"))
            } else {
                (Level::Note, format!("the trace shows {seen} kernel blocks per execution; meta.grid_steps is {m}"))
            };
            out.push(Finding::new("grid", level, what, None));
        }
    }
}

/// A module that mostly moves data (async copies), and where to: the copy-done's time is the
/// compute waiting for the transfer.
fn movement_findings(ev: &evidence::Evidence, out: &mut Vec<Finding>) {
    let Some(s) = &ev.shares else { return };
    if s.async_copy <= CAUSE_SHARE {
        return;
    }
    let host = if s.host_copy > 0.0 {
        format!("; {} of the op time moves data to or from host memory (memory space S(5): host offload)", pct(s.host_copy))
    } else {
        String::new()
    };
    let dominant = s.async_copy > DATA_MOVEMENT_DOMINANT;
    let what = format!(
        "async copies (copy-start/copy-done) take {} of the op time{host}{}",
        pct(s.async_copy),
        if dominant { ": the module mostly moves data, it is not compute or HBM-bound work" } else { "" }
    );
    let rx = if s.host_copy > 0.0 {
        "host transfers run over the host link, not HBM, so the HBM roofline does not bound them: keep the buffers on the device, or overlap the transfers with compute"
    } else {
        "start the copies earlier so compute hides them, or avoid them"
    };
    out.push(Finding::new("data-movement", if dominant { Level::Warn } else { Level::Note }, what, Some(rx)));
}

/// Layout ops (seed 003: above 5% of the time), reductions, collectives and exposed waits, each
/// with its share of the op time.
fn share_findings(inp: &Inputs, ev: &evidence::Evidence, out: &mut Vec<Finding>) {
    let Some(s) = &ev.shares else { return };
    if s.layout > LAYOUT_SHARE {
        let top = ev.layout_top.as_ref().map(|(n, f)| format!(" ({n} alone {})", pct(*f))).unwrap_or_default();
        out.push(Finding::new(
            "layout",
            Level::Warn,
            format!("layout ops (data formatting, transposes) take {}{top}: above 5% of the time (seed 003)", pct(s.layout)),
            Some(match (ev.backend, ev.layout_top.as_ref().is_some_and(|(n, _)| n.to_ascii_lowercase().contains("transpose"))) {
                (evidence::Backend::Tpu, _) => {
                    "block shapes that do not align with the 8x128 vreg tile make the compiler rearrange data (section 4.5); check shardings and layouts"
                }
                (_, true) => {
                    "the data arrives in a layout the consumer does not use: produce it in the consumer's layout, or fold the transpose into the kernel"
                }
                _ => "slices, pads and reshapes move data the compute does not use: keep the slicing inside the kernel's block specs, or give the inputs their final shape",
            }),
        ));
    }
    if s.reduce > SHARE_WARN {
        out.push(Finding::new(
            "reduce",
            Level::Note,
            format!("reductions take {} of the op time (ours: above 10%)", pct(s.reduce)),
            (ev.backend == evidence::Backend::Tpu)
                .then_some("a reduction over the last axis is the slowest path on TPU; reduce over the second-to-last one (section 4.5)"),
        ));
    }
    if s.collective > 0.0 {
        let level = if s.collective > SHARE_WARN { Level::Warn } else { Level::Note };
        out.push(Finding::new(
            "collectives",
            level,
            format!(
                "collectives take {} of the op time: the interconnect (ICI, NVLink), not HBM, bounds them, so the HBM roofline \
                 does not judge them",
                pct(s.collective)
            ),
            (s.collective > SHARE_WARN).then_some("overlap communication with compute; check the sharding (seeds 001, 003)"),
        ));
    }
    if s.waits > 0.0 {
        let level = if s.waits > SHARE_WARN { Level::Warn } else { Level::Note };
        out.push(Finding::new(
            "waits",
            level,
            format!(
                "async *-done ops (besides copies) wait {} of the op time (the exposed part of async communication, seed 003)",
                pct(s.waits)
            ),
            (s.waits > SHARE_WARN).then_some("start the async operations earlier or overlap them with compute (seed 003)"),
        ));
    }
    let _ = inp;
}

/// Each large op against its own roofline, T = max(FLOPs / peak, bytes / bandwidth) (seed 001:
/// "Within 10%? Great. Much worse? Investigate."; a matmul more than 2x its roofline is a red
/// flag), from the capture's per-op cost model. A module of many small ops (none at 5% of the
/// time) is judged by category instead, each category's ops summed. Collectives are left out:
/// the interconnect bounds them, not this roofline.
fn op_roofline_findings(inp: &Inputs, out: &mut Vec<Finding>) {
    let (Some(k), Some((tflops, gbps))) = (inp.kernel, inp.peaks) else { return };
    if tflops <= 0.0 || gbps <= 0.0 {
        return;
    }
    // (name, flops, bytes, time per occurrence us, share, is a matmul, host transfer)
    let judged = |o: &&crate::trace::OpStat| o.count > 0 && !evidence::is_collective(&o.name, &o.category);
    let mut items: Vec<(String, f64, f64, f64, f64, bool, bool)> = k
        .op_breakdown
        .iter()
        .filter(judged)
        .filter(|o| o.fraction >= CAUSE_SHARE)
        .take(6)
        .filter_map(|o| {
            Some((
                o.name.clone(),
                o.flops?,
                o.bytes?,
                o.total_us / o.count as f64,
                o.fraction,
                evidence::is_dot(o),
                k.host_memory_ops.contains(&o.name),
            ))
        })
        .collect();
    let by_category = items.is_empty();
    if by_category {
        for c in k.category_breakdown.iter().filter(|c| c.fraction >= CAUSE_SHARE).take(6) {
            let ops: Vec<&crate::trace::OpStat> = k.op_breakdown.iter().filter(judged).filter(|o| o.category == c.category).collect();
            if ops.is_empty() || ops.iter().any(|o| o.flops.is_none() || o.bytes.is_none()) {
                continue;
            }
            let n: u64 = ops.iter().map(|o| o.count).sum();
            let sum = |f: fn(&crate::trace::OpStat) -> f64| ops.iter().map(|o| f(o) * o.count as f64).sum::<f64>() / n as f64;
            let time: f64 = ops.iter().map(|o| o.total_us).sum::<f64>() / n as f64;
            let name = format!("{} ({} ops)", c.category, ops.len());
            items.push((
                name,
                sum(|o| o.flops.unwrap_or(0.0)),
                sum(|o| o.bytes.unwrap_or(0.0)),
                time,
                c.fraction,
                evidence::is_dot(ops[0]),
                false,
            ));
        }
    }
    let mut lines = Vec::new();
    let (mut worst, mut impossible, mut slow_matmul) = (f64::INFINITY, false, false);
    for (name, f, b, actual_us, share, dot, host) in &items {
        let floor_us = (f / (tflops * 1e12)).max(b / (gbps * 1e9)) * 1e6;
        if floor_us <= 0.0 || *actual_us <= 0.0 {
            continue;
        }
        let eff = floor_us / actual_us;
        worst = worst.min(eff);
        let host = if *host { ", a host transfer: its bytes do not go at HBM speed" } else { "" };
        let odd = if eff > 1.0 {
            impossible = true;
            " (faster than its roofline: the cost model or the peaks are off)"
        } else if *dot && eff < 1.0 / MATMUL_ROOFLINE_RED_FLAG {
            slow_matmul = true;
            " (a matmul more than 2x its roofline: wrong sharding or layout, seed 001)"
        } else {
            ""
        };
        let each = if by_category { "us an op" } else { "us each" };
        lines.push(format!(
            "{name}: {} of its roofline ({floor_us:.1} us floor, {actual_us:.1} {each}; {} of the time){odd}{host}",
            pct(eff),
            pct(*share)
        ));
    }
    if lines.is_empty() {
        return;
    }
    let level = if impossible || slow_matmul {
        Level::Warn
    } else if worst >= OP_ROOFLINE_GREAT {
        Level::Good
    } else {
        Level::Note
    };
    let what = if by_category { "no op takes 5% of the time; the largest categories, their ops summed," } else { "the largest ops" };
    out.push(Finding::new(
        "op-roofline",
        level,
        format!("{what} against their own roofline (within 10% is great, seed 001):\n{}", lines.join("\n")),
        slow_matmul.then_some("check the operands' sharding and layout: a retiling copy before the dot is the usual cause (seed 001)"),
    ));
}

/// The findings as indented text, one per entry, prescriptions after an arrow.
pub fn render(findings: &[Finding]) -> String {
    let mut s = String::new();
    for f in findings {
        // The rule and the source of its threshold close the finding's first line.
        let mut lines = f.what.lines();
        let first = lines.next().unwrap_or("");
        let tag = format!("({}: {})", f.rule, f.source);
        // Before a closing colon, which introduces the lines under it.
        let first = match first.strip_suffix(':') {
            Some(head) => format!("{head} {tag}:"),
            None => format!("{first} {tag}"),
        };
        let _ = writeln!(s, "  [{}] {first}", f.level.mark());
        for l in lines {
            let _ = writeln!(s, "           {l}");
        }
        if let Some(p) = &f.prescription {
            let _ = writeln!(s, "           -> {p}");
        }
    }
    s
}

/// Bubble fraction of a trace's kernel: the share of its executions' spans that no compute block
/// (a TRACE_COMPUTE capture) or else no op covers (self times of all ops over the summed spans).
/// `None` without either.
pub fn bubble_fraction(k: &crate::trace::KernelStats) -> Option<f64> {
    // A TRACE_COMPUTE capture shows the compute blocks themselves: the gaps between them are
    // the bubbles (on TPU the op table only has the one custom call covering the whole kernel).
    if let Some(p) = &k.pipeline {
        return Some((1.0 - p.compute_share).clamp(0.0, 1.0));
    }
    // One op per execution spans its execution by construction: no idle share to measure.
    let ops: u64 = k.op_breakdown.iter().map(|o| o.count).sum();
    if ops <= k.executions as u64 {
        return None;
    }
    let span: f64 = k.per_execution_us.iter().sum();
    let busy: f64 = k.category_breakdown.iter().map(|c| c.total_us).sum();
    (span > 0.0 && busy > 0.0).then(|| (1.0 - busy / span).clamp(0.0, 1.0))
}

/// Share of the kernel's op (self) time in exponentials (ops or categories named exp*).
pub fn exp_share(k: &crate::trace::KernelStats) -> Option<f64> {
    let total: f64 = k.op_breakdown.iter().map(|o| o.total_us).sum();
    let exp: f64 = k
        .op_breakdown
        .iter()
        .filter(|o| o.category.starts_with("exponential") || o.name.starts_with("exponential"))
        .map(|o| o.total_us)
        .sum();
    (total > 0.0).then_some(exp / total)
}

/// Share of the kernel's op (self) time in synchronous copy events (`copy` ops).
pub fn copy_share(k: &crate::trace::KernelStats) -> Option<f64> {
    let total: f64 = k.category_breakdown.iter().map(|c| c.total_us).sum();
    // Synchronous copies only: copy-start/copy-done pairs are transfers (`data-movement`).
    let copy: f64 = k
        .op_breakdown
        .iter()
        .filter(|o| {
            (o.category == "copy" || o.name.starts_with("copy")) && !o.name.starts_with("copy-start") && !o.name.starts_with("copy-done")
        })
        .filter(|o| o.category != "copy-start" && o.category != "copy-done")
        .map(|o| o.total_us)
        .sum();
    (total > 0.0).then_some(copy / total)
}

/// Kernel blocks per execution seen in the trace: the compute blocks of a TRACE_COMPUTE capture,
/// or else the largest per-execution occurrence count of any op (the grid loop's body runs once
/// per block).
pub fn blocks_seen(k: &crate::trace::KernelStats) -> Option<u64> {
    if let Some(p) = &k.pipeline {
        return Some(p.compute_blocks_per_execution.round() as u64).filter(|b| *b > 0);
    }
    let n = k.executions as u64;
    (n > 0).then(|| k.op_breakdown.iter().map(|o| o.count / n).max().unwrap_or(0)).filter(|b| *b > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gap_bands_at_the_articles_thresholds() {
        assert_eq!(gap_band(0.0), GapBand::NearRoofline);
        assert_eq!(gap_band(0.0999), GapBand::NearRoofline);
        assert_eq!(gap_band(0.10), GapBand::Moderate);
        assert_eq!(gap_band(0.30), GapBand::Moderate);
        assert_eq!(gap_band(0.3001), GapBand::Significant);
        assert_eq!(gap_share(1.42, 2.12).map(|s| (s * 1000.0).round()), Some(670.0));
        assert_eq!(gap_share(-0.1, 1.0), Some(0.0));
        assert_eq!(gap_share(1.0, 0.0), None);
    }

    #[test]
    fn regime_word_is_latency_bound_only_far_below_both_roofs() {
        assert_eq!(regime_word(false, 0.998), "LATENCY-BOUND");
        assert_eq!(regime_word(true, 0.91), "LATENCY-BOUND");
        assert_eq!(regime_word(true, 0.90), "MEMORY-BOUND");
        assert_eq!(regime_word(false, 0.05), "COMPUTE-BOUND");
        // The article's worked examples keep the article's words: 1.42 of 2.12 ms gap on the
        // compute side (section 3.3), 3.19 of 5.20 ms on the memory side (section 3.4).
        assert_eq!(regime_word(false, gap_share(1.42, 2.12).unwrap()), "COMPUTE-BOUND");
        assert_eq!(regime_word(true, gap_share(3.19, 5.20).unwrap()), "MEMORY-BOUND");
    }

    #[test]
    fn achieved_fraction_and_reread_factor() {
        // Section 3.4: memory-only 2.01 ms of 5.20 ms actual.
        assert!((achieved_fraction(0.70, 2.01, 5.20).unwrap() - 0.3865).abs() < 1e-4);
        assert_eq!(achieved_fraction(1.0, 1.0, 0.0), None);
        assert_eq!(reread_factor(64.0, 2.0), Some(32.0));
        assert_eq!(reread_factor(1.0, 0.0), None);
    }
}
