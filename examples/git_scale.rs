//! ratchet's git work at repository scale: builds a repository of 10,000 files (about 100 MB) in
//! a temporary directory, then times the git steps of experiments that are kept and reverted
//! (ratchet's own, through `ratchet::vcs`) beside the git command line doing the same steps on
//! the same repository. Each step is reported as wall time and CPU time (user + system, of this
//! process and of the git processes it waited for): on a shared machine the wall time carries
//! other jobs' load, the CPU time much less of it. Figures go to docs/git.md.
//!
//! cargo run --release --example git_scale [-- FILES [ROUNDS]]

use ratchet::vcs::Repo;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git").args(args).current_dir(dir).env("GIT_CONFIG_NOSYSTEM", "1").output().expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn git_out(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git").args(args).current_dir(dir).env("GIT_CONFIG_NOSYSTEM", "1").output().expect("git runs");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// CPU time (user + system) used so far by this process and by its waited-for children, in ms.
fn cpu_ms() -> f64 {
    let mut total = 0.0;
    for who in [libc::RUSAGE_SELF, libc::RUSAGE_CHILDREN] {
        // SAFETY: getrusage fills the struct it is given.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(who, &mut ru) };
        for tv in [ru.ru_utime, ru.ru_stime] {
            total += tv.tv_sec as f64 * 1e3 + tv.tv_usec as f64 / 1e3;
        }
    }
    total
}

/// A wall clock and a CPU clock started together.
#[derive(Clone, Copy)]
struct Clock(Instant, f64);

impl Clock {
    fn start() -> Clock {
        Clock(Instant::now(), cpu_ms())
    }
    /// (wall ms, CPU ms) since the start.
    fn read(self) -> (f64, f64) {
        (ms(self.0), cpu_ms() - self.1)
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// A repository of `files` files of about 10 KB of text each, in 100 directories, committed.
fn build(dir: &Path, files: usize) {
    let mut x: u64 = 0x2545f4914f6cdd1d;
    for i in 0..files {
        let d = dir.join(format!("src/d{:02}", i % 100));
        std::fs::create_dir_all(&d).unwrap();
        let mut text = String::with_capacity(10_300);
        while text.len() < 10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            text.push_str(&format!("v{:016x} = {}\n", x, x % 1000));
        }
        std::fs::write(d.join(format!("f{i:05}.py")), text).unwrap();
    }
    std::fs::write(dir.join("kernel.py"), "BQ = 128\n").unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.name", "bench"]);
    git(dir, &["config", "user.email", "bench@example.com"]);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "base"]);
    // ratchet's own directories are excluded, as `ensure_excludes` does on a first run.
    std::fs::write(dir.join(".git/info/exclude"), "/.ratchet/\n/results/\n/.cli/\n").unwrap();
    // A warm index (stat data fresh), as on a repository someone works in.
    git(dir, &["status", "--porcelain"]);
}

/// Per step, the (wall ms, CPU ms) of every measured round.
#[derive(Default)]
struct Steps {
    walk: Vec<(f64, f64)>,
    commit: Vec<(f64, f64)>,
    scan: Vec<(f64, f64)>,
    keep: Vec<(f64, f64)>,
    revert: Vec<(f64, f64)>,
}

/// Medians of the wall and of the CPU times.
fn med(v: &[(f64, f64)]) -> (f64, f64) {
    let (mut w, mut c): (Vec<f64>, Vec<f64>) = v.iter().copied().unzip();
    (median(&mut w), median(&mut c))
}

fn add(a: (f64, f64), b: (f64, f64)) -> (f64, f64) {
    (a.0 + b.0, a.1 + b.1)
}

/// Set every file's modification time to now (content unchanged), as a build tool or a
/// checkout of another branch and back does: the index's stat data no longer match.
fn touch_all(dir: &Path) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.file_type().unwrap().is_dir() {
            touch_all(&e.path());
        } else {
            std::fs::File::options().write(true).open(e.path()).unwrap().set_modified(std::time::SystemTime::now()).unwrap();
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let files: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let rounds: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(7);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("repo");
    std::fs::create_dir_all(&dir).unwrap();
    let t = Instant::now();
    build(&dir, files);
    let size: u64 = walk_size(&dir.join("src"));
    println!(
        "repository: {files} files + kernel.py, {:.0} MB of text; built and committed in {:.1} s",
        size as f64 / 1e6,
        t.elapsed().as_secs_f64()
    );

    let repo = Repo::discover(&dir).unwrap();
    let t = Instant::now();
    let head = repo.head_oid().unwrap();
    repo.incumbent_worktree(head).unwrap();
    let first_wt = ms(t);
    let t = Instant::now();
    git(&dir, &["worktree", "add", "-q", "--detach", ".cli/incumbent", &head.to_string()]);
    let first_wt_cli = ms(t);

    let (mut ours, mut cli) = (Steps::default(), Steps::default());
    let mut n = 0u64;
    for round in 0..rounds {
        for keep in [true, false] {
            n += 1;
            // ratchet: the hypothesis is one changed file.
            std::fs::write(dir.join("kernel.py"), format!("BQ = {}\n", 128 + n)).unwrap();
            let incumbent = repo.head_oid().unwrap();
            let t = Clock::start();
            let changes = repo.changes().unwrap();
            let c_walk = t.read();
            let cand = repo.commit_hypothesis(&format!("experiment {n}"), &changes, false).unwrap();
            let c_commit = t.read();
            let t = Clock::start();
            let scan = repo.after_run_scan().unwrap();
            assert!(scan.untracked.is_empty() && scan.edited.is_empty());
            let c_scan = t.read();
            let t = Clock::start();
            if keep {
                // The incumbent checkout follows the new incumbent along the changed paths.
                repo.incumbent_worktree(cand).unwrap();
            } else {
                let tip = repo.snapshot_paths("edits", &scan.edited).unwrap().unwrap_or(cand);
                repo.mark_discarded(&format!("bench-{n}"), tip).unwrap();
                repo.revert_to(incumbent, tip).unwrap();
            }
            let c_end = t.read();
            if round > 0 {
                ours.walk.push(c_walk);
                ours.commit.push(c_commit);
                ours.scan.push(c_scan);
                if keep {
                    ours.keep.push(c_end)
                } else {
                    ours.revert.push(c_end)
                }
            }

            // The git command line, the same steps.
            std::fs::write(dir.join("kernel.py"), format!("BQ = {}\n", 128 + n + 1000)).unwrap();
            let incumbent = git_out(&dir, &["rev-parse", "HEAD"]);
            let t = Clock::start();
            git(&dir, &["status", "--porcelain", "-uall"]);
            let g_walk = t.read();
            git(&dir, &["add", "-A"]);
            git(&dir, &["commit", "-qm", &format!("cli experiment {n}")]);
            let g_commit = t.read();
            let t = Clock::start();
            git(&dir, &["status", "--porcelain", "--untracked-files=normal"]);
            let g_scan = t.read();
            let t = Clock::start();
            if keep {
                git(&dir.join(".cli/incumbent"), &["checkout", "-q", "--detach", "main"]);
            } else {
                git(&dir, &["update-ref", &format!("refs/cli/discarded/{n}"), "HEAD"]);
                git(&dir, &["reset", "-q", "--hard", &incumbent]);
            }
            let g_end = t.read();
            if round > 0 {
                cli.walk.push(g_walk);
                cli.commit.push(g_commit);
                cli.scan.push(g_scan);
                if keep {
                    cli.keep.push(g_end)
                } else {
                    cli.revert.push(g_end)
                }
            }
        }
    }
    assert_eq!(git_out(&dir, &["status", "--porcelain", "--untracked-files=no"]), "", "the benchmark left the tree clean");

    // Stale stat data: every file touched, content unchanged. The first walk must re-read and
    // hash every file; the second shows whether the first refreshed the index's stat cache.
    let mut stale = vec![];
    touch_all(&dir.join("src"));
    for _ in 0..2 {
        let t = Clock::start();
        assert!(repo.changes().unwrap().is_empty());
        stale.push(t.read());
    }
    touch_all(&dir.join("src"));
    for _ in 0..2 {
        let t = Clock::start();
        git(&dir, &["status", "--porcelain", "-uall"]);
        stale.push(t.read());
    }

    // The floor under any status walk on this machine: one lstat of every file.
    let mut floor = vec![];
    for _ in 0..5 {
        let t = Clock::start();
        let n = count_lstat(&dir.join("src"));
        assert_eq!(n, files);
        floor.push(t.read());
    }
    let floor = med(&floor);
    let row = |name: &str, o: (f64, f64), g: Option<(f64, f64)>| match g {
        Some(g) => println!("{name:<56} {:>8.1} {:>8.1} {:>8.1} {:>8.1}", o.0, o.1, g.0, g.1),
        None => println!("{name:<56} {:>8.1} {:>8.1}", o.0, o.1),
    };
    let (ow, gw) = (med(&ours.walk), med(&cli.walk));
    let (oc, os, ok, or) = (med(&ours.commit), med(&ours.scan), med(&ours.keep), med(&ours.revert));
    let (gc, gs, gk, gr) = (med(&cli.commit), med(&cli.scan), med(&cli.keep), med(&cli.revert));
    println!("\nmedian of {} keeps and {} reverts (first round dropped), ms", rounds - 1, rounds - 1);
    println!("{:<56} {:>8} {:>8} {:>8} {:>8}", "step", "ratchet", "cpu", "git CLI", "cpu");
    row("lstat of every file (the floor under a status walk)", floor, None);
    row("  of which the status walk", ow, Some(gw));
    row("commit the hypothesis (status walk + commit)", oc, Some(gc));
    row("after the runs: what the benchmark wrote (status walk)", os, Some(gs));
    row("keep: move the incumbent checkout (worktree checkout)", ok, Some(gk));
    row("revert: park ref, back to the incumbent", or, Some(gr));
    row("git work per keep (total)", add(add(oc, os), ok), Some(add(add(gc, gs), gk)));
    row("git work per revert (total)", add(add(oc, os), or), Some(add(add(gc, gs), gr)));
    row("status walk, every file touched: 1st walk", stale[0], Some(stale[2]));
    row("status walk, every file touched: 2nd walk", stale[1], Some(stale[3]));
    println!("{:<56} {:>8.0} {:>8} {:>8.0}", "first incumbent checkout (once per clone), wall", first_wt, "", first_wt_cli);
}

fn count_lstat(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            let md = std::fs::symlink_metadata(e.path()).unwrap();
            if md.is_dir() {
                count_lstat(&e.path())
            } else {
                1
            }
        })
        .sum()
}

fn walk_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            let md = e.metadata().unwrap();
            if md.is_dir() {
                walk_size(&e.path())
            } else {
                md.len()
            }
        })
        .sum()
}
