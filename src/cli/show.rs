//! `ratchet show ID`: everything about one experiment in one place: what it tried, how it was
//! decided, all its metrics, its diff (and how to get it back, reverted or not), every run, the
//! HLO counts and the op breakdown next to the incumbent's, `--deep` snapshots, and where its
//! traces are with the command that opens them in XProf.

use crate::bench::{RunRecord, RunStatus, Side};
use crate::cli::args::ShowArgs;
use crate::config::{self, Config};
use crate::diagnose::compare::AbSide;
use crate::error::{Error, Result};
use crate::printable::{self, line};
use crate::report::sig;
use crate::store::{ResultRow, Status};
use crate::trace::{self, AnalyzeOptions, OpStat};
use crate::vcs::{self, Repo};
use crate::workspace::Workspace;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// One count of an HLO summary.
type HloCount = fn(&trace::HloStats) -> usize;

pub fn run(ws: &Workspace, args: &ShowArgs) -> Result<()> {
    let repo = &ws.repo;
    let store = &ws.store;
    let rows = store.rows()?;
    let Some(row) = rows.iter().find(|r| r.id == args.id) else {
        let ids = match (rows.first(), rows.last()) {
            (Some(a), Some(b)) => format!("experiments {} to {}", a.id, b.id),
            _ => "no experiments yet".into(),
        };
        return Err(Error::usage(format!("there is no experiment {} ({ids})", args.id)).hint("`ratchet results` lists them"));
    };
    let all_runs = store.runs()?;
    let runs: Vec<RunRecord> = all_runs.iter().filter(|r| r.experiment == row.id.to_string()).cloned().collect();
    let cfg = Config::load(&config::path_in(repo.root())).ok();
    let kernel = cfg.as_ref().and_then(|c| c.trace.kernel.clone());
    if let Some(other) = args.vs {
        let Some(base) = rows.iter().find(|r| r.id == other) else {
            return Err(Error::usage(format!("there is no experiment {other} to compare with")).hint("`ratchet results` lists them"));
        };
        let base_runs: Vec<RunRecord> = all_runs.iter().filter(|r| r.experiment == other.to_string()).cloned().collect();
        for (id, side) in [(other, &base_runs), (row.id, &runs)] {
            if AbSide::of("", side, Side::Candidate).runs.is_empty() {
                return Err(Error::usage(format!("experiment {id} has no ok candidate run in results/runs.jsonl to compare"))
                    .hint("the A/B table is the median over each experiment's recorded runs; `ratchet show ID` shows what it has"));
            }
        }
        let table = crate::diagnose::compare::ab_table(
            &AbSide::of(format!("experiment {other}"), &base_runs, Side::Candidate),
            &AbSide::of(format!("experiment {}", row.id), &runs, Side::Candidate),
            cfg.as_ref().and_then(Config::hardware),
            kernel.as_deref(),
        );
        if args.json {
            println!("{}", super::json::compare(base, row, &table));
        } else {
            let mut o = String::new();
            for r in [base, row] {
                let _ = writeln!(o, "experiment {}: {} ({})", r.id, line(&r.message), r.status.as_str());
            }
            o.push_str(&crate::diagnose::compare::render(&table));
            print!("{}", printable::block(&fit(&o, crate::cli::term::width())));
        }
        return Ok(());
    }
    if args.json {
        let findings = crate::diagnose::show::candidate_findings(&runs, cfg.as_ref().and_then(Config::hardware), kernel.clone());
        let cliffs = crate::diagnose::show::cliffs(&rows, &all_runs);
        let ab = crate::diagnose::show::ab_table(&runs, cfg.as_ref().and_then(Config::hardware), kernel.as_deref());
        println!("{}", super::json::show(repo, row, &runs, &findings, &cliffs, &ab));
        return Ok(());
    }
    let width = crate::cli::term::width();
    // `render` makes its one-line fields printable before they are fitted to the width; the
    // whole is made printable again for what else a benchmark reported (meta, environment).
    print!("{}", printable::block(&fit(&render(repo, row, &runs, kernel.clone()), width)));
    // Incumbent beside candidate, the candidate's diagnosis, spill cliffs.
    let diagnosis = crate::diagnose::show::render(row, &runs, &rows, &all_runs, cfg.as_ref().and_then(Config::hardware), kernel);
    print!("{}", printable::block(&fit(&diagnosis, width)));
    Ok(())
}

/// The report at the terminal's width: a longer line goes on below at its indent plus two,
/// broken between words (a word longer than the room, a path, is split, never cut), so nothing
/// is lost and nothing runs past the edge.
pub fn fit(text: &str, width: usize) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if crate::units::cells(line) <= width {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let (first, rest) = (" ".repeat(indent), " ".repeat((indent + 2).min(width / 2)));
        let mut cur = first.clone();
        let mut fresh = true;
        for word in line.trim_start().split(' ') {
            let pad = if fresh { 0 } else { 1 };
            if !fresh && crate::units::cells(&cur) + pad + crate::units::cells(word) > width {
                out.push_str(cur.trim_end());
                out.push('\n');
                cur = rest.clone();
                fresh = true;
            }
            if !fresh {
                cur.push(' ');
            }
            let mut w: Vec<char> = word.chars().collect();
            // A word wider than the room is split across lines.
            while crate::units::cells(&cur) + w.len() > width && w.len() > 1 {
                let room = width.saturating_sub(crate::units::cells(&cur)).max(1);
                let head: String = w.drain(..room.min(w.len())).collect();
                cur.push_str(&head);
                out.push_str(&cur);
                out.push('\n');
                cur = rest.clone();
            }
            cur.extend(w);
            fresh = false;
        }
        out.push_str(cur.trim_end());
        out.push('\n');
    }
    out
}

fn opt(v: Option<f64>, digits: usize, unit: &str) -> String {
    v.map(|x| format!("{}{unit}", sig(x, digits))).unwrap_or_else(|| "-".into())
}

/// The whole report, as text. Every field from the records, git or the runs (a message, a file
/// name, a benchmark's output) is `printable::line`d: one line each, nothing for the terminal.
pub fn render(repo: &Repo, row: &ResultRow, runs: &[RunRecord], kernel: Option<String>) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "experiment {}: {}", row.id, line(&row.message));
    let _ = writeln!(o, "  status      {}", row.status.as_str());
    if !row.hypothesis.is_empty() {
        let tags = if row.tags.is_empty() { String::new() } else { format!("  tags: {}", line(&row.tags.replace(';', ", "))) };
        let _ = writeln!(o, "  hypothesis  {}{tags}", line(&row.hypothesis));
    }
    let _ = writeln!(o, "  time        {} ({} runs, {})", line(&row.time), row.runs, crate::sweep::fmt_duration(row.wall_s));
    if !row.commit.is_empty() {
        let _ = writeln!(o, "  commit      {}", line(&row.commit));
    }
    let _ = writeln!(o, "  incumbent   {}", line(&row.incumbent));
    if !row.note.is_empty() {
        let _ = writeln!(o, "  why         {}", line(row.note.lines().next().unwrap_or("")));
        for l in row.note.lines().skip(1).take(12) {
            let _ = writeln!(o, "              {}", line(l));
        }
    }

    let _ = writeln!(o, "\ndecision ({}, positive = better)", row.metric);
    match (row.delta_pct, row.ci_low_pct, row.ci_high_pct) {
        (Some(d), Some(l), Some(h)) => {
            // The pairs the estimate is made of, as the row's: superseded re-runs left out.
            let pairs = crate::bench::pairs_of(runs).len();
            // The level the interval holds, where the row records it (fewer pairs than the
            // decision's level needs give a lower one).
            let level = row.ci_level_pct.map(|x| format!("{}% ", crate::stats::fmt_level(x))).unwrap_or_default();
            let _ = writeln!(
                o,
                "  effect {d:+.2}%  {level}CI [{l:+.2}%, {h:+.2}%]  over {pairs} pairs (Hodges-Lehmann)  test p = {}",
                row.p_value.map(crate::stats::fmt_p).unwrap_or("-".into())
            );
        }
        _ => {
            let _ = writeln!(o, "  no statistical decision ({})", row.status.as_str());
        }
    }
    if let Some(line) = crate::report::speedup_line(row) {
        let _ = writeln!(o, "  {line}");
    }
    if let Some(line) = crate::report::confirmation_line(row) {
        let _ = writeln!(o, "  other estimate: {line}");
    }
    let _ = writeln!(
        o,
        "  {}: incumbent {} -> candidate {} (each side's median run, not paired)",
        row.metric,
        opt(row.incumbent_value, 4, ""),
        opt(row.value, 4, "")
    );

    let _ = writeln!(o, "\nmetrics (candidate, median over its runs)");
    let _ = writeln!(
        o,
        "  score {}  latency {} ({})  host latency {}",
        opt(row.score, 3, ""),
        opt(row.latency_ms, 3, " ms"),
        line(row.latency_source.as_deref().unwrap_or("-")),
        opt(row.host_latency_ms, 3, " ms")
    );
    let _ = writeln!(
        o,
        "  util {}  {} TFLOP/s  intensity {} FLOPs/byte  BW {}  {}  gap {}",
        opt(row.util_pct, 1, "%"),
        opt(row.tflops, 3, ""),
        opt(row.intensity, 0, ""),
        opt(row.bw_pct, 1, "%"),
        line(row.regime.as_deref().unwrap_or("-")),
        opt(row.gap_ms, 3, " ms")
    );
    if let Some(k) = &row.kernel {
        let _ = writeln!(o, "  kernel in the trace: {}", line(k));
    }

    if !row.commit.is_empty() {
        let _ = writeln!(o, "\ndiff");
        let discarded = format!("{}{}", vcs::DISCARDED_PREFIX, row.id);
        let parked = repo.repo.find_reference(&discarded).is_ok();
        match diff_stat(repo, &row.commit) {
            Some(stat) => {
                for l in stat {
                    let _ = writeln!(o, "  {l}");
                }
            }
            None => {
                let _ = writeln!(o, "  (commit {} is not in this repository)", line(&row.commit));
            }
        }
        if parked && row.status != Status::Keep {
            let _ = writeln!(o, "  see it: git show {discarded}   (reverted; parked there)");
            let _ = writeln!(o, "  bring it back: ratchet retry {} (uncommitted, to run again; --run runs it)", row.id);
        } else {
            let _ = writeln!(o, "  see it: git show {}", line(&row.commit[..row.commit.len().min(12)]));
        }
    }

    if !runs.is_empty() {
        // The runs' common directory once, each run's own folder in its row.
        match runs[0].out_dir.parent() {
            Some(dir) => {
                let _ = writeln!(o, "\nruns (in {})", printable::path(dir));
            }
            None => {
                let _ = writeln!(o, "\nruns");
            }
        }
        let _ = writeln!(o, "  {:>3}  {:<9}  {:<11}  {:>12}  {:<8}  {:>7}  dir", "#", "side", "status", "latency", "source", "wall");
        for r in runs {
            let _ = writeln!(
                o,
                "  {:>3}  {:<9}  {:<11}  {:>12}  {:<8}  {:>6.1}s  {}",
                r.run,
                r.side.as_str(),
                r.status.as_str(),
                opt(r.latency_ms, 3, " ms"),
                line(r.latency_source.as_deref().unwrap_or("-")),
                r.wall_s,
                match (r.out_dir.parent() == runs[0].out_dir.parent(), r.out_dir.file_name()) {
                    (true, Some(leaf)) => printable::path(Path::new(leaf)),
                    _ => printable::path(&r.out_dir),
                }
            );
        }
    }

    // Wrapped here at a fixed width so that each phase's cell stays whole on its line; `fit`
    // wraps it further on a narrower terminal.
    if let Some(b) = crate::bench::timing::breakdown(runs) {
        o.push_str(&crate::bench::timing::render(&b, 96));
    }

    let cand = last_ok(runs, Side::Candidate);
    let inc = last_ok(runs, Side::Incumbent);
    let (ch, ih) = (cand.and_then(|r| r.hlo_stats.as_ref()), inc.and_then(|r| r.hlo_stats.as_ref()));
    if ch.is_some() || ih.is_some() {
        let _ = writeln!(o, "\nHLO counts      candidate  incumbent");
        let get = |h: Option<&trace::HloStats>, f: fn(&trace::HloStats) -> usize| h.map(|h| f(h).to_string()).unwrap_or("-".into());
        let fields: [(&str, HloCount); 6] = [
            ("dot", |h| h.dot),
            ("exponential", |h| h.exponential),
            ("reduce", |h| h.reduce),
            ("copy", |h| h.copy),
            ("fusion", |h| h.fusion),
            ("custom-call", |h| h.custom_call),
        ];
        for (name, f) in fields {
            let _ = writeln!(o, "  {name:<14}{:>10}  {:>9}", get(ch, f), get(ih, f));
        }
    }

    let opts = AnalyzeOptions { kernel, ..Default::default() };
    let cand_ops = op_breakdown(runs, Side::Candidate, &opts);
    let inc_ops = op_breakdown(runs, Side::Incumbent, &opts);
    if let (Some((cs, c)), Some((is, i))) = (&cand_ops, &inc_ops) {
        let _ = writeln!(o, "\nop breakdown per kernel execution (self time, us; candidate from {cs}, incumbent from {is})");
        o.push_str(&op_diff(c, i, 15));
    } else if cand.is_some() {
        let _ = writeln!(o, "\nop breakdown: no readable trace in the runs (the benchmark writes one when profile_iters > 0)");
    }

    let deep: Vec<&RunRecord> = runs.iter().filter(|r| !r.snapshots.is_empty()).collect();
    if !deep.is_empty() {
        let _ = writeln!(o, "\n--deep snapshots: kernel time per snapshot (us), run by run");
        for r in &deep {
            let times: Vec<f64> = r.snapshots.iter().filter_map(|s| s.kernel_median_us).collect();
            let med = crate::metrics::median(&times);
            let cells: Vec<String> = r
                .snapshots
                .iter()
                .map(|s| match (s.kernel_median_us, med) {
                    // A snapshot 20% slower than its run's median is a transient regression.
                    (Some(t), Some(m)) if t > 1.2 * m => format!("{}!", sig(t, 1)),
                    (Some(t), _) => sig(t, 1),
                    (None, _) => "?".into(),
                })
                .collect();
            let _ = writeln!(o, "  run {:>3} {:<9} {}", r.run, r.side.as_str(), cells.join("  "));
        }
        let _ = writeln!(o, "  (! marks a snapshot over 1.2x its run's median: a transient regression)");
        for s in deep.iter().flat_map(|r| &r.snapshots).filter(|s| s.error.is_some()).take(3) {
            let _ = writeln!(o, "  unreadable: {}: {}", printable::path(&s.path), line(s.error.as_deref().unwrap_or("")));
        }
    }

    let traces: Vec<(Side, PathBuf)> = [Side::Candidate, Side::Incumbent]
        .into_iter()
        .filter_map(|s| last_ok(runs, s).and_then(|r| r.trace.clone().map(|t| (s, t))))
        .collect();
    if !traces.is_empty() {
        let _ = writeln!(o, "\ntraces");
        for (side, t) in &traces {
            let _ = writeln!(o, "  {:<9} {}", side.as_str(), printable::path(t));
        }
        let logdir = traces[0].1.parent().map(Path::to_path_buf).unwrap_or_else(|| traces[0].1.clone());
        let _ = writeln!(o, "  every run's trace is under {}", printable::path(runs[0].out_dir.parent().unwrap_or(Path::new("."))));
        let _ = writeln!(
            o,
            "  open in XProf: xprof --port=8791 {}",
            printable::path(&crate::trace::locate::xprof_logdir(&traces[0].1).unwrap_or(logdir))
        );
        let _ = writeln!(
            o,
            "  read here:     ratchet inspect {}",
            last_ok(runs, Side::Candidate).map(|r| printable::path(&r.out_dir)).unwrap_or_default()
        );
    }
    o
}

/// The commit's diff stat as git prints it (` path | 3 ++-`, then the totals), each path
/// printable: git2's own stat writes a path as it is, so a newline in a file name would start a
/// line of its own. `None` when the commit is not in the repository.
fn diff_stat(repo: &Repo, commit: &str) -> Option<Vec<String>> {
    let commit = repo.repo.find_commit(git2::Oid::from_str(commit).ok()?).ok()?;
    let tree = commit.tree().ok()?;
    let parent = commit.parent(0).ok().and_then(|p| p.tree().ok());
    let diff = repo.repo.diff_tree_to_tree(parent.as_ref(), Some(&tree), None).ok()?;
    // Each file's path and its (insertions, deletions), `None` for a binary file.
    let mut files: Vec<(String, Option<(usize, usize)>)> = vec![];
    for (i, delta) in diff.deltas().enumerate() {
        let path = delta.new_file().path().or(delta.old_file().path()).map(printable::path).unwrap_or_default();
        let patch = git2::Patch::from_diff(&diff, i).ok().flatten();
        let counts = patch.filter(|p| !p.delta().flags().is_binary()).and_then(|p| p.line_stats().ok()).map(|(_, ins, del)| (ins, del));
        files.push((path, counts));
    }
    let path_w = files.iter().map(|(p, _)| crate::units::cells(p)).max().unwrap_or(0);
    let most = files.iter().filter_map(|(_, c)| c.map(|(i, d)| i + d)).max().unwrap_or(0);
    let count_w = most.to_string().len().max(if files.iter().any(|(_, c)| c.is_none()) { 3 } else { 1 });
    // As git: the bar is scaled down when the largest change would not fit in 50 columns.
    let bar = |n: usize| if most <= 50 { n } else { (n * 50).div_ceil(most) };
    let mut out = vec![];
    let (mut ins_total, mut del_total) = (0, 0);
    for (path, counts) in &files {
        let pad = " ".repeat(path_w - crate::units::cells(path));
        out.push(match counts {
            Some((i, d)) => {
                ins_total += i;
                del_total += d;
                format!(" {path}{pad} | {:>count_w$} {}{}", i + d, "+".repeat(bar(*i)), "-".repeat(bar(*d))).trim_end().to_string()
            }
            None => format!(" {path}{pad} | {:>count_w$}", "Bin"),
        });
    }
    let plural = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let mut total = format!(" {} changed", plural(files.len(), "file", "files"));
    if ins_total > 0 || del_total == 0 {
        total += &format!(", {}", plural(ins_total, "insertion(+)", "insertions(+)"));
    }
    if del_total > 0 || ins_total == 0 {
        total += &format!(", {}", plural(del_total, "deletion(-)", "deletions(-)"));
    }
    out.push(total);
    Some(out)
}

fn last_ok(runs: &[RunRecord], side: Side) -> Option<&RunRecord> {
    runs.iter().rev().find(|r| r.side == side && r.status == RunStatus::Ok)
}

/// The op breakdown of one side: from its `--deep` snapshots when it has them (more windows,
/// averaged), else from its last run's trace. Returns where it came from and the ops.
pub fn op_breakdown(runs: &[RunRecord], side: Side, opts: &AnalyzeOptions) -> Option<(String, Vec<OpStat>)> {
    // A snapshot directory has no result file: the kernel is the one its run named (as the
    // run itself read its snapshots), unless the config names one.
    let snaps: Vec<(&Path, AnalyzeOptions)> = runs
        .iter()
        .filter(|r| r.side == side && r.status == RunStatus::Ok)
        .flat_map(|r| {
            let opts = AnalyzeOptions { kernel: opts.kernel.clone().or_else(|| r.kernel.clone()), ..opts.clone() };
            r.snapshots.iter().map(move |s| (s.path.as_path(), opts.clone()))
        })
        .collect();
    if !snaps.is_empty() {
        let reports: Vec<Vec<OpStat>> =
            snaps.iter().filter_map(|(p, o)| trace::analyze(p, o).ok().and_then(|r| r.kernel).map(|k| k.op_breakdown)).collect();
        if !reports.is_empty() {
            return Some((format!("{} snapshots", reports.len()), average_ops(&reports)));
        }
    }
    let r = last_ok(runs, side)?;
    let report = trace::analyze(&r.out_dir, opts).ok()?;
    Some((format!("run {}", r.run), report.kernel?.op_breakdown))
}

/// Per-op mean of per-execution self time over several breakdowns.
fn average_ops(reports: &[Vec<OpStat>]) -> Vec<OpStat> {
    let mut acc: Vec<OpStat> = vec![];
    for rep in reports {
        for op in rep {
            match acc.iter_mut().find(|a| a.name == op.name) {
                Some(a) => a.per_execution_us += op.per_execution_us,
                None => acc.push(op.clone()),
            }
        }
    }
    let n = reports.len() as f64;
    for a in &mut acc {
        a.per_execution_us /= n;
    }
    acc.sort_by(|a, b| b.per_execution_us.total_cmp(&a.per_execution_us));
    acc
}

/// Side-by-side per-op table, largest change first: the per-op diff of candidate vs incumbent.
pub fn op_diff(cand: &[OpStat], inc: &[OpStat], limit: usize) -> String {
    let mut names: Vec<&str> = cand.iter().chain(inc).map(|o| o.name.as_str()).collect();
    names.sort();
    names.dedup();
    let get = |ops: &[OpStat], n: &str| ops.iter().find(|o| o.name == n).map(|o| o.per_execution_us);
    let mut rows: Vec<(&str, Option<f64>, Option<f64>)> = names.iter().map(|n| (*n, get(cand, n), get(inc, n))).collect();
    let d = |r: &(&str, Option<f64>, Option<f64>)| (r.1.unwrap_or(0.0) - r.2.unwrap_or(0.0)).abs();
    rows.sort_by(|a, b| d(b).total_cmp(&d(a)));
    let mut o = format!("  {:<40} {:>11} {:>11} {:>11} {:>8}\n", "op", "candidate", "incumbent", "delta", "delta %");
    let (ct, it): (f64, f64) = (cand.iter().map(|o| o.per_execution_us).sum(), inc.iter().map(|o| o.per_execution_us).sum());
    for (name, c, i) in rows.iter().take(limit) {
        let delta = c.unwrap_or(0.0) - i.unwrap_or(0.0);
        let pct = match i {
            Some(i) if *i > 0.0 => format!("{:+.1}%", delta / i * 100.0),
            _ => "new".into(),
        };
        // Escaped before it is cut, so a cut never leaves half an escape's raw character.
        let short: String = line(name).chars().take(40).collect();
        let _ = writeln!(o, "  {short:<40} {:>11} {:>11} {:>+11.2} {pct:>8}", opt(*c, 2, ""), opt(*i, 2, ""), delta);
    }
    if rows.len() > limit {
        let _ = writeln!(o, "  ... {} more ops", rows.len() - limit);
    }
    let pct = if it > 0.0 { format!("{:+.1}%", (ct - it) / it * 100.0) } else { "-".into() };
    let _ = writeln!(o, "  {:<40} {:>11.2} {:>11.2} {:>+11.2} {pct:>8}", "total", ct, it, ct - it);
    o
}
