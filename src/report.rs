//! Showing results: the terminal table (kept rows marked, the progression of the best value
//! visible), and the same rows as CSV, JSON or Markdown from the one in-memory row type.

use crate::store::{ResultRow, Status};
use crate::vcs::short;
use comfy_table::{presets, Attribute, Cell, CellAlignment, Color, ContentArrangement, Table};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    #[default]
    Table,
    Csv,
    Json,
    Md,
}

fn num(v: Option<f64>, digits: usize) -> String {
    v.map(|x| sig(x, digits)).unwrap_or_else(|| "-".into())
}

/// Moved to [`crate::units`]; re-exported so `report::sig` keeps working.
pub use crate::units::sig;

fn delta(r: &ResultRow) -> String {
    match (r.delta_pct, r.ci_low_pct, r.ci_high_pct) {
        (Some(d), Some(lo), Some(hi)) => format!("{d:+.1}% [{lo:+.1}, {hi:+.1}]"),
        (Some(d), _, _) => format!("{d:+.1}%"),
        _ => "-".into(),
    }
}

fn mark(s: Status) -> &'static str {
    match s {
        Status::Keep => "✔ keep",
        Status::Revert => "· revert",
        Status::Inconclusive => "? inconclusive",
        Status::Unconfirmed => "? unconfirmed",
        Status::NoOp => "· no-op",
        Status::Crash => "✗ crash",
        Status::Timeout => "✗ timeout",
        Status::Invalid => "✗ invalid",
        Status::Interrupted => "✗ interrupted",
        Status::Error => "✗ error",
        Status::Skipped => "- skipped",
        Status::Refused => "- refused",
    }
}

/// The best value of the deciding metric after each row: the value a keep brings, or the one
/// before. The first measured incumbent value starts the progression.
pub fn progression(rows: &[ResultRow]) -> Vec<Option<f64>> {
    let mut best: Option<f64> = None;
    rows.iter()
        .map(|r| {
            if best.is_none() {
                best = r.incumbent_value;
            }
            if r.status == Status::Keep {
                best = r.value.or(best);
            }
            best
        })
        .collect()
}

/// The gain of the best value over the first measured baseline, in percent (positive = better).
fn gain_pct(metric: &str, first: f64, best: f64) -> f64 {
    if metric == "latency" {
        (first / best - 1.0) * 100.0
    } else {
        (best / first - 1.0) * 100.0
    }
}

/// "score 1.23 -> 4.56 (+270.7% over the first baseline)", over all rows.
pub fn gain_line(rows: &[ResultRow]) -> Option<String> {
    let metric = rows.last()?.metric.clone();
    let first = rows.iter().find_map(|r| r.incumbent_value)?;
    let last = progression(rows).into_iter().flatten().last()?;
    let line = format!("{metric} {} -> {} ({:+.1}% over the first baseline)", sig(first, 3), sig(last, 3), gain_pct(&metric, first, last));
    Some(match confirmed_gain_pct(rows) {
        Some(g) => format!("{line}; confirmation batches alone: {g:+.1}%"),
        None => line,
    })
}

/// The kept rows' confirmation-only estimates compounded, in percent of the metric: the
/// best-so-far story on figures free of the first phase's selection (a kept marginal gain's
/// pooled estimate overstates it). `None` when no kept row has one.
pub fn confirmed_gain_pct(rows: &[ResultRow]) -> Option<f64> {
    let kept: Vec<f64> = rows.iter().filter(|r| r.status == Status::Keep).filter_map(|r| r.confirm_delta_pct).collect();
    (!kept.is_empty()).then(|| (kept.iter().map(|g| 1.0 + g / 100.0).product::<f64>() - 1.0) * 100.0)
}

/// Counts by status, "3 kept, 2 reverted, 1 crash".
pub fn status_counts(rows: &[ResultRow]) -> String {
    let mut parts = vec![];
    for s in Status::ALL {
        let n = rows.iter().filter(|r| r.status == s).count();
        if n > 0 {
            let name = match s {
                Status::Keep => "kept",
                Status::Revert => "reverted",
                s => s.as_str(),
            };
            parts.push(format!("{n} {name}"));
        }
    }
    parts.join(", ")
}

/// Which rows of the whole table to show, in which order; the best-so-far progression and the
/// gain stay those of the whole table, so a filter does not rewrite history.
#[derive(Debug, Clone)]
pub struct View<'a> {
    pub all: &'a [ResultRow],
    /// Indices into `all`, in display order.
    pub shown: Vec<usize>,
    /// What was filtered, for the footer ("" when nothing was).
    pub filter: String,
}

impl<'a> View<'a> {
    pub fn all(rows: &'a [ResultRow]) -> View<'a> {
        View { all: rows, shown: (0..rows.len()).collect(), filter: String::new() }
    }

    pub fn rows(&self) -> Vec<ResultRow> {
        self.shown.iter().map(|&i| self.all[i].clone()).collect()
    }
}

/// The morning review: a readable, aligned table for a terminal, and the night's story under it.
pub fn table(view: &View, color: bool) -> String {
    let all = view.all;
    if all.is_empty() {
        return "no experiments yet: run `ratchet \"experiment: ...\"` after editing the kernel, or `ratchet sweep`".into();
    }
    let metric = all.last().map(|r| r.metric.clone()).unwrap_or_default();
    let mut t = Table::new();
    t.load_preset(presets::UTF8_HORIZONTAL_ONLY).set_content_arrangement(ContentArrangement::Dynamic);
    if !color {
        t.force_no_tty();
    }
    t.set_header(vec![
        "id",
        "status",
        "commit",
        "message",
        &metric,
        "best",
        "gain",
        "Δ [CI]",
        "p",
        "latency ms",
        "util %",
        "regime",
        "runs",
    ]);
    let best = progression(all);
    let first = all.iter().find_map(|r| r.incumbent_value);
    for &i in &view.shown {
        let (r, b) = (&all[i], best[i]);
        let digits = if r.metric == "latency" { 3 } else { 2 };
        let mut status = Cell::new(mark(r.status));
        let mut value = Cell::new(num(r.value, digits)).set_alignment(CellAlignment::Right);
        if color {
            status = match r.status {
                Status::Keep => status.fg(Color::Green).add_attribute(Attribute::Bold),
                Status::Revert | Status::Skipped | Status::NoOp => status,
                Status::Inconclusive => status.fg(Color::Yellow),
                _ => status.fg(Color::Red),
            };
            if r.status == Status::Keep {
                value = value.add_attribute(Attribute::Bold);
            }
        }
        let gain = match (first, b) {
            (Some(f), Some(b)) => format!("{:+.1}%", gain_pct(&r.metric, f, b)),
            _ => "-".into(),
        };
        let msg: String = r.message.lines().next().unwrap_or("").chars().take(48).collect();
        let commit = if r.commit.is_empty() { "-" } else { short(&r.commit) };
        t.add_row(vec![
            Cell::new(r.id),
            status,
            Cell::new(commit),
            Cell::new(msg),
            value,
            Cell::new(num(b, digits)).set_alignment(CellAlignment::Right),
            Cell::new(gain).set_alignment(CellAlignment::Right),
            Cell::new(delta(r)).set_alignment(CellAlignment::Right),
            Cell::new(r.p_value.map(crate::stats::fmt_p).unwrap_or("-".into())).set_alignment(CellAlignment::Right),
            Cell::new(num(r.latency_ms, 3)).set_alignment(CellAlignment::Right),
            Cell::new(num(r.util_pct, 1)).set_alignment(CellAlignment::Right),
            Cell::new(r.regime.clone().unwrap_or("-".into())),
            Cell::new(r.runs).set_alignment(CellAlignment::Right),
        ]);
    }
    let kept = all.iter().filter(|r| r.status == Status::Keep).count();
    let runs: u64 = all.iter().map(|r| r.runs as u64).sum();
    let wall: f64 = all.iter().map(|r| r.wall_s).sum();
    let mut out = if view.shown.is_empty() { format!("no experiment matches {}", view.filter) } else { t.to_string() };
    let others: Vec<ResultRow> = all.iter().filter(|r| r.status != Status::Keep).cloned().collect();
    let others = if others.is_empty() { String::new() } else { format!(" ({})", status_counts(&others)) };
    out.push_str(&format!("\n{} experiments, {} kept{others}", all.len(), kept));
    if let Some(g) = gain_line(all) {
        out.push_str(&format!("; {g}"));
    }
    out.push_str(&format!("\n{runs} benchmark runs, {} of experiments", crate::units::fmt_duration(wall)));
    if !view.filter.is_empty() && !view.shown.is_empty() {
        out.push_str(&format!("\nshowing {} of {} ({})", view.shown.len(), all.len(), view.filter));
    }
    out
}

pub fn csv(rows: &[ResultRow]) -> String {
    let mut w = csv::Writer::from_writer(vec![]);
    for r in rows {
        w.serialize(r).expect("rows serialize");
    }
    if rows.is_empty() {
        // Still print the header so scripts see the columns.
        return COLUMNS.join(",") + "\n";
    }
    String::from_utf8(w.into_inner().expect("in-memory writer")).expect("csv is utf-8")
}

pub fn json(rows: &[ResultRow]) -> String {
    serde_json::to_string_pretty(rows).expect("rows serialize")
}

/// The Markdown table's columns (names as in the CSV; `best` is the best-so-far value).
pub const MD_COLUMNS: &[&str] = &[
    "id",
    "status",
    "commit",
    "message",
    "tags",
    "value",
    "best",
    "delta_pct",
    "ci_low_pct",
    "ci_high_pct",
    "p_value",
    "latency_ms",
    "util_pct",
    "regime",
    "runs",
];

pub fn markdown(view: &View) -> String {
    let esc = |s: &str| s.replace('|', "\\|").replace('\n', " ");
    let mut out = format!("| {} |\n", MD_COLUMNS.join(" | "));
    out.push_str("|---:|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|\n");
    let best = progression(view.all);
    let f = |v: Option<f64>, d: usize| v.map(|x| sig(x, d)).unwrap_or_default();
    for &i in &view.shown {
        let r = &view.all[i];
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.id,
            if r.status == Status::Keep { "**keep**" } else { r.status.as_str() },
            if r.commit.is_empty() { String::new() } else { format!("`{}`", short(&r.commit)) },
            esc(&r.message),
            esc(&r.tags.replace(';', ", ")),
            f(r.value, 3),
            f(best[i], 3),
            f(r.delta_pct, 2),
            f(r.ci_low_pct, 2),
            f(r.ci_high_pct, 2),
            r.p_value.map(crate::stats::fmt_p).unwrap_or_default(),
            f(r.latency_ms, 3),
            f(r.util_pct, 1),
            r.regime.as_deref().unwrap_or(""),
            r.runs
        ));
    }
    out
}

/// The CSV columns, in order (kept in step with `ResultRow` by a test).
pub const COLUMNS: &[&str] = &[
    "id",
    "time",
    "commit",
    "incumbent",
    "message",
    "status",
    "metric",
    "value",
    "incumbent_value",
    "delta_pct",
    "ci_low_pct",
    "ci_high_pct",
    "p_value",
    "score",
    "latency_ms",
    "util_pct",
    "tflops",
    "intensity",
    "bw_pct",
    "regime",
    "gap_ms",
    "runs",
    "wall_s",
    "latency_source",
    "host_latency_ms",
    "kernel",
    "hlo_dot",
    "hlo_exp",
    "hlo_reduce",
    "hlo_copy",
    "hlo_fusion",
    "hlo_custom_call",
    "hypothesis",
    "tags",
    "note",
    "p_threshold",
    "p_adjusted",
    "speedup_pct",
    "confirm_delta_pct",
    "confirm_ci_low_pct",
    "confirm_ci_high_pct",
    "noise_scale",
    "noise_sd_pct",
    "hlo_loop_copy",
    "kernel_ops",
    "meta",
];

pub fn render(view: &View, format: Format, color: bool) -> String {
    match format {
        Format::Table => table(view, color),
        Format::Csv => csv(&view.rows()),
        Format::Json => json(&view.rows()),
        Format::Md => markdown(view),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_match_the_row_type() {
        let rows = crate::store::Store::new(std::path::Path::new("/nonexistent")).rows().unwrap();
        assert!(rows.is_empty());
        let d = tempfile::tempdir().unwrap();
        let store = crate::store::Store::new(d.path());
        let row: ResultRow = serde_json::from_value(serde_json::json!({
            "id": 1, "time": "t", "commit": "c", "incumbent": "i", "message": "m", "status": "keep", "metric": "score",
            "value": null, "incumbent_value": null, "delta_pct": null, "ci_low_pct": null, "ci_high_pct": null, "p_value": null,
            "score": null, "latency_ms": null, "util_pct": null, "tflops": null, "intensity": null, "bw_pct": null, "regime": null,
            "gap_ms": null, "runs": 2, "wall_s": 1.0, "latency_source": null, "note": ""
        }))
        .unwrap();
        store.append_row(&row).unwrap();
        let text = std::fs::read_to_string(store.csv_path()).unwrap();
        assert_eq!(text.lines().next().unwrap(), COLUMNS.join(","));
        assert_eq!(csv(&[]).trim(), COLUMNS.join(","));
    }

    #[test]
    fn small_values_keep_their_figures() {
        assert_eq!(sig(0.004321, 2), "0.00432");
        assert_eq!(sig(12.345, 2), "12.35");
        assert_eq!(sig(0.0, 2), "0.00");
    }
}
