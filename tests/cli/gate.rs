//! `ratchet gate` fails the build on an injected regression, passes a neutral
//! change, works on a detached HEAD, and commits, resets and records nothing.

use crate::support;

use predicates::prelude::*;
use support::TestRepo;

/// A repo whose HEAD (detached, as a pull request's checkout is) changes fake.env to `env` on
/// top of the base; returns (repo, base, head).
fn pr(env: &str) -> (TestRepo, String, String) {
    let t = TestRepo::new();
    let base = t.head();
    t.write("fake.env", env);
    t.write("kernel.py", "BQ = 256\nBKV = 256\n");
    t.git(&["commit", "-qam", "the pull request"]);
    let head = t.head();
    t.git(&["checkout", "-q", "--detach"]);
    (t, base, head)
}

/// Nothing of the user's changed: HEAD, the work tree, results, worktrees.
fn untouched(t: &TestRepo, head: &str) {
    assert_eq!(t.head(), head, "HEAD did not move");
    assert_eq!(t.git(&["status", "--porcelain"]), "", "the work tree is clean");
    assert!(!t.path().join("results/results.csv").exists(), "no results row");
    assert!(!t.path().join("results/runs.jsonl").exists(), "no runs recorded in the user's table");
    assert_eq!(t.git(&["worktree", "list"]).lines().count(), 1, "the throw-away checkouts are gone");
    assert!(!t.git(&["branch", "--list"]).contains("ratchet-gate"), "no scratch branch is left");
}

#[test]
fn an_injected_regression_fails_the_build_with_a_markdown_summary() {
    let (t, base, head) = pr("FAKE_LATENCY_MS=13\n");
    let summary = t.path().join("..").join(format!("summary-{}.md", std::process::id()));
    let out = t.ratchet().args(["gate", "--base", &base, "--threshold", "5"]).env("GITHUB_STEP_SUMMARY", &summary).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(7), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("### ratchet gate: regression"), "{stdout}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("significant regression"));
    let md = std::fs::read_to_string(&summary).unwrap();
    let _ = std::fs::remove_file(&summary);
    assert!(md.contains("| latency (median) |") || md.contains("| score (median) |"), "{md}");
    assert!(md.contains("regression"), "{md}");
    untouched(&t, &head);
}

#[test]
fn a_neutral_change_passes_and_a_gain_is_reported() {
    let (t, base, head) = pr("FAKE_LATENCY_MS=10\n");
    t.ratchet()
        .args(["gate", "--base", &base, "--threshold", "5"])
        .assert()
        .success()
        .stdout(predicate::str::contains("no significant regression"));
    untouched(&t, &head);

    let (t, base, head) = pr("FAKE_LATENCY_MS=7\n");
    let out = t.ratchet().args(["gate", "--base", &base, "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["type"], "gate");
    assert_eq!(v["verdict"], "gain");
    assert_eq!(v["passed"], true);
    assert!(v["speedup_pct"].as_f64().unwrap() > 20.0, "{v}");
    assert_eq!(v["head"], head.as_str());
    untouched(&t, &head);
}

#[test]
fn a_slowdown_below_the_threshold_passes() {
    let (t, base, head) = pr("FAKE_LATENCY_MS=10.4\nFAKE_NOISE_CV=0.002\n");
    t.ratchet().args(["gate", "--base", &base, "--threshold", "20"]).assert().success();
    untouched(&t, &head);
}

#[test]
fn bad_refs_and_thresholds_are_usage_errors() {
    let (t, base, head) = pr("FAKE_LATENCY_MS=10\n");
    t.ratchet().args(["gate", "--base", "no-such-branch"]).assert().code(2).stderr(predicate::str::contains("fetch-depth"));
    t.ratchet().args(["gate", "--base", &base, "--threshold", "-1"]).assert().code(2);
    untouched(&t, &head);
}

#[test]
fn a_head_whose_benchmark_crashes_fails_the_build() {
    let (t, base, head) = pr("FAKE_MODE=crash\n");
    let out = t.ratchet().args(["gate", "--base", &base, "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["type"], "error");
    assert!(v["message"].as_str().unwrap().contains("head commit's benchmark failed"), "{v}");
    untouched(&t, &head);
}

#[test]
fn a_killed_gate_leaves_checkouts_that_status_reports_and_recover_removes() {
    let (t, base, head) = pr("FAKE_LATENCY_MS=10\nFAKE_SLEEP_S=30\n");
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("ratchet"))
        .args(["gate", "--base", &base])
        .current_dir(t.path())
        .envs(t.ratchet().get_envs().filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    support::wait_for(&t.path().join(".ratchet/gate/runs"));
    std::thread::sleep(std::time::Duration::from_millis(300));
    child.kill().unwrap(); // SIGKILL: no clean-up runs
    child.wait().unwrap();
    assert_eq!(t.git(&["worktree", "list"]).lines().count(), 3, "the gate's two checkouts are left");
    t.ratchet().arg("status").assert().success().stdout(predicate::str::contains("stopped `ratchet gate`"));
    assert_eq!(t.git(&["worktree", "list"]).lines().count(), 3, "status changed nothing");
    t.ratchet().arg("recover").assert().success().stdout(predicate::str::contains("removed the throw-away checkouts"));
    untouched(&t, &head);
}
