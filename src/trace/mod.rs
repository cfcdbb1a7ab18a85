//! Reading profiler captures: the kernel's device time per execution, its op
//! breakdown and HLO statistics, from an `.xplane.pb` (or a `.trace.json.gz` as a fallback).
//!
//! The flow is locate (which file) -> map it and decode its skeleton ([`xplane`], zero-copy)
//! -> one fused pass over every event (`scan`) that fills the module executions of every
//! device and the op tables -> pick the kernel -> its figures. [`analyze`] runs it all;
//! `ratchet inspect` (cli::inspect) prints it.

pub mod analysis;
pub mod hlo;
pub mod json_trace;
pub mod kernel_body;
pub mod locate;
mod scan;
mod wire;
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
    /// What an op's time is in the breakdowns: the `device_duration_ps` stat (TPU, as XProf
    /// uses it) or the event's duration.
    pub op_time: String,
    /// Every executed module, most executions first.
    pub modules: Vec<ModuleStats>,
    /// The kernel's figures (always set by [`analyze`], which fails when it cannot choose).
    pub kernel: Option<KernelStats>,
    /// HLO counts of the kernel's module from the `Hlo Proto` embedded in the capture.
    pub hlo_ops_from_proto: Option<HloStats>,
    /// Host-side durations (us) of the `kernel_step` step annotations (or older `kernel_step_<i>` ones): dispatch + execution +
    /// wait, so larger than the device time.
    pub host_steps_us: Vec<f64>,
    /// Op breakdown of every module, given by `inspect` when no single kernel was chosen.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ops_by_module: Vec<ModuleOps>,
    pub warnings: Vec<String>,
}

/// The op breakdown of one module (all its executions on its primary device).
#[derive(Debug, Clone, Serialize)]
pub struct ModuleOps {
    pub name: String,
    pub op_breakdown: Vec<OpStat>,
    pub category_breakdown: Vec<CategoryStat>,
}

/// A module's executions on one device, when it ran on several.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceStats {
    pub device: String,
    pub executions: usize,
    pub median_us: f64,
    pub mean_us: f64,
    pub min_us: f64,
    pub max_us: f64,
}

/// Per-execution statistics of one compiled module.
#[derive(Debug, Clone, Serialize)]
pub struct ModuleStats {
    /// `jit_name(program_id)` when the capture gives a program id, else `jit_name`.
    pub name: String,
    /// The module name alone (`jit_flash_attention`).
    pub module: String,
    pub program_id: Option<u64>,
    /// `module`, or `pallas_kernel` for a Pallas kernel on TPU (a `tpu_custom_call`), whose
    /// executions are its calls.
    pub kind: String,
    /// For a Pallas kernel: the module it ran in.
    pub within: Option<String>,
    /// The device the figures are from (the one that ran the module most); `None` on CPU.
    pub device: Option<String>,
    pub executions: usize,
    /// Median span of one execution: first op start to last op end.
    pub median_us: f64,
    pub mean_us: f64,
    pub min_us: f64,
    pub max_us: f64,
    pub total_us: f64,
    /// `total_us` over the summed time of every module on the same device.
    pub share_of_device_time: f64,
    /// Mean number of op events (CPU) or kernels (GPU) per execution; `None` on TPU, where
    /// the module event is read directly.
    pub ops_per_execution: Option<f64>,
    /// Per device, when the module ran on several (the figures above are from `device`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceStats>,
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
    /// The device the times are from; `None` on CPU.
    pub device: Option<String>,
    /// What an op's time is: the `device_duration_ps` stat (TPU, as XProf uses it) or the
    /// event's duration.
    pub op_time: String,
    /// FLOPs per execution by the capture's cost model (TPU `flops` op metadata), to set
    /// beside the benchmark's own estimate.
    pub cost_model_flops: Option<f64>,
    /// Bytes accessed per execution by the capture's cost model (TPU `bytes_accessed`).
    pub cost_model_bytes: Option<f64>,
    /// Ops whose HLO text puts a buffer in host memory (memory space S(5)): host-offload
    /// transfers (TPU captures, whose ops carry their HLO text).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_memory_ops: Vec<String>,
    /// Per HLO op, largest self time first.
    pub op_breakdown: Vec<OpStat>,
    /// Per category (dot, fusion, custom-call, copy, ...), largest self time first.
    pub category_breakdown: Vec<CategoryStat>,
    /// DMA/compute overlap, from a TPU capture taken with `TRACE_COMPUTE` (its compute and DMA
    /// rows); `None` in other captures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pipeline: Option<PipelineHealth>,
}

/// A Pallas kernel's pipeline as a `TRACE_COMPUTE` capture shows it (source article, 4.2-4.4).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PipelineHealth {
    /// Share of the steady state's DMA time that compute covers (1.0: every transfer hidden).
    pub dma_overlap: f64,
    /// DMA time per execution in the steady state, in microseconds.
    pub dma_us_per_execution: f64,
    /// Compute blocks per execution (the article's check against the grid's product).
    pub compute_blocks_per_execution: f64,
    /// Share of the executions' time that some compute block covers (1 - the bubble fraction,
    /// fill and drain included, as the article's 4.4 measures it).
    pub compute_share: f64,
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
    analyze_located_with(located, opts, true)
}

/// [`analyze_located`] for looking only (`inspect`): a capture with several equally-run
/// modules and no kernel named gives all of them, and no kernel, instead of an error.
pub fn analyze_located_for_inspect(located: &Located, opts: &AnalyzeOptions) -> anyhow::Result<TraceReport> {
    analyze_located_with(located, opts, false)
}

fn analyze_located_with(located: &Located, opts: &AnalyzeOptions, require_kernel: bool) -> anyhow::Result<TraceReport> {
    let mut opts = opts.clone();
    if opts.kernel.is_none() {
        opts.kernel = located.run.as_ref().and_then(|(_, r)| r.kernel.clone());
    }
    let mut report = match located.format {
        CaptureFormat::Xplane => analyze_xplane_file_with(&located.capture, &opts, require_kernel)?,
        CaptureFormat::TraceJson => json_trace::analyze_json_with(&located.capture, &opts, require_kernel)?,
    };
    let mut warnings = located.warnings.clone();
    warnings.append(&mut report.warnings);
    report.warnings = warnings;
    Ok(report)
}

/// Maps an `.xplane.pb` and analyses it in one pass over its events.
pub fn analyze_xplane_file(path: &Path, opts: &AnalyzeOptions) -> anyhow::Result<TraceReport> {
    analyze_xplane_file_with(path, opts, true)
}

fn analyze_xplane_file_with(path: &Path, opts: &AnalyzeOptions, require_kernel: bool) -> anyhow::Result<TraceReport> {
    use crate::safe_read::{open_regular, too_big, MAX_TRACE_BYTES};
    // A regular file only, opened without blocking, and no bigger than the cap.
    let file = open_regular(path)?;
    let len = file.metadata().with_context(|| format!("cannot read {}", path.display()))?.len();
    if len > MAX_TRACE_BYTES {
        return Err(too_big(path, len, MAX_TRACE_BYTES, "").into());
    }
    // An empty file cannot be mapped; it decodes as an empty capture.
    let map = if len == 0 {
        None
    } else {
        // SAFETY: a read-only private mapping of a capture the profiler has finished writing;
        // nothing in this process writes to it. (A file truncated by another process while
        // mapped would fault, as a file read would fail.)
        let m = unsafe { memmap2::MmapOptions::new().populate().map(&file) }.with_context(|| format!("cannot map {}", path.display()))?;
        // One front-to-back pass: ask for readahead.
        let _ = m.advise(memmap2::Advice::Sequential);
        Some(m)
    };
    let data: &[u8] = map.as_deref().unwrap_or(&[]);
    if len == 0 {
        anyhow::bail!(
            "{} is empty (0 bytes): the profiler did not finish writing it (a run killed while profiling, or a full \
             disk); run the benchmark again",
            path.display()
        );
    }
    let space = xplane::parse_skeleton(data).with_context(|| format!("cannot decode {}", path.display()))?;
    if space.planes.is_empty() {
        anyhow::bail!("{} ({len} bytes) holds no planes: it is not a jax.profiler capture (an XSpace)", path.display());
    }
    report_from_space(&space, &path.display().to_string(), opts, require_kernel)
}

/// Analyses a decoded capture; `capture` names it in the report.
pub fn analyze_space(space: &xplane::XSpace<'_>, capture: &str, opts: &AnalyzeOptions) -> anyhow::Result<TraceReport> {
    report_from_space(space, capture, opts, true)
}

fn report_from_space(
    space: &xplane::XSpace<'_>,
    capture: &str,
    opts: &AnalyzeOptions,
    require_kernel: bool,
) -> anyhow::Result<TraceReport> {
    let collected = scan::scan(space, !opts.times_only).with_context(|| format!("cannot decode {capture}"))?;
    if collected.modules.is_empty() {
        let planes: Vec<&str> = space.planes.iter().map(|p| p.name).collect();
        let dispatches = space
            .planes
            .iter()
            .filter(|p| p.name.starts_with("/host:"))
            .flat_map(|p| p.event_metadata.values())
            .filter(|m| scan::is_dispatch(m.name))
            .map(|m| m.name)
            .next();
        if let Some(name) = dispatches {
            return Err(no_op_events(capture, name));
        }
        anyhow::bail!(
            "{capture}: no executed XLA module found (no TPU `XLA Modules` events, no GPU \
             kernels with `hlo_module`, no CPU op events with `hlo_op`); planes: {}",
            planes.join(", ")
        );
    }
    build_report(collected, capture, CaptureFormat::Xplane, opts, require_kernel, Some(space))
}

/// The refusal for a CPU capture that records the host's calls but no op ran inside them.
pub(crate) fn no_op_events(capture: &str, dispatch: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "{capture}: this CPU capture records the host's calls (`{dispatch}` events) but no XLA op events, as \
         jax 0.4.30 and 0.6.x write on CPU: it holds no kernel time to read. Capture with another jax \
         (0.4.38, 0.5.x, 0.7 and later write op events), or set [trace] latency = \"host\" to time the \
         kernel from the benchmark alone"
    )
}

impl TraceReport {
    fn with_host_check(mut self) -> TraceReport {
        self.warnings.extend(self.host_contradiction());
        self
    }

    /// A contradiction between the trace and the host, when the capture has `kernel_step`
    /// annotations: every profiled call waits for the kernel inside its step, so a median
    /// execution longer than the longest step (the host's median plus its own spread) means
    /// the executions were not told apart (merged) or the trace's clock is off.
    pub fn host_contradiction(&self) -> Option<String> {
        let k = self.kernel.as_ref()?;
        let longest = self.host_steps_us.iter().copied().fold(f64::NAN, f64::max);
        (k.median_us > longest).then(|| {
            format!(
                "the trace's median execution of {} ({:.1} us) is longer than the longest of the host's {} kernel_step \
                 annotations ({longest:.1} us), each of which waits for one: the trace's executions are not the calls; \
                 its time is not used",
                k.name,
                k.median_us,
                self.host_steps_us.len()
            )
        })
    }
}

/// The report from collected executions: the kernel chosen (by pattern, or the one obvious
/// candidate) and its figures. Without `require_kernel` (`inspect`, which only looks), a
/// capture with no single obvious kernel gives every module's figures and op breakdown instead.
pub(crate) fn build_report(
    c: analysis::Collected,
    capture: &str,
    format: CaptureFormat,
    opts: &AnalyzeOptions,
    require_kernel: bool,
    space: Option<&xplane::XSpace<'_>>,
) -> anyhow::Result<TraceReport> {
    let mut warnings = c.warnings.clone();
    let chosen = match analysis::select_kernel(&c.modules, opts.kernel.as_deref(), &c.steps) {
        Ok(i) => Some(i),
        Err(e) if !require_kernel && opts.kernel.is_none() => {
            warnings.push(format!("no kernel chosen, so no roofline: {e}"));
            None
        }
        Err(e) => return Err(e.context(format!("{capture}: choosing the kernel"))),
    };
    let with_ops = !opts.times_only;
    let k = chosen.map(|i| &c.modules[i]);
    let kernel = k.map(|k| analysis::kernel_from_table(k, &c, with_ops));
    let hlo_ops_from_proto = match (space, k) {
        (Some(space), Some(k)) if with_ops && k.pallas_in.is_none() => match analysis::kernel_hlo_proto(space, k) {
            Some(Ok(stats)) => Some(stats),
            Some(Err(e)) => {
                warnings.push(format!("embedded HLO of {}: {e}", k.display_name()));
                None
            }
            None => None,
        },
        _ => None,
    };
    if let Some(w) = hlo_ops_from_proto.as_ref().and_then(HloStats::copy_warning) {
        warnings.push(w);
    }
    let first = k.or_else(|| c.modules.first());
    let source = match k {
        Some(k) => k.source.clone(),
        None => {
            let mut v: Vec<&str> = c.modules.iter().filter(|m| m.pallas_in.is_none()).map(|m| m.source.as_str()).collect();
            v.dedup();
            v.join("; ")
        }
    };
    let device = match (space, first.and_then(|m| m.device.as_deref())) {
        (Some(space), Some(plane)) => analysis::device_info(space, plane),
        (None, Some(plane)) => Some(DeviceInfo { plane: plane.to_string(), device_type: None, peak_tflops: None, hbm_gbps: None }),
        _ => None,
    };
    let ops_by_module = if chosen.is_none() && with_ops {
        c.modules
            .iter()
            .filter(|m| m.pallas_in.is_none())
            .map(|m| {
                let (op_breakdown, category_breakdown) = c.table.finish(m.group, m.execs.len(), &c.ops.infos);
                ModuleOps { name: m.display_name(), op_breakdown, category_breakdown }
            })
            .collect()
    } else {
        Vec::new()
    };
    Ok(TraceReport {
        capture: capture.to_string(),
        format,
        events: c.events,
        source,
        device,
        op_time: c.op_time.clone(),
        modules: c.module_stats(),
        kernel,
        hlo_ops_from_proto,
        host_steps_us: c.steps.iter().map(|&(s, e)| (e - s) as f64 / 1e6).collect(),
        ops_by_module,
        warnings,
    }
    .with_host_check())
}
