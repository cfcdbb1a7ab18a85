//! Never losing work: the repository lock, protected files, and what a hypothesis commit may
//! contain.

use crate::support;

use predicates::prelude::*;
use support::TestRepo;

#[test]
fn a_second_ratchet_on_the_same_repo_is_refused() {
    let t = TestRepo::new();
    let pid_file = t.hanging_candidate();
    let mut first = t.spawn_ratchet("experiment: holds the lock");
    support::wait_for(&pid_file);
    t.ratchet()
        .arg("experiment: second")
        .assert()
        .code(5)
        .stderr(predicate::str::contains("another ratchet").and(predicate::str::contains(first.id().to_string())));
    // The refused ratchet changed nothing: the first one's hypothesis commit is still HEAD.
    assert_eq!(t.git(&["log", "-1", "--format=%s"]).trim(), "experiment: holds the lock");
    unsafe {
        libc::kill(first.id() as i32, libc::SIGTERM);
    }
    assert_eq!(first.wait().unwrap().code(), Some(130));
    // SIGKILL leaves the lock file behind; the kernel released the flock, so the next run goes.
    t.write("fake.env", "FAKE_LATENCY_MS=5\n");
    t.ratchet().arg("experiment: after").assert().success();
}

#[test]
fn a_lock_left_by_a_killed_ratchet_is_cleared() {
    let t = TestRepo::new();
    // The lock lives in the common git dir, shared by every worktree of the repository.
    std::fs::create_dir_all(t.path().join(".git/ratchet")).unwrap();
    std::fs::write(t.path().join(".git/ratchet/lock"), r#"{"pid":999999999,"started":"2026-01-01T00:00:00Z","command":"ratchet x"}"#)
        .unwrap();
    t.write("fake.env", "FAKE_LATENCY_MS=5\n");
    t.ratchet().arg("experiment: go").assert().success().stderr(predicate::str::contains("cleared a stale lock"));
}

#[test]
fn a_hypothesis_that_changes_the_harness_is_refused() {
    let t = TestRepo::with_config(
        &support::DEFAULT_CONFIG.replace("command = \"python3 {bench}\"", "command = \"python3 {bench} bench.py\"\nprotect = [\"data/\"]"),
    );
    t.write("bench.py", "# the harness\n");
    t.write("data/inputs.txt", "1 2 3\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-qm", "harness"]);
    let base = t.head();
    let tweaked_config = t.read("ratchet.toml").replace("pairs = 4", "pairs = 3");
    for (file, text) in [("bench.py", "# a faster clock\n"), ("data/inputs.txt", "1\n"), ("ratchet.toml", tweaked_config.as_str())] {
        let before = t.read(file);
        t.write(file, text);
        t.write("kernel.py", "BQ = 256\n");
        t.ratchet()
            .arg("experiment: sneaky")
            .assert()
            .code(4)
            .stderr(predicate::str::contains("benchmark harness").and(predicate::str::contains(file)));
        assert_eq!(t.head(), base, "nothing committed for {file}");
        assert_eq!(t.read(file), text, "the working tree is left as it was");
        t.write(file, &before);
    }
}

#[test]
fn files_the_benchmark_writes_into_the_repo_never_leak_and_are_kept() {
    let t = TestRepo::new();
    t.write("fake.env", "FAKE_LATENCY_MS=10\nFAKE_WRITE_DIR=profile_data\n");
    t.git(&["commit", "-qam", "benchmark dumps profile_data"]);
    t.write("fake.env", "FAKE_LATENCY_MS=5\nFAKE_WRITE_DIR=profile_data\n");
    t.ratchet().arg("experiment: faster").assert().success().stderr(predicate::str::contains("profile_data"));
    // Run 0 is the candidate's (the order starts BA), run in the repo itself.
    assert!(t.path().join("profile_data/run0.txt").exists(), "the benchmark's output is left on disk");
    t.write("fake.env", "FAKE_LATENCY_MS=4\nFAKE_WRITE_DIR=profile_data\n");
    t.ratchet().arg("experiment: faster still").assert().success();
    let files = t.git(&["show", "--name-only", "--format=", "HEAD"]);
    assert_eq!(files.trim(), "fake.env", "profile_data/ never enters a hypothesis commit");
    // Left out by ratchet, not hidden from the user's git.
    assert_eq!(t.git(&["status", "--porcelain"]), "?? profile_data/\n");
}

/// A test repo with another test repo as its submodule at `vendor/lib` (the submodule's own repo
/// returned too: it must outlive the test).
fn with_submodule() -> (TestRepo, TestRepo) {
    let sub = TestRepo::new();
    let t = TestRepo::new();
    t.git(&["-c", "protocol.file.allow=always", "submodule", "add", "-q", sub.path().to_str().unwrap(), "vendor/lib"]);
    t.git(&["commit", "-qm", "add submodule"]);
    (sub, t)
}

#[test]
fn submodules_are_never_part_of_a_hypothesis_and_survive_a_revert() {
    let (_sub, t) = with_submodule();
    let base = t.head();
    // A local edit inside the submodule, and a slower kernel: the revert must keep the edit.
    t.write("vendor/lib/kernel.py", "BQ = 999  # local experiment in the submodule\n");
    t.write("fake.env", "FAKE_LATENCY_MS=20\n");
    t.ratchet().arg("experiment: slower").assert().success();
    assert_eq!(t.head(), base);
    let files = t.git(&["show", "--name-only", "--format=", "refs/ratchet/discarded/1"]);
    assert_eq!(files.trim(), "fake.env", "the submodule is not part of the hypothesis");
    assert_eq!(t.read("vendor/lib/kernel.py"), "BQ = 999  # local experiment in the submodule\n");
}

#[test]
fn a_hook_set_in_the_global_config_git_config_global_names_is_seen() {
    let t = TestRepo::new();
    let elsewhere = tempfile::tempdir().unwrap();
    let hooks = elsewhere.path().join("hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    support::write_script(&hooks.join("pre-commit"), "#!/bin/sh\nexit 0\n");
    let global = elsewhere.path().join("my-gitconfig");
    std::fs::write(&global, format!("[core]\n\thooksPath = {}\n", hooks.display())).unwrap();
    t.write("kernel.py", "BQ = 64\n");
    let out = t.ratchet().arg("experiment: BQ 64").env("GIT_CONFIG_GLOBAL", &global).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "refused: {stderr}");
    assert!(stderr.contains("pre-commit hook") && stderr.contains(&hooks.display().to_string()), "{stderr}");
    assert_eq!(t.read("kernel.py"), "BQ = 64\n", "the edit stays");
    assert!(t.rows().is_empty());
    // With the global file switched off, as git reads it, there is no hook and the experiment runs.
    t.ratchet().arg("experiment: BQ 64").env("GIT_CONFIG_GLOBAL", "/dev/null").assert().success();
}

#[test]
fn a_change_made_only_inside_a_submodule_is_named_not_called_no_change() {
    let (_sub, t) = with_submodule();
    let base = t.head();
    t.write("vendor/lib/kernel.py", "BQ = 999\n");
    let out = t.ratchet().arg("experiment: BQ 999 in the submodule").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("vendor/lib (files inside it are edited)") && stderr.contains("never commits into"), "{stderr}");
    assert_eq!(t.head(), base);
    assert_eq!(t.read("vendor/lib/kernel.py"), "BQ = 999\n");
    // A new commit checked out in the submodule: named as such; a sweep refuses to start on it.
    t.git(&["-c", "user.name=T", "-c", "user.email=t@e", "-C", "vendor/lib", "commit", "-qam", "BQ 999"]);
    let out = t.ratchet().arg("experiment: the submodule's new commit").output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("its checked-out commit is not the one the superproject records"));
    t.write("experiments/01.toml", "message = \"exp\"\n[[edit]]\nfile = \"fake.env\"\nfind = \"=10\"\nreplace = \"=5\"\n");
    t.git(&["add", "experiments"]);
    t.git(&["commit", "-qm", "queue"]);
    let out = t.ratchet().arg("sweep").output().unwrap();
    assert_eq!(out.status.code(), Some(4));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("submodules differ from their recorded commits"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(t.rows().is_empty());
}
