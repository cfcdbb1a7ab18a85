//! Never losing work: the repository lock, protected files, and what a hypothesis commit may
//! contain.

mod support;

use predicates::prelude::*;
use std::time::{Duration, Instant};
use support::TestRepo;

fn wait_for(path: &std::path::Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !path.exists() {
        assert!(Instant::now() < deadline, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_second_ratchet_on_the_same_repo_is_refused() {
    let t = TestRepo::new();
    let pid_file = t.path().join("child.pid");
    t.write(".gitignore", "child.pid\n");
    t.git(&["add", ".gitignore"]);
    t.git(&["commit", "-qm", "ignore"]);
    t.write("fake.env", &format!("FAKE_MODE=hang\nFAKE_SPAWN_CHILD=1\nFAKE_PID_FILE={}\n", pid_file.display()));
    let mut first = std::process::Command::new(assert_cmd::cargo::cargo_bin("ratchet"))
        .arg("experiment: holds the lock")
        .current_dir(t.path())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&pid_file);
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
    std::fs::create_dir_all(t.path().join(".ratchet")).unwrap();
    std::fs::write(t.path().join(".ratchet/lock"), r#"{"pid":999999999,"started":"2026-01-01T00:00:00Z","command":"ratchet x"}"#).unwrap();
    t.write("fake.env", "FAKE_LATENCY_MS=5\n");
    t.ratchet().arg("experiment: go").assert().success().stderr(predicate::str::contains("cleared a stale lock"));
}
