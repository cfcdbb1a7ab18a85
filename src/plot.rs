//! Pictures of the results (plotters): the score staircase over experiments (kept and reverted
//! marked, best-so-far as a step line) and the roofline chart (the configured hardware's roof,
//! each experiment's intensity vs achieved TFLOP/s, log-log), as SVG text and PNG bytes, and a
//! self-contained HTML report with the SVGs inline.
//!
//! PNG text needs a font: DejaVu Sans ships in `assets/fonts/` (license beside it) and is
//! compiled in, so rendering needs no system fonts. SVG names the font family and leaves the
//! glyphs to the viewer.

use crate::hardware::Hardware;
use crate::report::{progression, sig};
use crate::store::{ResultRow, Status};
use plotters::coord::Shift;
use plotters::prelude::*;

const FONT: &[u8] = include_bytes!("../assets/fonts/DejaVuSans.ttf");
pub const SIZE: (u32, u32) = (960, 540);
const KEEP: RGBColor = RGBColor(0x1a, 0x9a, 0x4a);
const REVERT: RGBColor = RGBColor(0x88, 0x88, 0x88);
const FAIL: RGBColor = RGBColor(0xd0, 0x30, 0x30);
const BEST: RGBColor = RGBColor(0x1f, 0x5f, 0xbf);

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
        let x = if self.log { 10f64.powf(v) } else { v };
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
    match s {
        Status::Keep => KEEP,
        Status::Revert | Status::Skipped => REVERT,
        _ => FAIL,
    }
}

fn staircase<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, rows: &[ResultRow]) -> DrawResult<()> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let metric = rows.last().map(|r| r.metric.clone()).unwrap_or_else(|| "score".into());
    let best = progression(rows);
    let vals: Vec<f64> = rows.iter().flat_map(|r| [r.value, r.incumbent_value]).flatten().filter(|v| *v > 0.0).collect();
    let (mn, mx) = (vals.iter().cloned().fold(f64::INFINITY, f64::min), vals.iter().cloned().fold(0.0, f64::max));
    let axis = Axis { log: mn.is_finite() && mx / mn > 20.0 };
    let (ylo, yhi) = range(&vals, axis);
    let n = rows.len() as f64;
    let dir = if metric == "latency" { "lower is better" } else { "higher is better" };
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
        .y_desc(metric.clone())
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

    // Best so far: a step line from the first baseline (x = 0) through every experiment.
    let mut steps = vec![];
    let mut prev = rows.iter().find_map(|r| r.incumbent_value);
    if let Some(p) = prev {
        steps.push((-0.4, axis.to(p)));
    }
    for (i, b) in best.iter().enumerate() {
        let x = i as f64 + 1.0;
        if let Some(b) = b {
            if let Some(p) = prev {
                steps.push((x - 0.5, axis.to(p)));
            }
            steps.push((x - 0.5, axis.to(*b)));
            steps.push((x + 0.4, axis.to(*b)));
            prev = Some(*b);
        }
    }
    chart
        .draw_series(LineSeries::new(steps, BEST.stroke_width(3)))
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
            .filter_map(|(i, r)| r.value.filter(|v| *v > 0.0).map(|v| (i as f64 + 1.0, axis.to(v), r.status)))
            .collect()
    };
    chart
        .draw_series(pts(&|s| s == Status::Keep).into_iter().map(|(x, y, _)| Circle::new((x, y), 7, KEEP.filled())))
        .map_err(e)?
        .label("kept")
        .legend(|(x, y)| Circle::new((x + 9, y), 6, KEEP.filled()));
    chart
        .draw_series(pts(&|s| s == Status::Revert).into_iter().map(|(x, y, _)| Cross::new((x, y), 7, REVERT.stroke_width(3))))
        .map_err(e)?
        .label("reverted")
        .legend(|(x, y)| Cross::new((x + 9, y), 6, REVERT.stroke_width(3)));
    // Failures and skips have no value: mark them on the floor of the chart.
    let floor = ylo + (yhi - ylo) * 0.03;
    let failed: Vec<(f64, Status)> = rows
        .iter()
        .enumerate()
        .filter(|(_, r)| !matches!(r.status, Status::Keep | Status::Revert))
        .map(|(i, r)| (i as f64 + 1.0, r.status))
        .collect();
    chart
        .draw_series(failed.iter().map(|(x, s)| TriangleMarker::new((*x, floor), 7, status_color(*s).filled())))
        .map_err(e)?
        .label("crash / timeout / invalid (red), skipped (grey)")
        .legend(|(x, y)| TriangleMarker::new((x + 9, y), 6, FAIL.filled()));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(e)?;
    Ok(())
}

fn roofline<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, rows: &[ResultRow], hw: Option<&Hardware>) -> DrawResult<()> {
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
    let mut xs: Vec<f64> = pts.iter().map(|p| p.0).collect();
    let mut ys: Vec<f64> = pts.iter().map(|p| p.1).collect();
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
    // Points on top of each other (same kernel shape, similar speed) share one label "3,4".
    let mut labels: Vec<(f64, f64, String)> = vec![];
    for (i, t, r) in &pts {
        let (x, y) = (log.to(*i), log.to(*t));
        match labels.iter_mut().find(|l| (l.0 - x).abs() < 0.02 * (xhi - xlo) && (l.1 - y).abs() < 0.03 * (yhi - ylo)) {
            Some(l) => l.2.push_str(&format!(",{}", r.id)),
            None => labels.push((x, y, r.id.to_string())),
        }
    }
    // Kept last, so a kept point is never hidden under a reverted one at the same spot.
    for (s, name) in [(Status::Invalid, "other"), (Status::Revert, "reverted"), (Status::Keep, "kept")] {
        let group: Vec<&(f64, f64, &ResultRow)> = pts
            .iter()
            .filter(|p| match s {
                Status::Keep | Status::Revert => p.2.status == s,
                _ => !matches!(p.2.status, Status::Keep | Status::Revert),
            })
            .collect();
        let c = status_color(s);
        chart
            .draw_series(group.iter().map(|(i, t, _)| Circle::new((log.to(*i), log.to(*t)), 6, c.filled())))
            .map_err(e)?
            .label(name)
            .legend(move |(x, y)| Circle::new((x + 9, y), 6, c.filled()));
    }
    chart
        .draw_series(labels.into_iter().map(|(x, y, text)| EmptyElement::at((x, y)) + Text::new(text, (8, -16), ("sans-serif", 13))))
        .map_err(e)?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(e)?;
    Ok(())
}

/// Which chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chart {
    Staircase,
    Roofline,
}

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, chart: Chart, rows: &[ResultRow], hw: Option<&Hardware>) -> DrawResult<()> {
    match chart {
        Chart::Staircase => staircase(root, rows),
        Chart::Roofline => roofline(root, rows, hw),
    }
}

/// The chart as SVG text.
pub fn svg(chart: Chart, rows: &[ResultRow], hw: Option<&Hardware>) -> DrawResult<String> {
    // Layout measures text even in SVG.
    font_once();
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
        draw(&root, chart, rows, hw)?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(out)
}

/// The chart as PNG bytes.
pub fn png(chart: Chart, rows: &[ResultRow], hw: Option<&Hardware>) -> DrawResult<Vec<u8>> {
    font_once();
    let (w, h) = SIZE;
    let mut rgb = vec![0u8; (w * h * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, SIZE).into_drawing_area();
        draw(&root, chart, rows, hw)?;
        root.present().map_err(|e| e.to_string())?;
    }
    let mut out = vec![];
    {
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut wr = enc.write_header().map_err(|e| e.to_string())?;
        wr.write_image_data(&rgb).map_err(|e| e.to_string())?;
    }
    Ok(out)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A self-contained HTML report: the story line, both charts inline as SVG, and the table.
/// No scripts, no stylesheets or images from elsewhere: it opens the same offline.
pub fn html(rows: &[ResultRow], hw: Option<&Hardware>, title: &str) -> DrawResult<String> {
    let mut o = String::new();
    o.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
    o.push_str(&format!("<title>{}</title>\n", esc(title)));
    o.push_str(
        "<style>body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse;font-size:13px}\
         th,td{padding:3px 8px;border-bottom:1px solid #ddd;text-align:right}td.l,th.l{text-align:left}\
         tr.keep td{background:#eaf6ee;font-weight:bold}tr.fail td{color:#b02020}tr.skipped td{color:#888}\
         .charts svg{max-width:100%;height:auto;margin:0.5em 0}</style>\n</head><body>\n",
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
    o.push_str("<div class=\"charts\">\n");
    for c in [Chart::Staircase, Chart::Roofline] {
        let s = svg(c, rows, hw)?;
        // Drop the XML prolog if any: inline SVG must start at <svg.
        let start = s.find("<svg").unwrap_or(0);
        o.push_str(&s[start..]);
        o.push('\n');
    }
    o.push_str("</div>\n<table>\n<tr>");
    let cols =
        ["id", "status", "commit", "message", "tags", "value", "best", "Δ% [CI]", "p", "latency ms", "util %", "regime", "runs", "note"];
    for c in cols {
        let l = matches!(c, "status" | "commit" | "message" | "tags" | "regime" | "note");
        o.push_str(&format!("<th{}>{}</th>", if l { " class=\"l\"" } else { "" }, esc(c)));
    }
    o.push_str("</tr>\n");
    let best = progression(rows);
    let f = |v: Option<f64>, d: usize| v.map(|x| sig(x, d)).unwrap_or_else(|| "-".into());
    for (r, b) in rows.iter().zip(best) {
        let class = match r.status {
            Status::Keep => "keep",
            Status::Revert => "revert",
            Status::Skipped => "skipped",
            _ => "fail",
        };
        let delta = match (r.delta_pct, r.ci_low_pct, r.ci_high_pct) {
            (Some(d), Some(l), Some(h)) => format!("{d:+.1}% [{l:+.1}, {h:+.1}]"),
            _ => "-".into(),
        };
        let cells = [
            (r.id.to_string(), false),
            (r.status.as_str().to_string(), true),
            (r.commit.chars().take(8).collect(), true),
            (r.message.clone(), true),
            (r.tags.replace(';', ", "), true),
            (f(r.value, 3), false),
            (f(b, 3), false),
            (delta, false),
            (r.p_value.map(crate::stats::fmt_p).unwrap_or("-".into()), false),
            (f(r.latency_ms, 3), false),
            (f(r.util_pct, 1), false),
            (r.regime.clone().unwrap_or_default(), true),
            (r.runs.to_string(), false),
            (r.note.lines().next().unwrap_or("").chars().take(120).collect(), true),
        ];
        o.push_str(&format!("<tr class=\"{class}\">"));
        for (text, left) in cells {
            o.push_str(&format!("<td{}>{}</td>", if left { " class=\"l\"" } else { "" }, esc(&text)));
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</table>\n</body></html>\n");
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_axis_labels_read_as_values() {
        let a = Axis { log: true };
        assert_eq!(a.label(a.to(100.0)), "100");
        assert_eq!(a.label(a.to(0.00398)), "0.0040");
        assert_eq!(a.label(a.to(316.23)), "320");
        assert_eq!(range(&[], a), (0.0, 1.0));
    }
}
