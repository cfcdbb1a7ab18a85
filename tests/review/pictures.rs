//! The charts and the HTML report tell the night's story truly: not-kept outcomes are
//! not failures, the roofline starts at the baseline and follows the kept commits, labels stay
//! few, failures sit at the worst end, the step line is square, and the page renders in a real
//! headless browser (screenshots kept under target/tmp/review-pictures for a person to look at).

use crate::support;
use crate::support::demo;

use demo::demo_rows;
use predicates::prelude::PredicateBooleanExt;
use ratchet::plot::{self, Chart, Night};
use ratchet::store::{ResultRow, Status};
use support::TestRepo;

const RED: &str = "#D03030";
const BLUE: &str = "#1F5FBF";

fn keep_dir() -> std::path::PathBuf {
    let keep = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("review-pictures");
    std::fs::create_dir_all(&keep).unwrap();
    keep
}

fn hw() -> ratchet::hardware::Hardware {
    ratchet::hardware::preset("tpu-v5e").unwrap().hw
}

/// The points of every polyline drawn in `color`.
fn polylines(svg: &str, color: &str) -> Vec<Vec<(f64, f64)>> {
    svg.split("<polyline")
        .skip(1)
        .filter(|p| p.split('>').next().unwrap().contains(&format!("stroke=\"{color}\"")))
        .map(|p| {
            let pts = p.split("points=\"").nth(1).unwrap().split('"').next().unwrap();
            pts.split_whitespace()
                .map(|xy| {
                    let (x, y) = xy.split_once(',').unwrap();
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect()
        })
        .collect()
}

/// The first vertex of every polygon (triangle marker) filled with `color`.
fn triangles(svg: &str, color: &str) -> Vec<(f64, f64)> {
    svg.split("<polygon")
        .skip(1)
        .filter(|p| p.contains(&format!("fill=\"{color}\"")))
        .map(|p| {
            let pts = p.split("points=\"").nth(1).unwrap();
            let (x, y) = pts.split_whitespace().next().unwrap().split_once(',').unwrap();
            (x.parse().unwrap(), y.parse().unwrap())
        })
        .collect()
}

#[test]
fn only_failures_are_red_and_the_step_line_is_square() {
    let rows = demo_rows();
    let runs = demo::demo_runs(&rows);
    let hw = hw();
    let night = Night { rows: &rows, runs: &runs, hw: Some(&hw) };
    let svg = plot::svg(Chart::Staircase, &night).unwrap();
    std::fs::write(keep_dir().join("demo-staircase.svg"), &svg).unwrap();
    // One crash in the demo, plus its legend entry: the inconclusive and the no-op are not red.
    assert_eq!(triangles(&svg, RED).len(), 2, "{svg}");
    assert_eq!(svg.matches(RED).count(), 2, "something else is drawn red");
    // The best-so-far line: every segment level or vertical.
    let lines = polylines(&svg, BLUE);
    let step = lines.iter().max_by_key(|l| l.len()).unwrap();
    assert!(step.len() >= 8, "{step:?}");
    for w in step.windows(2) {
        assert!(w[0].0 == w[1].0 || w[0].1 == w[1].1, "slanted segment {w:?}");
    }
    // Kept points carry their short description, cut between words.
    assert!(svg.contains("7: causal block skipping:"), "{svg}");
    assert!(!svg.contains("experiment: bump"), "the conventional prefix is dropped");
}

#[test]
fn with_lower_is_better_failures_sit_at_the_top() {
    let mut rows = demo_rows();
    for r in &mut rows {
        r.metric = "latency".into();
        (r.value, r.incumbent_value) = (r.latency_ms, r.incumbent_value.map(|v| 10.0 / (v / 1.23).sqrt()));
        r.delta_pct = r.speedup_pct;
    }
    let night = Night { rows: &rows, runs: &[], hw: None };
    let svg = plot::svg(Chart::Staircase, &night).unwrap();
    std::fs::write(keep_dir().join("latency-staircase.png"), plot::png(Chart::Staircase, &night).unwrap()).unwrap();
    let red = triangles(&svg, RED);
    let data: Vec<_> = red.iter().filter(|(x, _)| *x > 300.0).collect();
    assert_eq!(data.len(), 1, "{red:?}");
    // In the top band: above every data point of the chart (540 px high, plot from ~43 px).
    assert!(data[0].1 < 80.0, "failure marker at y = {} (lower is better: the worst end is the top)", data[0].1);
    let svg_hi = plot::svg(Chart::Staircase, &Night { rows: &demo_rows(), runs: &[], hw: None }).unwrap();
    let hi: Vec<_> = triangles(&svg_hi, RED).into_iter().filter(|(x, _)| *x > 300.0).collect();
    assert!(hi[0].1 > 420.0, "higher is better: failures at the bottom, got y = {}", hi[0].1);
}

#[test]
fn the_roofline_starts_at_the_baseline_and_follows_the_keeps() {
    let rows = demo_rows();
    let runs = demo::demo_runs(&rows);
    let hw = hw();
    let night = Night { rows: &rows, runs: &runs, hw: Some(&hw) };
    let (i, t) = plot::baseline_point(&night).expect("the baseline from the first incumbent's runs");
    assert!((i - 31.0).abs() < 0.01, "intensity {i}");
    assert!((t - 0.4).abs() < 0.02, "TFLOP/s {t}");
    let svg = plot::svg(Chart::Roofline, &night).unwrap();
    std::fs::write(keep_dir().join("demo-roofline.svg"), &svg).unwrap();
    assert!(svg.contains("\nbase\n</text>") && svg.contains("path of kept commits"), "{svg}");
    // The path: baseline plus the four keeps.
    let path = polylines(&svg, BLUE).into_iter().find(|l| l.len() == 5);
    assert!(path.is_some(), "{:?}", polylines(&svg, BLUE));
}

#[test]
fn labels_stay_few_on_a_long_night() {
    // 60 experiments, 30 of them kept: at most 12 labelled on either chart.
    let mut rows: Vec<ResultRow> = vec![];
    let base = demo_rows().remove(0);
    for id in 1..=60u64 {
        let mut r = base.clone();
        r.id = id;
        r.status = if id % 2 == 0 { Status::Keep } else { Status::Revert };
        r.message = format!("experiment: step {id} with a rather long description of the change");
        r.intensity = Some(30.0 + id as f64);
        r.tflops = Some(0.3 + id as f64 * 0.05);
        r.incumbent_value = Some(1.0 + id as f64 * 0.1);
        r.value = Some(1.1 + id as f64 * 0.1);
        r.delta_pct = Some(id as f64);
        rows.push(r);
    }
    let hw = hw();
    let night = Night { rows: &rows, runs: &[], hw: Some(&hw) };
    let stair = plot::svg(Chart::Staircase, &night).unwrap();
    assert_eq!(stair.matches("with a rather").count(), 12, "kept-point labels");
    let roof = plot::svg(Chart::Roofline, &night).unwrap();
    let id_labels = roof.matches("</text>").count();
    // Axis ticks, titles and legend entries, plus at most 12 point labels.
    let plain = plot::svg(Chart::Roofline, &Night { rows: &[], runs: &[], hw: Some(&hw) }).unwrap().matches("</text>").count();
    assert!(id_labels <= plain + 12 + 4, "{id_labels} texts vs {plain} without points");
    // The largest gains are the ones labelled.
    assert!(stair.contains("60: step 60") && !stair.contains("2: step 2 "), "{stair}");
}

#[test]
fn the_html_reads_on_a_phone_and_in_a_real_browser() {
    let t = TestRepo::new();
    demo::write_demo(t.path());
    // The last kept experiment's sequential test, as the experiment records it beside its runs.
    let exp9 = t.path().join(".ratchet/experiments/9");
    std::fs::create_dir_all(&exp9).unwrap();
    std::fs::write(exp9.join(ratchet::outcome::LOOKS_FILE), serde_json::to_string(&demo_looks(9)).unwrap()).unwrap();
    let out = t.path().join("plots");
    t.ratchet()
        .args(["plot", "-o"])
        .arg(&out)
        .arg("--html")
        .arg(out.join("report.html"))
        .assert()
        .success()
        .stdout(predicates::str::contains("looks-9.png"));
    for f in ["staircase", "roofline", "runs", "looks-9"] {
        assert!(out.join(format!("{f}.png")).exists() && out.join(format!("{f}.svg")).exists(), "{f}");
    }
    std::fs::copy(out.join("looks-9.png"), keep_dir().join("looks-9.png")).unwrap();
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("experiment 9: the sequential test&apos;s statistic"), "the looks chart is in the page");
    std::fs::write(keep_dir().join("report.html"), &html).unwrap();
    assert!(html.contains("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"));
    assert!(html.contains("viewBox=\"0 0 960 540\""), "charts scale with the page");
    // Rows by class: inconclusive and no-op are not failures.
    assert!(html.contains("<tr class=\"unsure\"><td>4</td>"), "{html}");
    assert!(html.contains("<tr class=\"notkept\"><td>5</td>"));
    assert!(html.contains("<tr class=\"failed\"><td>6</td>"));
    // The crash note on one line, cut between words.
    let note = html.split("<tr class=\"failed\">").nth(1).unwrap().split("</tr>").next().unwrap();
    assert!(note.contains("candidate crashed (exit 1): ⏎ Traceback"), "{note}");
    assert!(!note.contains('\n'));
    assert!(html.contains("kept changes chained: 14.0x faster (latency -92.8%)"), "{html}");
    // What was kept, in order, with what each brought.
    assert!(
        html.contains("<li value=\"7\">causal block skipping: skip fully masked KV blocks entirely <span class=\"fx\">speed-up 3.16x"),
        "{html}"
    );
    assert_eq!(html.matches("<li value=").count(), 4);

    let Some(browser) = ["chromium-headless-shell", "chromium", "google-chrome", "chromium-browser"]
        .into_iter()
        .find(|b| std::process::Command::new(b).arg("--version").output().is_ok_and(|o| o.status.success()))
    else {
        eprintln!("NOTE: no headless browser (chromium-headless-shell/chromium) on PATH: the HTML was checked as text only");
        return;
    };
    for (w, h) in [(420u32, 1800u32), (1280, 2800)] {
        let shot = keep_dir().join(format!("report-{w}.png"));
        let _ = std::fs::remove_file(&shot);
        // On a machine short of processes the browser itself can crash before it draws (its
        // zygote cannot fork): that says nothing of the page, so it gets three tries.
        let mut stderr = String::new();
        for _ in 0..3 {
            let status = std::process::Command::new(browser)
                .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"])
                .arg(format!("--screenshot={}", shot.display()))
                .arg(format!("--window-size={w},{h}"))
                .arg(format!("file://{}", out.join("report.html").display()))
                .output()
                .unwrap();
            if shot.exists() {
                break;
            }
            stderr += &String::from_utf8_lossy(&status.stderr);
        }
        assert!(shot.exists(), "{browser} took no screenshot in three tries: {stderr}");
        let dec = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
        let mut reader = dec.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), (w, h));
        let px = info.buffer_size() / (info.width * info.height) as usize;
        let pixels: Vec<&[u8]> = buf[..info.buffer_size()].chunks(px).collect();
        // The page drew something (text, charts), and the kept rows' green band shows.
        let ink = pixels.iter().filter(|p| p[0] < 128 && p[1] < 128 && p[2] < 128).count();
        assert!(ink > (w * h / 200) as usize, "{w}px: almost blank ({ink} dark pixels)");
        let kept_band = pixels.iter().filter(|p| (p[0], p[1], p[2]) == (0xea, 0xf6, 0xee)).count();
        assert!(kept_band > 1000, "{w}px: no kept row highlighted");
        // At phone width nothing is laid out past the right edge: the rightmost column of
        // pixels is background (the table scrolls inside its own box).
        let right: Vec<&&[u8]> = pixels.iter().skip(w as usize - 1).step_by(w as usize).collect();
        let dark = right.iter().filter(|p| p[0] < 200).count();
        assert!(dark < 10, "{w}px: {dark} dark pixels on the right edge");
        eprintln!("screenshot: {}", shot.display());
    }
}

/// A real decision of the sequential test on a fixed series of pairs (a 3% gain under 3% noise:
/// a few looks, then the confirmation), as the record an experiment writes.
fn demo_looks(id: u64) -> ratchet::outcome::LooksRecord {
    use ratchet::stats::sequential::{run_to_decision, OnePhase, Params, Sequential, Spending};
    let params = Params {
        min_pairs: 4,
        max_pairs: 24,
        look_every: 2,
        alpha: 0.02,
        spending: Spending::Pocock,
        min_effect_pct: 1.0,
        futility_beta: Some(0.2),
        confirm: true,
        confirm_pairs: 8,
        confirm_alpha: 0.05,
        // The two phases alone: what these pairs show is theirs.
        rescue_pairs: 0,
        rescue_alpha: 0.0,
        likelihood_ratio: OnePhase::Never,
        levels: ratchet::stats::sequential::Levels::first(),
        robust: None,
    };
    // A fixed, zero-mean noise pattern (no generator: the picture is the same every run).
    let noise = [0.04, -0.05, 0.01, -0.03, 0.05, -0.02, 0.03, -0.04, 0.02, -0.01, 0.04, -0.05];
    let d = run_to_decision(&Sequential::new(params), |_, i| 0.03 + noise[i % noise.len()]);
    ratchet::outcome::LooksRecord {
        version: ratchet::outcome::LOOKS_VERSION,
        experiment: id,
        verdict: d.verdict,
        effect_pct: d.effect_pct,
        ci_level: d.ci_level,
        looks: d.trail,
    }
}

#[test]
fn the_looks_chart_of_an_experiment_without_a_record_is_a_note() {
    let t = TestRepo::new();
    demo::write_demo(t.path());
    let out = t.path().join("plots");
    // No experiment recorded its looks (an old night): no looks chart by default, and one asked
    // for says why, without failing.
    t.ratchet().args(["plot", "-o"]).arg(&out).assert().success().stdout(predicates::str::contains("looks-").not());
    t.ratchet()
        .args(["plot", "--looks", "3", "-o"])
        .arg(&out)
        .assert()
        .success()
        .stdout(predicates::str::contains("experiment 3 has no record of its sequential test's looks"));
    assert!(!out.join("looks-3.svg").exists());
    t.ratchet().args(["plot", "--looks", "99", "-o"]).arg(&out).assert().code(2).stderr(predicates::str::contains("no experiment 99"));
}

#[test]
fn per_op_bars_from_the_runs_traces() {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/example-cpu");
    if !fixture.join("flash_attention_bq128_bkv128.xplane.pb").exists() {
        eprintln!("NOTE: tests/fixtures/example-cpu is absent: skipping the per-op chart");
        return;
    }
    let t = TestRepo::new();
    let rows = demo_rows();
    let store = ratchet::store::Store::new(&t.path().join("results"));
    for r in &rows {
        store.append_row(r).unwrap();
    }
    // Experiment 1's runs point at a real JAX capture (both sides: the same kernel).
    for mut run in demo::demo_runs(&rows) {
        if run.experiment == "1" {
            run.out_dir = fixture.clone();
        }
        store.append_run(&run).unwrap();
    }
    let out = t.path().join("plots");
    t.ratchet()
        .args(["plot", "--ops", "1", "-o"])
        .arg(&out)
        .arg("--html")
        .arg(out.join("report.html"))
        .assert()
        .success()
        .stdout(predicates::str::contains("ops-1.png"));
    let svg = std::fs::read_to_string(out.join("ops-1.svg")).unwrap();
    std::fs::copy(out.join("ops-1.png"), keep_dir().join("ops-1.png")).unwrap();
    assert!(svg.contains("experiment 1: self time per op"), "{svg}");
    // Two bars per op (candidate and incumbent), at most 14 ops.
    let bars = svg.matches("<rect").count() - 1 - 2; // background, two legend swatches
    assert!((4..=2 * ratchet::plot::MAX_OPS + 2).contains(&bars), "{bars} bars");
    assert!(std::fs::read_to_string(out.join("report.html")).unwrap().contains("experiment 1: self time per op"));
    // An experiment without traces says why.
    t.ratchet().args(["plot", "--ops", "3", "-o"]).arg(&out).assert().code(2).stderr(predicates::str::contains("no readable trace"));
}

#[test]
fn op_pairs_put_the_largest_change_first() {
    let op = |n: &str, us: f64| ratchet::trace::OpStat {
        name: n.into(),
        category: "x".into(),
        count: 1,
        total_us: us,
        inclusive_us: us,
        per_execution_us: us,
        fraction: 0.1,
        flops: None,
        bytes: None,
    };
    let cand = [op("dot", 50.0), op("exp", 9.0), op("new_op", 3.0)];
    let inc = [op("dot", 100.0), op("exp", 10.0), op("copy", 20.0)];
    let p = plot::op_pairs(&cand, &inc);
    let names: Vec<&str> = p.iter().map(|x| x.0.as_str()).collect();
    assert_eq!(names, ["dot", "copy", "new_op", "exp"]);
    assert_eq!((p[1].1, p[1].2), (0.0, 20.0), "an op gone from the candidate is 0 there");
}

#[test]
fn the_looks_chart_draws_the_rescue_s_look_after_both_phases_in_its_own_colour() {
    use ratchet::stats::sequential::{run_to_decision, Params, Sequential};
    use ratchet::stats::LookPhase;
    // The default rule on a budget of 8 + 4 pairs: its rescue reads 24.
    let params = Params { max_pairs: 8, confirm_pairs: 4, ..ratchet::config::DecisionConfig::earlier().params(None) };
    assert_eq!(params.max_total_pairs(), 24);
    // +3% under wide noise: neither clear nor futile in 8 pairs, clear over 24.
    let noise = [0.04, -0.05, 0.01, -0.03, 0.05, -0.02, 0.03, -0.04, 0.02, -0.01, 0.04, -0.05];
    let mut i = 0;
    let d = run_to_decision(&Sequential::new(params), |_, _| {
        i += 1;
        0.03 + noise[(i - 1) % noise.len()] * if i > 8 { 0.2 } else { 1.0 }
    });
    let rescue = d.trail.last().expect("looks");
    assert_eq!((rescue.phase, rescue.pairs), (LookPhase::Rescue, 24), "{:?}", d.trail);
    let rec = ratchet::outcome::LooksRecord {
        version: ratchet::outcome::LOOKS_VERSION,
        experiment: 4,
        verdict: d.verdict,
        effect_pct: d.effect_pct,
        ci_level: d.ci_level,
        looks: d.trail.clone(),
    };
    let svg = ratchet::plot::looks_svg(&rec).unwrap();
    // Its one point sits right of every first-phase look (x counts all 24 pairs), in purple.
    let rescue_x: Vec<(f64, f64)> = svg
        .split("<circle")
        .skip(1)
        .filter(|c| c.contains("fill=\"#7A3DA8\""))
        .map(|c| {
            let num = |k: &str| c.split(&format!("{k}=\"")).nth(1).unwrap().split('"').next().unwrap().parse::<f64>().unwrap();
            (num("cx"), num("cy"))
        })
        .collect();
    assert_eq!(rescue_x.len(), 1, "one rescue look drawn");
    let first: Vec<f64> = polylines(&svg, BLUE).into_iter().flatten().map(|(x, _)| x).collect();
    assert!(!first.is_empty() && first.iter().all(|&x| x < rescue_x[0].0), "{first:?} {rescue_x:?}");
    assert!(svg.contains("t-test over all pairs (rescue)"), "the legend names it");
    let ring = format!("decided: {} at the rescue", ratchet::replay::status_of(d.verdict).as_str());
    assert!(svg.contains(&ring), "the deciding ring names the rescue's look: {ring}");
}
