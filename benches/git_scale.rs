//! ratchet's git work at repository scale: builds a repository of 10,000 files (about 100 MB) in
//! a temporary directory, then times the git steps of experiments that are kept and reverted
//! (ratchet's own, through `ratchet::vcs`: as it works by default, with one stat pass and a
//! watcher, and with two whole-tree libgit2 status walks as `RATCHET_FULL_SCAN=1` makes it)
//! beside the git command line doing the same steps on the same repository. Each step is reported as wall time and CPU time (user + system, of this
//! process and of the git processes it waited for): on a shared machine the wall time carries
//! other jobs' load, the CPU time much less of it. Figures go to docs/git.md.
//!
//! cargo bench --bench git_scale [-- FILES [ROUNDS]]

#[path = "common/mod.rs"]
mod common;

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
    // ratchet's own directories and the git CLI's scratch are out of git's way (ratchet's own
    // ignore themselves through a `.gitignore` of theirs; one exclude file does it for all three).
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

impl Steps {
    /// One experiment's (walk, commit, after-run, keep-or-revert) times.
    fn push(&mut self, r: [(f64, f64); 4], keep: bool) {
        self.walk.push(r[0]);
        self.commit.push(r[1]);
        self.scan.push(r[2]);
        if keep {
            self.keep.push(r[3])
        } else {
            self.revert.push(r[3])
        }
    }
}

/// ratchet's git steps of one experiment whose hypothesis is one changed file, kept or
/// reverted: (status walk, walk + commit, check after the runs, keep or revert).
fn ratchet_round(repo: &Repo, dir: &Path, n: u64, keep: bool) -> [(f64, f64); 4] {
    std::fs::write(dir.join("kernel.py"), format!("BQ = {}\n", 128 + n)).unwrap();
    let incumbent = repo.head_oid().unwrap();
    let t = Clock::start();
    let changes = repo.changes().unwrap();
    let c_walk = t.read();
    assert_eq!(changes, vec!["kernel.py".to_string()]);
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
    [c_walk, c_commit, c_scan, t.read()]
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
    let Some(args) = common::bench_args("git_scale") else { return };
    let files: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let rounds: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(7);
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

    let (mut ours, mut full, mut cli) = (Steps::default(), Steps::default(), Steps::default());
    let mut n = 0u64;
    for round in 0..rounds {
        for keep in [true, false] {
            // ratchet, both ways: the hypothesis is one changed file.
            for (mode, steps) in [(true, &mut full), (false, &mut ours)] {
                repo.set_full_scan(mode);
                n += 1;
                let r = ratchet_round(&repo, &dir, n, keep);
                if round > 0 {
                    steps.push(r, keep);
                }
            }
            repo.set_full_scan(false);

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
                cli.push([g_walk, g_commit, g_scan, g_end], keep);
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
    let row = |name: &str, f: Option<(f64, f64)>, o: (f64, f64), g: Option<(f64, f64)>| {
        let cell = |v: Option<(f64, f64)>| v.map_or(format!("{:>8} {:>8}", "", ""), |v| format!("{:>8.1} {:>8.1}", v.0, v.1));
        println!("{name:<44} {} {} {}", cell(f), cell(Some(o)), cell(g));
    };
    let m = |s: &Steps| (med(&s.walk), med(&s.commit), med(&s.scan), med(&s.keep), med(&s.revert));
    let (fw, fc, fs, fk, fr) = m(&full);
    let (ow, oc, os, ok, or) = m(&ours);
    let (gw, gc, gs, gk, gr) = m(&cli);
    println!("\nmedian of {} keeps and {} reverts each (first round dropped), ms: wall and CPU", rounds - 1, rounds - 1);
    println!("{:<44} {:>17} {:>17} {:>17}", "", "ratchet, 2 walks", "ratchet", "git CLI");
    row("lstat of every file (the floor of a walk)", None, floor, None);
    row("  of which the status walk", Some(fw), ow, Some(gw));
    row("commit the hypothesis (walk + commit)", Some(fc), oc, Some(gc));
    row("after the runs: what changed meanwhile", Some(fs), os, Some(gs));
    row("keep: move the incumbent checkout", Some(fk), ok, Some(gk));
    row("revert: park ref, back to the incumbent", Some(fr), or, Some(gr));
    row("git work per keep (total)", Some(add(add(fc, fs), fk)), add(add(oc, os), ok), Some(add(add(gc, gs), gk)));
    row("git work per revert (total)", Some(add(add(fc, fs), fr)), add(add(oc, os), or), Some(add(add(gc, gs), gr)));
    row("status walk, every file touched: 1st walk", None, stale[0], Some(stale[2]));
    row("status walk, every file touched: 2nd walk", None, stale[1], Some(stale[3]));
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
