//! Reading profiler captures (issue 4): the kernel's device time per execution, its op
//! breakdown and HLO statistics, from an `.xplane.pb` (or a `.trace.json.gz` as a fallback).
//!
//! The flow is locate (which file) -> decode ([`xplane`], zero-copy) -> collect module
//! executions from the best timeline the capture has ([`analysis`]) -> pick the kernel ->
//! op breakdown and HLO counts. [`analyze`] runs it all; [`inspect`] prints it.

pub mod analysis;
pub mod hlo;
pub mod inspect;
pub mod json_trace;
pub mod locate;
pub mod xplane;

use std::path::Path;

use anyhow::Context;
use serde::Serialize;

pub use hlo::{hlo_stats_from_proto, hlo_stats_from_text, HloStats};
pub use locate::{locate, CaptureFormat, Located, RunInfo};

/// What to analyse.
#[derive(Debug, Clone, Default)]
pub struct AnalyzeOptions {
    /// Regular expression for the kernel's module name (`flash_attention`); matched against
    /// both `jit_name` and `jit_name(program_id)`. `None`: the result file's `kernel` field
    /// when the path is a run directory, else the module executed most often.
    pub kernel: Option<String>,
    /// Only the module executions and the kernel's time per execution: no op breakdown, no
    /// embedded HLO (one pass over the events instead of two). What every benchmark run needs.
    pub times_only: bool,
}

/// Everything read from one capture.
#[derive(Debug, Clone, Serialize)]
pub struct TraceReport {
    /// The capture file that was read.
    pub capture: String,
    pub format: CaptureFormat,
    /// Events in the capture (all planes and lines).
    pub events: u64,
    /// Which plane and line(s) the execution times come from.
    pub source: String,
    /// The device plane's type and peak figures, when it carries them (TPU, GPU).
    pub device: Option<DeviceInfo>,
    /// Every executed module, most executions first.
    pub modules: Vec<ModuleStats>,
    /// The kernel's figures (always set by [`analyze`], which fails when it cannot choose).
    pub kernel: Option<KernelStats>,
    /// HLO counts of the kernel's module from the `Hlo Proto` embedded in the capture.
    pub hlo_ops_from_proto: Option<HloStats>,
    /// Host-side durations (us) of the `kernel_step_i` annotations: dispatch + execution +
    /// wait, so larger than the device time.
    pub host_steps_us: Vec<f64>,
    pub warnings: Vec<String>,
}

/// Per-execution statistics of one compiled module.
#[derive(Debug, Clone, Serialize)]
pub struct ModuleStats {
    /// `jit_name(program_id)` when the capture gives a program id, else `jit_name`.
    pub name: String,
    /// The module name alone (`jit_flash_attention`).
    pub module: String,
    pub program_id: Option<u64>,
    pub executions: usize,
    /// Median span of one execution: first op start to last op end.
    pub median_us: f64,
    pub mean_us: f64,
    pub min_us: f64,
    pub max_us: f64,
    pub total_us: f64,
    /// Mean number of op events (CPU) or kernels (GPU) per execution; `None` on TPU, where
    /// the module event is read directly.
    pub ops_per_execution: Option<f64>,
}

/// The chosen kernel: its time per execution and where the time goes.
#[derive(Debug, Clone, Serialize)]
pub struct KernelStats {
    pub name: String,
    pub executions: usize,
    /// Span of each execution in time order, in microseconds.
    pub per_execution_us: Vec<f64>,
    pub median_us: f64,
    pub mean_us: f64,
    pub min_us: f64,
    pub max_us: f64,
    /// FLOPs per execution by the capture's cost model (TPU `flops` op metadata), to set
    /// beside the benchmark's own estimate.
    pub cost_model_flops: Option<f64>,
    /// Bytes accessed per execution by the capture's cost model (TPU `bytes_accessed`).
    pub cost_model_bytes: Option<f64>,
    /// Per HLO op, largest self time first.
    pub op_breakdown: Vec<OpStat>,
    /// Per category (dot, fusion, custom-call, copy, ...), largest self time first.
    pub category_breakdown: Vec<CategoryStat>,
}

/// Time of one HLO op over all the kernel's executions.
#[derive(Debug, Clone, Serialize)]
pub struct OpStat {
    pub name: String,
    pub category: String,
    /// Occurrences over all executions.
    pub count: u64,
    /// Self time (nested ops excluded), summed over all executions.
    pub total_us: f64,
    /// Time including the ops nested inside (a `while` holds its body).
    pub inclusive_us: f64,
    /// `total_us` per kernel execution.
    pub per_execution_us: f64,
    /// Share of the kernel's summed self time.
    pub fraction: f64,
    /// FLOPs of one occurrence by the capture's cost model (TPU), if given.
    pub flops: Option<f64>,
    /// Bytes accessed by one occurrence by the capture's cost model (TPU), if given.
    pub bytes: Option<f64>,
}

/// Self time of one op category over all the kernel's executions.
#[derive(Debug, Clone, Serialize)]
pub struct CategoryStat {
    pub category: String,
    pub total_us: f64,
    pub per_execution_us: f64,
    pub count: u64,
    pub fraction: f64,
}

/// The device plane's identity and peaks, as the capture records them.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceInfo {
    pub plane: String,
    pub device_type: Option<String>,
    /// Peak TFLOP/s (TPU plane stat `peak_teraflops_per_second`).
    pub peak_tflops: Option<f64>,
    /// Peak HBM bandwidth in GB/s (TPU `peak_hbm_bw_gigabytes_per_second`, GPU
    /// `memory_bandwidth`).
    pub hbm_gbps: Option<f64>,
}

/// Locates the capture behind `path` (an `.xplane.pb`, a profile log directory or a run
/// directory) and reads the kernel's figures from it.
pub fn analyze(path: &Path, opts: &AnalyzeOptions) -> anyhow::Result<TraceReport> {
    let located = locate(path)?;
    analyze_located(&located, opts)
}

/// [`analyze`] on an already located capture.
pub fn analyze_located(located: &Located, opts: &AnalyzeOptions) -> anyhow::Result<TraceReport> {
    let mut opts = opts.clone();
    if opts.kernel.is_none() {
        opts.kernel = located.run.as_ref().and_then(|(_, r)| r.kernel.clone());
    }
    let mut report = match located.format {
        CaptureFormat::Xplane => analyze_xplane_file(&located.capture, &opts)?,
        CaptureFormat::TraceJson => json_trace::analyze_json(&located.capture, &opts)?,
    };
    let mut warnings = located.warnings.clone();
    warnings.append(&mut report.warnings);
    report.warnings = warnings;
    Ok(report)
}

/// Reads an `.xplane.pb` into one buffer and analyses it.
pub fn analyze_xplane_file(path: &Path, opts: &AnalyzeOptions) -> anyhow::Result<TraceReport> {
    let data = crate::bench::safe_read::read_capped(path, crate::bench::safe_read::MAX_TRACE_BYTES)?;
    let space = xplane::parse(&data).with_context(|| format!("cannot decode {}", path.display()))?;
    analyze_space(&space, &path.display().to_string(), opts)
}

/// Analyses a decoded capture; `capture` names it in the report.
pub fn analyze_space(space: &xplane::XSpace<'_>, capture: &str, opts: &AnalyzeOptions) -> anyhow::Result<TraceReport> {
    let planes: Vec<&str> = space.planes.iter().map(|p| p.name).collect();
    let collected = analysis::collect(space).with_context(|| {
        format!(
            "{capture}: no executed XLA module found (no TPU `XLA Modules` events, no GPU \
             kernels with `hlo_module`, no CPU op events with `hlo_op`); planes: {}",
            planes.join(", ")
        )
    })?;
    let steps = analysis::host_step_windows(space);
    let idx = analysis::select_kernel(&collected.modules, opts.kernel.as_deref(), &steps)
        .with_context(|| format!("{capture}: choosing the kernel"))?;
    let k = &collected.modules[idx];
    let kernel =
        if opts.times_only { analysis::kernel_from_table(k, Default::default()) } else { analysis::kernel_stats(space, &collected, k) };
    let mut warnings = collected.warnings.clone();
    let hlo_ops_from_proto = match analysis::kernel_hlo_proto(space, k).filter(|_| !opts.times_only) {
        Some(Ok(stats)) => Some(stats),
        Some(Err(e)) => {
            warnings.push(format!("embedded HLO of {}: {e}", k.display_name()));
            None
        }
        None => None,
    };
    if let Some(w) = hlo_ops_from_proto.as_ref().and_then(HloStats::copy_warning) {
        warnings.push(w);
    }
    Ok(TraceReport {
        capture: capture.to_string(),
        format: CaptureFormat::Xplane,
        events: space.event_count() as u64,
        source: collected.source.clone(),
        device: analysis::device_info(space, &collected),
        modules: collected.modules.iter().map(|m| m.stats()).collect(),
        kernel: Some(kernel),
        hlo_ops_from_proto,
        host_steps_us: steps.iter().map(|&(s, e)| (e - s) as f64 / 1e6).collect(),
        warnings,
    })
}
