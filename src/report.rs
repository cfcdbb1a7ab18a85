//! Showing results: the terminal table (kept rows marked, the progression of the best value
//! visible), and the same rows as CSV, JSON or Markdown from the one in-memory row type.

use crate::store::{ResultRow, Status};
use comfy_table::{presets, Attribute, Cell, CellAlignment, Color, ContentArrangement, Table};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Csv,
    Json,
    Md,
}

fn num(v: Option<f64>, digits: usize) -> String {
    v.map(|x| sig(x, digits)).unwrap_or_else(|| "-".into())
}

/// `x` with `digits` decimals, or more when that would hide a small value's leading figures.
pub fn sig(x: f64, digits: usize) -> String {
    let a = x.abs();
    if a == 0.0 || a >= 1.0 || !a.is_finite() {
        return format!("{x:.digits$}");
    }
    // Keep three significant figures for values below 1.
    let lead = (-a.log10()).floor() as usize;
    let d = digits.max(lead + 3).min(12);
    format!("{x:.d$}")
}

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
        Status::NoOp => "· no-op",
        Status::Crash => "✗ crash",
        Status::Timeout => "✗ timeout",
        Status::Invalid => "✗ invalid",
        Status::Interrupted => "✗ interrupted",
        Status::Error => "✗ error",
    }
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(8)]
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

/// A readable, aligned table for a terminal.
pub fn table(rows: &[ResultRow], color: bool) -> String {
    if rows.is_empty() {
        return "no experiments yet: run `ratchet \"experiment: ...\"` after editing the kernel".into();
    }
    let metric = rows.last().map(|r| r.metric.clone()).unwrap_or_default();
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
        "Δ [CI]",
        "p",
        "latency ms",
        "util %",
        "regime",
        "gap ms",
        "runs",
    ]);
    let best = progression(rows);
    for (r, b) in rows.iter().zip(best) {
        let digits = if r.metric == "latency" { 3 } else { 2 };
        let mut status = Cell::new(mark(r.status));
        let mut value = Cell::new(num(r.value, digits)).set_alignment(CellAlignment::Right);
        if color {
            status = match r.status {
                Status::Keep => status.fg(Color::Green).add_attribute(Attribute::Bold),
                Status::Revert | Status::NoOp => status,
                Status::Inconclusive => status.fg(Color::Yellow),
                _ => status.fg(Color::Red),
            };
            if r.status == Status::Keep {
                value = value.add_attribute(Attribute::Bold);
            }
        }
        let msg: String = r.message.lines().next().unwrap_or("").chars().take(48).collect();
        t.add_row(vec![
            Cell::new(r.id),
            status,
            Cell::new(short(&r.commit)),
            Cell::new(msg),
            value,
            Cell::new(num(b, digits)).set_alignment(CellAlignment::Right),
            Cell::new(delta(r)).set_alignment(CellAlignment::Right),
            Cell::new(r.p_value.map(crate::stats::fmt_p).unwrap_or("-".into())).set_alignment(CellAlignment::Right),
            Cell::new(num(r.latency_ms, 3)).set_alignment(CellAlignment::Right),
            Cell::new(num(r.util_pct, 1)).set_alignment(CellAlignment::Right),
            Cell::new(r.regime.clone().unwrap_or("-".into())),
            Cell::new(num(r.gap_ms, 3)).set_alignment(CellAlignment::Right),
            Cell::new(r.runs).set_alignment(CellAlignment::Right),
        ]);
    }
    let kept = rows.iter().filter(|r| r.status == Status::Keep).count();
    let first = rows.iter().find_map(|r| r.incumbent_value);
    let last = progression(rows).into_iter().flatten().last();
    let mut out = t.to_string();
    out.push_str(&format!("\n{} experiments, {} kept", rows.len(), kept));
    if let (Some(f), Some(l)) = (first, last) {
        let gain = if metric == "latency" { (f / l - 1.0) * 100.0 } else { (l / f - 1.0) * 100.0 };
        out.push_str(&format!("; {metric} {} -> {} ({gain:+.1}% over the first baseline)", sig(f, 3), sig(l, 3)));
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

pub fn markdown(rows: &[ResultRow]) -> String {
    let esc = |s: &str| s.replace('|', "\\|").replace('\n', " ");
    let mut out = String::from("| id | status | commit | message | value | Δ% | CI | p | latency ms | util % | regime | gap ms | runs |\n");
    out.push_str("|---:|---|---|---|---:|---:|---|---:|---:|---:|---|---:|---:|\n");
    for r in rows {
        let ci = match (r.ci_low_pct, r.ci_high_pct) {
            (Some(l), Some(h)) => format!("[{l:+.1}, {h:+.1}]"),
            _ => "-".into(),
        };
        out.push_str(&format!(
            "| {} | {} | `{}` | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.id,
            if r.status == Status::Keep { "**keep**" } else { r.status.as_str() },
            short(&r.commit),
            esc(&r.message),
            num(r.value, 3),
            r.delta_pct.map(|d| format!("{d:+.2}")).unwrap_or("-".into()),
            ci,
            r.p_value.map(crate::stats::fmt_p).unwrap_or("-".into()),
            num(r.latency_ms, 3),
            num(r.util_pct, 1),
            r.regime.as_deref().unwrap_or("-"),
            num(r.gap_ms, 3),
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
    "note",
];

pub fn render(rows: &[ResultRow], format: Format, color: bool) -> String {
    match format {
        Format::Table => table(rows, color),
        Format::Csv => csv(rows),
        Format::Json => json(rows),
        Format::Md => markdown(rows),
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
