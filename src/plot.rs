//! Pictures of the results (plotters): the score staircase over experiments (kept points with
//! their descriptions, best-so-far as a step line), the roofline chart (the configured hardware's
//! roof, the baseline and the path of kept commits, log-log), each experiment's runs on both
//! sides and one experiment's sequential test (its statistic against the boundaries, look by
//! look), as SVG text and PNG bytes, and a self-contained HTML report with the SVGs inline.
//! Every status is drawn by its class (`Status::class`): only failures are red.
//!
//! PNG text needs a font: DejaVu Sans ships in `assets/fonts/` (license beside it) and is
//! compiled in, so rendering needs no system fonts. SVG names the font family and leaves the
//! glyphs to the viewer.

use crate::bench::{RunRecord, RunStatus, Side};
use crate::hardware::Hardware;
use crate::outcome::LooksRecord;
use crate::report::sig;
use crate::stats::{Look, LookPhase, Metric, Verdict};
use crate::store::{ResultRow, Status, StatusClass};
use crate::trace::OpStat;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const FONT: &[u8] = include_bytes!("../assets/fonts/DejaVuSans.ttf");
pub const SIZE: (u32, u32) = (960, 540);
const KEEP: RGBColor = RGBColor(0x1a, 0x9a, 0x4a);
const REVERT: RGBColor = RGBColor(0x88, 0x88, 0x88);
const FAIL: RGBColor = RGBColor(0xd0, 0x30, 0x30);
const BEST: RGBColor = RGBColor(0x1f, 0x5f, 0xbf);
const UNSURE: RGBColor = RGBColor(0xd8, 0x8c, 0x00);
/// The rescue's look (the t-test over all pairs): apart from both phases' colours.
const RESCUE: RGBColor = RGBColor(0x7a, 0x3d, 0xa8);

/// What the charts draw: the rows of results.csv and the raw runs of runs.jsonl.
#[derive(Debug, Clone, Copy)]
pub struct Night<'a> {
    pub rows: &'a [ResultRow],
    pub runs: &'a [RunRecord],
    pub hw: Option<&'a Hardware>,
}

/// Kept points labelled on a chart at most: beyond it, only the largest steps get a label.
const MAX_LABELS: usize = 12;

/// The ids of the kept rows whose points get a label: all of them up to [`MAX_LABELS`], else the
/// largest gains (so a long night's chart stays readable).
fn labelled_keeps(rows: &[ResultRow]) -> Vec<u64> {
    let mut kept: Vec<&ResultRow> = rows.iter().filter(|r| r.status == Status::Keep).collect();
    if kept.len() > MAX_LABELS {
        kept.sort_by(|a, b| b.delta_pct.unwrap_or(0.0).total_cmp(&a.delta_pct.unwrap_or(0.0)));
        kept.truncate(MAX_LABELS);
    }
    kept.iter().map(|r| r.id).collect()
}

/// The baseline's roofline point (intensity, TFLOP/s): the first measured experiment's
/// incumbent runs (median latency, their FLOPs and bytes).
pub fn baseline_point(night: &Night) -> Option<(f64, f64)> {
    let first = night.rows.iter().find(|r| r.incumbent_value.is_some())?;
    let id = first.id.to_string();
    let inc: Vec<&RunRecord> =
        night.runs.iter().filter(|r| r.experiment == id && r.side == Side::Incumbent && r.status == RunStatus::Ok).collect();
    let lat = crate::metrics::median(&inc.iter().filter_map(|r| r.latency_ms).collect::<Vec<_>>())?;
    let last = inc.iter().rev().find(|r| r.flops.is_some())?;
    let (flops, bytes) = (last.flops?, last.bytes?);
    (bytes > 0.0 && lat > 0.0).then(|| (flops / bytes, flops / (lat / 1e3) / 1e12))
}
type DrawResult<T> = Result<T, String>;

fn font_once() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // The bytes are compiled in and known to be a valid TrueType font.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// Axis values, on a log10 scale when the data spans more than `span` (score grows as the
/// square of a speed-up, so a good night spans decades).
/// A linear axis's tick as written: its ticks are round steps (1, 2, 5 x 10^k), so every
/// figure they carry is printed (105, 0.25), never rounded into its neighbour ("110 110").
fn linear_label(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return if x == 0.0 { "0".into() } else { format!("{x}") };
    }
    // Six significant figures undo the float noise of the tick arithmetic (0.30000000000000004).
    let mag = x.abs().log10().floor() as i32;
    let decimals = (5 - mag).clamp(0, 12) as usize;
    let text = format!("{x:.decimals$}");
    let text = if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.').to_string() } else { text };
    if text == "-0" {
        "0".into()
    } else {
        text
    }
}

/// A count axis's tick: whole numbers only (a tick between two counts gets no label, never a
/// rounded "2" beside another "2").
fn count_label(x: f64) -> String {
    if (x - x.round()).abs() > 1e-6 {
        String::new()
    } else {
        format!("{}", x.round() as i64)
    }
}

#[derive(Debug, Clone, Copy)]
struct Axis {
    log: bool,
}

impl Axis {
    fn to(&self, v: f64) -> f64 {
        if self.log {
            v.log10()
        } else {
            v
        }
    }
    fn label(&self, v: f64) -> String {
        if !self.log {
            return linear_label(v);
        }
        let x = 10f64.powf(v);
        // Two significant figures: tick values of a log axis are not round numbers.
        if x == 0.0 || !x.is_finite() {
            return format!("{x}");
        }
        let mag = x.abs().log10().floor() as i32;
        let decimals = (1 - mag).max(0) as usize;
        let rounded = (x / 10f64.powi(mag - 1)).round() * 10f64.powi(mag - 1);
        format!("{rounded:.decimals$}")
    }
}

fn range(vals: &[f64], axis: Axis) -> (f64, f64) {
    let t: Vec<f64> = vals.iter().map(|v| axis.to(*v)).filter(|v| v.is_finite()).collect();
    let lo = t.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = t.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    let pad = ((hi - lo) * 0.08).max(if axis.log { 0.05 } else { hi.abs().max(1e-9) * 0.05 });
    (lo - pad, hi + pad)
}

fn status_color(s: Status) -> RGBColor {
    match s.class() {
        StatusClass::Kept => KEEP,
        StatusClass::NotKept if matches!(s, Status::Inconclusive | Status::Unconfirmed) => UNSURE,
        StatusClass::NotKept | StatusClass::NotRun => REVERT,
        StatusClass::Failed => FAIL,
    }
}

/// The staircase's figures in the deciding metric's units, from the paired estimates rather
/// than absolute medians taken at different times: the best-so-far level after each row (the
/// first baseline times the kept rows' metric ratios) and each row's point (the level before it
/// times its own measured ratio against its incumbent), so a point sits above the line exactly
/// when its estimate was a gain. A row without an estimate (failed, skipped, no-op) has no point
/// where it has no value, and sits on the line where it has one.
fn staircase_points(rows: &[ResultRow]) -> (Vec<Option<f64>>, Vec<Option<f64>>) {
    let mut level = rows.iter().find_map(|r| r.incumbent_value);
    let (mut levels, mut points) = (vec![], vec![]);
    for r in rows {
        // The metric's ratio candidate / incumbent: delta_pct is its change, positive = better.
        let ratio = r.delta_pct.map(|d| if Metric::lower_is_better(&r.metric) { 1.0 / (1.0 + d / 100.0) } else { 1.0 + d / 100.0 });
        let point = match (level, ratio) {
            (Some(l), Some(x)) => Some(l * x),
            (Some(l), None) => r.value.map(|_| l),
            (None, _) => None,
        };
        if r.status == Status::Keep {
            level = point.or(level);
        }
        levels.push(level);
        points.push(point);
    }
    (levels, points)
}

/// Every value the staircase draws, the first baseline included (its point and the line's
/// start sit there), so the axis range holds all of them and none is pinned to an edge.
fn staircase_values(rows: &[ResultRow], best: &[Option<f64>], points: &[Option<f64>]) -> Vec<f64> {
    let start = rows.iter().find_map(|r| r.incumbent_value);
    start.iter().chain(best.iter().flatten()).chain(points.iter().flatten()).copied().filter(|v| *v > 0.0).collect()
}

fn staircase<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, rows: &[ResultRow]) -> DrawResult<()> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let metric = rows.iter().rev().find(|r| !r.metric.is_empty()).map(|r| r.metric.clone()).unwrap_or_else(|| "score".into());
    let lower_better = Metric::lower_is_better(&metric);
    let (best, points) = staircase_points(rows);
    let vals = staircase_values(rows, &best, &points);
    let (mn, mx) = (vals.iter().cloned().fold(f64::INFINITY, f64::min), vals.iter().cloned().fold(0.0, f64::max));
    let axis = Axis { log: mn.is_finite() && mx / mn > 20.0 };
    let (lo, hi) = range(&vals, axis);
    // Room for the legend on the side the staircase moves away from (the start's side is low for
    // higher-is-better, high for latency), and a band for outcomes without a value at the worst
    // end: the bottom when higher is better, the top for latency.
    let span = hi - lo;
    let (ylo, yhi) = if lower_better { (lo - 0.35 * span, hi + 0.08 * span) } else { (lo - 0.08 * span, hi + 0.35 * span) };
    // A linear axis of positive values does not go below zero (no "-2 ms" tick).
    let ylo = if !axis.log && mn.is_finite() && mn > 0.0 { ylo.max(0.0) } else { ylo };
    let band = if lower_better { yhi - 0.03 * (yhi - ylo) } else { ylo + 0.03 * (yhi - ylo) };
    let n = rows.len() as f64;
    let dir = if lower_better { "lower is better" } else { "higher is better" };
    let mut chart = ChartBuilder::on(root)
        .caption(format!("{metric} over experiments ({dir}{})", if axis.log { ", log scale" } else { "" }), ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(72)
        .build_cartesian_2d(-0.5..(n + 0.5), ylo..yhi)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc("experiment id")
        // The points are paired estimates chained from the first baseline, not medians.
        .y_desc(if lower_better {
            "latency (ms): first baseline / chained paired speed-ups".to_string()
        } else {
            format!("{metric}: first baseline x chained paired ratios")
        })
        .x_labels(rows.len().clamp(2, 20) + 1)
        .x_label_formatter(&|x| {
            let i = x.round() as i64;
            if (x - i as f64).abs() > 1e-6 || i < 0 || i as usize > rows.len() {
                String::new()
            } else if i == 0 {
                "base".into()
            } else {
                rows[i as usize - 1].id.to_string()
            }
        })
        .y_label_formatter(&|y| axis.label(*y))
        .label_style(("sans-serif", 14))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(e)?;

    chart
        .draw_series(LineSeries::new(step_line(rows, &best).into_iter().map(|(x, y)| (x, axis.to(y))), BEST.stroke_width(3)))
        .map_err(e)?
        .label("best so far")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 18, y)], BEST.stroke_width(3)));
    if let Some(p) = rows.iter().find_map(|r| r.incumbent_value) {
        chart.draw_series([Circle::new((0.0, axis.to(p)), 6, BEST.filled())]).map_err(e)?;
    }
    let pts = |want: &dyn Fn(Status) -> bool| -> Vec<(f64, f64, Status)> {
        rows.iter()
            .enumerate()
            .filter(|(_, r)| want(r.status))
            .filter_map(|(i, r)| points[i].filter(|v| *v > 0.0).map(|v| (i as f64 + 1.0, axis.to(v), r.status)))
            .collect()
    };
    let unsure = |s: Status| matches!(s, Status::Inconclusive | Status::Unconfirmed);
    chart
        .draw_series(
            pts(&|s| s.class() == StatusClass::NotKept && !unsure(s))
                .into_iter()
                .map(|(x, y, _)| Cross::new((x, y), 6, REVERT.stroke_width(3))),
        )
        .map_err(e)?
        .label("reverted / no-op")
        .legend(|(x, y)| Cross::new((x + 9, y), 6, REVERT.stroke_width(3)));
    chart
        .draw_series(pts(&unsure).into_iter().map(|(x, y, _)| Circle::new((x, y), 6, UNSURE.stroke_width(3))))
        .map_err(e)?
        .label("inconclusive / unconfirmed (worth a rerun)")
        .legend(|(x, y)| Circle::new((x + 9, y), 5, UNSURE.stroke_width(3)));
    chart
        .draw_series(pts(&|s| s == Status::Keep).into_iter().map(|(x, y, _)| Circle::new((x, y), 7, KEEP.filled())))
        .map_err(e)?
        .label("kept")
        .legend(|(x, y)| Circle::new((x + 9, y), 6, KEEP.filled()));
    // Outcomes without a value sit in the band at the worst end: failures red, not-run grey.
    let unmeasured = |class: StatusClass| -> Vec<f64> {
        rows.iter()
            .enumerate()
            .filter(|(i, r)| r.status.class() == class && (class == StatusClass::Failed || points[*i].is_none()))
            .map(|(i, _)| i as f64 + 1.0)
            .collect()
    };
    chart
        .draw_series(unmeasured(StatusClass::Failed).into_iter().map(|x| TriangleMarker::new((x, band), 7, FAIL.filled())))
        .map_err(e)?
        .label("crash / timeout / invalid")
        .legend(|(x, y)| TriangleMarker::new((x + 9, y), 6, FAIL.filled()));
    let not_run = unmeasured(StatusClass::NotRun);
    if !not_run.is_empty() {
        chart
            .draw_series(not_run.into_iter().map(|x| TriangleMarker::new((x, band), 6, REVERT.stroke_width(2))))
            .map_err(e)?
            .label("skipped / refused / interrupted / error")
            .legend(|(x, y)| TriangleMarker::new((x + 9, y), 5, REVERT.stroke_width(2)));
    }
    // Short descriptions on kept points (as autoresearch's progress.png), alternating above and
    // below the step so neighbours do not collide; a long night labels only its largest steps.
    let labelled = labelled_keeps(rows);
    let mut labels = vec![];
    for (k, (i, r)) in rows.iter().enumerate().filter(|(_, r)| labelled.contains(&r.id)).enumerate() {
        let Some(v) = points[i].filter(|v| *v > 0.0) else { continue };
        let text = format!("{}: {}", r.id, crate::units::cut(&crate::report::short_message(&r.message), 26));
        let dy = if k % 2 == 0 { -22 } else { 12 };
        // Near the right edge the label ends at the point instead of starting there.
        let x = i as f64 + 1.0;
        let dx = if x > n * 0.7 { -10 - 7 * crate::units::cells(&text) as i32 } else { -10 };
        labels.push(EmptyElement::at((x, axis.to(v))) + Text::new(text, (dx, dy), ("sans-serif", 12).into_font().color(&KEEP)));
    }
    chart.draw_series(labels).map_err(e)?;
    draw_legend(&mut chart, if lower_better { SeriesLabelPosition::LowerLeft } else { SeriesLabelPosition::UpperLeft })?;
    Ok(())
}

/// The best-so-far step line: level from the baseline, a vertical rise exactly between the
/// experiment before a keep and the keep, level again to the next keep (no slanted segments).
fn step_line(rows: &[ResultRow], best: &[Option<f64>]) -> Vec<(f64, f64)> {
    let mut steps = vec![];
    let mut prev: Option<f64> = None;
    for (i, b) in best.iter().enumerate() {
        let Some(b) = *b else { continue };
        let x = i as f64 + 1.0;
        match prev {
            None => {
                let start = rows.iter().find_map(|r| r.incumbent_value).unwrap_or(b);
                steps.push((-0.4, start));
                if start != b {
                    steps.push((x - 0.5, start));
                    steps.push((x - 0.5, b));
                }
            }
            Some(p) if p != b => {
                steps.push((x - 0.5, p));
                steps.push((x - 0.5, b));
            }
            _ => {}
        }
        prev = Some(b);
    }
    if let Some(p) = prev {
        steps.push((rows.len() as f64 + 0.4, p));
    }
    steps
}

fn roofline<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, night: &Night) -> DrawResult<()> {
    let (rows, hw) = (night.rows, night.hw);
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let log = Axis { log: true };
    let pts: Vec<(f64, f64, &ResultRow)> = rows
        .iter()
        .filter_map(|r| match (r.intensity, r.tflops) {
            (Some(i), Some(t)) if i > 0.0 && t > 0.0 => Some((i, t, r)),
            _ => None,
        })
        .collect();
    let base = baseline_point(night);
    let mut xs: Vec<f64> = pts.iter().map(|p| p.0).chain(base.map(|b| b.0)).collect();
    let mut ys: Vec<f64> = pts.iter().map(|p| p.1).chain(base.map(|b| b.1)).collect();
    if let Some(hw) = hw {
        let ridge = hw.peak_tflops * 1e3 / hw.hbm_gbps;
        xs.extend([ridge / 10.0, ridge * 4.0]);
        ys.extend([hw.peak_tflops * 1.5, hw.peak_tflops / 30.0]);
    }
    if xs.is_empty() {
        xs.extend([1.0, 1000.0]);
        ys.extend([0.1, 100.0]);
    }
    let (xlo, xhi) = range(&xs, log);
    let xhi = xhi + (xhi - xlo) * 0.06;
    let (ylo, yhi) = range(&ys, log);
    // Headroom above for the legend.
    let yhi = yhi + (yhi - ylo) * 0.25;
    let title = match hw {
        Some(h) => format!("roofline: {} TFLOP/s peak, {} GB/s HBM", sig(h.peak_tflops, 0), sig(h.hbm_gbps, 0)),
        None => "roofline (no [hardware] in ratchet.toml: points only)".into(),
    };
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(72)
        .build_cartesian_2d(xlo..xhi, ylo..yhi)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc("arithmetic intensity (FLOPs/byte, log)")
        .y_desc("achieved TFLOP/s (log)")
        .x_label_formatter(&|x| log.label(*x))
        .y_label_formatter(&|y| log.label(*y))
        .label_style(("sans-serif", 14))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(e)?;
    if let Some(hw) = hw {
        let ridge = hw.peak_tflops * 1e3 / hw.hbm_gbps;
        let roof = |i: f64| (i * hw.hbm_gbps / 1e3).min(hw.peak_tflops);
        // Straight in log-log: the bandwidth slope up to the ridge, then the compute roof.
        let mut line: Vec<(f64, f64)> = vec![(xlo, log.to(roof(10f64.powf(xlo))))];
        if log.to(ridge) > xlo && log.to(ridge) < xhi {
            line.push((log.to(ridge), log.to(hw.peak_tflops)));
        }
        line.push((xhi, log.to(roof(10f64.powf(xhi)))));
        chart
            .draw_series(LineSeries::new(line, BLACK.stroke_width(2)))
            .map_err(e)?
            .label(format!("roofline (ridge {} FLOPs/byte)", sig(ridge, 0)))
            .legend(|(x, y)| PathElement::new([(x, y), (x + 18, y)], BLACK.stroke_width(2)));
    }
    // The path of kept commits: from the baseline through each keep, in order.
    let mut path: Vec<(f64, f64)> = base.map(|(i, t)| (log.to(i), log.to(t))).into_iter().collect();
    path.extend(pts.iter().filter(|p| p.2.status == Status::Keep).map(|(i, t, _)| (log.to(*i), log.to(*t))));
    if path.len() > 1 {
        chart
            .draw_series(LineSeries::new(path, BEST.mix(0.8).stroke_width(2)))
            .map_err(e)?
            .label("path of kept commits")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 18, y)], BEST.stroke_width(2)));
    }
    // Kept last, so a kept point is never hidden under another at the same spot.
    for (class, name) in
        [(StatusClass::NotRun, ""), (StatusClass::Failed, "failed"), (StatusClass::NotKept, "not kept"), (StatusClass::Kept, "kept")]
    {
        let group: Vec<&(f64, f64, &ResultRow)> = pts.iter().filter(|p| p.2.status.class() == class).collect();
        if group.is_empty() {
            continue;
        }
        let s = chart
            .draw_series(group.iter().map(|(i, t, r)| {
                let c = status_color(r.status);
                let r = if class == StatusClass::Kept { 7 } else { 5 };
                Circle::new((log.to(*i), log.to(*t)), r, c.filled())
            }))
            .map_err(e)?;
        if !name.is_empty() {
            let c = match class {
                StatusClass::Kept => KEEP,
                StatusClass::Failed => FAIL,
                _ => REVERT,
            };
            s.label(name).legend(move |(x, y)| Circle::new((x + 9, y), 6, c.filled()));
        }
    }
    if let Some((i, t)) = base {
        chart
            .draw_series([Circle::new((log.to(i), log.to(t)), 7, BEST.filled())])
            .map_err(e)?
            .label("baseline")
            .legend(|(x, y)| Circle::new((x + 9, y), 6, BEST.filled()));
    }
    // Labels only on the baseline and the (largest) keeps; labels at the same spot merge ("3,7").
    let labelled = labelled_keeps(rows);
    let mut labels: Vec<(f64, f64, String)> = vec![];
    let spots = base
        .map(|(i, t)| (log.to(i), log.to(t), "base".to_string()))
        .into_iter()
        .chain(pts.iter().filter(|p| labelled.contains(&p.2.id)).map(|(i, t, r)| (log.to(*i), log.to(*t), r.id.to_string())));
    for (x, y, text) in spots {
        match labels.iter_mut().find(|l| (l.0 - x).abs() < 0.03 * (xhi - xlo) && (l.1 - y).abs() < 0.04 * (yhi - ylo)) {
            Some(l) => l.2.push_str(&format!(",{text}")),
            None => labels.push((x, y, text)),
        }
    }
    chart
        .draw_series(labels.into_iter().map(|(x, y, text)| EmptyElement::at((x, y)) + Text::new(text, (9, -17), ("sans-serif", 13))))
        .map_err(e)?;
    draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    Ok(())
}

/// Each measured experiment's runs, both sides (as hyperfine's whisker plots): per side a box
/// from the lower to the upper quartile, the median across it, whiskers to the extremes.
fn runs_chart<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, night: &Night) -> DrawResult<()> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let lat = |id: &str, side: Side| -> Vec<f64> {
        let mut v: Vec<f64> = night
            .runs
            .iter()
            .filter(|r| r.experiment == id && r.side == side && r.status == RunStatus::Ok)
            .filter_map(|r| r.latency_ms)
            .filter(|l| *l > 0.0)
            .collect();
        v.sort_by(f64::total_cmp);
        v
    };
    // Each experiment in percent of its incumbent's median: the spread of both sides and the
    // gap between them read the same whether the kernel takes 10 ms or 0.1 ms.
    let groups: Vec<(&ResultRow, Vec<f64>, Vec<f64>)> = night
        .rows
        .iter()
        .filter_map(|r| {
            let (inc, cand) = (lat(&r.id.to_string(), Side::Incumbent), lat(&r.id.to_string(), Side::Candidate));
            let base = crate::metrics::median(&inc)?;
            let pct = |v: Vec<f64>| v.into_iter().map(|x| x / base * 100.0).collect::<Vec<f64>>();
            Some((r, pct(inc), pct(cand)))
        })
        .collect();
    let all: Vec<f64> = groups.iter().flat_map(|(_, a, b)| a.iter().chain(b.iter()).cloned()).collect();
    let (mn, mx) = (all.iter().cloned().fold(f64::INFINITY, f64::min), all.iter().cloned().fold(0.0, f64::max));
    let axis = Axis { log: mn.is_finite() && mx / mn > 20.0 };
    let (ylo, yhi) = range(&all, axis);
    let yhi = yhi + (yhi - ylo) * 0.2;
    let n = groups.len().max(1) as f64;
    let mut chart = ChartBuilder::on(root)
        .caption(
            format!("every run: candidate (coloured) vs incumbent (grey){}", if axis.log { ", log scale" } else { "" }),
            ("sans-serif", 20),
        )
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(72)
        .build_cartesian_2d(-0.6..(n - 0.4), ylo..yhi)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc("experiment id")
        .y_desc("latency, % of the incumbent's median (lower is better)")
        .x_labels(groups.len().clamp(1, 25))
        .x_label_formatter(&|x| {
            let i = x.round() as i64;
            if (x - i as f64).abs() > 1e-6 || i < 0 || i as usize >= groups.len() {
                String::new()
            } else {
                groups[i as usize].0.id.to_string()
            }
        })
        .y_label_formatter(&|y| axis.label(*y))
        .label_style(("sans-serif", 14))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(e)?;
    let q = |v: &[f64], p: f64| -> f64 {
        let k = (v.len() - 1) as f64 * p;
        let (a, b) = (v[k.floor() as usize], v[k.ceil() as usize]);
        a + (b - a) * (k - k.floor())
    };
    let mut elems: Vec<PathElement<(f64, f64)>> = vec![];
    let mut boxes: Vec<Rectangle<(f64, f64)>> = vec![];
    for (k, (r, inc, cand)) in groups.iter().enumerate() {
        for (v, dx, color) in [(inc, -0.18, REVERT), (cand, 0.18, status_color(r.status))] {
            if v.is_empty() {
                continue;
            }
            let x = k as f64 + dx;
            let w = 0.13;
            let (lo, q1, med, q3, hi) = (v[0], q(v, 0.25), q(v, 0.5), q(v, 0.75), v[v.len() - 1]);
            let y = |t: f64| axis.to(t);
            let style = color.stroke_width(2);
            elems.push(PathElement::new([(x, y(lo)), (x, y(q1))], style));
            elems.push(PathElement::new([(x, y(q3)), (x, y(hi))], style));
            elems.push(PathElement::new([(x - w / 2.0, y(lo)), (x + w / 2.0, y(lo))], style));
            elems.push(PathElement::new([(x - w / 2.0, y(hi)), (x + w / 2.0, y(hi))], style));
            boxes.push(Rectangle::new([(x - w, y(q1)), (x + w, y(q3))], color.mix(0.35).filled()));
            elems.push(PathElement::new([(x - w, y(med)), (x + w, y(med))], BLACK.stroke_width(2)));
        }
    }
    chart.draw_series(boxes).map_err(e)?;
    chart.draw_series(elems).map_err(e)?;
    Ok(())
}

/// Ops drawn on the per-op chart at most (largest change first).
pub const MAX_OPS: usize = 14;

/// One experiment's per-op self time per kernel execution, incumbent (grey) beside candidate
/// (its status colour), the ops that changed most first.
fn ops_chart<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, row: &ResultRow, cand: &[OpStat], inc: &[OpStat]) -> DrawResult<()> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let ops = op_pairs(cand, inc);
    let n = ops.len().max(1) as f64;
    let xmax = ops.iter().flat_map(|o| [o.1, o.2]).fold(0.0f64, f64::max).max(1e-9) * 1.1;
    let title = format!("experiment {}: self time per op and kernel execution (us)", row.id);
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(230)
        .build_cartesian_2d(0.0..xmax, -0.6..(n - 0.4))
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc("us per kernel execution")
        .y_labels(ops.len().max(1))
        .y_label_formatter(&|y| {
            let i = y.round() as i64;
            if (y - i as f64).abs() > 1e-6 || i < 0 || i as usize >= ops.len() {
                String::new()
            } else {
                middle_cut(&ops[ops.len() - 1 - i as usize].0, 30)
            }
        })
        .label_style(("sans-serif", 13))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(e)?;
    let c = status_color(row.status);
    // The largest change on top.
    let bars = ops.iter().rev().enumerate().flat_map(|(k, (_, cv, iv))| {
        let y = k as f64;
        [
            Rectangle::new([(0.0, y + 0.02), (*iv, y + 0.38)], REVERT.mix(0.7).filled()),
            Rectangle::new([(0.0, y - 0.38), (*cv, y - 0.02)], c.filled()),
        ]
    });
    chart.draw_series(bars).map_err(e)?;
    chart
        .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
        .map_err(e)?
        .label("incumbent")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 16, y + 5)], REVERT.mix(0.7).filled()));
    chart
        .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
        .map_err(e)?
        .label("candidate")
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 16, y + 5)], c.filled()));
    draw_legend(&mut chart, SeriesLabelPosition::LowerRight)?;
    Ok(())
}

/// `s` cut to `max` chars in the middle: op names differ at their ends (`..._fusion.2`).
fn middle_cut(s: &str, max: usize) -> String {
    let chars: Vec<char> = s.chars().collect();
    if chars.len() <= max {
        return s.to_string();
    }
    let head = (max - 1) / 2;
    let tail = max - 1 - head;
    format!("{}…{}", chars[..head].iter().collect::<String>(), chars[chars.len() - tail..].iter().collect::<String>())
}

/// (op, candidate us, incumbent us) for the ops of either side, largest absolute change first,
/// at most [`MAX_OPS`].
pub fn op_pairs(cand: &[OpStat], inc: &[OpStat]) -> Vec<(String, f64, f64)> {
    let mut names: Vec<&str> = cand.iter().chain(inc).map(|o| o.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let get = |ops: &[OpStat], n: &str| ops.iter().find(|o| o.name == n).map(|o| o.per_execution_us).unwrap_or(0.0);
    let mut out: Vec<(String, f64, f64)> = names.iter().map(|n| (n.to_string(), get(cand, n), get(inc, n))).collect();
    // By change, then by size (an unchanged kernel still shows its heaviest ops).
    out.sort_by(|a, b| {
        ((b.1 - b.2).abs(), b.1.max(b.2)).partial_cmp(&((a.1 - a.2).abs(), a.1.max(a.2))).unwrap_or(std::cmp::Ordering::Equal)
    });
    out.truncate(MAX_OPS);
    out
}

/// The per-op chart of one experiment as SVG.
pub fn ops_svg(row: &ResultRow, cand: &[OpStat], inc: &[OpStat]) -> DrawResult<String> {
    font_once();
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
        ops_chart(&root, row, cand, inc)?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(out)
}

/// The per-op chart of one experiment as PNG bytes.
pub fn ops_png(row: &ResultRow, cand: &[OpStat], inc: &[OpStat]) -> DrawResult<Vec<u8>> {
    font_once();
    let (w, h) = SIZE;
    let mut rgb = vec![0u8; (w * h * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, SIZE).into_drawing_area();
        ops_chart(&root, row, cand, inc)?;
        root.present().map_err(|e| e.to_string())?;
    }
    encode_png(&rgb)
}

fn encode_png(rgb: &[u8]) -> DrawResult<Vec<u8>> {
    let (w, h) = SIZE;
    let mut out = vec![];
    {
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut wr = enc.write_header().map_err(|e| e.to_string())?;
        wr.write_image_data(rgb).map_err(|e| e.to_string())?;
    }
    Ok(out)
}

/// Where each look sits on the looks chart's x axis: pairs measured, the confirmation batch's
/// counted on from the first phase's last look (the rescue's look counts every pair already).
fn look_xs(rec: &LooksRecord) -> Vec<f64> {
    let main_end = rec.looks.iter().filter(|l| l.phase == LookPhase::Decision).map(|l| l.pairs).max().unwrap_or(0);
    rec.looks.iter().map(|l| (l.pairs + if l.phase == LookPhase::Confirmation { main_end } else { 0 }) as f64).collect()
}

/// One experiment's sequential test: the statistic (estimate / se; ln LR for the likelihood
/// ratio) at each look against the keep and revert boundaries of that look, the decision phase
/// and its confirmation batch, the deciding look ringed.
fn looks_chart<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, rec: &LooksRecord) -> DrawResult<()> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let xs = look_xs(rec);
    let finite: Vec<f64> =
        rec.looks.iter().flat_map(|l| [l.statistic, l.keep_boundary, l.revert_boundary]).flatten().chain([0.0]).collect();
    let (lo, hi) = range(&finite, Axis { log: false });
    // Headroom above for the legend; an unbounded statistic (se = 0) is drawn at the edge.
    let (ylo, yhi) = (lo, hi + (hi - lo) * 0.3);
    let clamp = |v: Option<f64>, l: &Look| -> f64 { v.unwrap_or(if l.estimate_pct > 0.0 { hi } else { lo }) };
    let xmax = xs.iter().cloned().fold(1.0, f64::max);
    let status = match rec.verdict {
        Verdict::Keep => Status::Keep,
        Verdict::Revert => Status::Revert,
        Verdict::Inconclusive => Status::Inconclusive,
        Verdict::Unconfirmed => Status::Unconfirmed,
    };
    let verdict = status.as_str();
    // A ratio's looks (the robust ratio's, `method = "likelihood-ratio"`'s) hold ln LR against
    // its levels, in one phase; the two phases' hold estimate / se, the confirmation after.
    let ratio = rec
        .looks
        .iter()
        .any(|l| l.scale == crate::stats::sequential::likelihood::SCALE || l.scale == crate::stats::sequential::robust::SCALE);
    let mut chart = ChartBuilder::on(root)
        .caption(
            format!(
                "experiment {}: the {} statistic at each look ({verdict}; the test's mean {:+.1}%)",
                rec.experiment,
                if ratio { "likelihood ratio's" } else { "sequential test's" },
                rec.effect_pct
            ),
            ("sans-serif", 20),
        )
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..xmax * 1.08 + 0.5, ylo..yhi)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc(if ratio { "pairs measured" } else { "pairs measured (confirmation batch after the first phase)" })
        .y_desc(if ratio { "statistic: ln likelihood ratio, a gain against no gain" } else { "statistic: estimate / standard error" })
        .x_label_formatter(&|x| count_label(*x))
        .label_style(("sans-serif", 14))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(e)?;
    chart.draw_series(LineSeries::new([(0.0, 0.0), (xmax * 1.08 + 0.5, 0.0)], BLACK.mix(0.3))).map_err(e)?;
    let phases = [
        (LookPhase::Decision, BEST, "statistic, decision phase"),
        (LookPhase::Confirmation, UNSURE, "statistic, confirmation batch"),
        (LookPhase::Rescue, RESCUE, "statistic, t-test over all pairs (rescue)"),
    ];
    let pts = |phase: LookPhase, f: &dyn Fn(&Look) -> Option<f64>| -> Vec<(f64, f64)> {
        rec.looks.iter().zip(&xs).filter(|(l, _)| l.phase == phase).filter_map(|(l, &x)| f(l).map(|y| (x, y))).collect()
    };
    // Boundaries first, so the statistic is drawn over them: one dashed step per look.
    for (name, color, get) in [
        ("keep boundary", KEEP, (|l: &Look| l.keep_boundary) as fn(&Look) -> Option<f64>),
        ("revert boundary", FAIL, |l: &Look| l.revert_boundary),
    ] {
        let mut first = true;
        for (phase, _, _) in phases {
            let p = pts(phase, &get);
            if p.is_empty() {
                continue;
            }
            let s = chart.draw_series(DashedLineSeries::new(p.clone(), 6, 4, color.stroke_width(2))).map_err(e)?;
            if first {
                s.label(name).legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], color.stroke_width(2)));
                first = false;
            }
            chart.draw_series(p.iter().map(|&(x, y)| Cross::new((x, y), 4, color.stroke_width(2)))).map_err(e)?;
        }
    }
    for (phase, color, name) in phases {
        let p: Vec<(f64, f64)> =
            rec.looks.iter().zip(&xs).filter(|(l, _)| l.phase == phase).map(|(l, &x)| (x, clamp(l.statistic, l))).collect();
        if p.is_empty() {
            continue;
        }
        chart
            .draw_series(LineSeries::new(p.clone(), color.stroke_width(3)))
            .map_err(e)?
            .label(name)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], color.stroke_width(3)));
        chart.draw_series(p.iter().map(|&(x, y)| Circle::new((x, y), 4, color.filled()))).map_err(e)?;
    }
    // The confirmation batch starts where the first phase stopped.
    if let Some(i) = rec.looks.iter().position(|l| l.phase == LookPhase::Confirmation) {
        let x0 = xs[..i].iter().cloned().fold(0.0, f64::max);
        chart.draw_series(LineSeries::new([(x0, ylo), (x0, hi)], BLACK.mix(0.25))).map_err(e)?;
        chart
            .draw_series([
                EmptyElement::at((x0, hi)) + Text::new("confirmation", (6, 4), ("sans-serif", 13).into_font().color(&BLACK.mix(0.6)))
            ])
            .map_err(e)?;
    }
    // The deciding look (the last), ringed in the verdict's colour; with a confirmation, the
    // look that ended the first phase is ringed too.
    let mut rings = vec![];
    if let Some(i) = rec.looks.iter().rposition(|l| l.phase == LookPhase::Decision) {
        if rec.looks.iter().any(|l| l.phase == LookPhase::Confirmation) {
            rings.push((i, BEST, "first phase: promising".to_string()));
        }
    }
    if let Some(l) = rec.looks.last() {
        let which = match l.phase {
            LookPhase::Confirmation => "confirmation look",
            LookPhase::Rescue => "the rescue's look",
            LookPhase::Decision => "look",
        };
        rings.push((rec.looks.len() - 1, status_color(status), format!("decided: {verdict} at {which} {} ({} pairs)", l.look, l.pairs)));
    }
    for (i, color, text) in rings {
        let (x, y) = (xs[i], clamp(rec.looks[i].statistic, &rec.looks[i]));
        let dx = if x > xmax * 0.6 { -12 - 7 * crate::units::cells(&text) as i32 } else { 12 };
        chart
            .draw_series([EmptyElement::at((x, y))
                + Circle::new((0, 0), 10, color.stroke_width(3))
                + Text::new(text, (dx, -22), ("sans-serif", 13).into_font().color(&color))])
            .map_err(e)?;
    }
    draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    Ok(())
}

/// One experiment's looks chart as SVG.
pub fn looks_svg(rec: &LooksRecord) -> DrawResult<String> {
    font_once();
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
        looks_chart(&root, rec)?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(out)
}

/// One experiment's looks chart as PNG bytes.
pub fn looks_png(rec: &LooksRecord) -> DrawResult<Vec<u8>> {
    font_once();
    let (w, h) = SIZE;
    let mut rgb = vec![0u8; (w * h * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, SIZE).into_drawing_area();
        looks_chart(&root, rec)?;
        root.present().map_err(|e| e.to_string())?;
    }
    encode_png(&rgb)
}

/// Which chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chart {
    Staircase,
    Roofline,
    /// Every run's latency, both sides, per experiment.
    Runs,
}

impl Chart {
    pub const ALL: [Chart; 3] = [Chart::Staircase, Chart::Roofline, Chart::Runs];

    /// The file name stem it is written under.
    pub fn name(self) -> &'static str {
        match self {
            Chart::Staircase => "staircase",
            Chart::Roofline => "roofline",
            Chart::Runs => "runs",
        }
    }
}

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, chart: Chart, night: &Night) -> DrawResult<()> {
    match chart {
        Chart::Staircase => staircase(root, night.rows),
        Chart::Roofline => roofline(root, night),
        Chart::Runs => runs_chart(root, night),
    }
}

/// The chart as SVG text.
pub fn svg(chart: Chart, night: &Night) -> DrawResult<String> {
    // Layout measures text even in SVG.
    font_once();
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
        draw(&root, chart, night)?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(out)
}

/// The chart as PNG bytes.
pub fn png(chart: Chart, night: &Night) -> DrawResult<Vec<u8>> {
    font_once();
    let (w, h) = SIZE;
    let mut rgb = vec![0u8; (w * h * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, SIZE).into_drawing_area();
        draw(&root, chart, night)?;
        root.present().map_err(|e| e.to_string())?;
    }
    encode_png(&rgb)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// What the HTML report's rows link to: each commit's diff (in the page), its runs, traces and
/// HLO (files of the workspace), with every path relative to the report's folder so that the
/// report and its workspace can move together and name no machine's paths.
#[derive(Debug, Clone, Default)]
pub struct Evidence {
    /// The folder the report is written to.
    pub report_dir: PathBuf,
    /// The workspace's root: the commands the report gives run from there.
    pub root: PathBuf,
    /// Each experiment's diff against its incumbent, by id (`Repo::patch`).
    pub diffs: BTreeMap<u64, String>,
}

/// Lines of a diff the report shows at most; `git show` has the rest.
const DIFF_LINES: usize = 400;

impl Evidence {
    /// The report's evidence for these rows, read from the workspace's repository.
    pub fn gather(repo: &crate::vcs::Repo, rows: &[ResultRow], report_dir: &Path) -> Evidence {
        let diffs = rows
            .iter()
            .filter_map(|r| {
                let oid = git2::Oid::from_str(&r.commit).ok()?;
                Some((r.id, repo.patch(oid).ok()?))
            })
            .collect();
        Evidence { report_dir: report_dir.to_path_buf(), root: repo.root().to_path_buf(), diffs }
    }

    /// `path` as a link from the report: relative to its folder, percent-encoded.
    fn href(&self, path: &Path) -> String {
        let rel = pathdiff::diff_paths(path, &self.report_dir).unwrap_or_else(|| path.to_path_buf());
        let text = rel.to_string_lossy().replace('\\', "/");
        esc(&percent_encoding::utf8_percent_encode(&text, HREF).to_string())
    }

    /// `path` as a command line names it from the workspace's root.
    fn named_from_root(&self, path: &Path) -> String {
        crate::printable::path(path.strip_prefix(&self.root).unwrap_or(path))
    }
}

/// What a path in an `href` must escape: controls, space and the characters with a meaning in
/// a URL (`/` and `.` stay as they are).
const HREF: &percent_encoding::AsciiSet =
    &percent_encoding::CONTROLS.add(b' ').add(b'"').add(b'#').add(b'%').add(b'?').add(b'<').add(b'>').add(b'`').add(b'\'');

/// A self-contained HTML report: the story line, the charts inline as SVG, the table and each
/// row's evidence. No scripts, no stylesheets or images from elsewhere: it opens the same
/// offline. It reads on a phone too (a viewport tag; the charts scale, the table scrolls
/// sideways in its own box).
pub fn html(night: &Night, title: &str, ev: &Evidence) -> DrawResult<String> {
    html_with(night, title, &[], ev)
}

/// [`html`] with extra inline SVG charts (per-op charts) after the others.
pub fn html_with(night: &Night, title: &str, extra_svgs: &[String], ev: &Evidence) -> DrawResult<String> {
    let rows = night.rows;
    let mut o = String::new();
    o.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
    o.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    o.push_str(&format!("<title>{}</title>\n", esc(title)));
    o.push_str(
        "<style>body{font-family:sans-serif;margin:1em auto;padding:0 1em;max-width:1100px;color:#222;line-height:1.4}\
         h1{font-size:1.4em;overflow-wrap:anywhere}\
         .scroll{overflow-x:auto;max-width:100%}table{border-collapse:collapse;font-size:13px}\
         th,td{padding:3px 8px;border-bottom:1px solid #ddd;text-align:right;white-space:nowrap}td.l,th.l{text-align:left}\
         td.msg{white-space:normal;min-width:14em;max-width:28em}\
         tr.kept td{background:#eaf6ee;font-weight:bold}tr.failed td{color:#b02020}tr.notrun td{color:#888}\
         tr.unsure td.st{color:#b07000}ol.kept li{margin:0.2em 0}ol.kept .fx{color:#1a7a3a;font-size:0.9em}\
         .charts svg{display:block;width:100%;max-width:960px;height:auto;margin:0.5em 0}</style>\n</head><body>\n",
    );
    o.push_str(&format!("<h1>{}</h1>\n", esc(title)));
    let kept = rows.iter().filter(|r| r.status == Status::Keep).count();
    let runs: u64 = rows.iter().map(|r| r.runs as u64).sum();
    let wall: f64 = rows.iter().map(|r| r.wall_s).sum();
    o.push_str(&format!(
        "<p>{} experiments, {kept} kept ({}); {runs} benchmark runs, {}.</p>\n",
        rows.len(),
        esc(&crate::report::status_counts(rows)),
        crate::units::fmt_duration(wall)
    ));
    if let Some(g) = crate::report::gain_line(rows) {
        o.push_str(&format!("<p><b>{}</b></p>\n", esc(&g)));
    }
    // The night's story in one list: what was kept, in order, with what each brought.
    let kept: Vec<&ResultRow> = rows.iter().filter(|r| r.status == Status::Keep).collect();
    if !kept.is_empty() {
        o.push_str("<ol class=\"kept\">\n");
        for r in kept {
            let fx = crate::report::speedup_line(r).unwrap_or_default();
            o.push_str(&format!(
                "<li value=\"{}\">{} <span class=\"fx\">{}</span></li>\n",
                r.id,
                esc(&crate::report::short_message(&r.message)),
                esc(&fx)
            ));
        }
        o.push_str("</ol>\n");
    }
    o.push_str("<div class=\"charts\">\n");
    for c in Chart::ALL {
        if c == Chart::Runs && night.runs.is_empty() {
            continue;
        }
        inline_svg(&mut o, &svg(c, night)?);
    }
    for s in extra_svgs {
        inline_svg(&mut o, s);
    }
    o.push_str("</div>\n<div class=\"scroll\"><table>\n<tr>");
    let cols = [
        "id",
        "status",
        "commit",
        "message",
        "speed-up [CI]",
        "latency Δ",
        "metric Δ",
        "best",
        "p",
        "latency ms",
        "util %",
        "regime",
        "runs",
        "note",
        "evidence",
    ];
    for c in cols {
        let l = matches!(c, "status" | "commit" | "message" | "regime" | "note" | "evidence");
        o.push_str(&format!("<th{}>{}</th>", if l { " class=\"l\"" } else { "" }, esc(c)));
    }
    o.push_str("</tr>\n");
    let best = crate::report::chain(rows);
    let f = |v: Option<f64>, d: usize| v.map(|x| sig(x, d)).unwrap_or_else(|| "-".into());
    // Each row's files, from its own runs (the run log read once, grouped by experiment).
    let mut by_experiment: BTreeMap<&str, Vec<&RunRecord>> = BTreeMap::new();
    for x in night.runs {
        by_experiment.entry(x.experiment.as_str()).or_default().push(x);
    }
    let files: Vec<RowFiles> =
        rows.iter().map(|r| row_files(by_experiment.get(r.id.to_string().as_str()).map_or(&[][..], Vec::as_slice))).collect();
    for ((r, b), rf) in rows.iter().zip(best).zip(&files) {
        let class = match r.status.class() {
            StatusClass::Kept => "kept",
            StatusClass::NotKept if crate::report::worth_rerun(r) => "unsure",
            StatusClass::NotKept => "notkept",
            StatusClass::Failed => "failed",
            StatusClass::NotRun => "notrun",
        };
        let (sx, lat) = match crate::report::speedup(r) {
            Some((x, ci)) => (crate::report::speedup_cell(x, ci), crate::report::pct1(crate::report::latency_change_pct(x))),
            None => ("-".into(), "-".into()),
        };
        let metric_delta = r.delta_pct.map(|d| format!("{} {}", r.metric, crate::report::pct1(d))).unwrap_or("-".into());
        let best_x = b.map(crate::report::fmt_x).unwrap_or_else(|| "-".into());
        let cells = [
            (r.id.to_string(), ""),
            (if crate::report::too_noisy(r) { "revert (too noisy to tell)".into() } else { r.status.as_str().to_string() }, "l st"),
            (r.commit.chars().take(8).collect(), "l"),
            (crate::report::one_line(&r.message), "l msg"),
            (sx, ""),
            (lat, ""),
            (metric_delta, ""),
            (best_x, ""),
            (r.p_value.map(crate::stats::fmt_p).unwrap_or("-".into()), ""),
            (f(r.latency_ms, 3), ""),
            (f(r.util_pct, 1), ""),
            (r.regime.clone().unwrap_or_default(), "l"),
            (r.runs.to_string(), ""),
            // The note on one line, cut between words; `ratchet show ID` has all of it.
            (crate::units::cut(&crate::report::table_note(r), 100), "l msg"),
        ];
        o.push_str(&format!("<tr class=\"{class}\">"));
        for (text, cls) in cells {
            o.push_str(&format!("<td{}>{}</td>", if cls.is_empty() { String::new() } else { format!(" class=\"{cls}\"") }, esc(&text)));
        }
        o.push_str(&format!("<td class=\"l\">{}</td>", evidence_links(r, rf, ev)));
        o.push_str("</tr>\n");
    }
    o.push_str("</table></div>\n<h2>Evidence</h2>\n");
    for (r, rf) in rows.iter().zip(&files) {
        evidence_section(&mut o, r, rf, ev);
    }
    o.push_str("</body></html>\n");
    Ok(o)
}

/// Where a row's figures come from, as the files of its workspace: its runs' folder, a
/// candidate's trace and HLO, the first of its runs that has each.
struct RowFiles {
    runs: Option<PathBuf>,
    /// (side, trace file, the XProf log directory above it).
    traces: Vec<(Side, PathBuf, PathBuf)>,
    hlo: Option<PathBuf>,
}

fn row_files(own: &[&RunRecord]) -> RowFiles {
    // A run's trace and HLO paths may be relative to its run's directory.
    let trace = |side: Side| {
        own.iter().filter(|x| x.side == side).find_map(|x| x.trace.as_ref().map(|t| x.out_dir.join(t))).map(|t| {
            // XProf opens the folder above `plugins/profile/<session>/` (the layout jax writes).
            let logdir = crate::trace::locate::xprof_logdir(&t).or_else(|| t.parent().map(Path::to_path_buf)).unwrap_or_else(|| t.clone());
            (side, t, logdir)
        })
    };
    RowFiles {
        runs: own.first().and_then(|x| x.out_dir.parent()).map(Path::to_path_buf),
        traces: [Side::Candidate, Side::Incumbent].into_iter().filter_map(trace).collect(),
        hlo: own.iter().filter(|x| x.side == Side::Candidate).find_map(|x| x.hlo.as_ref().map(|h| x.out_dir.join(h))),
    }
}

/// The row's cell of links: its diff (in this page), runs, candidate trace and HLO.
fn evidence_links(r: &ResultRow, f: &RowFiles, ev: &Evidence) -> String {
    let mut parts = vec![];
    if ev.diffs.contains_key(&r.id) {
        parts.push(format!("<a href=\"#exp-{}\">diff</a>", r.id));
    }
    if let Some(d) = &f.runs {
        parts.push(format!("<a href=\"{}/\">runs</a>", ev.href(d)));
    }
    if let Some((_, t, _)) = f.traces.first() {
        parts.push(format!("<a href=\"{}\">trace</a>", ev.href(t)));
    }
    if let Some(h) = &f.hlo {
        parts.push(format!("<a href=\"{}\">HLO</a>", ev.href(h)));
    }
    parts.push(format!("<a href=\"#exp-{}\">more</a>", r.id));
    parts.join(" · ")
}

/// A row's evidence in full: the commands that print it, its files, how to open its traces in
/// XProf (as the profiling guide's `xprof --port=8791 <logdir>`), and its diff.
fn evidence_section(o: &mut String, r: &ResultRow, f: &RowFiles, ev: &Evidence) {
    o.push_str(&format!(
        "<details id=\"exp-{0}\"><summary>{0} · {1} · {2}</summary>\n<p><code>ratchet show {0}</code>",
        r.id,
        esc(r.status.as_str()),
        esc(&crate::report::one_line(&r.message))
    ));
    if !r.commit.is_empty() {
        o.push_str(&format!(" · <code>git show {}</code>", esc(&r.commit[..r.commit.len().min(12)])));
    }
    o.push_str("</p>\n<ul>\n");
    if let Some(d) = &f.runs {
        o.push_str(&format!("<li>runs: <a href=\"{}/\">{}</a></li>\n", ev.href(d), esc(&ev.named_from_root(d))));
    }
    for (side, t, logdir) in &f.traces {
        o.push_str(&format!(
            "<li>{} trace: <a href=\"{}\">{}</a>; in XProf: <code>xprof --port=8791 {}</code></li>\n",
            side.as_str(),
            ev.href(t),
            esc(&t.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()),
            esc(&ev.named_from_root(logdir))
        ));
    }
    if let Some(h) = &f.hlo {
        o.push_str(&format!("<li>candidate HLO: <a href=\"{}\">{}</a></li>\n", ev.href(h), esc(&ev.named_from_root(h))));
    }
    o.push_str("</ul>\n");
    if let Some(diff) = ev.diffs.get(&r.id) {
        let lines: Vec<&str> = diff.lines().collect();
        let shown = lines[..lines.len().min(DIFF_LINES)].join("\n");
        o.push_str(&format!("<pre class=\"diff\">{}</pre>\n", esc(&crate::printable::block(&shown))));
        if lines.len() > DIFF_LINES {
            o.push_str(&format!("<p>{} more lines: <code>git show {}</code></p>\n", lines.len() - DIFF_LINES, esc(&r.commit)));
        }
    }
    o.push_str("</details>\n");
}

/// Append an SVG to an HTML page without its XML prolog: inline SVG must start at `<svg` (its
/// viewBox lets it scale).
fn inline_svg(o: &mut String, s: &str) {
    let start = s.find("<svg").unwrap_or(0);
    o.push_str(&s[start..]);
    o.push('\n');
}

/// The legend every chart draws: the series' labels in a white, lightly bordered box at `pos`.
fn draw_legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    pos: SeriesLabelPosition,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(pos)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_names_are_cut_in_the_middle() {
        assert_eq!(middle_cut("dynamic-update-slice_convert_fusion.2", 20), "dynamic-u…t_fusion.2");
        assert_eq!(middle_cut("while", 20), "while");
    }

    #[test]
    fn a_reverted_point_sits_by_its_own_ratio_not_its_absolute_median() {
        // Latency: a kept 2x (10 -> 5 ms), then a change measured 5% slower than its incumbent
        // whose runs happened to land on a fast stretch (median 4.0 ms, below the kept 5.0).
        let mut kept = ResultRow::unmeasured(1, Status::Keep, "a", String::new(), String::new());
        (kept.metric, kept.incumbent_value, kept.value, kept.delta_pct) = ("latency".into(), Some(10.0), Some(5.0), Some(100.0));
        let mut worse = ResultRow::unmeasured(2, Status::Revert, "b", String::new(), String::new());
        (worse.metric, worse.incumbent_value, worse.value, worse.delta_pct) = ("latency".into(), Some(3.8), Some(4.0), Some(-5.0));
        let (levels, points) = staircase_points(&[kept, worse]);
        assert_eq!(levels, [Some(5.0), Some(5.0)]);
        assert!((points[0].unwrap() - 5.0).abs() < 1e-12);
        // Worse than the line (higher latency), as its own test found: 5 / 0.95.
        assert!((points[1].unwrap() - 5.0 / 0.95).abs() < 1e-12, "{points:?}");
    }

    #[test]
    fn the_first_baseline_is_inside_the_staircase_axis() {
        // The demo's night: a baseline score of 0.002 and a kept 12.2x (+1124%).
        let mut kept = ResultRow::unmeasured(1, Status::Keep, "a", String::new(), String::new());
        (kept.metric, kept.incumbent_value, kept.value, kept.delta_pct) = ("score".into(), Some(0.002), Some(0.0245), Some(1123.7));
        let rows = [kept];
        let (best, points) = staircase_points(&rows);
        let vals = staircase_values(&rows, &best, &points);
        let axis = Axis { log: true };
        let (lo, hi) = range(&vals, axis);
        for v in [0.002, 0.0245] {
            assert!(lo < axis.to(v) && axis.to(v) < hi, "{v} outside the axis {lo}..{hi}");
        }
    }

    #[test]
    fn linear_ticks_are_distinct_and_count_ticks_whole() {
        // Ticks plotters gives a 100-120 axis: every one distinct as written.
        let ticks: Vec<String> = (0..9).map(|i| linear_label(100.0 + 2.5 * i as f64)).collect();
        assert_eq!(ticks, ["100", "102.5", "105", "107.5", "110", "112.5", "115", "117.5", "120"]);
        assert_eq!(linear_label(0.1 + 0.2), "0.3");
        assert_eq!(linear_label(-0.0), "0");
        assert_eq!(Axis { log: false }.label(115.0), "115");
        // The looks chart's pairs axis at half steps: no "0 0 1 2 2 2".
        let ticks: Vec<String> = (0..6).map(|i| count_label(i as f64 * 0.5)).collect();
        assert_eq!(ticks, ["0", "", "1", "", "2", ""]);
    }

    #[test]
    fn log_axis_labels_read_as_values() {
        let a = Axis { log: true };
        assert_eq!(a.label(a.to(100.0)), "100");
        assert_eq!(a.label(a.to(0.00398)), "0.0040");
        assert_eq!(a.label(a.to(316.23)), "320");
        assert_eq!(range(&[], a), (0.0, 1.0));
    }
}
