//! Where a run's seconds go: each phase's median over an experiment's runs and its share of the
//! process's wall, computed from the run records alone (`ratchet show` prints it, `--json` carries it).

use super::{RunRecord, RunStatus};
use crate::metrics::median;
use serde::Serialize;

/// The benchmark's phases in the order they happen (python/ratchet_bench.py `PHASES`); a name a
/// newer helper adds is listed after these, by name.
pub const PHASE_ORDER: &[&str] = &[
    "start_to_import",
    "imports",
    "setup",
    "backend_init",
    "compile",
    "hlo_dump",
    "warmup",
    "measured",
    "profiled",
    "profiler_overhead",
    "snapshots",
    "check",
    "result_write",
];
/// The process's wall outside every phase it reported: the result write itself, the summary,
/// the interpreter's exit (and, without a spawn stamp, its start).
pub const OUTSIDE_PHASES: &str = "outside_phases";
/// Ratchet's own time from the process's exit to the run's record being complete.
pub const AFTER_EXIT: &str = "ratchet_after_exit";

/// One phase's figures over an experiment's runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseFigure {
    pub name: String,
    /// Median over the runs that report it, in ms.
    pub median_ms: f64,
    /// Median over the same runs of the phase's share of that run's process wall, in %.
    pub share_pct: f64,
    /// How many runs report it.
    pub runs: usize,
}

/// The kernel's own share of the wall: calls x median call time / process wall, run by run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelShare {
    /// Median over the runs of `kernel_calls`.
    pub calls: f64,
    /// Median over the runs of the run's median timed call (`host_latency_ms`).
    pub call_ms: f64,
    /// Median over the runs of kernel_calls x host_latency_ms / wall, in %.
    pub share_pct: f64,
    pub runs: usize,
}

/// An experiment's breakdown, over its successful runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Breakdown {
    /// Successful runs the figures are taken over.
    pub runs: usize,
    /// How many of them were forked from a pre-imported parent (docs/protocol.md, "Forked
    /// runs"): their `imports` are the parent's, paid once.
    pub forked: usize,
    /// Median process wall (spawn to exit, `wall_s`), in ms.
    pub wall_ms: f64,
    /// The benchmark's phases in process order, then `outside_phases`, then ratchet's
    /// `ratchet_after_exit` (outside the process's wall, but shared as a part of it).
    pub phases: Vec<PhaseFigure>,
    pub kernel: Option<KernelShare>,
}

fn figure(name: &str, per_run: &[(f64, f64)]) -> Option<PhaseFigure> {
    let secs: Vec<f64> = per_run.iter().map(|(s, _)| *s).collect();
    let shares: Vec<f64> = per_run.iter().map(|(s, wall)| s / wall * 100.0).collect();
    Some(PhaseFigure { name: name.into(), median_ms: median(&secs)? * 1e3, share_pct: median(&shares)?, runs: per_run.len() })
}

/// The breakdown of `runs` (an experiment's records): its successful runs with a positive wall.
/// `None` when no such run exists.
pub fn breakdown(runs: &[RunRecord]) -> Option<Breakdown> {
    let ok: Vec<&RunRecord> = runs.iter().filter(|r| r.status == RunStatus::Ok && r.wall_s > 0.0).collect();
    let wall_ms = median(&ok.iter().map(|r| r.wall_s).collect::<Vec<_>>())? * 1e3;
    let mut names: Vec<String> = PHASE_ORDER.iter().map(|s| s.to_string()).collect();
    for r in &ok {
        for k in r.phases_s.iter().flatten().map(|(k, _)| k) {
            if !names.contains(k) {
                names.push(k.clone());
            }
        }
    }
    let mut phases: Vec<PhaseFigure> = names
        .iter()
        .filter_map(|n| {
            let per_run: Vec<(f64, f64)> = ok.iter().filter_map(|r| Some((*r.phases_s.as_ref()?.get(n)?, r.wall_s))).collect();
            figure(n, &per_run)
        })
        .collect();
    let outside: Vec<(f64, f64)> =
        ok.iter().filter_map(|r| Some(((r.wall_s - r.phases_s.as_ref()?.values().sum::<f64>()).max(0.0), r.wall_s))).collect();
    phases.extend(figure(OUTSIDE_PHASES, &outside));
    let after: Vec<(f64, f64)> = ok.iter().filter_map(|r| Some((r.after_exit_s?, r.wall_s))).collect();
    phases.extend(figure(AFTER_EXIT, &after));
    let kernel_runs: Vec<(f64, f64, f64)> = ok
        .iter()
        .filter_map(|r| {
            let (calls, call_ms) = (r.kernel_calls? as f64, r.host_latency_ms?);
            Some((calls, call_ms, calls * call_ms / (r.wall_s * 1e3) * 100.0))
        })
        .collect();
    let col = |i: usize| kernel_runs.iter().map(|k| [k.0, k.1, k.2][i]).collect::<Vec<_>>();
    let kernel = match (median(&col(0)), median(&col(1)), median(&col(2))) {
        (Some(calls), Some(call_ms), Some(share_pct)) => Some(KernelShare { calls, call_ms, share_pct, runs: kernel_runs.len() }),
        _ => None,
    };
    let forked = ok.iter().filter(|r| r.forked).count();
    Some(Breakdown { runs: ok.len(), forked, wall_ms, phases, kernel })
}

/// A share as `show` prints it: one decimal under 10%, none above.
pub fn fmt_share(pct: f64) -> String {
    if pct < 10.0 {
        format!("{pct:.1}%")
    } else {
        format!("{pct:.0}%")
    }
}

/// A time in ms as `show` prints it: whole ms from 100 up, else three significant digits.
pub fn fmt_ms(ms: f64) -> String {
    match ms {
        m if m >= 100.0 => format!("{m:.0} ms"),
        m if m >= 10.0 => format!("{m:.1} ms"),
        m if m >= 1.0 => format!("{m:.2} ms"),
        m => format!("{} ms", crate::units::sig(m, 3)),
    }
}

/// A median count of calls: whole, or with the half an even number of runs can give.
fn fmt_calls(calls: f64) -> String {
    if calls.fract() == 0.0 {
        format!("{calls:.0}")
    } else {
        format!("{calls:.1}")
    }
}

/// The breakdown as a few lines: a heading, the phases wrapped at `width`, the kernel's share.
pub fn render(b: &Breakdown, width: usize) -> String {
    let forked = match b.forked {
        0 => String::new(),
        n if n == b.runs => ", each forked from a pre-imported parent".to_string(),
        n => format!(", {n} forked from a pre-imported parent"),
    };
    let mut o = format!(
        "\nwhere a run's seconds go ({} ok runs{forked}, median wall {}; per phase its median and % of the wall)\n",
        b.runs,
        fmt_ms(b.wall_ms)
    );
    let mut line = String::from(" ");
    for p in &b.phases {
        let cell = format!(" {} {} {}", p.name, fmt_ms(p.median_ms), fmt_share(p.share_pct));
        if line.len() > 1 && line.len() + cell.len() + 2 > width {
            o.push_str(&line);
            o.push('\n');
            line = String::from(" ");
        }
        if line.len() > 1 {
            line.push_str(" ·");
        }
        line.push_str(&cell);
    }
    if line.len() > 1 {
        o.push_str(&line);
        o.push('\n');
    }
    if let Some(k) = &b.kernel {
        o.push_str(&format!(
            "  kernel {} of the wall ({} calls x {} median call)\n",
            fmt_share(k.share_pct),
            fmt_calls(k.calls),
            fmt_ms(k.call_ms)
        ));
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(wall_s: f64, phases: &[(&str, f64)], after: Option<f64>, calls: Option<u64>, call_ms: Option<f64>) -> RunRecord {
        let mut r: RunRecord = serde_json::from_str(
            r#"{"experiment":"1","run":0,"side":"candidate","commit":"c","time":"t","status":"ok","wall_s":1.0,"out_dir":"/x",
                "latency_ms":null,"latency_source":null,"value":null,"flops":null,"bytes":null,"min_bytes":null}"#,
        )
        .unwrap();
        r.wall_s = wall_s;
        r.phases_s = (!phases.is_empty()).then(|| phases.iter().map(|(k, v)| (k.to_string(), *v)).collect());
        r.after_exit_s = after;
        r.kernel_calls = calls;
        r.host_latency_ms = call_ms;
        r
    }

    #[test]
    fn phases_come_in_process_order_with_later_names_after() {
        let r = rec(2.0, &[("zz_new", 0.1), ("compile", 0.5), ("imports", 1.0)], Some(0.02), Some(10), Some(20.0));
        let b = breakdown(&[r]).unwrap();
        let names: Vec<&str> = b.phases.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["imports", "compile", "zz_new", OUTSIDE_PHASES, AFTER_EXIT]);
        // 2 s wall less 1.6 s of phases; 10 calls x 20 ms = 0.2 s = 10% of the wall.
        assert!((b.phases[3].median_ms - 400.0).abs() < 1e-9);
        assert!((b.kernel.unwrap().share_pct - 10.0).abs() < 1e-9);
    }

    #[test]
    fn runs_without_phases_give_their_wall_and_bookkeeping_only() {
        let mut crashed = rec(9.0, &[("imports", 8.0)], Some(1.0), None, None);
        crashed.status = RunStatus::Crash;
        let b = breakdown(&[rec(1.0, &[], Some(0.01), None, None), crashed]).unwrap();
        assert_eq!(b.runs, 1);
        assert_eq!(b.wall_ms, 1000.0);
        assert_eq!(b.phases.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), [AFTER_EXIT]);
        assert!(b.kernel.is_none());
        assert!(breakdown(&[]).is_none());
    }

    #[test]
    fn shares_are_medians_of_each_runs_own_share() {
        // 1 s of 2 s (50%), 1 s of 4 s (25%), 3 s of 4 s (75%): median 1 s, median share 50%.
        let runs = [
            rec(2.0, &[("imports", 1.0)], None, None, None),
            rec(4.0, &[("imports", 1.0)], None, None, None),
            rec(4.0, &[("imports", 3.0)], None, None, None),
        ];
        let b = breakdown(&runs).unwrap();
        assert_eq!((b.phases[0].median_ms, b.phases[0].share_pct, b.phases[0].runs), (1000.0, 50.0, 3));
        assert_eq!(b.wall_ms, 4000.0);
    }

    #[test]
    fn the_text_is_a_few_lines_within_the_width() {
        let phases: Vec<(&str, f64)> = PHASE_ORDER.iter().map(|p| (*p, 0.1)).collect();
        let b = breakdown(&[rec(3.0, &phases, Some(0.05), Some(14), Some(27.0))]).unwrap();
        let text = render(&b, 100);
        assert!(text.lines().count() <= 7, "{text}");
        assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
        assert!(text.contains("kernel 13% of the wall (14 calls x 27.0 ms median call)"), "{text}");
        assert!(!text.contains("forked"), "{text}");
    }

    #[test]
    fn forked_runs_are_counted_and_named() {
        let mut forked = rec(1.0, &[("imports", 0.0)], None, None, None);
        forked.forked = true;
        let plain = rec(3.0, &[("imports", 2.0)], None, None, None);
        let b = breakdown(&[forked.clone(), plain]).unwrap();
        assert_eq!((b.runs, b.forked), (2, 1));
        assert!(render(&b, 100).contains("(2 ok runs, 1 forked from a pre-imported parent,"), "{}", render(&b, 100));
        let all = breakdown(&[forked.clone(), forked]).unwrap();
        assert!(render(&all, 100).contains("(2 ok runs, each forked from a pre-imported parent,"), "{}", render(&all, 100));
    }
}
