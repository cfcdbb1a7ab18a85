//! The sections of `ratchet show ID` below the row: the incumbent's figures beside the
//! candidate's (util, bandwidth, regime word, gap, HLO and kernel-body op counts, tunables, what
//! each was measured with), the candidate's diagnosis, and the spill cliffs of the results.

use std::fmt::Write as _;

use crate::bench::{RunRecord, Side};
use crate::hardware::Hardware;
use crate::metrics::{self, Metrics};
use crate::store::ResultRow;
use crate::units::sig;

use super::compare::{hardware_of, ok_runs};
use super::environment::{self, Environment};
use super::{cliff, Finding, Inputs, RooflineView};

/// What one side's runs show.
#[derive(Debug, Clone, Default)]
pub struct SideFigures {
    pub runs: usize,
    pub metrics: Option<Metrics>,
    pub hw: Option<Hardware>,
    pub last: Option<RunRecord>,
}

/// One side's medians and roofline.
pub fn side_figures(runs: &[RunRecord], side: Side, configured: Option<Hardware>) -> SideFigures {
    let ok = ok_runs(runs, side);
    let Some(last) = ok.last().map(|r| (*r).clone()) else { return SideFigures::default() };
    let hw = hardware_of(&last, configured);
    let lat = metrics::median(&ok.iter().filter_map(|r| r.latency_ms).collect::<Vec<_>>());
    let m = match (lat, hw) {
        (Some(l), Some(hw)) => Some(metrics::roofline(last.flops, last.bytes, last.min_bytes, l, &hw)),
        _ => None,
    };
    SideFigures { runs: ok.len(), metrics: m, hw, last: Some(last) }
}

/// The diagnosis rules' view of a side's roofline.
pub fn view(m: &Metrics, hw: &Hardware) -> Option<RooflineView> {
    Some(RooflineView {
        memory_bound: m.regime? == metrics::Regime::MemoryBound,
        intensity: m.intensity?,
        ridge: metrics::ridge_point(hw),
        compute_only_ms: m.compute_only_ms?,
        memory_only_ms: m.memory_only_ms?,
        actual_ms: m.latency_ms,
        util: m.util_pct? / 100.0,
        bw: m.bw_pct? / 100.0,
    })
}

fn regime_cell(f: &SideFigures) -> String {
    let Some(m) = &f.metrics else { return "-".into() };
    match (m.regime, m.gap_ms) {
        (Some(r), Some(g)) => {
            let share = super::gap_share(g, m.latency_ms).unwrap_or(0.0);
            super::regime_word(r == metrics::Regime::MemoryBound, share).to_string()
        }
        (Some(r), None) => r.as_str().to_string(),
        _ => "-".into(),
    }
}

fn kernel_cell(r: Option<&RunRecord>) -> String {
    r.and_then(|r| r.kernel_ops.first())
        .map(|k| format!("{}/{}/{}/{}/{}", k.matmul, k.exp, k.reduce, k.dma, k.copy))
        .unwrap_or_else(|| "-".into())
}

fn hlo_cell(r: Option<&RunRecord>) -> String {
    r.and_then(|r| r.hlo_stats.as_ref())
        .map(|h| {
            let loops = if h.loop_copies > 0 { format!(" ({} loop)", h.loop_copies) } else { String::new() };
            format!("{}/{}/{}/{}{loops}", h.dot, h.exponential, h.reduce, h.copy)
        })
        .unwrap_or_else(|| "-".into())
}

fn tunables_cell(r: Option<&RunRecord>) -> String {
    let cell = r.map(|r| super::columns::meta_cell(&[r])).unwrap_or_default();
    let t: Vec<String> = super::columns::parse_cell(&cell)
        .into_iter()
        .filter(|(k, _)| k.chars().next().is_some_and(|c| c.is_ascii_uppercase()))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if t.is_empty() {
        "-".into()
    } else {
        t.join(" ")
    }
}

/// The A/B table, the candidate's findings, the measured-with lines and the cliffs.
/// `all_runs`: every run of the results (for the incumbents' points of the spill-cliff check).
pub fn render(
    row: &ResultRow,
    runs: &[RunRecord],
    all_rows: &[ResultRow],
    all_runs: &[RunRecord],
    configured: Option<Hardware>,
    kernel: Option<String>,
) -> String {
    let mut o = String::new();
    let inc = side_figures(runs, Side::Incumbent, configured);
    let cand = side_figures(runs, Side::Candidate, configured);
    if inc.last.is_some() && cand.last.is_some() {
        o.push_str(&super::compare::render(&ab_table(runs, configured, kernel.as_deref())));
    }
    if inc.last.is_some() || cand.last.is_some() {
        let _ = writeln!(o, "\nincumbent vs candidate (median latency over each side's ok runs; roofline from it)");
        let _ = writeln!(o, "  {:<22} {:>22} {:>22}", "", "incumbent", "candidate");
        let m = |f: &SideFigures, g: &dyn Fn(&Metrics) -> Option<String>| f.metrics.as_ref().and_then(g).unwrap_or_else(|| "-".into());
        let lines: Vec<(&str, String, String)> = vec![
            ("runs", inc.runs.to_string(), cand.runs.to_string()),
            (
                "latency",
                m(&inc, &|x| Some(format!("{} ms", sig(x.latency_ms, 4)))),
                m(&cand, &|x| Some(format!("{} ms", sig(x.latency_ms, 4)))),
            ),
            ("util", m(&inc, &|x| x.util_pct.map(|u| format!("{u:.2}%"))), m(&cand, &|x| x.util_pct.map(|u| format!("{u:.2}%")))),
            ("bandwidth", m(&inc, &|x| x.bw_pct.map(|u| format!("{u:.2}%"))), m(&cand, &|x| x.bw_pct.map(|u| format!("{u:.2}%")))),
            ("intensity (FLOPs/B)", m(&inc, &|x| x.intensity.map(|i| sig(i, 4))), m(&cand, &|x| x.intensity.map(|i| sig(i, 4)))),
            ("regime", regime_cell(&inc), regime_cell(&cand)),
            (
                "gap",
                m(&inc, &|x| x.gap_ms.map(|g| format!("{} ms ({:.0}%)", sig(g, 3), g / x.latency_ms * 100.0))),
                m(&cand, &|x| x.gap_ms.map(|g| format!("{} ms ({:.0}%)", sig(g, 3), g / x.latency_ms * 100.0))),
            ),
            ("HLO dot/exp/red/copy", hlo_cell(inc.last.as_ref()), hlo_cell(cand.last.as_ref())),
            ("kernel mm/exp/red/dma/cp", kernel_cell(inc.last.as_ref()), kernel_cell(cand.last.as_ref())),
            ("tunables", tunables_cell(inc.last.as_ref()), tunables_cell(cand.last.as_ref())),
        ];
        for (name, a, b) in lines {
            let _ = writeln!(o, "  {name:<22} {a:>22} {b:>22}");
        }
        let env_of = |f: &SideFigures| f.last.as_ref().and_then(|r| r.environment.clone());
        let (ie, ce): (Option<Environment>, Option<Environment>) = (env_of(&inc), env_of(&cand));
        if ie.is_some() || ce.is_some() {
            let _ = writeln!(o, "\nmeasured with");
            for (side, e) in [("incumbent", &ie), ("candidate", &ce)] {
                let _ = writeln!(o, "  {side:<10} {}", e.as_ref().map(environment::summary).unwrap_or_else(|| "(not recorded)".into()));
            }
            if let (Some(a), Some(b)) = (&ie, &ce) {
                if let Some(w) = environment::difference_warning(a, b) {
                    let _ = writeln!(o, "  WARNING: {w}");
                }
            }
        }
    }

    let findings = findings_of(&cand, kernel);
    if !findings.is_empty() {
        let _ = writeln!(o, "\ndiagnosis of the candidate (KernelForge part 2)");
        o.push_str(&super::render(&findings));
    }

    let cliffs = cliffs(all_rows, all_runs);
    if !cliffs.is_empty() {
        let _ = writeln!(o, "\nspill cliffs across the results (latency or gap jumps as a block size grows)");
        for c in &cliffs {
            let mark = if c.ids.contains(&row.id) { "  <- this experiment" } else { "" };
            let ids: Vec<String> = c.ids.iter().map(u64::to_string).collect();
            let _ = writeln!(o, "  {} [experiment {}]{mark}", c.message(), ids.join(", "));
        }
    }
    o
}

/// The seed's A/B table of an experiment: its incumbent's runs against its candidate's.
pub fn ab_table(runs: &[RunRecord], configured: Option<Hardware>, kernel: Option<&str>) -> super::compare::AbTable {
    use super::compare::AbSide;
    super::compare::ab_table(
        &AbSide::of("incumbent", runs, Side::Incumbent),
        &AbSide::of("candidate", runs, Side::Candidate),
        configured,
        kernel,
    )
}

/// The candidate's diagnosis: the rules run on its last ok run (figures, trace, HLO, kernel
/// body), the same list for the text and `show --json`.
pub fn candidate_findings(runs: &[RunRecord], configured: Option<Hardware>, kernel: Option<String>) -> Vec<Finding> {
    findings_of(&side_figures(runs, Side::Candidate, configured), kernel)
}

/// The rules run on one side's figures (its last ok run's trace, HLO and kernel body).
fn findings_of(cand: &SideFigures, kernel: Option<String>) -> Vec<Finding> {
    let Some(last) = &cand.last else { return vec![] };
    let report = crate::trace::analyze(&last.out_dir, &crate::trace::AnalyzeOptions { kernel, ..Default::default() }).ok();
    let trace = report.as_ref().and_then(|r| r.kernel.clone());
    let devices = match (&report, &trace) {
        (Some(r), Some(k)) => r.modules.iter().find(|m| m.name == k.name).map(|m| m.devices.clone()).unwrap_or_default(),
        _ => Vec::new(),
    };
    let steps = report.as_ref().map(|r| r.host_steps_us.clone()).unwrap_or_default();
    let roof = match (&cand.metrics, &cand.hw) {
        (Some(m), Some(hw)) => view(m, hw),
        _ => None,
    };
    super::diagnose(&Inputs {
        roofline: roof,
        bytes: last.bytes,
        min_bytes: last.min_bytes,
        meta: last.meta.as_ref(),
        hlo: last.hlo_stats.as_ref(),
        kernel_ops: &last.kernel_ops,
        bubble_fraction: trace.as_ref().and_then(super::bubble_fraction),
        dma_overlap: trace.as_ref().and_then(|k| k.pipeline.as_ref()).map(|p| p.dma_overlap),
        exp_share: trace.as_ref().and_then(super::exp_share),
        blocks_seen: trace.as_ref().and_then(super::blocks_seen),
        copy_share: trace.as_ref().and_then(super::copy_share),
        backend: last.backend.as_deref(),
        flops: last.flops,
        kernel: trace.as_ref(),
        peaks: cand.hw.as_ref().map(|h| (h.peak_tflops, h.hbm_gbps)),
        sms: last.device.as_deref().and_then(crate::hardware::gpu_sms),
        devices: &devices,
        host_steps_us: &steps,
    })
}

/// The spill cliffs across the results (candidates' and incumbents' points).
pub fn cliffs(all_rows: &[ResultRow], all_runs: &[RunRecord]) -> Vec<cliff::Cliff> {
    let mut points = cliff::candidates(all_rows);
    points.extend(cliff::incumbents(all_runs, all_rows));
    cliff::detect_points(&points)
}
