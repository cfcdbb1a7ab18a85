//! Showing results: the terminal table (kept rows marked, the progression of the best value
//! visible), and the same rows as CSV, JSON or Markdown from the one in-memory row type.

use crate::printable::line;
use crate::stats::Metric;
use crate::store::{ResultRow, Status, StatusClass};
use crate::vcs::short;
use comfy_table::{presets, Attribute, Cell, CellAlignment, Color, ContentArrangement, Table};

/// How `ratchet results` writes its rows (the command line's `--format`, see `cli`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
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

/// Moved to `crate::units`; re-exported so `report::sig` keeps working.
pub use crate::units::sig;

fn delta(r: &ResultRow) -> String {
    match (r.delta_pct, r.ci_low_pct, r.ci_high_pct) {
        (Some(d), Some(lo), Some(hi)) => format!("{d:+.1}% [{lo:+.1}, {hi:+.1}]"),
        (Some(d), _, _) => format!("{d:+.1}%"),
        _ => "-".into(),
    }
}

/// How the note of a `revert` starts when its interval still reaches the minimum effect: the
/// test stopped for futility, but these pairs could not rule a worthwhile gain out.
pub const TOO_NOISY: &str = "too noisy to tell";

/// Reverted without evidence against the idea: `inconclusive`, `unconfirmed`, or a `revert`
/// too noisy to tell. Agents should run it again rather than drop it (`worth_rerun` in JSON).
pub fn worth_rerun(r: &ResultRow) -> bool {
    matches!(r.status, Status::Inconclusive | Status::Unconfirmed) || too_noisy(r)
}

/// A `revert` whose interval still reaches the minimum effect (see [`TOO_NOISY`]).
pub fn too_noisy(r: &ResultRow) -> bool {
    r.status == Status::Revert && r.note.starts_with(TOO_NOISY)
}

/// The status as the tables show it: a revert too noisy to tell says so.
fn row_mark(r: &ResultRow) -> &'static str {
    if too_noisy(r) {
        "? revert, noisy"
    } else {
        mark(r.status)
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

/// The kept rows' speed-ups chained (multiplied) after each row: how much faster the branch is
/// than the first baseline by the experiments' own paired estimates, each measured against the
/// incumbent of its time (never absolute medians from different hours). 1x until the first keep;
/// `None` before the first measured row.
pub fn chain(rows: &[ResultRow]) -> Vec<Option<f64>> {
    let mut x: Option<f64> = None;
    rows.iter()
        .map(|r| {
            if x.is_none() && (r.incumbent_value.is_some() || speedup(r).is_some()) {
                x = Some(1.0);
            }
            if r.status == Status::Keep {
                if let (Some(acc), Some((s, _))) = (x, speedup(r)) {
                    x = Some(acc * s);
                }
            }
            x
        })
        .collect()
}

/// `x` to `n` significant figures, without a trailing exponent: 1.23, 240, 0.00432.
pub fn figures(x: f64, n: usize) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let mag = x.abs().log10().floor() as i64;
    let decimals = (n as i64 - 1 - mag).max(0) as usize;
    let scale = 10f64.powi(mag as i32 + 1 - n as i32);
    let rounded = if decimals == 0 { (x / scale).round() * scale } else { x };
    format!("{rounded:.decimals$}")
}

/// How many times a speed-up's log shows in the metric's log-ratio (as `stats::elasticity`, by
/// the name a row records): `score` goes as 1/latency^2, latency and TFLOP/s as 1/latency.
pub fn elasticity_of(metric: &str) -> f64 {
    if metric == "score" {
        2.0
    } else {
        1.0
    }
}

/// A change of a metric of elasticity `e` (percent, positive = better) as a speed-up factor.
pub fn factor_from_metric_pct(pct: f64, e: f64) -> f64 {
    (1.0 + pct / 100.0).max(1e-12).powf(1.0 / e)
}

/// "+1.5%", "-26.5%"; a change that rounds to zero is "±0.0%" (never "-0.0%").
pub fn pct1(p: f64) -> String {
    if (p * 10.0).round() == 0.0 {
        "±0.0%".into()
    } else {
        format!("{p:+.1}%")
    }
}

/// The change of latency (percent, negative = faster) that a speed-up factor means.
pub fn latency_change_pct(factor: f64) -> f64 {
    (1.0 / factor - 1.0) * 100.0
}

/// A row's speed-up of the candidate over the incumbent (x, latency terms) with its interval
/// when recorded: `speedup_pct` when the row has it, else its metric change converted back.
pub fn speedup(r: &ResultRow) -> Option<(f64, Option<(f64, f64)>)> {
    let e = elasticity_of(&r.metric);
    let x = r.speedup_pct.map(|s| 1.0 + s / 100.0).or_else(|| r.delta_pct.map(|d| factor_from_metric_pct(d, e)))?;
    let ci = match (r.ci_low_pct, r.ci_high_pct) {
        (Some(lo), Some(hi)) => Some((factor_from_metric_pct(lo, e), factor_from_metric_pct(hi, e))),
        _ => None,
    };
    Some((x, ci))
}

/// "speed-up 1.36x [1.35-1.37], latency -26.5%, score +85.0%": one experiment's effect in the
/// terms people read right (a positive latency "gain" reads as slower).
pub fn speedup_line(r: &ResultRow) -> Option<String> {
    let (x, ci) = speedup(r)?;
    let ci = ci.map(|(lo, hi)| format!(" [{lo:.2}-{hi:.2}]")).unwrap_or_default();
    let mut line = format!("speed-up {}{ci}, latency {}", fmt_x(x), pct1(latency_change_pct(x)));
    if let (Some(d), false) = (r.delta_pct, Metric::lower_is_better(&r.metric) || r.metric.is_empty()) {
        line.push_str(&format!(", {} {}", r.metric, pct1(d)));
    }
    Some(line)
}

/// The one other estimate a kept row carries, named for what it is: its confirmation batch's
/// own speed-up, free of the first phase's selection (`show` and `-v` print it; every other
/// view shows the row's one estimate).
pub fn confirmation_line(r: &ResultRow) -> Option<String> {
    let (c, lo, hi) = (r.confirm_delta_pct?, r.confirm_ci_low_pct?, r.confirm_ci_high_pct?);
    let sp = |m: f64| factor_from_metric_pct(m, elasticity_of(&r.metric));
    let level = r.confirm_ci_level_pct.map(|l| format!("{}% CI ", crate::stats::fmt_level(l))).unwrap_or_default();
    Some(format!(
        "the confirmation batch alone (free of the first phase's selection): speed-up {} [{level}{:.2}-{:.2}]",
        fmt_x(sp(c)),
        sp(lo),
        sp(hi)
    ))
}

/// What a table's note column says of a row: why nothing was measured or decided (a crash's
/// reason, a skip's), on one line; nothing for a row with a speed-up, whose one estimate is in
/// its own column (the test's reasoning, with its own figures, is `show`'s).
pub fn table_note(r: &ResultRow) -> String {
    if speedup(r).is_some() {
        String::new()
    } else {
        one_line(&r.note)
    }
}

/// A speed-up and its interval as every view writes them: "1.25x [1.23-1.27]", or "1.25x" with
/// no interval recorded.
pub fn speedup_cell(x: f64, ci: Option<(f64, f64)>) -> String {
    match ci {
        Some((lo, hi)) => format!("{} [{lo:.2}-{hi:.2}]", fmt_x(x)),
        None => fmt_x(x),
    }
}

/// "1.23x": two decimals below 10x, one above.
pub fn fmt_x(x: f64) -> String {
    if x >= 9.995 {
        format!("{x:.1}x")
    } else {
        format!("{x:.2}x")
    }
}

/// The best value's speed-up over the first baseline (x): the metric's ratio, in latency terms.
pub fn overall_factor(metric: &str, first: f64, best: f64) -> f64 {
    let ratio = if Metric::lower_is_better(metric) { first / best } else { best / first };
    ratio.max(1e-12).powf(1.0 / elasticity_of(metric))
}

/// The footer's headline: the kept rows' speed-ups chained, how many rows that is, and the
/// deciding metric's median at the first baseline and at the latest keep, said to be what it
/// is (two medians measured at different times).
pub fn gain_line(rows: &[ResultRow]) -> Option<String> {
    let metric = rows.iter().rev().find(|r| !r.metric.is_empty())?.metric.clone();
    let x = chain(rows).into_iter().flatten().last()?;
    let kept = rows.iter().filter(|r| r.status == Status::Keep && speedup(r).is_some()).count();
    let mut line = format!(
        "kept changes chained: {} faster (latency {}), the product of {}",
        fmt_x(x),
        pct1(latency_change_pct(x)),
        if kept == 1 { "the 1 kept row's speed-up".to_string() } else { format!("{kept} kept rows' speed-ups") }
    );
    let first = rows.iter().find_map(|r| r.incumbent_value);
    let last = progression(rows).into_iter().flatten().last();
    if let (Some(first), Some(last), true) = (first, last, kept > 0) {
        let unit = if Metric::lower_is_better(&metric) { " ms" } else { "" };
        line.push_str(&format!(
            "; {metric} median {}{unit} at the first baseline, {}{unit} at the latest keep (measured at different times)",
            figures(first, 3),
            figures(last, 3)
        ));
    }
    Some(line)
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

/// How the terminal table is laid out.
#[derive(Debug, Clone, Copy)]
pub struct TableOpts {
    pub color: bool,
    /// The width every line fits into (the compact table).
    pub width: usize,
    /// Every column, one line per row, however wide.
    pub wide: bool,
}

/// The compact table (fits `opts.width`) or, with `opts.wide`, every column.
pub fn table_with(view: &View, opts: TableOpts) -> String {
    let all = view.all;
    if all.is_empty() {
        let text = "no experiments yet: run `ratchet \"experiment: ...\"` after editing the kernel, or `ratchet sweep`";
        return if opts.wide { text.into() } else { crate::units::wrap(text, opts.width).join("\n") };
    }
    let body = if view.shown.is_empty() {
        format!("no experiment matches {}", view.filter)
    } else if opts.wide {
        wide_body(view, opts.color)
    } else {
        compact_body(view, opts)
    };
    let mut out = body;
    for line in footer(view) {
        if opts.wide {
            out.push_str(&format!("\n{line}"));
        } else {
            for l in crate::units::wrap(&line, opts.width) {
                out.push_str(&format!("\n{l}"));
            }
        }
    }
    out
}

/// The story under the table: counts, the kept rows chained, runs spent, the filter.
fn footer(view: &View) -> Vec<String> {
    let all = view.all;
    let kept = all.iter().filter(|r| r.status == Status::Keep).count();
    let runs: u64 = all.iter().map(|r| r.runs as u64).sum();
    let wall: f64 = all.iter().map(|r| r.wall_s).sum();
    let others: Vec<ResultRow> = all.iter().filter(|r| r.status != Status::Keep).cloned().collect();
    let others = if others.is_empty() { String::new() } else { format!(" ({})", status_counts(&others)) };
    let mut lines = vec![format!("{} experiments, {} kept{others}", all.len(), kept)];
    if let Some(g) = gain_line(all) {
        lines.push(g);
    }
    lines.push(format!("{runs} benchmark runs, {} of experiments", crate::units::fmt_duration(wall)));
    if let Some(l) = level_line(view) {
        lines.push(l);
    }
    if !view.filter.is_empty() && !view.shown.is_empty() {
        lines.push(format!("showing {} of {} ({})", view.shown.len(), all.len(), view.filter));
    }
    lines
}

/// The rows shown whose interval holds less than the others' level (too few pairs for it), so
/// that no interval in the table reads as more than it is; `None` when all hold the same.
fn level_line(view: &View) -> Option<String> {
    let rows: Vec<&ResultRow> = view.shown.iter().map(|&i| &view.all[i]).filter(|r| r.ci_low_pct.is_some()).collect();
    let top = rows.iter().filter_map(|r| r.ci_level_pct).fold(f64::NEG_INFINITY, f64::max);
    let low: Vec<&ResultRow> = rows.iter().copied().filter(|r| r.ci_level_pct.is_some_and(|l| l < top - 1e-9)).collect();
    if low.is_empty() {
        return None;
    }
    const NAMED: usize = 6;
    let mut named: Vec<String> =
        low.iter().take(NAMED).map(|r| format!("{} at {}%", r.id, crate::stats::fmt_level(r.ci_level_pct.unwrap_or(top)))).collect();
    if low.len() > NAMED {
        named.push(format!("{} more", low.len() - NAMED));
    }
    Some(format!(
        "intervals at {}%, except {} row{} with too few pairs for it: {}",
        crate::stats::fmt_level(top),
        low.len(),
        if low.len() == 1 { "" } else { "s" },
        named.join(", ")
    ))
}

/// The message as a one-line label: its first line, without the conventional `experiment: `.
pub fn short_message(message: &str) -> String {
    let first = message.lines().next().unwrap_or("").trim();
    let rest = first.strip_prefix("experiment:").map(str::trim_start).unwrap_or(first);
    let more = if message.trim().lines().nth(1).is_some() { " …" } else { "" };
    format!("{rest}{more}")
}

/// A field's text on one line: line breaks shown as ` ⏎ `, so a table row stays one line.
pub fn one_line(text: &str) -> String {
    text.trim().lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ⏎ ")
}

fn status_cell(r: &ResultRow, color: bool) -> String {
    let m = row_mark(r);
    if !color {
        return m.to_string();
    }
    let code = match r.status.class() {
        StatusClass::Kept => "1;32",
        StatusClass::NotKept if worth_rerun(r) => "33",
        StatusClass::NotKept | StatusClass::NotRun => "",
        StatusClass::Failed => "31",
    };
    if code.is_empty() {
        m.to_string()
    } else {
        format!("\x1b[{code}m{m}\x1b[0m")
    }
}

/// One column of the compact table.
struct Col {
    header: String,
    cells: Vec<String>,
    right: bool,
    /// Lower goes in first when the width is short; the message (flex) takes what is left.
    priority: u8,
    flex: bool,
}

/// The compact table: id, status, speed-up with its interval, latency change, the deciding
/// metric's change, the message; commit and best-so-far when the width allows. Every line
/// fits `opts.width`; a cell is never wrapped (the message is cut at a word).
fn compact_body(view: &View, opts: TableOpts) -> String {
    let all = view.all;
    let metric = all.iter().rev().find(|r| !r.metric.is_empty()).map(|r| r.metric.clone()).unwrap_or_else(|| "score".into());
    let best = chain(all);
    let rows: Vec<&ResultRow> = view.shown.iter().map(|&i| &all[i]).collect();
    let mut cols = vec![
        Col { header: "id".into(), cells: rows.iter().map(|r| r.id.to_string()).collect(), right: true, priority: 0, flex: false },
        Col {
            header: "status".into(),
            cells: rows.iter().map(|r| row_mark(r).to_string()).collect(),
            right: false,
            priority: 1,
            flex: false,
        },
        Col {
            header: "commit".into(),
            cells: rows.iter().map(|r| if r.commit.is_empty() { "-".into() } else { line(short(&r.commit)).into_owned() }).collect(),
            right: false,
            priority: 6,
            flex: false,
        },
        Col {
            header: "speed-up [CI]".into(),
            cells: rows.iter().map(|r| speedup(r).map(|(x, ci)| speedup_cell(x, ci)).unwrap_or_else(|| "-".into())).collect(),
            right: true,
            priority: 2,
            flex: false,
        },
        Col {
            header: "latency".into(),
            cells: rows.iter().map(|r| speedup(r).map(|(x, _)| pct1(latency_change_pct(x))).unwrap_or("-".into())).collect(),
            right: true,
            priority: 4,
            flex: false,
        },
        Col {
            header: "best".into(),
            cells: view.shown.iter().map(|&i| best[i].map(fmt_x).unwrap_or_else(|| "-".into())).collect(),
            right: true,
            priority: 7,
            flex: false,
        },
    ];
    // The deciding metric's own change beside the speed-up (for latency it is the latency column).
    if metric != "latency" {
        cols.push(Col {
            header: format!("{metric} Δ"),
            cells: rows.iter().map(|r| r.delta_pct.map(pct1).unwrap_or("-".into())).collect(),
            right: true,
            priority: 5,
            flex: false,
        });
        cols.swap(5, 6); // display order: ..., latency, metric Δ, best
    }
    cols.push(Col {
        header: "message".into(),
        // Printable before the layout (an escape is wider than its character) and the colour.
        cells: rows.iter().map(|r| line(&short_message(&r.message)).into_owned()).collect(),
        right: false,
        priority: 3,
        flex: true,
    });
    let w = |c: &Col| c.cells.iter().map(|s| crate::units::cells(s)).chain([crate::units::cells(&c.header)]).max().unwrap_or(0);
    let widths: Vec<usize> = cols.iter().map(w).collect();
    const SEP: usize = 2;
    const MSG_MIN: usize = 16;
    // Take columns by priority while the message keeps at least MSG_MIN cells.
    let mut order: Vec<usize> = (0..cols.len()).filter(|&i| !cols[i].flex).collect();
    order.sort_by_key(|&i| cols[i].priority);
    let mut used = 0usize;
    let mut take = vec![false; cols.len()];
    for i in order {
        let extra = widths[i] + if used == 0 { 0 } else { SEP };
        let after = used + extra;
        // Commit and best-so-far only where the message keeps room to be read.
        let room = if cols[i].priority >= 6 { 2 * MSG_MIN } else { MSG_MIN };
        if cols[i].priority <= 1 || after + SEP + room <= opts.width {
            take[i] = true;
            used = after;
        }
    }
    let msg = cols.len() - 1;
    take[msg] = true;
    let msg_width = opts.width.saturating_sub(used + SEP).max(8).min(widths[msg]);
    let mut lines = vec![];
    let line = |cells: Vec<(String, usize, bool)>| -> String {
        let parts: Vec<String> = cells
            .into_iter()
            .map(|(text, width, right)| {
                let pad = width.saturating_sub(crate::units::cells(&text));
                if right {
                    format!("{}{text}", " ".repeat(pad))
                } else {
                    format!("{text}{}", " ".repeat(pad))
                }
            })
            .collect();
        parts.join(&" ".repeat(SEP)).trim_end().to_string()
    };
    let shown: Vec<usize> = (0..cols.len()).filter(|&i| take[i]).collect();
    let cell_width = |i: usize| if i == msg { msg_width } else { widths[i] };
    lines.push(line(shown.iter().map(|&i| (crate::units::cut(&cols[i].header, cell_width(i)), cell_width(i), cols[i].right)).collect()));
    lines.push("─".repeat(opts.width.min(used + SEP + msg_width)));
    for (k, r) in rows.iter().enumerate() {
        let mut text =
            line(shown.iter().map(|&i| (crate::units::cut(&cols[i].cells[k], cell_width(i)), cell_width(i), cols[i].right)).collect());
        if opts.color {
            // Colour the status after the layout, so escape codes never count as width.
            let plain = row_mark(r);
            text = text.replacen(plain, &status_cell(r, true), 1);
        }
        lines.push(text);
    }
    lines.push("─".repeat(opts.width.min(used + SEP + msg_width)));
    lines.join("\n")
}

/// Every column, one line per row however wide (`ratchet results --wide`): cells are never
/// wrapped, so hashes and numbers stay whole; notes are cut to one line.
fn wide_body(view: &View, color: bool) -> String {
    let all = view.all;
    let metric = all.last().map(|r| r.metric.clone()).unwrap_or_default();
    let mut t = Table::new();
    t.load_preset(presets::UTF8_HORIZONTAL_ONLY).set_content_arrangement(ContentArrangement::Disabled);
    if !color {
        t.force_no_tty();
    }
    t.set_header(vec![
        "id",
        "status",
        "commit",
        "message",
        "speed-up [CI]",
        "latency Δ",
        &metric,
        "best",
        "metric gain [CI]",
        "p",
        "latency ms",
        "util %",
        "regime",
        "runs",
        "note",
    ]);
    let best = chain(all);
    for &i in &view.shown {
        let (r, b) = (&all[i], best[i]);
        let digits = if Metric::lower_is_better(&r.metric) { 3 } else { 2 };
        let mut status = Cell::new(row_mark(r));
        let mut value = Cell::new(num(r.value, digits)).set_alignment(CellAlignment::Right);
        if color {
            status = match r.status.class() {
                StatusClass::Kept => status.fg(Color::Green).add_attribute(Attribute::Bold),
                StatusClass::NotKept if worth_rerun(r) => status.fg(Color::Yellow),
                StatusClass::NotKept | StatusClass::NotRun => status,
                StatusClass::Failed => status.fg(Color::Red),
            };
            if r.status == Status::Keep {
                value = value.add_attribute(Attribute::Bold);
            }
        }
        let (sx, lat) = match speedup(r) {
            Some((x, ci)) => (speedup_cell(x, ci), format!("{:+.1}%", latency_change_pct(x))),
            None => ("-".into(), "-".into()),
        };
        let commit = if r.commit.is_empty() { "-" } else { short(&r.commit) };
        t.add_row(vec![
            Cell::new(r.id),
            status,
            Cell::new(line(commit)),
            Cell::new(crate::units::cut(&line(&short_message(&r.message)), 60)),
            Cell::new(sx).set_alignment(CellAlignment::Right),
            Cell::new(lat).set_alignment(CellAlignment::Right),
            value,
            Cell::new(b.map(fmt_x).unwrap_or_else(|| "-".into())).set_alignment(CellAlignment::Right),
            Cell::new(delta(r)).set_alignment(CellAlignment::Right),
            Cell::new(r.p_value.map(crate::stats::fmt_p).unwrap_or("-".into())).set_alignment(CellAlignment::Right),
            Cell::new(num(r.latency_ms, 3)).set_alignment(CellAlignment::Right),
            Cell::new(num(r.util_pct, 1)).set_alignment(CellAlignment::Right),
            Cell::new(line(r.regime.as_deref().unwrap_or("-"))),
            Cell::new(r.runs).set_alignment(CellAlignment::Right),
            Cell::new(crate::units::cut(&line(&table_note(r)), 80)),
        ]);
    }
    t.to_string()
}

pub fn csv(rows: &[ResultRow]) -> String {
    let mut w = csv::Writer::from_writer(vec![]);
    for r in rows {
        w.serialize(r.for_csv()).expect("rows serialize");
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

/// The Markdown table's columns (names as in the CSV; `best` is the kept rows' speed-ups
/// chained so far, as in every view).
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
    // Markdown is read on a terminal too (`--format md`, the gate's comment): printable, one line.
    let esc = |s: &str| line(&s.replace('|', "\\|").replace('\n', " ")).into_owned();
    let mut out = format!("| {} |\n", MD_COLUMNS.join(" | "));
    out.push_str("|---:|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|\n");
    let best = chain(view.all);
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
            best[i].map(fmt_x).unwrap_or_default(),
            f(r.delta_pct, 2),
            f(r.ci_low_pct, 2),
            f(r.ci_high_pct, 2),
            r.p_value.map(crate::stats::fmt_p).unwrap_or_default(),
            f(r.latency_ms, 3),
            f(r.util_pct, 1),
            esc(r.regime.as_deref().unwrap_or("")),
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
    "p_conditional",
    "borrowed_sd_pct",
    "borrowed_df",
    "borrowed_sums_sd_pct",
    "borrowed_sums_df",
    "borrowed_from",
    "ci_level_pct",
    "confirm_ci_level_pct",
];

/// [`render`] with the table's layout given.
pub fn render_with(view: &View, format: Format, opts: TableOpts) -> String {
    match format {
        Format::Table => table_with(view, opts),
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
    fn rows_with_wide_text_fit_the_width() {
        // CJK messages take two cells a character and combining accents none: the compact
        // table's every line still fits 80 columns, and the message column is still used.
        let row = |id: u64, message: &str, status: &str| -> ResultRow {
            serde_json::from_value(serde_json::json!({
                "id": id, "time": "2026-01-01T00:00:00Z", "commit": "abcdef1", "incumbent": "1234567", "message": message,
                "status": status, "metric": "latency", "value": 2.0, "incumbent_value": 3.0, "delta_pct": -33.3,
                "ci_low_pct": -40.0, "ci_high_pct": -30.0, "p_value": 0.001, "score": null, "latency_ms": 2.0,
                "util_pct": null, "tflops": null, "intensity": null, "bw_pct": null, "regime": null, "gap_ms": null,
                "runs": 12, "wall_s": 30.0, "latency_source": null, "note": ""
            }))
            .unwrap()
        };
        let rows = vec![
            row(1, "experiment: 把查询分块从三十二行增加到一百二十八行以减少网格步数并重新测量延迟", "keep"),
            row(2, "experiment: re\u{301}sume\u{301} de\u{301}ja\u{300} vu: the café's bigger KV blocks, once more", "revert"),
        ];
        let text = table_with(&View::all(&rows), TableOpts { color: false, width: 80, wide: false });
        for line in text.lines() {
            let cells = unicode_width::UnicodeWidthStr::width(line);
            assert!(cells <= 80, "{cells} cells: {line}");
        }
        assert!(text.contains("把查询分块"), "{text}");
        assert!(text.contains("re\u{301}sume\u{301}"), "{text}");
    }

    #[test]
    fn the_footer_names_the_intervals_that_hold_less_than_the_others() {
        let row = |id: u64, level: Option<f64>| -> ResultRow {
            serde_json::from_value(serde_json::json!({
                "id": id, "time": "2026-01-01T00:00:00Z", "commit": "abcdef1", "incumbent": "1234567", "message": "m",
                "status": "revert", "metric": "latency", "value": 2.0, "incumbent_value": 3.0, "delta_pct": -33.3,
                "ci_low_pct": -40.0, "ci_high_pct": -30.0, "p_value": 0.5, "score": null, "latency_ms": 2.0,
                "util_pct": null, "tflops": null, "intensity": null, "bw_pct": null, "regime": null, "gap_ms": null,
                "runs": 12, "wall_s": 30.0, "latency_source": null, "note": "", "ci_level_pct": level
            }))
            .unwrap()
        };
        let text = |rows: &[ResultRow]| table_with(&View::all(rows), TableOpts { color: false, width: 200, wide: false });
        // A 2-pair and a 4-pair interval among 96% ones; a row from before the level was recorded
        // says nothing.
        let rows = [row(1, Some(96.0)), row(2, Some(50.0)), row(3, None), row(4, Some(87.5))];
        assert!(text(&rows).contains("intervals at 96%, except 2 rows with too few pairs for it: 2 at 50%, 4 at 87.5%"), "{}", text(&rows));
        // All at one level, or none recorded: no line.
        for rows in [vec![row(1, Some(96.0)), row(2, Some(96.0))], vec![row(1, None)]] {
            assert!(!text(&rows).contains("intervals at"), "{}", text(&rows));
        }
        // A long night names six and counts the rest.
        let many: Vec<ResultRow> = (1..=9).map(|i| row(i, Some(if i == 1 { 96.0 } else { 50.0 }))).collect();
        assert!(
            text(&many).contains("8 rows with too few pairs for it: 2 at 50%, 3 at 50%, 4 at 50%, 5 at 50%, 6 at 50%, 7 at 50%, 2 more"),
            "{}",
            text(&many)
        );
    }

    #[test]
    fn figures_are_significant() {
        assert_eq!(figures(1.23, 3), "1.23");
        assert_eq!(figures(240.293, 3), "240");
        assert_eq!(figures(0.004321, 3), "0.00432");
        assert_eq!(figures(12345.0, 3), "12300");
        assert_eq!(fmt_x(13.72), "13.7x");
        assert_eq!(fmt_x(1.234), "1.23x");
        assert!((overall_factor("score", 1.23, 232.0) - 13.73).abs() < 0.01);
        assert!((latency_change_pct(2.0) + 50.0).abs() < 1e-9);
    }

    #[test]
    fn small_values_keep_their_figures() {
        assert_eq!(sig(0.004321, 2), "0.00432");
        assert_eq!(sig(12.345, 2), "12.35");
        assert_eq!(sig(0.0, 2), "0.00");
    }
}
