//! The A/B table of seed 003 ("Generate a comparison table": step time, MXU utilization, top
//! hotspot, peak HBM, each with its delta) for two sets of runs: an experiment's incumbent and
//! candidate, or the candidates of two experiments. Every figure is the median over its side's
//! ok runs, the hotspot's too (each run's trace read), never one run a side.

use std::fmt::Write as _;

use serde::Serialize;

use crate::bench::{RunRecord, RunStatus, Side};
use crate::hardware::Hardware;
use crate::metrics;
use crate::trace::AnalyzeOptions;
use crate::units::sig;

/// The ok runs of `side`: successful and not superseded by a re-run, as every view counts them.
pub(super) fn ok_runs(runs: &[RunRecord], side: Side) -> Vec<&RunRecord> {
    runs.iter().filter(|r| r.side == side && r.status == RunStatus::Ok && !r.superseded).collect()
}

/// The hardware to judge a side by: the configured one, else its device kind's preset.
pub(super) fn hardware_of(last: &RunRecord, configured: Option<Hardware>) -> Option<Hardware> {
    configured.or_else(|| last.device.as_deref().and_then(crate::hardware::for_device_kind).map(|p| p.hw))
}

/// One side of the table: a label and its ok runs.
pub struct AbSide<'a> {
    pub label: String,
    pub runs: Vec<&'a RunRecord>,
}

impl<'a> AbSide<'a> {
    /// The ok runs of `side` among `runs` (superseded runs left out, as every view does).
    pub fn of(label: impl Into<String>, runs: &'a [RunRecord], side: Side) -> AbSide<'a> {
        AbSide { label: label.into(), runs: ok_runs(runs, side) }
    }
}

/// The most expensive op of a side: the one with the largest median share of the kernel's op
/// time over the side's runs, with its median self time per execution.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hotspot {
    pub op: String,
    /// Median share of the kernel's op time (0..1).
    pub share: f64,
    pub per_execution_us: f64,
    /// Runs whose trace gave the breakdown.
    pub runs: usize,
}

/// The table's figures; `None` where a side's runs do not give one (no hardware peaks for the
/// utilization, no readable trace for the hotspot, a CPU for the peak memory).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AbTable {
    pub baseline: String,
    pub experiment: String,
    pub baseline_runs: usize,
    pub experiment_runs: usize,
    pub step_time_ms: [Option<f64>; 2],
    /// Step time change, percent of the baseline's.
    pub step_time_delta_pct: Option<f64>,
    /// Share of the chip's peak FLOP/s (percent) at the median step time.
    pub util_pct: [Option<f64>; 2],
    /// Utilization change, percentage points.
    pub util_delta_pts: Option<f64>,
    pub hotspot: [Option<Hotspot>; 2],
    /// Change of the baseline's hotspot's own time per execution in the experiment, percent
    /// (-100 when the experiment no longer runs that op).
    pub hotspot_delta_pct: Option<f64>,
    pub peak_memory_bytes: [Option<f64>; 2],
    pub peak_memory_delta_bytes: Option<f64>,
}

const GIB: f64 = (1u64 << 30) as f64;

/// Per op, the median over the runs of its share and of its time per execution (an op missing
/// from a run counts 0 there), and how many runs gave a breakdown.
fn op_medians(runs: &[&RunRecord], kernel: Option<&str>) -> (Vec<(String, f64, f64)>, usize) {
    let breakdowns: Vec<Vec<crate::trace::OpStat>> = runs
        .iter()
        .filter_map(|r| {
            let opts = AnalyzeOptions { kernel: kernel.map(str::to_string).or_else(|| r.kernel.clone()), ..Default::default() };
            crate::trace::analyze(&r.out_dir, &opts).ok()?.kernel.map(|k| k.op_breakdown)
        })
        .filter(|b| !b.is_empty())
        .collect();
    let mut names: Vec<&str> = breakdowns.iter().flatten().map(|o| o.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let ops = names
        .iter()
        .map(|&n| {
            let of = |f: fn(&crate::trace::OpStat) -> f64| -> f64 {
                let v: Vec<f64> = breakdowns.iter().map(|b| b.iter().find(|o| o.name == n).map(f).unwrap_or(0.0)).collect();
                metrics::median(&v).unwrap_or(0.0)
            };
            (n.to_string(), of(|o| o.fraction), of(|o| o.per_execution_us))
        })
        .collect();
    (ops, breakdowns.len())
}

fn hotspot(ops: &[(String, f64, f64)], runs: usize) -> Option<Hotspot> {
    ops.iter().max_by(|a, b| a.1.total_cmp(&b.1).then_with(|| b.0.cmp(&a.0))).map(|(op, share, us)| Hotspot {
        op: op.clone(),
        share: *share,
        per_execution_us: *us,
        runs,
    })
}

/// The A/B table of `experiment` against `baseline`. `configured`: the config's hardware (else
/// each side's device preset); `kernel`: the config's kernel pattern (else each run's own).
pub fn ab_table(baseline: &AbSide<'_>, experiment: &AbSide<'_>, configured: Option<Hardware>, kernel: Option<&str>) -> AbTable {
    let sides = [baseline, experiment];
    let step = sides.map(|s| metrics::median(&s.runs.iter().filter_map(|r| r.latency_ms).collect::<Vec<_>>()));
    let util = [0, 1].map(|i| {
        let last = sides[i].runs.last()?;
        let hw = hardware_of(last, configured)?;
        metrics::roofline(last.flops, last.bytes, last.min_bytes, step[i]?, &hw).util_pct
    });
    let ops = sides.map(|s| op_medians(&s.runs, kernel));
    let hot = [hotspot(&ops[0].0, ops[0].1), hotspot(&ops[1].0, ops[1].1)];
    let hotspot_delta_pct = hot[0].as_ref().filter(|h| h.per_execution_us > 0.0 && ops[1].1 > 0).map(|h| {
        let after = ops[1].0.iter().find(|o| o.0 == h.op).map(|o| o.2).unwrap_or(0.0);
        (after / h.per_execution_us - 1.0) * 100.0
    });
    let peak = sides.map(|s| metrics::median(&s.runs.iter().filter_map(|r| r.peak_memory_bytes).collect::<Vec<_>>()));
    let diff = |v: &[Option<f64>; 2]| Some(v[1]? - v[0]?);
    AbTable {
        baseline: baseline.label.clone(),
        experiment: experiment.label.clone(),
        baseline_runs: baseline.runs.len(),
        experiment_runs: experiment.runs.len(),
        step_time_delta_pct: step[0].zip(step[1]).filter(|(a, _)| *a > 0.0).map(|(a, b)| (b / a - 1.0) * 100.0),
        step_time_ms: step,
        util_delta_pts: diff(&util),
        util_pct: util,
        hotspot_delta_pct,
        hotspot: hot,
        peak_memory_delta_bytes: diff(&peak),
        peak_memory_bytes: peak,
    }
}

/// The table as text, with a line on what each figure is.
pub fn render(t: &AbTable) -> String {
    let dash = || "-".to_string();
    let cells = |v: &[Option<f64>; 2], f: &dyn Fn(f64) -> String| [v[0].map(f).unwrap_or_else(dash), v[1].map(f).unwrap_or_else(dash)];
    let hot = |h: &Option<Hotspot>| h.as_ref().map(|h| format!("{} ({:.1}%)", h.op, h.share * 100.0)).unwrap_or_else(dash);
    let rows: [(&str, [String; 2], String); 4] = [
        (
            "step time",
            cells(&t.step_time_ms, &|v| format!("{} ms", sig(v, 4))),
            t.step_time_delta_pct.map(|d| format!("{d:+.1}%")).unwrap_or_else(dash),
        ),
        ("MXU util", cells(&t.util_pct, &|v| format!("{v:.2}%")), t.util_delta_pts.map(|d| format!("{d:+.2} pts")).unwrap_or_else(dash)),
        (
            "top hotspot",
            [hot(&t.hotspot[0]), hot(&t.hotspot[1])],
            t.hotspot_delta_pct.map(|d| format!("{d:+.1}% its time")).unwrap_or_else(dash),
        ),
        (
            "peak HBM",
            cells(&t.peak_memory_bytes, &|v| format!("{:.2} GiB", v / GIB)),
            t.peak_memory_delta_bytes.map(|d| format!("{:+.2} GiB", d / GIB)).unwrap_or_else(dash),
        ),
    ];
    let w = rows.iter().flat_map(|r| [r.1[0].len(), r.1[1].len()]).chain([t.baseline.len(), t.experiment.len()]).max().unwrap_or(10);
    let mut o = String::new();
    let _ = writeln!(o, "\nA/B: {} vs {} (medians over {} and {} ok runs)", t.experiment, t.baseline, t.experiment_runs, t.baseline_runs);
    let _ = writeln!(o, "  {:<12} {:<w$}  {:<w$}  delta", "metric", t.baseline, t.experiment);
    for (name, [a, b], d) in rows {
        let _ = writeln!(o, "  {name:<12} {a:<w$}  {b:<w$}  {d}");
    }
    let mut notes = Vec::new();
    if t.util_pct.iter().all(Option::is_none) {
        notes.push("MXU util needs the chip's peaks ([hardware] in ratchet.toml) and the kernel's FLOPs");
    }
    if t.hotspot.iter().all(Option::is_none) {
        notes.push("the hotspot needs the runs' traces (profile_iters > 0)");
    }
    if t.peak_memory_bytes.iter().all(Option::is_none) {
        notes.push("peak HBM is the device's memory_stats(), which a CPU backend does not give");
    }
    for n in notes {
        let _ = writeln!(o, "  ({n})");
    }
    o
}
