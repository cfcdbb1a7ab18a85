//! The morning review against the runs behind it: experiments run in-process on the mock
//! executor, then every view (the table at 80 columns and wide, Markdown, CSV, JSON, `show`,
//! HTML) is read and its speed-ups recomputed from results/runs.jsonl by a separate, plain
//! implementation of the estimate (every Walsh average enumerated, the signed-rank law counted).

use crate::support;

use ratchet::bench::mock::{MockExecutor, Step};
use ratchet::bench::Side;
use ratchet::events::Effects;
use ratchet::experiment::{self, Options, Outcome};
use ratchet::report::{self, Format, TableOpts, View};
use ratchet::signals::Cancel;
use ratchet::store::{ResultRow, Status};
use ratchet::workspace::Workspace;
use std::path::Path;

/// Latency decides; default alpha (0.02), so intervals are at 96%.
fn config(max_pairs: u32) -> String {
    format!(
        "[benchmark]\ncommand = \"true\"\ntimeout_s = 20\nkill_grace_s = 0.5\nwarmup = 0\niters = 5\nprofile_iters = 0\n\
         [hardware]\npreset = \"tpu-v5e\"\n[decision]\nmin_pairs = 4\nmax_pairs = {max_pairs}\nconfirm_pairs = 4\n\
         [score]\nmetric = \"latency\"\n"
    )
}
const LEVEL: f64 = 0.96;

struct Repo {
    dir: tempfile::TempDir,
}

impl Repo {
    fn new(max_pairs: u32) -> Repo {
        support::isolate_git();
        let r = Repo { dir: tempfile::tempdir().unwrap() };
        r.git(&["init", "-q", "-b", "main"]);
        r.git(&["config", "user.name", "Test"]);
        r.git(&["config", "user.email", "test@example.com"]);
        r.write("ratchet.toml", &config(max_pairs));
        r.write("kernel.py", "BQ = 0\n");
        r.git(&["add", "-A"]);
        r.git(&["commit", "-qm", "baseline"]);
        r
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn write(&self, rel: &str, text: &str) {
        std::fs::write(self.path().join(rel), text).unwrap();
    }

    fn git(&self, args: &[&str]) -> String {
        support::git_in(self.path(), args)
    }

    /// One experiment whose hypothesis writes `kernel.py`, measured by `exec`.
    fn experiment(&self, n: usize, exec: &mut MockExecutor) -> Outcome {
        self.experiment_with_events(n, exec).0
    }

    /// [`Repo::experiment`], with the events it emitted.
    fn experiment_with_events(&self, n: usize, exec: &mut MockExecutor) -> (Outcome, Vec<ratchet::events::Event>) {
        self.write("kernel.py", &format!("BQ = {n}\n"));
        let mut events = vec![];
        let ws = Workspace::discover(self.path()).unwrap().lock("test", &mut events).unwrap();
        let mut fx = Effects::new(&mut events, Cancel::new());
        ratchet::sweep::recover(&ws, &mut fx).unwrap();
        let opts = Options { message: format!("experiment: idea {n}"), ..Default::default() };
        let o = experiment::run(&ws, &opts, exec, &mut fx).unwrap();
        drop(fx);
        (o, events)
    }

    fn rows(&self) -> Vec<ResultRow> {
        Workspace::discover(self.path()).unwrap().store.rows().unwrap()
    }
}

/// The incumbent at `inc` ms except its runs `wild` (0-based, per side), 4x slow; the candidate
/// at `cand` ms.
fn wild(inc: f64, cand: f64, wild: &'static [usize]) -> MockExecutor {
    MockExecutor::new(move |c| match c.side {
        Side::Incumbent if wild.contains(&c.n) => Step::Latency(4.0 * inc),
        Side::Incumbent => Step::Latency(inc),
        Side::Candidate => Step::Latency(cand),
    })
}

fn views(repo: &Repo) -> Vec<(&'static str, String)> {
    let ws = Workspace::discover(repo.path()).unwrap();
    let rows = ws.store.rows().unwrap();
    let runs = ws.store.runs().unwrap();
    let view = View::all(&rows);
    let opts = |width, wide| TableOpts { color: false, width, wide };
    let mut v = vec![
        ("table at 80 columns", report::render_with(&view, Format::Table, opts(80, false))),
        ("table at 200 columns", report::render_with(&view, Format::Table, opts(200, false))),
        ("wide table", report::render_with(&view, Format::Table, opts(80, true))),
        ("markdown", report::render_with(&view, Format::Md, opts(80, false))),
        ("html", ratchet::plot::html(&ratchet::plot::Night { rows: &rows, runs: &runs, hw: None }, "review", &Default::default()).unwrap()),
    ];
    for r in &rows {
        let own: Vec<_> = runs.iter().filter(|x| x.experiment == r.id.to_string()).cloned().collect();
        v.push(("show", ratchet::cli::show::render(&ws.repo, r, &own, None)));
    }
    v
}

#[test]
fn a_true_2x_reads_2x_everywhere_despite_two_wild_incumbent_runs() {
    // The earlier rule, whose decision reads the plain mean the wild runs carry.
    let repo = Repo::new(16);
    repo.write("ratchet.toml", &config(16).replace("[decision]\n", "[decision]\nmethod = \"auto\"\n"));
    repo.git(&["commit", "-qam", "the earlier rule"]);
    let o = repo.experiment(1, &mut wild(10.0, 5.0, &[1, 2]));
    assert_eq!(o.row.status, Status::Keep, "{}", o.row.note);
    let (x, _) = report::speedup(&o.row).unwrap();
    assert!((x / 2.0 - 1.0).abs() < 0.15, "the row reads {x:.2}x for a true 2.0x");
    // The decision's own mean is what the row used to show: carried by the two wild runs.
    let d = o.decision.as_ref().unwrap();
    assert!(1.0 + d.effect_pct / 100.0 > 2.3, "the mean is {:.2}x: the case does not test anything", 1.0 + d.effect_pct / 100.0);
    let shown = report::fmt_x(x);
    // The test's mean is `show`'s, named there; no other view prints it.
    let mean = format!("{:+.2}%", d.effect_pct);
    for (name, text) in views(&repo) {
        assert!(name == "show" || !text.contains(&mean), "{name} shows the test's mean {mean}:\n{text}");
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(flat.contains(&shown), "{name} does not show {shown}:\n{text}");
        // No other speed-up factor in the view (the best-so-far and the footer's chain agree).
        for w in flat.split(|c: char| c.is_whitespace() || "[]()<>,;-".contains(c)) {
            if let Some(f) = w.strip_suffix('x').and_then(|n| n.parse::<f64>().ok()) {
                if f > 1.5 {
                    assert!((f / 2.0 - 1.0).abs() < 0.15 || text.contains(&format!("[{}", w)), "{name} shows {w}:\n{text}");
                }
            }
        }
    }
    // The JSON and CSV carry the same figure.
    let rows = repo.rows();
    let json: serde_json::Value = serde_json::from_str(&report::json(&rows)).unwrap();
    let sp = json[0]["speedup_pct"].as_f64().unwrap();
    assert!((1.0 + sp / 100.0 - x).abs() < 1e-9);
    let csv = report::csv(&rows);
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let col = reader.headers().unwrap().iter().position(|h| h == "speedup_pct").unwrap();
    let cell: f64 = reader.records().next().unwrap().unwrap()[col].parse().unwrap();
    assert!((1.0 + cell / 100.0 - x).abs() < 1e-9, "{csv}");
}

// ---- an independent recomputation from results/runs.jsonl ----

/// (incumbent, candidate) latencies per experiment, straight from the run log: successful,
/// not superseded runs, two at a time in order.
fn pairs_from_log(text: &str) -> std::collections::BTreeMap<u64, Vec<(f64, f64)>> {
    let mut by: std::collections::BTreeMap<u64, Vec<serde_json::Value>> = Default::default();
    for l in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        if v["status"] == "ok" && v["superseded"] != true {
            by.entry(v["experiment"].as_str().unwrap().parse().unwrap()).or_default().push(v);
        }
    }
    by.into_iter()
        .map(|(id, runs)| {
            let pairs = runs
                .chunks_exact(2)
                .map(|p| {
                    let get = |side: &str| p.iter().find(|r| r["side"] == side).unwrap()["value"].as_f64().unwrap();
                    (get("incumbent"), get("candidate"))
                })
                .collect();
            (id, pairs)
        })
        .collect()
}

/// Hodges-Lehmann by enumeration, and its interval from the signed-rank law counted over all
/// 2^n sign patterns, with the coverage that interval has. The miss probability 1 - level is
/// split as docs/decisions.md states: an eighth to the lower end (0.5% at 96%); the upper end
/// gets the rest on a keep's row and also an eighth on a row without a keep. A lower end that
/// cannot be that sure (too few pairs) is the smallest Walsh average, and the upper end gets what
/// is left of the two ends' total.
fn hl(d: &[f64], level: f64, keep: bool) -> (f64, f64, f64, f64) {
    let n = d.len();
    let mut w: Vec<f64> = (0..n).flat_map(|i| (i..n).map(move |j| (i, j))).map(|(i, j)| (d[i] + d[j]) / 2.0).collect();
    w.sort_by(f64::total_cmp);
    let m = w.len();
    let est = if m % 2 == 1 { w[m / 2] } else { (w[m / 2 - 1] + w[m / 2]) / 2.0 };
    // How many of the 2^n sign patterns give each sum of positive ranks: each rank in or out.
    let mut counts = vec![0u64; m + 1];
    counts[0] = 1;
    for r in 1..=n {
        for s in (r..=m).rev() {
            counts[s] += counts[s - r];
        }
    }
    let total = (1u64 << n) as f64;
    let cdf = |k: usize| counts[..=k].iter().sum::<u64>() as f64 / total;
    let end = |allowed: f64| {
        let mut k = 1;
        while k < m / 2 && cdf(k) <= allowed + 1e-12 {
            k += 1;
        }
        k
    };
    let (lower, both) = ((1.0 - level) / 8.0, if keep { 1.0 - level } else { (1.0 - level) / 4.0 });
    let low = end(lower);
    let high = end(if cdf(low - 1) > lower + 1e-12 { both - cdf(low - 1) } else { both - lower });
    (est, w[low - 1], w[m - high], 1.0 - cdf(low - 1) - cdf(high - 1))
}

/// What the terminal face prints for these events (stdout, stderr), at `width` columns.
fn printed(events: Vec<ratchet::events::Event>, v: ratchet::cli::ui::Verbosity, width: usize) -> (String, String) {
    let mut ui = ratchet::cli::ui::Text::with_writers(Vec::new(), Vec::new()).with_verbosity(v).with_width(width);
    for e in events {
        ratchet::events::Events::emit(&mut ui, e);
    }
    let (out, err) = ui.into_writers();
    (String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap())
}

#[test]
fn every_speed_up_in_the_review_is_recomputed_from_the_runs() {
    let repo = Repo::new(8);
    // What each experiment printed when it ended.
    let mut said = vec![];
    let mut run = |n: usize, exec: &mut MockExecutor| {
        said.push(printed(repo.experiment_with_events(n, exec).1, Default::default(), 100).0);
    };
    // A kept 2x with a wild run, a kept 1.25x, a clear loss, a noisy stop.
    run(1, &mut wild(10.0, 5.0, &[2]));
    run(2, &mut wild(5.0, 4.0, &[]));
    run(3, &mut wild(4.0, 5.0, &[]));
    let mut noisy = MockExecutor::sides(Step::Latency(4.0), Step::Latency(4.0));
    noisy.cv = 0.3;
    run(4, &mut noisy);
    // A gain of about 2% swinging from -2% to +6% pair to pair: the budget ends it without a
    // keep, over enough pairs that the row's upper end (at the small share, as on every row
    // without a keep) is not the one a keep's row would show.
    const GAINS: [f64; 8] = [0.06, 0.01, 0.05, -0.02, 0.04, 0.0, -0.01, 0.03];
    run(
        5,
        &mut MockExecutor::new(|c| match c.side {
            Side::Incumbent => Step::Latency(4.0),
            Side::Candidate => Step::Latency(4.0 / (1.0 + GAINS[c.n % GAINS.len()])),
        }),
    );
    // Gains of 0.2-1.5% a pair, 0.8% on average, under the 1% minimum effect: reverted by the
    // two phases with every pair above no gain, yet the row's lower end is at most no gain.
    const SMALL: [f64; 8] = [0.015, 0.002, 0.012, 0.003, 0.01, 0.004, 0.014, 0.002];
    run(
        6,
        &mut MockExecutor::new(|c| match c.side {
            Side::Incumbent => Step::Latency(4.0),
            Side::Candidate => Step::Latency(4.0 / (1.0 + SMALL[c.n % SMALL.len()])),
        }),
    );
    let rows = repo.rows();
    let log = std::fs::read_to_string(repo.path().join("results/runs.jsonl")).unwrap();
    let pairs = pairs_from_log(&log);
    let mut chain = 1.0;
    let mut expected_best = vec![];
    for r in &rows {
        let p = &pairs[&r.id];
        // Latency: the speed-up of a pair is incumbent / candidate.
        let d: Vec<f64> = p.iter().map(|(i, c)| (i / c).ln()).collect();
        let (est, lo, hi, coverage) = hl(&d, LEVEL, r.status == Status::Keep);
        // A row without a keep: its lower end reaches no gain.
        let lo = if r.status != Status::Keep { lo.min(0.0) } else { lo };
        let pct = |x: f64| (x.exp() - 1.0) * 100.0;
        // The level the row states is the one its interval has: the decision's, or with too few
        // pairs the lower coverage of the Walsh averages' range.
        let level = coverage.min(LEVEL) * 100.0;
        assert!((r.ci_level_pct.unwrap() - level).abs() < 1e-9, "row {}: {:?} vs {level} over {} pairs", r.id, r.ci_level_pct, d.len());
        assert!((r.speedup_pct.unwrap() - pct(est)).abs() < 1e-9, "row {}: {:?} vs {}", r.id, r.speedup_pct, pct(est));
        assert!((r.ci_low_pct.unwrap() - pct(lo)).abs() < 1e-9 && (r.ci_high_pct.unwrap() - pct(hi)).abs() < 1e-9, "row {}", r.id);
        let median = |side: usize| support::median(p.iter().map(|x| if side == 0 { x.0 } else { x.1 }).collect());
        assert!((r.incumbent_value.unwrap() - median(0)).abs() < 1e-9 && (r.value.unwrap() - median(1)).abs() < 1e-9);
        if r.status == Status::Keep {
            chain *= est.exp();
        }
        expected_best.push(chain);
        // The table's cell for this row: the estimate and its interval.
        let cell = format!("{} [{:.2}-{:.2}]", report::fmt_x(est.exp()), lo.exp(), hi.exp());
        // The decision line the experiment printed: the same estimate, interval and level.
        let decided =
            said[r.id as usize - 1].lines().find(|l| l.starts_with(&format!("  {}: ", r.status.as_str().to_uppercase()))).unwrap();
        let printed =
            format!("speed-up {} [{}% CI {:.2}-{:.2}]", report::fmt_x(est.exp()), ratchet::stats::fmt_level(level), lo.exp(), hi.exp());
        assert!(decided.contains(&printed), "row {}: {printed} not in {decided}", r.id);
        assert!(decided.contains(&format!("over {} pairs", p.len())), "{decided}");
        let table = report::render_with(&View::all(&rows), Format::Table, TableOpts { color: false, width: 200, wide: false });
        let line = table.lines().find(|l| l.trim_start().starts_with(&format!("{} ", r.id))).unwrap();
        assert!(line.contains(&cell), "row {}: {cell} not in {line}", r.id);
        assert!(line.contains(&report::fmt_x(chain)), "row {}: best {} not in {line}", r.id, report::fmt_x(chain));
        // `show` prints the same effect and the pairs it is made of.
        let ws = Workspace::discover(repo.path()).unwrap();
        let own: Vec<_> = ws.store.runs().unwrap().into_iter().filter(|x| x.experiment == r.id.to_string()).collect();
        let show = ratchet::cli::show::render(&ws.repo, r, &own, None);
        assert!(show.contains(&format!("effect {:+.2}%", pct(est))) && show.contains(&format!("over {} pairs", p.len())), "{show}");
        assert!(show.contains(&format!("{}% CI [", ratchet::stats::fmt_level(level))), "{show}");
    }
    assert!(rows.iter().any(|r| r.status == Status::Keep) && rows.iter().any(|r| r.status != Status::Keep), "{rows:?}");
    // The case has intervals at the decision's level and below it (too few pairs).
    assert!(rows.iter().any(|r| r.ci_level_pct == Some(96.0)) && rows.iter().any(|r| r.ci_level_pct < Some(96.0)), "{rows:?}");
    // The footer's total is the chain of the kept rows.
    let table = report::render_with(&View::all(&rows), Format::Table, TableOpts { color: false, width: 300, wide: false });
    eprintln!("{table}\n{}", report::render_with(&View::all(&rows), Format::Table, TableOpts { color: false, width: 80, wide: true }));
    assert!(table.contains(&format!("kept changes chained: {} faster", report::fmt_x(chain))), "{table}");
    // Markdown's best column is the same chain.
    let md = report::markdown(&View::all(&rows));
    for (r, b) in rows.iter().zip(&expected_best) {
        let line = md.lines().find(|l| l.starts_with(&format!("| {} |", r.id))).unwrap();
        assert!(line.contains(&format!("| {} |", report::fmt_x(*b))), "{line}");
    }
}

#[test]
fn a_rescue_s_keep_shows_the_estimate_of_the_pairs_it_read() {
    let repo = Repo::new(8);
    // A 4% gain on a first experiment (no history) where every 4th incumbent run and every 8th
    // candidate run is 1.5x slow: the two phases' t-tests read the wild pairs' spread and end
    // without a keep, and the rescue's t-test over 24 pairs keeps it on the others.
    let mut exec = MockExecutor::new(|c| {
        let slow = match c.side {
            Side::Incumbent => c.n % 4 == 1,
            Side::Candidate => c.n % 8 == 3,
        };
        let base = if c.side == Side::Incumbent { 10.0 } else { 9.6 };
        Step::Latency(if slow { 1.5 * base } else { base })
    });
    let (o, events) = repo.experiment_with_events(1, &mut exec);
    let said = printed(events, Default::default(), 100).0;
    let d = o.decision.expect("decided");
    assert_eq!((o.row.status, d.procedure), (Status::Keep, ratchet::stats::Procedure::Rescue), "{}", d.reason);
    let rescue = d.rescue.expect("the rescue's record");
    // The pairs it set aside, recomputed from the runs alone: over 4 robust sds (1.4826 MAD) from
    // the median of the log-ratios.
    let pairs = &pairs_from_log(&std::fs::read_to_string(repo.path().join("results/runs.jsonl")).unwrap())[&1];
    let logs: Vec<f64> = pairs.iter().map(|(i, c)| (i / c).ln()).collect();
    assert_eq!(logs.len(), rescue.pairs);
    let med = support::median(logs.clone());
    let mad = 1.4826 * support::median(logs.iter().map(|x| (x - med).abs()).collect());
    let wild: Vec<usize> = (0..logs.len()).filter(|&i| (logs[i] - med).abs() > 4.0 * mad).collect();
    assert_eq!(rescue.set_aside_pairs, wild);
    assert!(wild.len() >= 6, "{wild:?}");
    // The row's estimate and interval are those of the pairs it read, recomputed by enumeration.
    let read: Vec<f64> = (0..logs.len()).filter(|i| !wild.contains(i)).map(|i| logs[i]).collect();
    let (est, lo, hi, _) = hl(&read, LEVEL, true);
    let pct = |x: f64| (x.exp() - 1.0) * 100.0;
    let r = &o.row;
    assert!((r.speedup_pct.unwrap() - pct(est)).abs() < 1e-9, "{:?} vs {}", r.speedup_pct, pct(est));
    assert!((r.ci_low_pct.unwrap() - pct(lo)).abs() < 1e-9 && (r.ci_high_pct.unwrap() - pct(hi)).abs() < 1e-9, "{r:?}");
    assert!(lo > 0.0, "the kept interval lies above no gain");
    // The decision line says what it read.
    let line = said.lines().find(|l| l.starts_with("  KEEP: ")).unwrap();
    let over = format!("over {} of {} pairs ({} outliers set aside)", read.len(), logs.len(), wild.len());
    assert!(line.contains(&over), "{over} not in {line}");
    assert!(line.contains(&format!("[96% CI {:.2}-{:.2}]", lo.exp(), hi.exp())), "{line}");
}

#[test]
fn an_experiments_default_report_is_six_lines_that_fit_the_terminal() {
    // The earlier rule, which has an unconfirmed end to print.
    let repo = Repo::new(8);
    repo.write("ratchet.toml", &config(8).replace("[decision]\n", "[decision]\nmethod = \"auto\"\n"));
    repo.git(&["commit", "-qam", "the earlier rule"]);
    let mut unconfirmed = MockExecutor::new(|c| match (c.side, c.n) {
        // A clear gain in the first phase that the confirmation batch does not repeat.
        (Side::Candidate, n) if n < 4 => Step::Latency(4.0),
        _ => Step::Latency(5.0),
    });
    let cases: Vec<(&str, MockExecutor)> = vec![
        ("KEEP", wild(10.0, 5.0, &[])),
        ("REVERT", wild(4.0, 5.0, &[])),
        ("CRASH", MockExecutor::sides(Step::Latency(5.0), Step::Crash(3))),
        ("UNCONFIRMED", std::mem::replace(&mut unconfirmed, MockExecutor::sides(Step::Timeout, Step::Timeout))),
    ];
    for (n, (verdict, mut exec)) in cases.into_iter().enumerate() {
        let (o, events) = repo.experiment_with_events(n + 1, &mut exec);
        for width in [100, 80, 60] {
            let (out, err) = printed(events.clone(), Default::default(), width);
            let lines: Vec<&str> = out.lines().chain(err.lines()).collect();
            assert!(lines.iter().all(|l| l.chars().count() <= width), "{verdict} at {width}:\n{out}{err}");
            // The roofline's figures are whole where the line is narrow: some are left out, none cut.
            let roof = lines.iter().find(|l| l.contains(" ms (host)"));
            assert!(roof.is_none_or(|l| !l.contains('…') && l.contains("LATENCY-BOUND")), "{verdict} at {width}: {roof:?}");
            if width == 100 {
                assert!(lines.len() <= 6, "{verdict}: {} lines:\n{out}{err}", lines.len());
                assert!(out.contains(&format!("  {verdict}: ")), "{verdict} ({:?}):\n{out}", o.row.status);
                assert!(out.lines().last().unwrap().contains(&format!("ratchet show {}", n + 1)), "{out}");
            }
        }
    }
}

// ---- words that never claim more than the interval ----

#[test]
fn a_futility_stop_whose_interval_reaches_the_minimum_effect_is_too_noisy_to_tell() {
    let repo = Repo::new(16);
    // Same code on both sides, 10% noise per run: the test gives up early on a wide interval.
    let mut noisy = MockExecutor::sides(Step::Latency(4.0), Step::Latency(4.0));
    noisy.cv = 0.1;
    let o = repo.experiment(1, &mut noisy);
    let d = o.decision.as_ref().unwrap();
    assert_eq!(d.verdict, ratchet::stats::Verdict::Revert, "{}", d.reason);
    assert!(o.row.ci_high_pct.unwrap() >= 1.0, "{:?}", o.row);
    // Still a revert (the decision is the test's), but it says it could not tell.
    assert_eq!(o.row.status, Status::Revert, "{}", o.row.note);
    assert!(o.row.note.starts_with("too noisy to tell"), "{}", o.row.note);
    let rows = repo.rows();
    let table = report::render_with(&View::all(&rows), Format::Table, TableOpts { color: false, width: 80, wide: false });
    assert!(table.lines().any(|l| l.trim_start().starts_with("1 ") && l.contains("revert, noisy")), "{table}");
    // Reverted all the same: the branch is back at the baseline.
    assert_eq!(repo.git(&["log", "-1", "--format=%s"]), "baseline");
    // Agents read it as worth a rerun.
    let ws = Workspace::discover(repo.path()).unwrap();
    let runs: Vec<_> = ws.store.runs().unwrap();
    let v = ratchet::cli::json::decision(&o.row, None, &runs.iter().collect::<Vec<_>>());
    assert_eq!(v["worth_rerun"], true, "{v}");
    assert_eq!(v["status"], "revert");

    // A clear loss whose interval stays below the minimum effect is still a plain revert.
    let o = repo.experiment(2, &mut MockExecutor::sides(Step::Latency(4.0), Step::Latency(5.0)));
    assert_eq!(o.row.status, Status::Revert, "{}", o.row.note);
    assert!(o.row.ci_high_pct.unwrap() < 1.0 && !o.row.note.starts_with("too noisy"), "{}", o.row.note);
    let v = ratchet::cli::json::decision(&o.row, None, &[]);
    assert_eq!(v["worth_rerun"], false);
}

/// `ratchet gate --json` on the fake benchmark: the base at its defaults (10 ms, 1% noise),
/// the head with `env` as its fake.env.
fn gate(env: &str) -> serde_json::Value {
    let t = support::TestRepo::new();
    let base = t.head();
    t.write("fake.env", env);
    t.write("kernel.py", "BQ = 256\nBKV = 256\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-qm", "head"]);
    let out = t.ratchet().args(["gate", "--base", &base, "--threshold", "2", "--pairs", "16", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The level stated is the one the interval holds over its pairs: 96%, or with fewer than 6
    // pairs the whole range of the Walsh averages, 1 - 2^(1 - n).
    let n = (v["pairs"].as_u64().unwrap() + v["confirmation_pairs"].as_u64().unwrap()) as i32;
    let level = v["ci_level"].as_f64().unwrap();
    // In percent beside the rows' `ci_level_pct`, the same level.
    assert!((v["ci_level_pct"].as_f64().unwrap() - level * 100.0).abs() < 1e-9, "{v}");
    let expected = if n >= 6 { LEVEL } else { 1.0 - 2f64.powi(1 - n) };
    assert!((level - expected).abs() < 1e-9, "{n} pairs: {level}");
    let stated = format!("({}% CI", ratchet::stats::fmt_level(level * 100.0));
    assert!(v["markdown"].as_str().unwrap().contains(&stated), "{stated}: {v}");
    v
}

#[test]
fn gate_says_ruled_out_only_when_the_interval_rules_it_out() {
    let slowdown = 100.0 * (100.0 / 102.0 - 1.0);
    // As fast, but 30% noise on the head: it ends (a futility stop or the budget) with no
    // slowdown shown, and none ruled out either.
    let v = gate("FAKE_LATENCY_MS=10\nFAKE_NOISE_CV=0.3\n");
    let md = v["markdown"].as_str().unwrap();
    assert!(v["ci_low_pct"].as_f64().unwrap() < slowdown, "{v}");
    assert_eq!(v["passed"], true);
    assert_eq!(v["verdict"], "inconclusive", "{md}");
    assert!(!md.contains("ruled out at"), "{md}");
    let reason = v["reason"].as_str().unwrap();
    assert!(reason.starts_with("too noisy to tell") || reason.starts_with("the budget of 16 pairs ran out"), "{md}");
    // As fast and quiet: the whole interval is above a 2% slowdown, so it is ruled out.
    let v = gate("FAKE_LATENCY_MS=10\n");
    let md = v["markdown"].as_str().unwrap();
    assert!(v["ci_low_pct"].as_f64().unwrap() > slowdown, "{v}");
    assert_eq!(v["verdict"], "neutral", "{md}");
    assert!(md.contains("ruled out"), "{md}");
}

// ---- the noisy-machine alarm ----

/// Record `sessions` of noise history with one pair's log-ratio spread `sd`.
fn noisy_history(repo: &Repo, sd: f64, sessions: usize) {
    let ws = Workspace::discover(repo.path()).unwrap();
    let cfg = ratchet::config::Config::load(&ratchet::config::path_in(repo.path())).unwrap();
    let key = experiment::history_key(&cfg);
    let mut rng = ratchet::stats::rng::Rng::new(5);
    for s in 0..sessions {
        let d: Vec<f64> = (0..12).map(|_| sd * rng.normal()).collect();
        let e = ratchet::stats::history::entry("2026-01-01T00:00:00Z", &format!("experiment {s}"), &[&d]).unwrap();
        ratchet::stats::history::record(&ws.state_dir, &key, e).unwrap();
    }
}

#[test]
fn a_noisy_machine_is_said_plainly_at_the_start_and_in_status() {
    let repo = Repo::new(16);
    // Quiet history: no alarm.
    noisy_history(&repo, 0.005, 4);
    let ws = Workspace::discover(repo.path()).unwrap();
    assert_eq!(ratchet::cli::status::report(&ws).unwrap().noise_alarm, None);

    let repo = Repo::new(16);
    noisy_history(&repo, 0.45, 4);
    let ws = Workspace::discover(repo.path()).unwrap();
    let alarm = ratchet::cli::status::report(&ws).unwrap().noise_alarm.expect("a 45% per-pair noise raises the alarm");
    for words in ["noisy machine", "min_effect_pct", "quiet the machine", "iters"] {
        assert!(alarm.contains(words), "{words}: {alarm}");
    }
    // The experiment says the same before it measures.
    let (_, events) = repo.experiment_with_events(1, &mut MockExecutor::sides(Step::Latency(4.0), Step::Latency(4.0)));
    let notes: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e, ratchet::events::Event::Note { text } if text == &alarm))
        .map(|(i, _)| i)
        .collect();
    let first_run = events.iter().position(|e| matches!(e, ratchet::events::Event::RunFinished { .. })).unwrap();
    assert!(notes.len() == 1 && notes[0] < first_run, "the alarm comes once, before the first run");
}

/// Notes an experiment measured by `exec` emitted, with how many runs had finished before each.
fn notes_of(repo: &Repo, n: usize, exec: &mut MockExecutor) -> Vec<(usize, String)> {
    let (_, events) = repo.experiment_with_events(n, exec);
    let mut finished = 0;
    let mut notes = vec![];
    for e in &events {
        match e {
            ratchet::events::Event::RunFinished { .. } => finished += 1,
            ratchet::events::Event::Note { text } => notes.push((finished, text.clone())),
            _ => {}
        }
    }
    notes
}

/// Runs spread about 30% around 5 ms on both sides (deterministic).
fn noisy_machine() -> MockExecutor {
    MockExecutor::new(|c| {
        let phase = c.n as f64 * if c.side == Side::Incumbent { 2.3 } else { 1.7 };
        Step::Latency(5.0 * (1.0 + 0.3 * phase.sin()))
    })
}

#[test]
fn a_noisy_machine_without_history_is_named_after_the_first_pairs() {
    let repo = Repo::new(16);
    // No history: nothing to warn about at the start.
    let notes = notes_of(&repo, 1, &mut noisy_machine());
    let alarms: Vec<&(usize, String)> = notes.iter().filter(|(_, t)| t.contains("noisy machine")).collect();
    assert_eq!(alarms.len(), 1, "{notes:?}");
    let (after, text) = alarms[0];
    assert_eq!(*after, 8, "the alarm comes right after the 4th pair: {notes:?}");
    assert!(text.contains("4 pairs, no history"), "{text}");
    // Two lines that fit: what it costs, then what to do.
    assert!(text.lines().count() == 2 && text.lines().all(|l| l.len() + 6 <= 100), "{text}");
    for words in ["min_effect_pct", "quiet the machine", "iters"] {
        assert!(text.contains(words), "{words}: {text}");
    }
}

#[test]
fn a_quiet_machine_with_one_wild_run_raises_no_alarm() {
    let repo = Repo::new(16);
    let notes = notes_of(&repo, 1, &mut wild(5.0, 5.0, &[1]));
    assert!(!notes.iter().any(|(_, t)| t.contains("noisy machine")), "{notes:?}");
}

#[test]
fn a_decision_on_its_own_scale_says_the_history_was_not_used() {
    // The two phases, whose guard can leave the history's scale for the pairs' own.
    let repo = Repo::new(16);
    repo.write("ratchet.toml", &config(16).replace("[decision]\n", "[decision]\nmethod = \"sequential\"\n"));
    repo.git(&["commit", "-qam", "the two phases"]);
    // A quiet history (0.5% a pair), then pairs about 30% apart: the deciding look cannot
    // borrow the history's scale, and the line that shows both scales says which one decided.
    noisy_history(&repo, 0.005, 4);
    let (o, events) = repo.experiment_with_events(1, &mut noisy_machine());
    let d = o.decision.as_ref().unwrap();
    assert_eq!(d.scale, "own", "{d:?}");
    // The reasoning is -v's.
    let (out, _) = printed(events, ratchet::cli::ui::Verbosity::Verbose, 100);
    let flat = out.split_whitespace().collect::<Vec<_>>().join(" ");
    let h = o.row.borrowed_sd_pct.expect("the history was there");
    assert!(
        flat.contains(&format!(
            "own noise scale ({:.2}% per pair; the history's {h:.2}% was not used at the deciding look)",
            d.noise_sd_pct
        )),
        "{out}"
    );
}

// ---- one regime word ----

#[test]
fn a_kernel_far_below_both_roofs_is_latency_bound_in_every_view() {
    let repo = Repo::new(8);
    // The mock's 1 GFLOP and 10 MB in 5 ms on a v5e: 0.1% of peak FLOP/s, 0.2% of bandwidth.
    let o = repo.experiment(1, &mut wild(10.0, 5.0, &[]));
    assert_eq!(o.row.regime.as_deref(), Some("LATENCY-BOUND"), "{:?}", o.row);
    assert!(o.row.util_pct.unwrap() < 1.0);
    let ws = Workspace::discover(repo.path()).unwrap();
    let rows = ws.store.rows().unwrap();
    let runs = ws.store.runs().unwrap();
    let wide = report::render_with(&View::all(&rows), Format::Table, TableOpts { color: false, width: 80, wide: true });
    let show = ratchet::cli::show::render(&ws.repo, &rows[0], &runs, None);
    let md = report::markdown(&View::all(&rows));
    let html = ratchet::plot::html(&ratchet::plot::Night { rows: &rows, runs: &runs, hw: None }, "review", &Default::default()).unwrap();
    for (name, text) in [("wide", &wide), ("show", &show), ("md", &md), ("html", &html)] {
        assert!(text.contains("LATENCY-BOUND") && !text.contains("MEMORY-BOUND") && !text.contains("COMPUTE-BOUND"), "{name}:\n{text}");
    }
    // The diagnosis's word is the same function's.
    assert_eq!(ratchet::diagnose::regime_word(true, 0.99), "LATENCY-BOUND");
}

// ---- `show` at the terminal's width ----

#[test]
fn show_fits_80_columns_and_loses_nothing() {
    let repo = Repo::new(16);
    let mut noisy = MockExecutor::sides(Step::Latency(4.0), Step::Latency(4.0));
    noisy.cv = 0.3;
    repo.experiment(1, &mut noisy);
    let show = |cols: &str| {
        let out = assert_cmd::Command::cargo_bin("ratchet")
            .unwrap()
            .current_dir(repo.path())
            .args(["show", "1"])
            .env("COLUMNS", cols)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let (narrow, wide) = (show("80"), show("1000"));
    for l in narrow.lines() {
        assert!(l.chars().count() <= 80, "{} columns: {l}", l.chars().count());
    }
    let ink = |t: &str| t.chars().filter(|c| !c.is_whitespace()).collect::<String>();
    assert_eq!(ink(&narrow), ink(&wide), "wrapping lost or added something");
    assert!(wide.lines().any(|l| l.chars().count() > 80), "the case has long lines to fit");
}

#[test]
fn the_json_schema_describes_every_results_column() {
    let schema: serde_json::Value = serde_json::from_str(&std::fs::read_to_string("docs/json.schema.json").unwrap()).unwrap();
    let props = schema["$defs"]["row"]["properties"].as_object().unwrap();
    let missing: Vec<&&str> =
        report::COLUMNS.iter().filter(|c| props.get(**c).and_then(|p| p["description"].as_str()).is_none_or(str::is_empty)).collect();
    assert!(missing.is_empty(), "columns without a description in docs/json.schema.json: {missing:?}");
}

#[test]
fn status_json_gives_a_running_ratchet_as_an_object() {
    let repo = Repo::new(8);
    let ws = Workspace::discover(repo.path()).unwrap();
    assert!(ratchet::cli::status::report(&ws).unwrap().running_process.is_none());
    // Another ratchet (here: this process, through a second lock) holds the repository.
    let mut events = vec![];
    let _held = Workspace::discover(repo.path()).unwrap().lock("ratchet sweep --max-wall 8h", &mut events).unwrap();
    let r = ratchet::cli::status::report(&ws).unwrap();
    let p = r.running_process.expect("the holder as an object");
    assert_eq!(p.pid, std::process::id());
    assert_eq!(p.command, "ratchet sweep --max-wall 8h");
    assert!(!p.started.is_empty());
    let v = serde_json::to_value(ratchet::cli::status::report(&ws).unwrap()).unwrap();
    assert_eq!(v["running_process"]["pid"], std::process::id());
}

#[test]
fn show_json_links_each_run_to_its_directory() {
    let repo = Repo::new(8);
    repo.experiment(1, &mut wild(10.0, 5.0, &[]));
    let ws = Workspace::discover(repo.path()).unwrap();
    let rows = ws.store.rows().unwrap();
    let runs = ws.store.runs().unwrap();
    let findings = ratchet::diagnose::show::candidate_findings(&runs, None, None);
    let ab = ratchet::diagnose::show::ab_table(&runs, None, None);
    let v = ratchet::cli::json::show(&ws.repo, &rows[0], &runs, &findings, &[], &ab);
    let shown = v["runs"].as_array().unwrap();
    assert_eq!(shown.len(), runs.len());
    for (j, r) in shown.iter().zip(&runs) {
        assert_eq!(j["dir"].as_str().unwrap(), r.out_dir.to_str().unwrap());
        assert!(Path::new(j["dir"].as_str().unwrap()).join("stdout.log").exists(), "{j}");
        assert!(j.get("trace").is_some(), "{j}");
    }
    // The decision's pair count is the pairs its estimate is made of.
    assert_eq!(v["experiment"]["pairs"], runs.len() / 2);
}

#[test]
fn show_json_carries_the_findings_the_text_prints() {
    let repo = Repo::new(8);
    repo.experiment(1, &mut wild(10.0, 5.0, &[]));
    let ws = Workspace::discover(repo.path()).unwrap();
    let (rows, runs) = (ws.store.rows().unwrap(), ws.store.runs().unwrap());
    let hw = ratchet::config::Config::load(&ratchet::config::path_in(repo.path())).ok().and_then(|c| c.hardware());
    let findings = ratchet::diagnose::show::candidate_findings(&runs, hw, None);
    let ab = ratchet::diagnose::show::ab_table(&runs, hw, None);
    let v = ratchet::cli::json::show(&ws.repo, &rows[0], &runs, &findings, &[], &ab);
    let listed = v["findings"].as_array().unwrap();
    assert!(!listed.is_empty(), "the mock's 0.1%-util kernel has a diagnosis");
    assert!(listed.iter().any(|f| f["rule"] == "regime" && f["what"].as_str().unwrap().starts_with("LATENCY-BOUND")), "{listed:?}");
    let text = ratchet::diagnose::show::render(&rows[0], &runs, &rows, &runs, hw, None);
    for f in listed {
        assert!(text.contains(f["what"].as_str().unwrap()), "the JSON finding {f} is not in the text:\n{text}");
    }
    assert_eq!(v["cliffs"], serde_json::json!([]));
}

#[test]
fn the_html_links_each_row_to_its_evidence_relative_to_the_report() {
    let repo = Repo::new(8);
    repo.experiment(1, &mut wild(10.0, 5.0, &[]));
    repo.experiment(2, &mut wild(5.0, 6.0, &[]));
    let ws = Workspace::discover(repo.path()).unwrap();
    let rows = ws.store.rows().unwrap();
    let mut runs = ws.store.runs().unwrap();
    // A candidate run with a trace in jax's layout and an HLO dump, as a real benchmark leaves.
    let cand = runs.iter_mut().find(|r| r.experiment == "1" && r.side == Side::Candidate).unwrap();
    let trace = std::path::PathBuf::from("profile/plugins/profile/2026_12_03/host.xplane.pb");
    std::fs::create_dir_all(cand.out_dir.join(trace.parent().unwrap())).unwrap();
    std::fs::write(cand.out_dir.join(&trace), b"").unwrap();
    std::fs::write(cand.out_dir.join("kernel.hlo.txt"), b"HloModule m\n").unwrap();
    (cand.trace, cand.hlo) = (Some(trace), Some("kernel.hlo.txt".into()));
    // The other's trace as the Python helper names it: the log directory itself.
    let cand2 = runs.iter_mut().find(|r| r.experiment == "2" && r.side == Side::Candidate).unwrap();
    std::fs::create_dir_all(cand2.out_dir.join("profile/plugins/profile/s")).unwrap();
    cand2.trace = Some("profile".into());
    let logdir2 = cand2.out_dir.join("profile").strip_prefix(repo.path()).unwrap().display().to_string();
    let report_dir = repo.path().join("results");
    let ev = ratchet::plot::Evidence::gather(&ws.repo, &rows, &report_dir);
    let html = ratchet::plot::html(&ratchet::plot::Night { rows: &rows, runs: &runs, hw: None }, "review", &ev).unwrap();
    // Every link resolves from the report's folder, and no path names this machine.
    let links: Vec<&str> = html.split("href=\"").skip(1).map(|l| &l[..l.find('"').unwrap()]).collect();
    for l in &links {
        match l.strip_prefix('#') {
            Some(anchor) => assert!(html.contains(&format!("id=\"{anchor}\"")), "{l}"),
            None => assert!(report_dir.join(l).exists() && !l.starts_with('/'), "{l} does not resolve from results/"),
        }
    }
    assert!(!html.contains(&repo.path().display().to_string()), "a machine's path in the report");
    for id in [1, 2] {
        assert!(links.contains(&format!("../.ratchet/experiments/{id}/runs/").as_str()), "{links:?}");
        assert!(links.contains(&format!("#exp-{id}").as_str()), "{links:?}");
    }
    assert!(links.iter().any(|l| l.ends_with("/profile/plugins/profile/2026_12_03/host.xplane.pb")), "{links:?}");
    assert!(links.iter().any(|l| l.ends_with("/kernel.hlo.txt")), "{links:?}");
    // XProf opens the folder above plugins/, named from the workspace's root.
    assert!(html.contains("<code>xprof --port=8791 .ratchet/experiments/1/runs/"), "{html}");
    assert!(html.contains(&format!("<code>xprof --port=8791 {logdir2}</code>")), "{logdir2}: {html}");
    // The diff is the commit's, in the page.
    assert!(html.contains("-BQ = 0") && html.contains("+BQ = 1"), "{html}");
    assert!(html.contains("<code>ratchet show 1</code>") && html.contains(&format!("<code>git show {}</code>", &rows[0].commit[..12])));
}
