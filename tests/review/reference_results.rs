//! The committed reference run (`results/`, made by scripts/reference-run.sh) agrees with itself:
//! every figure of its table recomputes from its results.csv, the chained speed-up is the same in
//! the table, the HTML report and the README, and the files the README shows are there. It is
//! checked against its own records, never against a fresh run (whose figures differ by machine).

use ratchet::store::{ResultRow, Status, Store};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e} (scripts/reference-run.sh writes it)", p.display()))
}

fn rows() -> Vec<ResultRow> {
    let rows = Store::new(&root().join("results")).rows().unwrap();
    assert!(!rows.is_empty(), "results/results.csv holds no rows");
    rows
}

/// The number in `s` (a `4.36x`, a `-77.0%`, a `+1796.9%`), and half its last printed digit:
/// the most a correctly rounded figure may differ from the value behind it.
fn figure(s: &str) -> (f64, f64) {
    let t = s.trim().trim_end_matches(['x', '%']);
    let decimals = t.split_once('.').map_or(0, |(_, d)| d.len());
    (t.parse().unwrap_or_else(|_| panic!("{s:?} is no figure")), 0.5 * 10f64.powi(-(decimals as i32)) + 1e-9)
}

fn assert_shows(shown: &str, value: f64, what: &str) {
    let (v, tol) = figure(shown);
    assert!((v - value).abs() <= tol, "{what}: the table shows {shown}, results.csv gives {value}");
}

/// A speed-up (x) from a change of the deciding metric in percent: score goes as 1/latency^2,
/// TFLOP/s as 1/latency, latency as itself (its change is a latency's: negative is faster).
fn speedup(metric: &str, pct: f64) -> f64 {
    let r = 1.0 + pct / 100.0;
    match metric {
        "score" => r.sqrt(),
        "tflops" => r,
        "latency" => 1.0 / r,
        m => panic!("no speed-up rule for the metric {m:?}"),
    }
}

/// The kept rows' speed-ups chained, as the footer and the README say it (`13.1x`).
fn chained(rows: &[ResultRow]) -> f64 {
    rows.iter().filter(|r| r.status == Status::Keep).map(|r| 1.0 + r.speedup_pct.expect("a kept row has its speed-up") / 100.0).product()
}

#[test]
fn the_reference_table_recomputes_from_its_csv() {
    let rows = rows();
    let table = read(&root().join("results/table.txt"));
    let lines: Vec<&str> = table.lines().collect();
    // The rows sit between the two rules; the footer follows the second.
    let rules: Vec<usize> = (0..lines.len()).filter(|&i| lines[i].starts_with('─')).collect();
    assert_eq!(rules.len(), 2, "a header, rows and a footer: {table}");
    let mut seen = 0;
    for line in &lines[rules[0] + 1..rules[1]] {
        let mut cells: Vec<&str> = line.split_whitespace().collect();
        let Some(id) = cells.first().and_then(|c| c.parse::<u64>().ok()) else { continue };
        let row = rows.iter().find(|r| r.id == id).unwrap_or_else(|| panic!("the table's row {id} is not in results.csv"));
        seen += 1;
        // id, mark, status (a revert whose interval still reaches the minimum effect reads
        // "revert, noisy", as its note says), then the figures or dashes.
        if cells[2] == "revert," {
            assert_eq!(cells[3], "noisy", "row {id}: {line}");
            assert!(row.note.starts_with("too noisy to tell"), "row {id} reads noisy, its note does not say so: {}", row.note);
            cells.remove(3);
            cells[2] = "revert";
        } else {
            assert!(!row.note.starts_with("too noisy to tell"), "row {id}'s note says too noisy, its status does not: {line}");
        }
        assert_eq!(cells[2], row.status.as_str(), "row {id}'s status");
        let Some(pct) = row.speedup_pct else {
            assert_eq!(&cells[3..6], ["-", "-", "-"], "row {id} has no estimate in results.csv: {line}");
            continue;
        };
        let x = 1.0 + pct / 100.0;
        assert_shows(cells[3], x, &format!("row {id}'s speed-up"));
        let ci = cells[4].trim_matches(['[', ']']).split_once('-').unwrap_or_else(|| panic!("row {id}'s interval: {line}"));
        assert_shows(&format!("{}x", ci.0), speedup(&row.metric, row.ci_low_pct.unwrap()), &format!("row {id}'s interval, low"));
        assert_shows(&format!("{}x", ci.1), speedup(&row.metric, row.ci_high_pct.unwrap()), &format!("row {id}'s interval, high"));
        assert_shows(cells[5], (1.0 / x - 1.0) * 100.0, &format!("row {id}'s latency change"));
        assert_shows(cells[6], row.delta_pct.unwrap(), &format!("row {id}'s {} change", row.metric));
    }
    assert_eq!(seen, rows.len(), "the table shows every row of results.csv");

    let footer = lines[rules[1] + 1..].join(" ");
    let kept = rows.iter().filter(|r| r.status == Status::Keep).count();
    assert!(footer.starts_with(&format!("{} experiments, {kept} kept", rows.len())), "{footer}");
    let chain = chained(&rows);
    let said = footer.split("kept changes chained: ").nth(1).and_then(|s| s.split_whitespace().next()).expect("the chained speed-up");
    assert_shows(said, chain, "the chained speed-up");
    let latency = footer.split("faster (latency ").nth(1).and_then(|s| s.split(')').next()).expect("the chained latency change");
    assert_shows(latency, (1.0 / chain - 1.0) * 100.0, "the chained latency change");
    let runs: u32 = rows.iter().map(|r| r.runs).sum();
    assert!(footer.contains(&format!("{runs} benchmark runs")), "{runs} runs: {footer}");
    let wall = rows.iter().map(|r| r.wall_s).sum::<f64>().round() as u64;
    assert!(footer.contains(&format!("{}m{:02}s of experiments", wall / 60, wall % 60)), "{wall} s: {footer}");
    // The intervals that hold less than the rest are named with the level results.csv records.
    let levels: Vec<(u64, f64)> = rows.iter().filter_map(|r| r.ci_level_pct.map(|l| (r.id, l))).collect();
    let top = levels.iter().map(|x| x.1).fold(f64::NEG_INFINITY, f64::max);
    let low: Vec<String> =
        levels.iter().filter(|x| x.1 < top).map(|(id, l)| format!("{id} at {}%", ratchet::stats::fmt_level(*l))).collect();
    if low.is_empty() {
        assert!(!footer.contains("too few pairs"), "{footer}");
    } else {
        assert!(footer.contains(&format!("too few pairs for it: {}", low.join(", "))), "{low:?}: {footer}");
    }
}

#[test]
fn the_readme_and_the_report_say_the_reference_runs_figures() {
    let rows = rows();
    let chain = chained(&rows);
    let phrase = format!("kept changes chained: {} faster", ratchet::report::fmt_x(chain));
    let readme = read(&root().join("README.md"));
    assert!(readme.contains(&phrase), "the README should show the reference run's {phrase:?}");
    assert!(read(&root().join("results/report.html")).contains(&phrase), "the HTML report: {phrase:?}");
    // Every file of results/ the README links to is there.
    let linked: Vec<&str> =
        readme.match_indices("](results/").map(|(i, _)| &readme[i + 2..]).map(|s| s.split(')').next().unwrap()).collect();
    assert!(linked.iter().any(|l| l.ends_with("staircase.svg")), "the README shows the staircase: {linked:?}");
    for l in linked {
        let p = root().join(l);
        assert!(if l.ends_with('/') { p.is_dir() } else { p.is_file() }, "the README links to {l}, which is not there");
    }
    // Each row is one of the example's hypotheses, as committed in experiments/.
    for r in &rows {
        let file = r.hypothesis.split('@').next().unwrap();
        assert!(root().join("experiments").join(file).is_file(), "row {} names {file:?}, not in experiments/", r.id);
    }
}

/// The lines of a fenced block that follows `heading` in `text`.
fn block_after<'a>(text: &'a str, heading: &str) -> Vec<&'a str> {
    let start = text.find(heading).unwrap_or_else(|| panic!("no {heading:?}"));
    let rest = &text[start + heading.len()..];
    let rest = &rest[rest.find("```\n").expect("a fenced block") + 4..];
    rest[..rest.find("```").expect("the block's end")].lines().collect()
}

#[test]
fn the_readmes_sample_is_what_the_reference_runs_first_experiment_printed() {
    let run = read(&root().join("results/run.txt"));
    let printed: Vec<&str> =
        run.split("what the first experiment printed:\n").nth(1).expect("run.txt keeps the first experiment's output").lines().collect();
    let readme = read(&root().join("README.md"));
    assert_eq!(block_after(&readme, "What an experiment prints"), printed, "the README's sample is results/run.txt's");
    // A short report that fits: at most six lines of at most 100 columns, besides a noisy
    // machine's two-line note (what it costs, then the fix).
    let report = printed.iter().filter(|l| !l.starts_with("note: ") && !l.starts_with("  fix: ")).count();
    assert!(report <= 6 && printed.len() - report <= 2, "{printed:#?}");
    assert!(printed.iter().all(|l| l.chars().count() <= 100), "{printed:#?}");
    // Its decision is row 1's: the speed-up, interval and level that results.csv records.
    let r = &rows()[0];
    let (x, ci) = ratchet::report::speedup(r).expect("row 1 has its speed-up");
    let cell = ratchet::report::speedup_cell(x, ci);
    let (x, rest) = cell.split_once(" [").unwrap();
    let level = ratchet::stats::fmt_level(r.ci_level_pct.expect("its level"));
    let decided = format!("  {}: speed-up {x} [{level}% CI {rest}", r.status.as_str().to_uppercase());
    assert!(printed.iter().any(|l| l.starts_with(&decided)), "{decided}\n{printed:#?}");
}

#[test]
fn the_reference_review_names_no_machines_paths() {
    for f in ["run.txt", "report.html", "table.txt"] {
        let text = read(&root().join("results").join(f));
        for p in ["/work/", "/home/", "/tmp/", "/Users/", "/root/"] {
            assert!(!text.contains(p), "results/{f} names a machine's path ({p})");
        }
    }
    // The report's links are relative to it.
    let html = read(&root().join("results/report.html"));
    assert!(html.contains("href=\"../.ratchet/experiments/1/runs/\""), "the report links row 1's runs");
    assert!(!html.contains("href=\"/"), "an absolute link in the report");
}
