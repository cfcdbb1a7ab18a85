//! `ratchet inspect PATH`: the article-style diagnosis of one capture (regime, actual vs
//! minimum intensity, time decomposition, bandwidth, HLO counts, op breakdown), as text or as
//! one JSON object.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Context;
use serde::Serialize;

pub use crate::cli::args::InspectArgs;
use crate::printable::line;
use crate::trace::locate::{locate, resolve_in_run};
use crate::trace::{analyze_located_for_inspect, hlo_stats_from_text, AnalyzeOptions, CategoryStat, HloStats, OpStat, TraceReport};

/// The roofline diagnosis of one kernel (the article's section 3).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Roofline {
    /// The word every view uses ([`crate::metrics::regime_word`]): `COMPUTE-BOUND`,
    /// `MEMORY-BOUND` or `LATENCY-BOUND`.
    pub regime: String,
    /// The roofline's side, `COMPUTE-BOUND` or `MEMORY-BOUND` (intensity against the ridge),
    /// which the rules read even when the word is `LATENCY-BOUND`.
    pub side: String,
    /// FLOPs per byte with re-reads (flops / bytes).
    pub intensity: f64,
    /// FLOPs per byte with perfect reuse (flops / min_bytes).
    pub min_traffic_intensity: Option<f64>,
    /// Peak FLOP/s over peak bandwidth.
    pub ridge: f64,
    pub compute_only_ms: f64,
    pub memory_only_ms: f64,
    pub actual_ms: f64,
    /// Actual minus the larger of the two floors.
    pub gap_ms: f64,
    pub achieved_gbps: f64,
    pub bandwidth_fraction: f64,
    pub tflops: f64,
    pub utilization: f64,
}

impl Roofline {
    /// The figures the diagnosis rules read.
    pub fn view(&self) -> crate::diagnose::RooflineView {
        crate::diagnose::RooflineView {
            memory_bound: self.side == "MEMORY-BOUND",
            intensity: self.intensity,
            ridge: self.ridge,
            compute_only_ms: self.compute_only_ms,
            memory_only_ms: self.memory_only_ms,
            actual_ms: self.actual_ms,
            util: self.utilization,
            bw: self.bandwidth_fraction,
        }
    }

    /// The diagnosis for `flops` and `bytes` per call taking `actual_ms`, on a chip with
    /// `peak_tflops` and `hbm_gbps`: [`crate::metrics::roofline`]'s figures (the one roofline
    /// arithmetic), in the fields `inspect` prints.
    pub fn compute(flops: f64, bytes: f64, min_bytes: Option<f64>, actual_ms: f64, peak_tflops: f64, hbm_gbps: f64) -> Roofline {
        let hw = crate::hardware::Hardware { peak_tflops, hbm_gbps };
        let m = crate::metrics::roofline(Some(flops), Some(bytes), min_bytes, actual_ms, &hw);
        let side = m.regime.unwrap_or(crate::metrics::Regime::ComputeBound);
        Roofline {
            regime: m.regime_word().unwrap_or(side.as_str()).to_string(),
            side: side.as_str().to_string(),
            intensity: m.intensity.unwrap_or(f64::NAN),
            min_traffic_intensity: m.min_intensity,
            ridge: crate::metrics::ridge_point(&hw),
            compute_only_ms: m.compute_only_ms.unwrap_or(f64::NAN),
            memory_only_ms: m.memory_only_ms.unwrap_or(f64::NAN),
            actual_ms,
            gap_ms: m.gap_ms.unwrap_or(f64::NAN),
            achieved_gbps: m.achieved_gbps.unwrap_or(f64::NAN),
            bandwidth_fraction: m.bw_pct.map_or(f64::NAN, |p| p / 100.0),
            tflops: m.tflops.unwrap_or(f64::NAN),
            utilization: m.util_pct.map_or(f64::NAN, |p| p / 100.0),
        }
    }
}

/// Everything `inspect` shows; `--json` prints it as one object (the trace report's fields
/// at the top level, `modules` among them).
#[derive(Debug, Clone, Serialize)]
pub struct InspectOutput {
    #[serde(flatten)]
    pub report: TraceReport,
    /// The HLO text file read, and its counts.
    pub hlo_file: Option<String>,
    pub hlo_from_text: Option<HloStats>,
    /// `trace` (the kernel's median device time) or `benchmark` (median of latencies_ms).
    pub latency_source: Option<String>,
    pub latency_ms: Option<f64>,
    pub flops: Option<f64>,
    pub bytes: Option<f64>,
    pub min_bytes: Option<f64>,
    /// Where `flops` and `bytes` come from: `flags`, `result file` or `capture cost model`.
    pub cost_source: Option<String>,
    pub peak_tflops: Option<f64>,
    pub hbm_gbps: Option<f64>,
    pub roofline: Option<Roofline>,
    /// The kernel-body file read, and the op counts of each kernel in it.
    pub kernel_body_file: Option<String>,
    pub kernel_ops: Vec<crate::trace::kernel_body::KernelOps>,
    /// What the run was measured with (its result file's `environment`).
    pub environment: Option<crate::diagnose::environment::Environment>,
    /// The article's diagnosis of these figures (crate::diagnose).
    pub findings: Vec<crate::diagnose::Finding>,
}

/// Reads the capture and gathers the figures `inspect` shows.
pub fn build_inspect(args: &InspectArgs) -> anyhow::Result<InspectOutput> {
    let (report, run) = match traceless_run(&args.path) {
        // A run that recorded no trace (TPU/GPU runs with profile_iters = 0, or a run
        // directory holding only a result file, HLO and kernel body): the diagnosis from the
        // benchmark's own timings, HLO and kernel body.
        Some(run) => (no_trace_report(&args.path), Some(run)),
        None => {
            let located = locate(&args.path)?;
            let run = located.run.clone();
            // Looking needs no single kernel: with several equally-run modules and none named,
            // every module is shown (and the roofline, which needs one latency, is left out).
            (analyze_located_for_inspect(&located, &AnalyzeOptions { kernel: args.kernel.clone(), ..Default::default() })?, run)
        }
    };
    let info = run.as_ref().map(|(_, i)| i);
    let hlo_path = args.hlo.clone().or_else(|| {
        let (dir, i) = run.as_ref()?;
        i.hlo.as_deref().map(|h| resolve_in_run(dir, h))
    });
    let hlo_from_text = match &hlo_path {
        Some(p) => {
            let text = crate::safe_read::read_text_capped(p, crate::safe_read::MAX_HLO_BYTES)
                .with_context(|| format!("cannot read the HLO text {}", p.display()))?;
            Some(hlo_stats_from_text(&text))
        }
        None => None,
    };
    let mut report = report;
    if let Some(w) = hlo_from_text.as_ref().and_then(HloStats::copy_warning) {
        if !report.warnings.contains(&w) {
            report.warnings.push(w);
        }
    }
    // FLOPs and bytes per call: the flags, the run's result file, then the capture's own cost
    // model (its per-op `flops` and `bytes_accessed` summed over one execution, the figures
    // XProf's roofline tool plots), taken as a pair so one source gives both.
    let given = (args.flops.or(info.and_then(|i| i.flops)), args.bytes.or(info.and_then(|i| i.bytes)));
    let model = report.kernel.as_ref().map(|k| (k.cost_model_flops, k.cost_model_bytes));
    let (flops, bytes, cost_source) = match (given, model) {
        ((Some(f), Some(b)), _) => (Some(f), Some(b), Some(if args.flops.is_some() { "flags" } else { "result file" })),
        ((None, None), Some((Some(f), Some(b)))) => (Some(f), Some(b), Some("capture cost model")),
        ((f, b), _) => (f, b, None),
    };
    let min_bytes = args.min_bytes.or(info.and_then(|i| i.min_bytes));
    let device = report.device.as_ref();
    // Peaks: the flags, the capture's device plane, the run's device kind (the one peak table,
    // crate::hardware), then the repo's configured hardware.
    let kind = info.and_then(|i| i.device.as_deref());
    let kind_hw = kind.and_then(crate::hardware::for_device_kind).map(|p| p.hw);
    let peak_tflops = args
        .peak_tflops
        .or(device.and_then(|d| d.peak_tflops))
        .or(kind_hw.map(|h| h.peak_tflops))
        .or(args.config_hardware.map(|h| h.peak_tflops));
    let hbm_gbps =
        args.hbm_gbps.or(device.and_then(|d| d.hbm_gbps)).or(kind_hw.map(|h| h.hbm_gbps)).or(args.config_hardware.map(|h| h.hbm_gbps));
    let (latency_source, latency_ms) = match report.kernel.as_ref().map(|k| k.median_us) {
        Some(us) if us.is_finite() && us > 0.0 => (Some("trace".to_string()), Some(us / 1e3)),
        _ => match info.map(|i| crate::trace::analysis::Summary::of(&i.latencies_ms).median) {
            Some(ms) if ms.is_finite() => (Some("benchmark".to_string()), Some(ms)),
            _ => (None, None),
        },
    };
    let roofline = match (flops, bytes, latency_ms, peak_tflops, hbm_gbps) {
        (Some(f), Some(b), Some(ms), Some(p), Some(bw)) if f > 0.0 && b > 0.0 && p > 0.0 && bw > 0.0 => {
            Some(Roofline::compute(f, b, min_bytes, ms, p, bw))
        }
        _ => None,
    };
    let body_path = args.kernel_body.clone().or_else(|| {
        let (dir, i) = run.as_ref()?;
        i.kernel_body.as_deref().map(|h| resolve_in_run(dir, h))
    });
    let kernel_ops = match &body_path {
        Some(p) => {
            let text = crate::safe_read::read_text_capped(p, crate::safe_read::MAX_HLO_BYTES)
                .with_context(|| format!("cannot read the kernel body {}", p.display()))?;
            crate::trace::kernel_body::parse_kernel_bodies(&text).with_context(|| format!("kernel body {}", p.display()))?
        }
        None => Vec::new(),
    };
    let hlo_for_rules = hlo_from_text.as_ref().or(report.hlo_ops_from_proto.as_ref());
    let kstats = report.kernel.as_ref();
    let findings = crate::diagnose::diagnose(&crate::diagnose::Inputs {
        roofline: roofline.as_ref().map(Roofline::view),
        bytes,
        min_bytes,
        meta: info.and_then(|i| i.meta.as_ref()),
        hlo: hlo_for_rules,
        kernel_ops: &kernel_ops,
        bubble_fraction: kstats.and_then(crate::diagnose::bubble_fraction),
        dma_overlap: kstats.and_then(|k| k.pipeline.as_ref()).map(|p| p.dma_overlap),
        exp_share: kstats.and_then(crate::diagnose::exp_share),
        blocks_seen: kstats.and_then(crate::diagnose::blocks_seen),
        copy_share: kstats.and_then(crate::diagnose::copy_share),
        backend: info.and_then(|i| i.backend.as_deref()),
        flops,
        kernel: kstats,
        peaks: peak_tflops.zip(hbm_gbps),
        sms: kind.and_then(crate::hardware::gpu_sms),
        devices: kstats.and_then(|k| report.modules.iter().find(|m| m.name == k.name)).map(|m| m.devices.as_slice()).unwrap_or(&[]),
        host_steps_us: &report.host_steps_us,
    });
    Ok(InspectOutput {
        report,
        hlo_file: hlo_path.map(|p| p.display().to_string()),
        hlo_from_text,
        latency_source,
        latency_ms,
        flops,
        bytes,
        min_bytes,
        cost_source: cost_source.map(str::to_string),
        peak_tflops,
        hbm_gbps,
        roofline,
        kernel_body_file: body_path.map(|p| p.display().to_string()),
        kernel_ops,
        environment: info.and_then(|i| i.environment.clone()),
        findings,
    })
}

/// A run directory whose result file names no trace and which holds no profile: its
/// directory and result file.
fn traceless_run(path: &std::path::Path) -> Option<(PathBuf, crate::trace::RunInfo)> {
    let result = path.join(crate::bench::protocol::RESULT_FILE);
    if !path.is_dir() || !result.is_file() {
        return None;
    }
    let info = crate::trace::locate::read_run_info(path).ok()?;
    (info.trace.is_none() && locate(path).is_err()).then(|| (path.to_path_buf(), info))
}

/// The (empty) trace part of a traceless run's output.
fn no_trace_report(path: &std::path::Path) -> TraceReport {
    TraceReport {
        capture: "(none)".into(),
        format: crate::trace::CaptureFormat::Xplane,
        events: 0,
        source: format!("no trace in {}: times are the benchmark's own", path.display()),
        device: None,
        op_time: "-".into(),
        modules: Vec::new(),
        kernel: None,
        hlo_ops_from_proto: None,
        host_steps_us: Vec::new(),
        ops_by_module: Vec::new(),
        warnings: vec!["the run recorded no trace (profile_iters = 0?): no op breakdown, no pipeline figures".into()],
    }
}

/// `ratchet inspect`: prints the diagnosis (or `--json`) to stdout.
pub fn run_inspect(args: &InspectArgs) -> anyhow::Result<()> {
    let out = match build_inspect(args) {
        Ok(out) => out,
        // With --json the failure is a JSON object on stdout too (the project's error
        // envelope), so a caller parsing stdout never meets plain text.
        Err(e) if args.json => {
            let err = crate::error::Error::from(e);
            println!("{}", crate::cli::json::error(&err));
            return Err(err.into());
        }
        Err(e) => return Err(e),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        // `render_text` makes the names it lays out printable; the whole again for the rest a
        // capture can carry (its warnings, a device's name).
        print!("{}", crate::printable::block(&render_text(&out)));
    }
    Ok(())
}

fn bytes_h(b: f64) -> String {
    if b >= 1e9 {
        format!("{:.1} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1} kB", b / 1e3)
    } else {
        format!("{b:.0} B")
    }
}

/// An intensity with enough digits to be read below 1 FLOP/byte (a data-movement module's).
fn intensity_h(x: f64) -> String {
    if x.abs() < 1.0 {
        format!("{x:.4}")
    } else {
        format!("{x:.1}")
    }
}

fn hlo_line(h: &HloStats) -> String {
    format!(
        "dot {}  exponential {}  reduce {}  copy {}  fusion {}  custom-call {}  while {}  \
         ({} instructions)",
        h.dot, h.exponential, h.reduce, h.copy, h.fusion, h.custom_call, h.while_, h.total_instructions
    )
}

fn render_ops(s: &mut String, of: &str, categories: &[CategoryStat], ops: &[OpStat]) {
    let _ = writeln!(s, "\nTime by category{of} (self time per execution):");
    for c in categories {
        let _ = writeln!(s, "    {:<20} {:>10.1} us {:>6.1}%  ({} ops)", c.category, c.per_execution_us, c.fraction * 100.0, c.count);
    }
    let _ = writeln!(s, "\nTop ops{of} (self time per execution):");
    for op in ops.iter().take(15) {
        let name = line(&op.name);
        let cost = match (op.flops, op.bytes) {
            (Some(f), Some(b)) => format!("  {f:.3e} FLOPs, {}", bytes_h(b)),
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "    {:<40} {:<16} {:>10.1} us {:>6.1}%  x{}{}",
            name,
            line(&op.category),
            op.per_execution_us,
            op.fraction * 100.0,
            op.count,
            cost
        );
    }
}

/// The human-readable diagnosis.
pub fn render_text(o: &InspectOutput) -> String {
    let r = &o.report;
    let mut s = String::new();
    // Writing to a String cannot fail; `let _` keeps the formatting code flat.
    // Names come from the capture (modules, ops, planes) and the file system: each printable
    // before it is padded into a column.
    let _ = writeln!(s, "Capture:   {} ({} events)", line(&r.capture), r.events);
    let _ = writeln!(s, "Source:    {}", line(&r.source));
    if let Some(d) = &r.device {
        let _ =
            writeln!(s, "Device:    {}{}", line(&d.plane), d.device_type.as_deref().map(|t| format!(" ({})", line(t))).unwrap_or_default());
    }
    if r.kernel.is_none() {
        let _ = writeln!(s, "Op times:  {}", r.op_time);
    }
    if !r.modules.is_empty() {
        let _ = writeln!(s, "\nModules (device time; share of the device's module time):");
        let _ = writeln!(
            s,
            "  {:<44} {:>6} {:>12} {:>12} {:>12} {:>12} {:>7}  device",
            "name", "runs", "median us", "mean us", "min us", "max us", "share"
        );
        for m in &r.modules {
            let name = match &m.within {
                Some(w) => format!("{} (Pallas, in {})", line(&m.name), line(w)),
                None => line(&m.name).into_owned(),
            };
            let _ = writeln!(
                s,
                "  {:<44} {:>6} {:>12.1} {:>12.1} {:>12.1} {:>12.1} {:>6.1}%  {}",
                name,
                m.executions,
                m.median_us,
                m.mean_us,
                m.min_us,
                m.max_us,
                m.share_of_device_time * 100.0,
                line(m.device.as_deref().unwrap_or("host"))
            );
            for d in &m.devices {
                let _ = writeln!(
                    s,
                    "    on {:<41} {:>6} {:>12.1} {:>12.1} {:>12.1} {:>12.1}",
                    line(&d.device),
                    d.executions,
                    d.median_us,
                    d.mean_us,
                    d.min_us,
                    d.max_us
                );
            }
        }
    }
    if let Some(k) = &r.kernel {
        let _ = writeln!(
            s,
            "\nKernel:    {}  {} executions, median {:.1} us (min {:.1}, max {:.1})",
            line(&k.name),
            k.executions,
            k.median_us,
            k.min_us,
            k.max_us
        );
        if !r.host_steps_us.is_empty() {
            let med = crate::trace::analysis::Summary::of(&r.host_steps_us).median;
            let _ =
                writeln!(s, "Host steps: {} kernel_step annotations, median {:.1} us (dispatch + run + wait)", r.host_steps_us.len(), med);
        }
        let _ = writeln!(s, "Op times:  {}", k.op_time);
        if let (Some(f), Some(b)) = (k.cost_model_flops, k.cost_model_bytes) {
            let _ = writeln!(s, "Cost model (capture): {:.3e} FLOPs, {} per execution", f, bytes_h(b));
        }
    }
    match &o.roofline {
        Some(rf) => {
            if o.cost_source.as_deref() == Some("capture cost model") {
                let _ = writeln!(
                    s,
                    "\nRoofline from the capture's cost model (per-op flops and bytes_accessed summed per execution, as XProf's roofline tool; --flops/--bytes override)"
                );
            }
            if rf.gap_ms < 0.0 || rf.utilization > 1.0 || rf.bandwidth_fraction > 1.0 {
                let _ = writeln!(s, "\nIMPOSSIBLE figures below (util or BW above 100%, or a negative gap): inputs to check, not results");
            }
            let _ = writeln!(s, "\nBottleneck:          {}", rf.regime);
            let _ = writeln!(s, "Operational intensity:");
            let _ = writeln!(s, "    Actual (with re-reads):  {} FLOPs/byte", intensity_h(rf.intensity));
            if let Some(mi) = rf.min_traffic_intensity {
                let _ = writeln!(s, "    Minimum (perfect reuse): {mi:.1} FLOPs/byte");
            }
            let _ = writeln!(s, "    Chip ridge point:        {:.1} FLOPs/byte", rf.ridge);
            if rf.intensity < rf.ridge {
                let _ = writeln!(s, "  {:.1}x below ridge point", rf.ridge / rf.intensity);
            } else {
                let _ = writeln!(s, "  {:.1}x above ridge point", rf.intensity / rf.ridge);
            }
            let _ = writeln!(s, "Memory traffic:");
            if let Some(mb) = o.min_bytes {
                let _ = writeln!(s, "    Min (theoretical):  {}", bytes_h(mb));
            }
            if let Some(b) = o.bytes {
                let _ = writeln!(s, "    Est (with tiling):  {}", bytes_h(b));
            }
            let _ = writeln!(s, "Time decomposition:");
            let _ = writeln!(s, "    Compute-only:  {:.2} ms (if 100% of peak FLOP/s)", rf.compute_only_ms);
            let _ = writeln!(s, "    Memory-only:   {:.2} ms (if 100% BW)", rf.memory_only_ms);
            let _ = writeln!(s, "    Actual:        {:.2} ms ({})", rf.actual_ms, o.latency_source.as_deref().unwrap_or("?"));
            let _ = writeln!(s, "    Gap:           {:.2} ms", rf.gap_ms);
            let _ = writeln!(s, "Bandwidth:");
            let _ = writeln!(
                s,
                "    Achieved:      {:.1} GB/s / {:.0} GB/s ({:.1}%)",
                rf.achieved_gbps,
                o.hbm_gbps.unwrap_or(f64::NAN),
                rf.bandwidth_fraction * 100.0
            );
            let _ = writeln!(
                s,
                "Throughput:        {:.2} TFLOP/s ({:.1}% of {:.0})",
                rf.tflops,
                rf.utilization * 100.0,
                o.peak_tflops.unwrap_or(f64::NAN)
            );
        }
        None => {
            let mut missing = Vec::new();
            if o.flops.is_none() {
                missing.push("--flops");
            }
            if o.bytes.is_none() {
                missing.push("--bytes");
            }
            if o.peak_tflops.is_none() {
                missing.push("--peak-tflops");
            }
            if o.hbm_gbps.is_none() {
                missing.push("--hbm-gbps");
            }
            if o.latency_ms.is_none() {
                missing.push("a kernel time");
            }
            let _ = writeln!(
                s,
                "\nRoofline: not computed; missing {} (or a run directory whose \
                 ratchet-result.json gives flops and bytes)",
                missing.join(", ")
            );
        }
    }
    if let Some(h) = &o.hlo_from_text {
        let _ = writeln!(s, "\nHLO ({}):\n    {}", o.hlo_file.as_deref().unwrap_or("text"), hlo_line(h));
    }
    if let Some(h) = &r.hlo_ops_from_proto {
        let _ = writeln!(s, "\nHLO (embedded in the capture):\n    {}", hlo_line(h));
    }
    if !o.kernel_ops.is_empty() {
        let _ = writeln!(s, "\nKernel body ({}):", o.kernel_body_file.as_deref().unwrap_or("text"));
        for k in &o.kernel_ops {
            let _ = writeln!(s, "    {} ({}): {}", line(&k.name), line(&k.dialect), line(&k.summary()));
        }
    }
    if let Some(e) = &o.environment {
        let _ = writeln!(s, "\nMeasured with: {}", crate::diagnose::environment::summary(e));
    }
    if !o.findings.is_empty() {
        let _ = writeln!(s, "\nDiagnosis (KernelForge part 2):");
        s.push_str(&crate::diagnose::render(&o.findings));
    }
    if let Some(k) = &r.kernel {
        render_ops(&mut s, "", &k.category_breakdown, &k.op_breakdown);
    }
    for m in &r.ops_by_module {
        render_ops(&mut s, &format!(" of {}", line(&m.name)), &m.category_breakdown, &m.op_breakdown);
    }
    if !r.warnings.is_empty() {
        let _ = writeln!(s, "\nWarnings:");
        for w in &r.warnings {
            let _ = writeln!(s, "  - {}", line(w));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roofline_matches_the_articles_worked_example() {
        // Section 3.4: 138.8 GFLOP, 1.6 GB with re-reads, 6 MB minimum, 5.20 ms, v5e peaks.
        let r = Roofline::compute(138.8e9, 1.627e9, Some(6.0e6), 5.20, 197.0, 819.0);
        assert_eq!(r.regime, "MEMORY-BOUND");
        assert!((r.intensity - 85.3).abs() < 0.1, "{}", r.intensity);
        assert!((r.ridge - 240.5).abs() < 0.1);
        assert!((r.min_traffic_intensity.unwrap() - 23133.3).abs() < 0.1);
        assert!((r.compute_only_ms - 0.70).abs() < 0.01);
        assert!((r.memory_only_ms - 1.99).abs() < 0.01);
        assert!((r.gap_ms - 3.21).abs() < 0.01);
        assert!((r.achieved_gbps - 312.9).abs() < 0.1);
    }

    #[test]
    fn compute_bound_example() {
        // Section 3.3: 138.8 GFLOP, 136 MB, 2.12 ms.
        let r = Roofline::compute(138.8e9, 136e6, None, 2.12, 197.0, 819.0);
        assert_eq!((r.regime.as_str(), r.side.as_str()), ("COMPUTE-BOUND", "COMPUTE-BOUND"));
        assert!((r.gap_ms - 1.42).abs() < 0.01);
        assert!((r.utilization - 0.332).abs() < 0.001);
    }

    #[test]
    fn the_json_regime_is_the_word_every_view_uses_and_the_side_stays_beside_it() {
        // 1 GFLOP and 10 MB in 5 ms on a v5e: 0.1% of peak FLOP/s, 0.2% of bandwidth.
        let r = Roofline::compute(1e9, 1e7, None, 5.0, 197.0, 819.0);
        assert_eq!((r.regime.as_str(), r.side.as_str()), ("LATENCY-BOUND", "MEMORY-BOUND"));
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["regime"], "LATENCY-BOUND");
        assert_eq!(v["side"], "MEMORY-BOUND");
        assert!(r.view().memory_bound, "the rules read the side");
    }

    #[test]
    fn args_parse() {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: InspectArgs,
        }
        let cli = Cli::try_parse_from([
            "inspect",
            "run/",
            "--json",
            "--kernel",
            "attn",
            "--peak-tflops",
            "197",
            "--hbm-gbps",
            "819",
            "--flops",
            "1e9",
        ])
        .unwrap();
        assert!(cli.args.json);
        assert_eq!(cli.args.kernel.as_deref(), Some("attn"));
        assert_eq!(cli.args.flops, Some(1e9));
        assert_eq!(cli.args.hbm_gbps, Some(819.0));
    }
}
