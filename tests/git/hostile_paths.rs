//! Directories and files of the user's that ratchet must never clobber or hang on: a worker's
//! `--out` or work directory that holds someone else's files (directly or through a symbolic
//! link), a symlinked experiment directory under `gc`, a user's worktree or branch that happens to
//! carry a name ratchet uses for its checkouts, and a FIFO given as a config file.

use crate::support;

use std::path::Path;
use support::TestRepo;

/// A repo with a faster candidate commit on a side branch; returns (incumbent, candidate).
fn two_commits(t: &TestRepo) -> (String, String) {
    let inc = t.head();
    t.git(&["checkout", "-qb", "side"]);
    t.write("fake.env", "FAKE_LATENCY_MS=5\n");
    t.git(&["commit", "-qam", "candidate"]);
    let cand = t.head();
    t.git(&["checkout", "-q", "main"]);
    (inc, cand)
}

fn worker(t: &TestRepo, inc: &str, cand: &str, out: &Path) -> assert_cmd::Command {
    let mut c = t.ratchet();
    c.args(["worker", "--repo"]).arg(t.path()).args(["--incumbent", inc, "--candidate", cand, "--out"]).arg(out);
    c
}

/// A directory of the user's with files under the names a worker writes.
fn users_dir(at: &Path) {
    std::fs::create_dir_all(at.join("runs")).unwrap();
    std::fs::write(at.join("runs/notes.txt"), "mine\n").unwrap();
    std::fs::write(at.join("runs.jsonl"), "{\"mine\": true}\n").unwrap();
}

fn users_dir_intact(at: &Path) {
    assert_eq!(std::fs::read_to_string(at.join("runs/notes.txt")).unwrap(), "mine\n", "the user's runs/ was touched");
    assert_eq!(std::fs::read_to_string(at.join("runs.jsonl")).unwrap(), "{\"mine\": true}\n", "the user's runs.jsonl was replaced");
}

#[test]
fn worker_refuses_an_out_directory_holding_someone_elses_files() {
    let t = TestRepo::new();
    let (inc, cand) = two_commits(&t);
    let d = tempfile::tempdir().unwrap();
    let mine = d.path().join("mine");
    users_dir(&mine);
    let out = worker(&t, &inc, &cand, &mine).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no ratchet worker wrote"), "{err}");
    users_dir_intact(&mine);
    // The same directory reached through a symbolic link.
    let link = d.path().join("link");
    std::os::unix::fs::symlink(&mine, &link).unwrap();
    let out = worker(&t, &inc, &cand, &link).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("symbolic link"), "{}", String::from_utf8_lossy(&out.stderr));
    users_dir_intact(&mine);
    // A fresh directory, and one holding only an engine's log, are measured as before.
    std::fs::create_dir_all(d.path().join("logged")).unwrap();
    std::fs::write(d.path().join("logged/worker.log"), "started\n").unwrap();
    for dir in ["fresh", "logged"] {
        worker(&t, &inc, &cand, &d.path().join(dir)).assert().success();
        assert!(d.path().join(dir).join("trial.json").is_file());
    }
    assert_eq!(std::fs::read_to_string(d.path().join("logged/worker.log")).unwrap(), "started\n");
}

#[test]
fn worker_never_replaces_checkouts_in_a_work_directory_it_did_not_make() {
    let t = TestRepo::new();
    let (inc, cand) = two_commits(&t);
    let d = tempfile::tempdir().unwrap();
    let work = d.path().join("work");
    std::fs::create_dir_all(work.join("candidate")).unwrap();
    std::fs::write(work.join("candidate/draft.py"), "unsaved work\n").unwrap();
    let out = worker(&t, &inc, &cand, &d.path().join("t1")).env("RATCHET_WORKER_DIR", &work).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("was not made by a ratchet worker"), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(work.join("candidate/draft.py")).unwrap(), "unsaved work\n");
    // A work directory the worker made is reused, trial after trial.
    let own = d.path().join("slot");
    for n in ["t2", "t3"] {
        worker(&t, &inc, &cand, &d.path().join(n)).env("RATCHET_WORKER_DIR", &own).assert().success();
    }
    assert!(own.join("candidate/fake.env").is_file());
}

#[test]
fn gc_never_follows_a_symlinked_experiment_directory() {
    let t = TestRepo::new();
    t.write("fake.env", "FAKE_LATENCY_MS=20\n");
    t.ratchet().arg("experiment: slower").assert().success();
    assert_eq!(t.rows()[0]["status"], "revert");
    // The user moved the run directory elsewhere and left a link; the target holds their files.
    let elsewhere = tempfile::tempdir().unwrap();
    let target = elsewhere.path().join("exp1");
    std::fs::create_dir_all(target.join("runs")).unwrap();
    std::fs::write(target.join("runs/important.txt"), "keep me\n").unwrap();
    let exp = t.path().join(".ratchet/experiments/1");
    std::fs::remove_dir_all(&exp).unwrap();
    std::os::unix::fs::symlink(&target, &exp).unwrap();
    t.ratchet().args(["gc", "--keep-last", "0"]).assert().success();
    assert_eq!(std::fs::read_to_string(target.join("runs/important.txt")).unwrap(), "keep me\n", "gc deleted through the link");
    assert!(exp.is_symlink());
}

#[test]
fn recover_leaves_a_users_worktree_that_carries_a_gate_checkouts_name() {
    let t = TestRepo::new();
    let d = tempfile::tempdir().unwrap();
    let wt = d.path().join("ratchet-gate-base");
    t.git(&["worktree", "add", "-q", "--detach", wt.to_str().unwrap()]);
    std::fs::write(wt.join("uncommitted.py"), "half-done work\n").unwrap();
    t.ratchet().arg("status").assert().success();
    let out = t.ratchet().arg("recover").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(wt.join("uncommitted.py")).unwrap(), "half-done work\n", "recover removed the user's worktree");
    assert!(t.git(&["worktree", "list"]).contains("ratchet-gate-base"));
    // The gate refuses to take the name over instead of pruning it.
    let out = t.ratchet().args(["gate", "--base", "HEAD", "--head", "HEAD"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("ratchet did not make it"), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(wt.join("uncommitted.py").is_file());
}

/// Users' branches under the names of ratchet's scratch branches (the gate's and the incumbent
/// checkout's), each on a commit of its own.
fn users_scratch_named_branches(t: &TestRepo) -> Vec<(&'static str, String)> {
    let names = ["ratchet-gate-base-tmp", "ratchet-gate-head-tmp", "ratchet-incumbent-tmp"];
    t.git(&["checkout", "-qb", "mine"]);
    t.write("notes.txt", "my work\n");
    t.git(&["add", "notes.txt"]);
    t.git(&["commit", "-qm", "my work"]);
    let mine = t.head();
    t.git(&["checkout", "-q", "main"]);
    names
        .iter()
        .map(|n| {
            t.git(&["branch", n, &mine]);
            (*n, mine.clone())
        })
        .collect()
}

fn branches_intact(t: &TestRepo, branches: &[(&str, String)]) {
    for (name, at) in branches {
        assert_eq!(t.git(&["rev-parse", &format!("refs/heads/{name}")]).trim(), at, "the user's branch {name} was moved or deleted");
    }
}

#[test]
fn users_branches_named_like_scratch_branches_survive_gate_experiments_and_recover() {
    let t = TestRepo::new();
    let branches = users_scratch_named_branches(&t);
    let out = t.ratchet().args(["gate", "--base", "HEAD", "--head", "HEAD"]).output().unwrap();
    assert!(out.status.code().is_some_and(|c| c < 2), "gate: {}", String::from_utf8_lossy(&out.stderr));
    branches_intact(&t, &branches);
    assert_eq!(t.git(&["worktree", "list"]).lines().count(), 1, "the gate's checkouts are gone");
    t.write("fake.env", "FAKE_LATENCY_MS=5\n");
    let out = t.ratchet().arg("experiment: faster").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    branches_intact(&t, &branches);
    t.ratchet().arg("recover").assert().success();
    branches_intact(&t, &branches);
    let left: Vec<String> = t.git(&["branch", "--list", "ratchet-*"]).lines().map(|l| l.trim().to_string()).collect();
    assert_eq!(left.len(), branches.len(), "ratchet left scratch branches of its own: {left:?}");
}

#[test]
fn recover_deletes_trial_refs_no_parallel_sweep_tracks() {
    let t = TestRepo::new();
    t.git(&["update-ref", "refs/ratchet/trials/t7", "HEAD"]);
    let status = t.ratchet().arg("status").output().unwrap();
    assert!(
        String::from_utf8_lossy(&status.stdout).contains("trials no parallel sweep tracks (t7)"),
        "{}",
        String::from_utf8_lossy(&status.stdout)
    );
    let out = t.ratchet().arg("recover").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("t7"), "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(t.git(&["for-each-ref", "refs/ratchet/trials/"]), "", "a stray trial ref survived recovery");
}

#[test]
fn worker_refuses_a_fifo_as_its_config_instead_of_hanging() {
    let t = TestRepo::new();
    let (inc, cand) = two_commits(&t);
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("ratchet.toml");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a fresh path in a temporary directory.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let out = worker(&t, &inc, &cand, &d.path().join("t1"))
        .arg("--config")
        .arg(&fifo)
        .timeout(std::time::Duration::from_secs(30))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code().is_some_and(|c| c != 0), "the worker hung or succeeded: {err}");
    assert!(err.contains("not a regular file"), "{err}");
}
