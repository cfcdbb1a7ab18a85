//! Seconds per run and per decision on the CPU example, this build against a baseline built
//! from git, side by side in one run: `cargo bench --bench wall_time` (docs/protocol.md, "Where
//! a run's seconds go"). Needs a `python3` with jax on PATH (`source scripts/python-env.sh`).
//!
//! Each round makes two fresh scratch repos of `examples/flash_attention` with this repo's
//! `ratchet.toml` and `experiments/`, and runs `ratchet sweep` in one with each binary (which
//! goes first alternates by round). Every figure is recomputed from the repos' own records:
//! `results/runs.jsonl` (each run's wall, calls and median call) and `ratchet results --format
//! json` (the decisions).
//!
//! `cargo bench --bench wall_time -- aa` compares instead the A/A statistics of forked runs
//! (`preload = true`) with fresh processes (`preload = false`), this build alone: blocks of
//! `ratchet calibrate` alternating between two scratch repos that differ only in that key.
//!
//! RATCHET_BASELINE_BIN  a baseline binary to use as it is; else
//! RATCHET_BASELINE_REV  the git revision to build one from (default: the commit before forked
//!                       runs came in), in target/wall-bench/ (a release build, once)
//! RATCHET_BENCH_ROUNDS  rounds (default 2; with `aa`, calibration blocks a mode, default 3)
//! RATCHET_AA_PAIRS      A/A pairs a calibration block (default 20)

#[path = "common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

fn main() {
    // A test run (`cargo test --benches`) must not start a night of sweeps.
    let Some(args) = common::bench_args("wall_time") else { return };
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let new = PathBuf::from(env!("CARGO_BIN_EXE_ratchet"));
    let python_ok = Command::new("python3").args(["-c", "import jax"]).status().is_ok_and(|s| s.success());
    if !python_ok {
        eprintln!("wall_time: no python3 with jax on PATH: run `source scripts/python-env.sh` first");
        std::process::exit(2);
    }
    let env_usize = |k: &str, d: usize| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    if args.iter().any(|a| a == "aa") {
        aa(&root, &new, env_usize("RATCHET_BENCH_ROUNDS", 3), env_usize("RATCHET_AA_PAIRS", 20));
        return;
    }
    let baseline = baseline(&root);
    let rounds = env_usize("RATCHET_BENCH_ROUNDS", 2);
    // The sweeps print to stderr: stdout is the table alone.
    let scratch = root.join("target/wall-bench/repos");
    let mut figures: [Vec<Sweep>; 2] = [vec![], vec![]];
    for round in 0..rounds {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let (name, bin) = if i == 0 { ("baseline", &baseline) } else { ("this build", &new) };
            let repo = scratch.join(format!("{round}-{i}"));
            make_repo(&root, &repo);
            eprintln!("wall_time: round {} of {rounds}, {name}: ratchet sweep in {}", round + 1, repo.display());
            figures[i].push(sweep(bin, &repo));
        }
    }
    print_table(&baseline, &new, &figures);
}

/// The baseline binary: RATCHET_BASELINE_BIN, or a release build of RATCHET_BASELINE_REV.
fn baseline(root: &Path) -> PathBuf {
    if let Some(bin) = std::env::var_os("RATCHET_BASELINE_BIN") {
        return PathBuf::from(bin);
    }
    let rev = std::env::var("RATCHET_BASELINE_REV").unwrap_or_else(|_| {
        // The commit that added forked runs, then its parent.
        let added = git(root, &["log", "--format=%H", "-S", "pub mod preload;", "--", "src/bench/mod.rs"]);
        let first = added.lines().last().unwrap_or("HEAD").to_string();
        format!("{first}^")
    });
    let sha = git(root, &["rev-parse", "--verify", &format!("{rev}^{{commit}}")]).trim().to_string();
    let dir = root.join("target/wall-bench");
    let src = dir.join(format!("src-{}", &sha[..12]));
    let bin = dir.join(format!("target-{}/release/ratchet", &sha[..12]));
    if !bin.exists() {
        if !src.exists() {
            git(root, &["worktree", "add", "--detach", "-f", &src.display().to_string(), &sha]);
        }
        eprintln!("wall_time: building the baseline {} ({sha}) in release, once", rev);
        let ok = Command::new("cargo")
            .args(["build", "--release", "--bin", "ratchet"])
            .current_dir(&src)
            .env("CARGO_TARGET_DIR", dir.join(format!("target-{}", &sha[..12])))
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "the baseline {rev} did not build");
    }
    bin
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git").args(args).current_dir(dir).output().expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A fresh git repo of the example, as scripts/demo.sh makes it.
fn make_repo(root: &Path, repo: &Path) {
    let _ = std::fs::remove_dir_all(repo);
    std::fs::create_dir_all(repo.join("examples")).unwrap();
    std::fs::copy(root.join("ratchet.toml"), repo.join("ratchet.toml")).unwrap();
    let cp = |from: &str, to: &Path| {
        assert!(Command::new("cp").arg("-R").arg(root.join(from)).arg(to).status().unwrap().success());
    };
    cp("experiments", repo);
    cp("examples/flash_attention", &repo.join("examples"));
    let _ = std::fs::remove_dir_all(repo.join("examples/flash_attention/__pycache__"));
    std::fs::write(repo.join(".gitignore"), "__pycache__/\n/profile_data/\n").unwrap();
    for args in [
        &["init", "-q"][..],
        &["symbolic-ref", "HEAD", "refs/heads/main"],
        &["config", "user.name", "wall bench"],
        &["config", "user.email", "bench@ratchet.invalid"],
        &["add", "-A"],
        &["commit", "-qm", "the example"],
    ] {
        git(repo, args);
    }
}

/// One sweep's figures, from its repo's records.
struct Sweep {
    wall_s: f64,
    decisions: usize,
    statuses: Vec<String>,
    runs: Vec<Run>,
}

struct Run {
    experiment: u64,
    wall_s: f64,
    /// Ratchet's time after the process's exit (`after_exit_s`), in s.
    after_exit_s: Option<f64>,
    /// kernel_calls x the run's median timed call, in s.
    kernel_s: Option<f64>,
    forked: bool,
}

fn sweep(bin: &Path, repo: &Path) -> Sweep {
    let t = Instant::now();
    let status = Command::new(bin).args(["sweep", "-q"]).current_dir(repo).stdout(std::io::stderr()).status().expect("ratchet runs");
    let wall_s = t.elapsed().as_secs_f64();
    assert!(status.success(), "ratchet sweep failed in {}", repo.display());
    let rows = Command::new(bin).args(["results", "--format", "json"]).current_dir(repo).output().unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&rows.stdout).expect("results --format json");
    let statuses: Vec<String> = rows.as_array().into_iter().flatten().filter_map(|row| Some(row["status"].as_str()?.to_string())).collect();
    // A decision is a row the rule ended: kept, reverted, found a no-op or left inconclusive.
    let decisions =
        statuses.iter().filter(|s| !matches!(s.as_str(), "crash" | "timeout" | "invalid" | "interrupted" | "error" | "skipped")).count();
    let text = std::fs::read_to_string(repo.join("results/runs.jsonl")).unwrap_or_default();
    let runs = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|r| r["status"] == "ok")
        .map(|r| Run {
            // An id: "1", or a number in older records.
            experiment: r["experiment"].as_str().and_then(|s| s.parse().ok()).or(r["experiment"].as_u64()).unwrap_or(0),
            wall_s: r["wall_s"].as_f64().unwrap_or(0.0),
            after_exit_s: r["after_exit_s"].as_f64(),
            kernel_s: r["kernel_calls"].as_f64().zip(r["host_latency_ms"].as_f64()).map(|(n, ms)| n * ms / 1e3),
            forked: r["forked"].as_bool().unwrap_or(false),
        })
        .collect();
    Sweep { wall_s, decisions, statuses, runs }
}

/// The median, NaN for none (printed as such): the decision's own.
fn median(v: Vec<f64>) -> f64 {
    ratchet::stats::sequential::median(&v)
}

struct Summary {
    decisions: usize,
    per_decision_s: f64,
    run_wall_s: f64,
    kernel_share: f64,
    /// The same over experiment 1 alone: the example's kernel as shipped, before any keep.
    kernel_share_first: f64,
    outside_runs: f64,
    after_exit: f64,
    forked: usize,
    runs: usize,
}

fn summary(sweeps: &[Sweep]) -> Summary {
    let decisions: usize = sweeps.iter().map(|s| s.decisions).sum();
    let wall: f64 = sweeps.iter().map(|s| s.wall_s).sum();
    let runs: Vec<&Run> = sweeps.iter().flat_map(|s| &s.runs).collect();
    let in_runs: f64 = runs.iter().map(|r| r.wall_s).sum();
    Summary {
        decisions,
        per_decision_s: wall / decisions.max(1) as f64,
        run_wall_s: median(runs.iter().map(|r| r.wall_s).collect()),
        kernel_share: median(runs.iter().filter_map(|r| Some(r.kernel_s? / r.wall_s)).collect()),
        kernel_share_first: median(runs.iter().filter(|r| r.experiment == 1).filter_map(|r| Some(r.kernel_s? / r.wall_s)).collect()),
        outside_runs: (wall - in_runs) / wall,
        after_exit: median(runs.iter().filter_map(|r| Some(r.after_exit_s? / r.wall_s)).collect()),
        forked: runs.iter().filter(|r| r.forked).count(),
        runs: runs.len(),
    }
}

fn print_table(baseline: &Path, new: &Path, figures: &[Vec<Sweep>; 2]) {
    let (b, n) = (summary(&figures[0]), summary(&figures[1]));
    println!("wall_time: {} sweep(s) each of the CPU example's experiments/", figures[0].len());
    println!("  baseline:   {}", baseline.display());
    println!("  this build: {}", new.display());
    println!("{:<44} {:>12} {:>12} {:>8}", "", "baseline", "this build", "ratio");
    let row = |name: &str, x: f64, y: f64, unit: &str| {
        println!("{name:<44} {:>11.2}{unit} {:>11.2}{unit} {:>7.2}x", x, y, y / x);
    };
    println!("{:<44} {:>12} {:>12}", "decisions", b.decisions, n.decisions);
    for (name, sweeps) in [("baseline", &figures[0]), ("this build", &figures[1])] {
        for (i, s) in sweeps.iter().enumerate() {
            println!("  {name} sweep {}: {} in {:.0} s", i + 1, s.statuses.join(" "), s.wall_s);
        }
    }
    row("wall per decision", b.per_decision_s, n.per_decision_s, "s");
    row("median run wall", b.run_wall_s, n.run_wall_s, "s");
    let pct = |name: &str, x: f64, y: f64| println!("{name:<44} {:>11.1}% {:>11.1}%", x * 100.0, y * 100.0);
    pct("kernel share of a run's wall, experiment 1", b.kernel_share_first, n.kernel_share_first);
    pct("kernel share of a run's wall, all runs", b.kernel_share, n.kernel_share);
    pct("ratchet's own: sweep wall outside runs", b.outside_runs, n.outside_runs);
    pct("ratchet's own: after a run's exit (median)", b.after_exit, n.after_exit);
    println!("{:<44} {:>12} {:>12}", "runs forked / ok runs", format!("{}/{}", b.forked, b.runs), format!("{}/{}", n.forked, n.runs));
}

/// A/A blocks of `ratchet calibrate`, alternating forked and fresh: the spread, the shape and
/// the A/A effect of each mode's runs and pairs.
fn aa(root: &Path, bin: &Path, blocks: usize, pairs: usize) {
    let scratch = root.join("target/wall-bench/aa");
    let modes = ["forked", "fresh"];
    for (i, mode) in modes.iter().enumerate() {
        let repo = scratch.join(mode);
        make_repo(root, &repo);
        if i == 1 {
            let cfg = std::fs::read_to_string(repo.join("ratchet.toml")).unwrap();
            std::fs::write(repo.join("ratchet.toml"), cfg.replace("[benchmark]\n", "[benchmark]\npreload = false\n")).unwrap();
            git(&repo, &["commit", "-qam", "fresh processes"]);
        }
    }
    // Per mode: each run's log value (in run order, per block) and each pair's log ratio.
    let mut runs: [Vec<Vec<f64>>; 2] = [vec![], vec![]];
    let mut ratios: [Vec<f64>; 2] = [vec![], vec![]];
    let mut walls: [Vec<f64>; 2] = [vec![], vec![]];
    for block in 0..blocks {
        let order = if block % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let repo = scratch.join(modes[i]);
            eprintln!("wall_time aa: block {} of {blocks}, {}: ratchet calibrate --pairs {pairs}", block + 1, modes[i]);
            let t = Instant::now();
            let out =
                Command::new(bin).args(["calibrate", "-q", "--json", "--pairs", &pairs.to_string()]).current_dir(&repo).output().unwrap();
            walls[i].push(t.elapsed().as_secs_f64());
            assert!(out.status.success(), "calibrate failed: {}", String::from_utf8_lossy(&out.stderr));
            let cal: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(repo.join("results/calibration.json")).unwrap()).unwrap();
            let values: Vec<f64> = cal["values"].as_array().unwrap().iter().filter_map(|v| v.as_f64()).map(f64::ln).collect();
            runs[i].push(values);
            for p in cal["pairs"].as_array().unwrap() {
                if let (Some(a), Some(b)) = (p[0].as_f64(), p[1].as_f64()) {
                    ratios[i].push((b / a).ln());
                }
            }
        }
    }
    let sd = |v: &[f64]| {
        let m = v.iter().sum::<f64>() / v.len() as f64;
        (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() as f64 - 1.0)).sqrt()
    };
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    // Lag-1 autocorrelation of the runs within each block, pooled.
    let ar1 = |blocks: &[Vec<f64>]| {
        let (mut num, mut den) = (0.0, 0.0);
        for b in blocks {
            let m = mean(b);
            num += b.windows(2).map(|w| (w[0] - m) * (w[1] - m)).sum::<f64>();
            den += b.iter().map(|x| (x - m).powi(2)).sum::<f64>();
        }
        num / den
    };
    // Pairs beyond 3 robust sds (MAD_TO_SD x MAD) of the median: the outliers the rule must survive.
    let outliers = |v: &[f64]| {
        let med = median(v.to_vec());
        let mad = median(v.iter().map(|x| (x - med).abs()).collect()) * ratchet::stats::sequential::sample::MAD_TO_SD;
        v.iter().filter(|x| (*x - med).abs() > 3.0 * mad).count()
    };
    println!("wall_time aa: {blocks} block(s) of {pairs} A/A pairs a mode, alternating");
    println!("{:<40} {:>12} {:>12}", "", "forked", "fresh");
    let within: Vec<f64> = (0..2).map(|i| mean(&runs[i].iter().map(|b| sd(b)).collect::<Vec<_>>()) * 100.0).collect();
    println!("{:<40} {:>11.2}% {:>11.2}%", "run-to-run sd of ln value (within block)", within[0], within[1]);
    println!("{:<40} {:>11.2}% {:>11.2}%", "pair ln-ratio sd", sd(&ratios[0]) * 100.0, sd(&ratios[1]) * 100.0);
    println!("{:<40} {:>11.2}% {:>11.2}%", "A/A effect (mean pair ln-ratio)", mean(&ratios[0]) * 100.0, mean(&ratios[1]) * 100.0);
    println!("{:<40} {:>12.2} {:>12.2}", "lag-1 autocorrelation of runs", ar1(&runs[0]), ar1(&runs[1]));
    println!(
        "{:<40} {:>12} {:>12}",
        "pairs beyond 3 robust sds",
        format!("{}/{}", outliers(&ratios[0]), ratios[0].len()),
        format!("{}/{}", outliers(&ratios[1]), ratios[1].len())
    );
    println!("{:<40} {:>11.1}s {:>11.1}s", "wall per calibration block (median)", median(walls[0].clone()), median(walls[1].clone()));
    // Equal spread of the pair ratios: a two-sided F test.
    use statrs::distribution::{ContinuousCDF, FisherSnedecor};
    let (v0, v1) = (sd(&ratios[0]).powi(2), sd(&ratios[1]).powi(2));
    let f = FisherSnedecor::new(ratios[0].len() as f64 - 1.0, ratios[1].len() as f64 - 1.0).unwrap();
    let p = 2.0 * f.cdf(v0 / v1).min(1.0 - f.cdf(v0 / v1));
    println!("variance ratio forked/fresh {:.2}, two-sided F test p = {p:.3}", v0 / v1);
}
