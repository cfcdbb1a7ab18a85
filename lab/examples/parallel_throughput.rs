//! Parallel sweeps measured: the same queue of hypotheses swept first by the serial loop
//! (`ratchet sweep`, the baseline) and then by `ratchet sweep --jobs N` for each N asked, on N
//! fake device slots, each run of a sleep-dominated shell benchmark (so 8 slots fit on 2 cores),
//! and the hypotheses per hour, the stale rechecks and the keeps per true effect printed as a
//! Markdown table (docs/scale-out.md holds one), with the host's load average while each ran.
//!
//! Each hypothesis changes its own factor line of factors.env, and the benchmark's latency is
//! 10 ms times the product of the factors, so kept gains compound and every hypothesis still
//! applies on top of any other. True effects are drawn as `ratchet-lab simulate --jobs` draws them
//! (ratchet_lab::parallel::Queue: `mix`, 30% of the queue real gains, or `win30`, 30% winners, as
//! `ratchet-lab simulate --jobs --queue` draws them); the per-run noise is 1% gaussian,
//! made by Box-Muller from two fresh 32-bit numbers of /dev/urandom per run. (An earlier version
//! seeded mawk's `srand` with such a number: mawk clamps seeds above 2^31, so about half the
//! runs printed the same value and the noise was far below 1%.) Every slot count sweeps the
//! same queue in the same run, one after the other, so the figures are side by side.
//!
//! cargo build && cargo run --example parallel_throughput [-- HYPOTHESES [SLEEP_S [JOBS,.. [ROUNDS [mix|win30]]]]] (16, 0.5, 2,4, 1, mix)

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const BENCH: &str = r#"#!/bin/sh
# A fake device: sleeps (the device's time), then reports 10 ms x the product of factors.env.
sleep "$BENCH_SLEEP_S"
set -- $(od -An -N8 -tu4 /dev/urandom)
awk -F= -v a="$1" -v b="$2" 'BEGIN { p = 1 } /^F[0-9]+=/ { p *= $2 }
END { u1 = (a + 1) / 4294967297; u2 = (b + 1) / 4294967297;
      z = sqrt(-2 * log(u1)) * cos(6.283185307 * u2);
      printf "RESULT: latency=%.6fms\n", 10 * p * (1 + 0.01 * z) }' factors.env
"#;

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git").args(args).current_dir(dir).env("GIT_CONFIG_NOSYSTEM", "1").output().expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// The true speed-up of hypothesis `h` (the simulation's mix, drawn by a fixed hash).
fn effect(seed: u64, h: usize, mix: &[(f64, f64)]) -> f64 {
    let mut x = seed ^ (h as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 31;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 29;
    let u = (x >> 11) as f64 / (1u64 << 53) as f64;
    let mut acc = 0.0;
    for &(e, w) in mix {
        acc += w;
        if u < acc {
            return e;
        }
    }
    0.0
}

fn setup(dir: &Path, effects: &[f64]) {
    let n = effects.len();
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.name", "bench"]);
    git(dir, &["config", "user.email", "bench@example.com"]);
    std::fs::write(dir.join("bench.sh"), BENCH).unwrap();
    std::fs::write(
        dir.join("ratchet.toml"),
        "[benchmark]\ncommand = \"sh bench.sh\"\nwarmup = 0\niters = 1\nprofile_iters = 0\n[score]\nmetric = \"latency\"\n",
    )
    .unwrap();
    let factors: String = (0..n).map(|i| format!("F{i}=1.0\n")).collect();
    std::fs::write(dir.join("factors.env"), factors).unwrap();
    std::fs::create_dir_all(dir.join("experiments")).unwrap();
    for (i, &e) in effects.iter().enumerate() {
        let text = format!(
            "message = \"h{i:02}: {:+.0}%\"\n[[edit]]\nfile = \"factors.env\"\nfind = \"F{i}=1.0\\n\"\nreplace = \"F{i}={:.6}\\n\"\n",
            e * 100.0,
            1.0 / (1.0 + e)
        );
        std::fs::write(dir.join(format!("experiments/h{i:02}.toml")), text).unwrap();
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "baseline and queue"]);
}

fn ratchet_bin() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/release/examples/parallel_throughput -> target/release/ratchet
    let bin = exe.parent().and_then(Path::parent).unwrap().join("ratchet");
    assert!(bin.exists(), "build the binary first: cargo build [--release] ({} is missing)", bin.display());
    bin
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(16);
    let sleep: f64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(0.5);
    let jobs: Vec<usize> = args.get(3).map(|s| s.split(',').map(|x| x.parse().unwrap()).collect()).unwrap_or(vec![2, 4]);
    // A decision takes 4 to 40 runs, so one round's serial and parallel sweeps each draw their
    // own luck; rounds pool it (the speed-up over all rounds is total hypotheses over total wall).
    let rounds: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(1);
    let seed = 20261123;
    let bin = ratchet_bin();
    // `mix`: the simulation's queue (30% real gains, most of them small, so about one in eight
    // hypotheses wins); `win30`: 30% of the queue wins (+3% and +10% gains), where stale
    // winners and their rechecks are most frequent.
    let queue = args.get(5).map(String::as_str).unwrap_or("mix");
    let mix = queue.parse::<ratchet_lab::parallel::Queue>().unwrap_or_else(|e| panic!("{e}")).shares();
    let effects: Vec<f64> = (0..n).map(|i| effect(seed, i, mix)).collect();
    let count = |e: f64| effects.iter().filter(|&&x| x == e).count();
    println!(
        "{n} hypotheses (+0% x{}, -5% x{}, +1% x{}, +3% x{}, +10% x{}), each run sleeping {sleep} s, 1% noise, {} cores\n",
        count(0.0),
        count(-0.05),
        count(0.01),
        count(0.03),
        count(0.10),
        std::thread::available_parallelism().map(|p| p.get()).unwrap_or(1)
    );
    println!("| round | sweep | wall | hypotheses / hour | speed-up | slot use | runs / hypothesis | stale rechecks | +0% kept | -5% kept | +1% kept | +3% kept | +10% kept | distinct values / runs | run wall (median) | load (1 min) |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut split = vec![];
    let mut pooled: Vec<Pooled> = vec![];
    for round in 1..=rounds {
        let mut base_rate = None;
        // 0: the serial loop (no --jobs), the baseline every speed-up is against.
        for (i, &k) in std::iter::once(&0).chain(&jobs).enumerate() {
            let dir = tempfile::tempdir().unwrap();
            setup(dir.path(), &effects);
            let load = Load::start();
            let t = Instant::now();
            let t0 = std::time::SystemTime::now();
            let jobs_arg = k.to_string();
            let args: Vec<&str> = if k == 0 { vec!["sweep"] } else { vec!["sweep", "--jobs", &jobs_arg] };
            let out = Command::new(&bin)
                .args(&args)
                .current_dir(dir.path())
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("BENCH_SLEEP_S", sleep.to_string())
                .output()
                .unwrap();
            let wall = t.elapsed().as_secs_f64();
            let t1 = std::time::SystemTime::now();
            let load = load.stop();
            assert!(out.status.success(), "sweep --jobs {k} failed: {}", String::from_utf8_lossy(&out.stderr));
            let mut rdr = csv::Reader::from_path(dir.path().join("results/results.csv")).unwrap();
            let headers = rdr.headers().unwrap().clone();
            let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
            let (hyp, status, runs, note) = (col("hypothesis"), col("status"), col("runs"), col("note"));
            let mut kept = std::collections::HashMap::<String, (usize, usize)>::new();
            let (mut total_runs, mut stale, mut rows) = (0u64, 0usize, 0usize);
            for r in rdr.records() {
                let r = r.unwrap();
                rows += 1;
                let i: usize = r[hyp].trim_start_matches('h')[..2].parse().unwrap();
                let e = format!("{:+.0}%", effects[i] * 100.0);
                let slot = kept.entry(e).or_default();
                slot.1 += 1;
                if &r[status] == "keep" {
                    slot.0 += 1;
                }
                total_runs += r[runs].parse::<u64>().unwrap_or(0);
                if r[note].starts_with("stale winner") {
                    stale += 1;
                }
            }
            assert_eq!(rows, n, "every hypothesis has one row");
            // Slot use: the trials' own wall time over the slots' time (the serial loop: its runs'
            // over the wall); and the noise check: every run's value should be its own (the broken
            // seeding repeated half of them).
            let trials = std::fs::read_dir(dir.path().join(".ratchet/trials")).map(|d| d.flatten().collect::<Vec<_>>()).unwrap_or_default();
            let spans: Vec<Span> = trials.iter().filter_map(|d| Span::read(&d.path(), t0)).collect();
            let trial_busy: f64 = spans.iter().map(|s| s.end - s.start).sum();
            let runs_text = std::fs::read_to_string(dir.path().join("results/runs.jsonl")).unwrap_or_default();
            let records: Vec<serde_json::Value> = runs_text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
            let values: Vec<String> = records.iter().filter_map(|v| v["latency_ms"].as_f64().map(|x| format!("{x:.6}"))).collect();
            let mut run_walls: Vec<f64> = records.iter().filter_map(|v| v["wall_s"].as_f64()).collect();
            run_walls.sort_by(f64::total_cmp);
            let run_wall = run_walls.get(run_walls.len() / 2).copied().unwrap_or(f64::NAN);
            let busy = if k == 0 { run_walls.iter().sum() } else { trial_busy };
            let distinct = values.iter().collect::<std::collections::BTreeSet<_>>().len();
            let rate = n as f64 / wall * 3600.0;
            let speedup = rate / *base_rate.get_or_insert(rate);
            let horizon = t1.duration_since(t0).map(|d| d.as_secs_f64()).unwrap_or(wall);
            split.push((format!("{round} | {}", name_of(k)), split_slot_time(k, horizon, &spans, &run_walls, n)));
            if pooled.len() <= i {
                pooled.push(Pooled { name: name_of(k), ..Pooled::default() });
            }
            pooled[i].add(wall, n, total_runs, stale, &kept);
            let cell = |e: &str| kept.get(e).map(|(k, t)| format!("{k}/{t}")).unwrap_or_else(|| "-".into());
            let name = name_of(k);
            println!(
            "| {round} | {name} | {wall:.0} s | {rate:.0} | {speedup:.2}x | {:.0}% | {:.1} | {stale} | {} | {} | {} | {} | {} | {distinct}/{} | {run_wall:.2} s | {load} |",
            busy / (wall * k.max(1) as f64) * 100.0,
            total_runs as f64 / n as f64,
            cell("+0%"),
            cell("-5%"),
            cell("+1%"),
            cell("+3%"),
            cell("+10%"),
            values.len()
        );
        }
    }
    if rounds > 1 {
        println!("\nOver the {rounds} rounds (hypotheses / hour: all rounds' hypotheses over all their wall time):\n");
        println!("| sweep | wall | hypotheses / hour | speed-up | runs / hypothesis | stale rechecks | +0% kept | -5% kept | +1% kept | +3% kept | +10% kept |");
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        let base = pooled[0].rate();
        for p in &pooled {
            let cell = |e: &str| p.kept.get(e).map(|(k, t)| format!("{k}/{t}")).unwrap_or_else(|| "-".into());
            println!(
                "| {} | {:.0} s | {:.0} | {:.2}x | {:.1} | {} | {} | {} | {} | {} | {} |",
                p.name,
                p.wall,
                p.rate(),
                p.rate() / base,
                p.runs as f64 / p.n as f64,
                p.stale,
                cell("+0%"),
                cell("-5%"),
                cell("+1%"),
                cell("+3%"),
                cell("+10%")
            );
        }
    }
    println!("\nWhere each sweep's slot time went (N slots x wall), from the run directories' files:\n");
    println!("| round | sweep | slot time | runs of first trials | runs of rechecks | in a trial, outside its runs | between trials on a slot | before the first trial | after a slot's last trial | first-trial runs / hypothesis |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (name, row) in split {
        println!("| {name} | {row} |");
    }
}

/// One sweep kind's figures summed over the rounds.
#[derive(Default)]
struct Pooled {
    name: String,
    wall: f64,
    n: usize,
    runs: u64,
    stale: usize,
    kept: std::collections::HashMap<String, (usize, usize)>,
}

impl Pooled {
    fn add(&mut self, wall: f64, n: usize, runs: u64, stale: usize, kept: &std::collections::HashMap<String, (usize, usize)>) {
        self.wall += wall;
        self.n += n;
        self.runs += runs;
        self.stale += stale;
        for (e, (k, t)) in kept {
            let c = self.kept.entry(e.clone()).or_default();
            c.0 += k;
            c.1 += t;
        }
    }

    fn rate(&self) -> f64 {
        self.n as f64 / self.wall * 3600.0
    }
}

fn name_of(k: usize) -> String {
    if k == 0 {
        "serial".to_string()
    } else {
        format!("--jobs {k}")
    }
}

/// One trial's time on its slot, in seconds from the sweep's start: its end is `trial.json`'s
/// modification time (written last), its start that less the trial's own wall.
struct Span {
    slot: usize,
    start: f64,
    end: f64,
    recheck: bool,
    /// The wall time of its runs, and how many.
    runs: f64,
    count: usize,
}

impl Span {
    fn read(dir: &Path, t0: std::time::SystemTime) -> Option<Span> {
        let path = dir.join("trial.json");
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).ok()?).ok()?;
        let end = std::fs::metadata(&path).ok()?.modified().ok()?.duration_since(t0).ok()?.as_secs_f64();
        let runs_text = std::fs::read_to_string(dir.join("runs.jsonl")).unwrap_or_default();
        let runs: f64 = runs_text.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()?["wall_s"].as_f64()).sum();
        Some(Span {
            slot: v["slot"].as_u64()? as usize,
            start: end - v["wall_s"].as_f64()?,
            end,
            recheck: v["recheck"].as_bool().unwrap_or(false),
            runs,
            count: v["runs"].as_u64().unwrap_or(0) as usize,
        })
    }
}

/// The slot time (`k` slots x `horizon` s; the serial loop: one slot) split into the runs of
/// first trials and of rechecks, the workers' time outside their runs, the gaps between one
/// trial's end and the next's start on a slot, the wait before a slot's first trial and the
/// idle tail after its last; as shares of the slot time, and the first trials' runs per
/// hypothesis.
fn split_slot_time(k: usize, horizon: f64, spans: &[Span], run_walls: &[f64], n: usize) -> String {
    let pct = |x: f64, total: f64| format!("{:.1}%", x / total * 100.0);
    if k == 0 {
        let runs: f64 = run_walls.iter().sum();
        return format!(
            "{horizon:.0} s | {} | - | {} (between runs: the decisions, rows, commits) | - | - | - | {:.1}",
            pct(runs, horizon),
            pct(horizon - runs, horizon),
            run_walls.len() as f64 / n as f64
        );
    }
    let total = horizon * k as f64;
    let (mut first, mut rechecks, mut inside, mut gaps, mut before, mut after, mut first_runs) = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0usize);
    for slot in 0..k {
        let mut mine: Vec<&Span> = spans.iter().filter(|s| s.slot == slot).collect();
        mine.sort_by(|a, b| a.start.total_cmp(&b.start));
        let mut t = 0.0;
        for (i, s) in mine.iter().enumerate() {
            if i == 0 {
                before += s.start.max(0.0);
            } else {
                gaps += (s.start - t).max(0.0);
            }
            t = s.end;
            if s.recheck {
                rechecks += s.runs;
            } else {
                first += s.runs;
            }
            inside += (s.end - s.start) - s.runs;
        }
        after += (horizon - t).max(0.0);
    }
    for s in spans.iter().filter(|s| !s.recheck) {
        first_runs += s.count;
    }
    format!(
        "{total:.0} s | {} | {} | {} | {} | {} | {} | {:.1}",
        pct(first, total),
        pct(rechecks, total),
        pct(inside, total),
        pct(gaps, total),
        pct(before, total),
        pct(after, total),
        first_runs as f64 / n as f64
    )
}

/// The host's 1-minute load average, sampled every 5 s while a sweep runs (this example's own
/// processes included): says how much the machine, not ratchet, limited a figure.
struct Load {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    samples: std::thread::JoinHandle<Vec<f64>>,
}

impl Load {
    fn start() -> Load {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let samples = std::thread::spawn(move || {
            let mut v = vec![];
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                if let Some(x) = std::fs::read_to_string("/proc/loadavg").ok().and_then(|t| t.split(' ').next()?.parse().ok()) {
                    v.push(x);
                }
                for _ in 0..50 {
                    if flag.load(std::sync::atomic::Ordering::Relaxed) {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
            }
            v
        });
        Load { stop, samples }
    }

    /// `min-max` of the samples.
    fn stop(self) -> String {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let v = self.samples.join().unwrap_or_default();
        let (lo, hi) = v.iter().fold((f64::INFINITY, 0.0f64), |(a, b), &x| (a.min(x), b.max(x)));
        if v.is_empty() {
            "-".into()
        } else {
            format!("{lo:.1}-{hi:.1}")
        }
    }
}
