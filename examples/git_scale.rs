//! ratchet's git work at repository scale: builds a repository of 10,000 files (about 100 MB) in
//! a temporary directory, then times the git steps of experiments that are kept and reverted
//! (ratchet's own, through `ratchet::vcs`) beside the git command line doing the same steps on
//! the same repository. Figures go to docs/git.md.
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

struct Steps {
    walk: Vec<f64>,
    commit: Vec<f64>,
    scan: Vec<f64>,
    keep: Vec<f64>,
    revert: Vec<f64>,
}

impl Steps {
    fn new() -> Steps {
        Steps { walk: vec![], commit: vec![], scan: vec![], keep: vec![], revert: vec![] }
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

    let (mut ours, mut cli) = (Steps::new(), Steps::new());
    let mut n = 0u64;
    for round in 0..rounds {
        for keep in [true, false] {
            n += 1;
            // ratchet: the hypothesis is one changed file.
            std::fs::write(dir.join("kernel.py"), format!("BQ = {}\n", 128 + n)).unwrap();
            let incumbent = repo.head_oid().unwrap();
            let t = Instant::now();
            let changes = repo.changes().unwrap();
            let c_walk = ms(t);
            let cand = repo.commit_hypothesis(&format!("experiment {n}"), &changes, false).unwrap();
            let c_commit = ms(t);
            let t = Instant::now();
            let scan = repo.after_run_scan().unwrap();
            assert!(scan.untracked.is_empty() && scan.edited.is_empty());
            let c_scan = ms(t);
            let t = Instant::now();
            if keep {
                // The incumbent checkout follows the new incumbent along the changed paths.
                repo.incumbent_worktree(cand).unwrap();
            } else {
                let tip = repo.snapshot_paths("edits", &scan.edited).unwrap().unwrap_or(cand);
                repo.mark_discarded(&format!("bench-{n}"), tip).unwrap();
                repo.revert_to(incumbent, tip).unwrap();
            }
            let c_end = ms(t);
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
            let t = Instant::now();
            git(&dir, &["status", "--porcelain", "-uall"]);
            let g_walk = ms(t);
            git(&dir, &["add", "-A"]);
            git(&dir, &["commit", "-qm", &format!("cli experiment {n}")]);
            let g_commit = ms(t);
            let t = Instant::now();
            git(&dir, &["status", "--porcelain", "--untracked-files=normal"]);
            let g_scan = ms(t);
            let t = Instant::now();
            if keep {
                git(&dir.join(".cli/incumbent"), &["checkout", "-q", "--detach", "main"]);
            } else {
                git(&dir, &["update-ref", &format!("refs/cli/discarded/{n}"), "HEAD"]);
                git(&dir, &["reset", "-q", "--hard", &incumbent]);
            }
            let g_end = ms(t);
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

    // The floor under any status walk on this machine: one lstat of every file.
    let mut floor = vec![];
    for _ in 0..5 {
        let t = Instant::now();
        let n = count_lstat(&dir.join("src"));
        assert_eq!(n, files);
        floor.push(ms(t));
    }
    let floor = median(&mut floor);
    let (ow, gw) = (median(&mut ours.walk), median(&mut cli.walk));
    let (oc, os, ok, or) = (median(&mut ours.commit), median(&mut ours.scan), median(&mut ours.keep), median(&mut ours.revert));
    let (gc, gs, gk, gr) = (median(&mut cli.commit), median(&mut cli.scan), median(&mut cli.keep), median(&mut cli.revert));
    println!("\nmedian of {} keeps and {} reverts (first round dropped), ms", rounds - 1, rounds - 1);
    println!("{:<58} {:>9} {:>9}", "step", "ratchet", "git CLI");
    println!("{:<58} {:>9.1} {:>9}", "lstat of every file (the floor under a status walk)", floor, "");
    println!("{:<58} {:>9.1} {:>9.1}", "  of which the status walk", ow, gw);
    println!("{:<58} {:>9.1} {:>9.1}", "commit the hypothesis (status walk + commit)", oc, gc);
    println!("{:<58} {:>9.1} {:>9.1}", "after the runs: what the benchmark wrote (status walk)", os, gs);
    println!("{:<58} {:>9.1} {:>9.1}", "keep: move the incumbent checkout (worktree checkout)", ok, gk);
    println!("{:<58} {:>9.1} {:>9.1}", "revert: park ref, back to the incumbent", or, gr);
    println!("{:<58} {:>9.1} {:>9.1}", "git work per keep (total)", oc + os + ok, gc + gs + gk);
    println!("{:<58} {:>9.1} {:>9.1}", "git work per revert (total)", oc + os + or, gc + gs + gr);
    println!("{:<58} {:>9.0} {:>9.0}", "first incumbent checkout (once per clone)", first_wt, first_wt_cli);
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
