//! End-to-end behaviour of the `ratchet` binary on throw-away git repos with a fake benchmark.

use crate::support;

use predicates::prelude::*;
use support::TestRepo;

/// One fixed test after 2 pairs, no confirmation: 4 runs an experiment. The decision's own
/// cases (looks, confirmation, the run order) run in-process in decisions::loop_inprocess; here
/// the binary shows what only a process shows (exit status, output, the commits, the files).
const QUICK: &str = "[benchmark]\ncommand = \"python3 {bench}\"\ntimeout_s = 20\nkill_grace_s = 0.5\nwarmup = 0\n\
iters = 5\nprofile_iters = 0\n[hardware]\npreset = \"tpu-v5e\"\n[decision]\nmethod = \"fixed\"\nmin_pairs = 2\nmax_pairs = 2\n\
confirm = false\n";

#[test]
fn faster_candidate_is_kept_and_becomes_the_incumbent() {
    let t = TestRepo::with_config(QUICK);
    let base = t.head();
    t.write("fake.env", "FAKE_LATENCY_MS=5\n");
    t.ratchet().arg("experiment: twice as fast").assert().success().stdout(predicate::str::contains("KEEP"));
    let head = t.head();
    assert_ne!(head, base, "the hypothesis commit stays");
    assert_eq!(t.git(&["log", "-1", "--format=%s"]).trim(), "experiment: twice as fast");
    assert_eq!(t.git(&["status", "--porcelain"]), "", "nothing of ratchet's shows up in git status");
    let rows = t.rows();
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    assert_eq!(r["status"], "keep");
    assert_eq!(r["commit"], head);
    assert_eq!(r["incumbent"], base);
    assert_eq!(r["runs"], "4");
    let delta: f64 = r["delta_pct"].parse().unwrap();
    // score = util / latency goes as 1/latency^2: half the latency is about 4x the score.
    assert!(delta > 250.0 && delta < 500.0, "delta {delta}");
    assert!((r["latency_ms"].parse::<f64>().unwrap() - 5.0).abs() < 0.3);
    // Every run is kept raw, from two checkouts: the incumbent's runs ran the base commit.
    for run in &t.runs() {
        let expected = if run["side"] == "incumbent" { &base } else { &head };
        assert_eq!(run["commit"].as_str().unwrap(), expected);
        assert_eq!(run["status"], "ok");
    }

    // The next experiment is measured against the kept commit.
    t.write("fake.env", "FAKE_LATENCY_MS=5\n# same speed\n");
    t.ratchet().arg("experiment: a comment").assert().success();
    let rows = t.rows();
    assert_eq!(rows[1]["incumbent"], head);
    assert_ne!(rows[1]["status"], "keep", "a change of nothing is not kept");
    assert_eq!(t.head(), head);
}

#[test]
fn slower_candidate_is_reverted_and_kept_under_a_ref() {
    let t = TestRepo::with_config(QUICK);
    let base = t.head();
    t.write("fake.env", "FAKE_LATENCY_MS=20\n");
    t.write("notes/new_file.txt", "an untracked file that is part of the hypothesis\n");
    t.ratchet().arg("experiment: slower").assert().success().stdout(predicate::str::contains("REVERT"));
    assert_eq!(t.head(), base, "the branch is back on the incumbent");
    assert_eq!(t.read("fake.env"), "FAKE_LATENCY_MS=10\n", "the working tree is back too");
    assert!(!t.path().join("notes/new_file.txt").exists());
    // The discarded commit holds the whole change.
    let shown = t.git(&["show", "--stat", "refs/ratchet/discarded/1"]);
    assert!(shown.contains("experiment: slower") && shown.contains("fake.env") && shown.contains("notes/new_file.txt"), "{shown}");
    let diff = t.git(&["diff", &base, "refs/ratchet/discarded/1", "--", "fake.env"]);
    assert!(diff.contains("+FAKE_LATENCY_MS=20"), "{diff}");
    let r = &t.rows()[0];
    assert_eq!(r["status"], "revert");
    assert!(r["delta_pct"].parse::<f64>().unwrap() < -50.0);
}

#[test]
fn crashing_candidate_is_recorded_and_reverted() {
    let t = TestRepo::new();
    let base = t.head();
    t.write("fake.env", "FAKE_MODE=crash\n");
    t.ratchet()
        .arg("experiment: boom")
        .assert()
        .success()
        .stdout(predicate::str::contains("CRASH").and(predicate::str::contains("fake kernel exploded")));
    assert_eq!(t.head(), base);
    let r = &t.rows()[0];
    assert_eq!(r["status"], "crash");
    assert!(r["note"].contains("exited with code 3"), "{}", r["note"]);
    assert!(t.git(&["show", "refs/ratchet/discarded/1"]).contains("FAKE_MODE=crash"));
}

#[test]
fn hanging_candidate_times_out_and_its_grandchild_is_killed() {
    let t = TestRepo::with_config(&support::DEFAULT_CONFIG.replace("timeout_s = 20", "timeout_s = 1.5"));
    let pid_file = t.hanging_candidate();
    let base = t.head();
    t.ratchet().arg("experiment: hang").assert().success().stdout(predicate::str::contains("TIMEOUT"));
    assert_eq!(t.head(), base);
    assert_eq!(t.rows()[0]["status"], "timeout");
    let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(!ratchet::bench::executor::alive(pid), "the benchmark's grandchild {pid} is still running");
}

#[test]
fn malformed_or_missing_report_is_invalid() {
    for (mode, needle) in [
        ("garbage", "not valid JSON"),
        ("silent", "no ratchet-result.json"),
        ("badversion", "version 2"),
        ("badcheck", "correctness check failed"),
    ] {
        let t = TestRepo::new();
        let base = t.head();
        t.write("fake.env", &format!("FAKE_MODE={mode}\n"));
        t.ratchet().arg(format!("experiment: {mode}")).assert().success();
        assert_eq!(t.head(), base, "{mode}");
        let r = &t.rows()[0];
        assert_eq!(r["status"], "invalid", "{mode}");
        assert!(r["note"].contains(needle), "{mode}: {}", r["note"]);
    }
}

#[test]
fn legacy_result_lines_work_unchanged() {
    let t = TestRepo::with_config(QUICK);
    t.write("fake.env", "FAKE_MODE=legacy\n");
    t.git(&["commit", "-qam", "legacy baseline"]);
    let base = t.head();
    t.write("fake.env", "FAKE_MODE=legacy\nFAKE_LATENCY_MS=5\n");
    t.ratchet().arg("experiment: legacy faster").assert().success();
    assert_ne!(t.head(), base);
    let r = &t.rows()[0];
    assert_eq!(r["status"], "keep");
    assert_eq!(r["latency_source"], "reported");
    assert_eq!(r["regime"], "COMPUTE-BOUND", "the REGIME line is taken as reported");
    assert_eq!(r["bw_pct"], "38.2");
}

#[test]
fn clean_tree_is_refused_unless_allowed() {
    let t = TestRepo::new();
    let base = t.head();
    t.ratchet().arg("experiment: nothing").assert().code(4).stderr(predicate::str::contains("nothing to test"));
    assert_eq!(t.head(), base);
    assert!(t.rows().is_empty());
    // An explicit empty hypothesis re-measures HEAD: same speed, so it is reverted.
    t.ratchet().args(["experiment: re-measure", "--allow-empty"]).assert().success();
    assert_eq!(t.head(), base);
    assert_eq!(t.rows()[0]["status"], "revert");
}

#[test]
fn bad_config_names_key_and_line_and_commits_nothing() {
    let t = TestRepo::new();
    t.write("ratchet.toml", "[benchmark]\ncommand = \"true\"\nwarmpu = 3\n");
    t.git(&["commit", "-qam", "typo"]);
    let base = t.head();
    t.write("kernel.py", "BQ = 256\n");
    t.ratchet().arg("experiment: x").assert().code(3).stderr(predicate::str::contains("line 3").and(predicate::str::contains("warmpu")));
    assert_eq!(t.head(), base);
    assert_eq!(t.read("kernel.py"), "BQ = 256\n", "the working tree is untouched");
}

#[test]
fn missing_config_points_to_init() {
    let t = TestRepo::new();
    t.git(&["rm", "-q", "ratchet.toml"]);
    t.git(&["commit", "-qm", "no config"]);
    t.write("kernel.py", "BQ = 256\n");
    t.ratchet().arg("experiment: x").assert().code(3).stderr(predicate::str::contains("ratchet init"));
}

#[test]
fn detached_head_is_refused() {
    let t = TestRepo::new();
    let base = t.head();
    t.git(&["checkout", "-q", "--detach"]);
    t.write("kernel.py", "BQ = 256\n");
    t.ratchet().arg("experiment: x").assert().code(4).stderr(predicate::str::contains("detached"));
    assert_eq!(t.head(), base);
    assert_eq!(t.read("kernel.py"), "BQ = 256\n");
}

#[test]
fn ratchet_files_are_never_committed_and_ignored_files_stay_out() {
    let t = TestRepo::with_config(QUICK);
    t.write(".gitignore", "*.log\n");
    t.git(&["add", ".gitignore"]);
    t.git(&["commit", "-qm", "ignore logs"]);
    t.write("debug.log", "ignored\n");
    t.write("fake.env", "FAKE_LATENCY_MS=5\n");
    t.ratchet().arg("experiment: faster").assert().success();
    let files = t.git(&["show", "--name-only", "--format=", "HEAD"]);
    assert_eq!(files.trim(), "fake.env");
    assert!(t.path().join("debug.log").exists());
    // ratchet's directories ignore themselves; the user's ignore files stay as they were.
    let exclude = std::fs::read_to_string(t.path().join(".git/info/exclude")).unwrap_or_default();
    assert!(!exclude.contains("/.ratchet/") && !exclude.contains("/results/"), "{exclude}");
    assert_eq!(t.git(&["status", "--porcelain"]), "");
}

#[test]
fn deep_suffix_in_message_is_the_flag() {
    let t = TestRepo::with_config(QUICK);
    t.write("fake.env", "FAKE_LATENCY_MS=5\n");
    t.ratchet().arg("experiment: scratch buffer fix --deep").assert().success().stderr(predicate::str::contains("--deep"));
    assert_eq!(t.git(&["log", "-1", "--format=%s"]).trim(), "experiment: scratch buffer fix");
}

#[test]
fn results_in_every_format() {
    let t = TestRepo::with_config(QUICK);
    t.ratchet().arg("results").assert().success().stdout(predicate::str::contains("no experiments yet"));
    t.write("fake.env", "FAKE_LATENCY_MS=5\n");
    t.ratchet().arg("experiment: faster").assert().success();
    t.write("fake.env", "FAKE_LATENCY_MS=50\n");
    t.ratchet().arg("experiment: slower").assert().success();
    t.ratchet().arg("results").assert().success().stdout(
        predicate::str::contains("✔ keep").and(predicate::str::contains("· revert")).and(predicate::str::contains("2 experiments, 1 kept")),
    );
    let csv = t.ratchet().args(["results", "--format", "csv"]).output().unwrap();
    let csv = String::from_utf8(csv.stdout).unwrap();
    assert!(csv.starts_with("id,time,commit,incumbent,message,status,"), "{csv}");
    assert_eq!(csv.lines().count(), 3);
    let json = t.ratchet().args(["results", "--format", "json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 2);
    assert_eq!(v[0]["status"], "keep");
    t.ratchet().args(["results", "--format", "md"]).assert().success().stdout(predicate::str::contains("| 1 | **keep** |"));
}

#[test]
fn init_writes_a_valid_commented_config() {
    let t = TestRepo::new();
    t.write("prepare.py", "print('hi')\n");
    t.ratchet().arg("init").assert().code(3).stderr(predicate::str::contains("--force"));
    t.ratchet().args(["init", "--force", "--preset", "h100"]).assert().success();
    let text = t.read("ratchet.toml");
    assert!(text.contains("command = \"python3 prepare.py\"") && text.contains("preset = \"h100\"") && text.contains("# "));
    ratchet::config::Config::parse(&text).unwrap();
}

#[test]
fn interrupt_kills_the_benchmark_reverts_and_exits_130() {
    let t = TestRepo::new();
    let pid_file = t.hanging_candidate();
    let base = t.head();
    let mut child = t.spawn_ratchet("experiment: interrupted");
    // Wait until the hanging candidate runs (its grandchild wrote the pid file).
    support::wait_for(&pid_file);
    std::thread::sleep(std::time::Duration::from_millis(200));
    let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    // The benchmark's whole process group (its grandchild too) is gone: the hanging candidate
    // would outlive any test, so only the interrupt can end it.
    assert!(support::eventually(|| !ratchet::bench::executor::alive(pid)), "benchmark grandchild {pid} survived the interrupt");
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert_eq!(t.head(), base);
    assert_eq!(t.rows()[0]["status"], "interrupted");
    assert!(t.git(&["show", "refs/ratchet/discarded/1"]).contains("FAKE_MODE=hang"));
}

#[test]
fn incumbent_failure_is_an_error_not_a_decision() {
    let t = TestRepo::new();
    t.write("fake.env", "FAKE_MODE=crash\n");
    t.git(&["commit", "-qam", "broken baseline"]);
    let base = t.head();
    t.write("fake.env", "FAKE_LATENCY_MS=5\n");
    t.ratchet().arg("experiment: fix").assert().code(1).stderr(predicate::str::contains("incumbent"));
    assert_eq!(t.head(), base);
    assert_eq!(t.rows()[0]["status"], "error");
    assert!(t.git(&["show", "refs/ratchet/discarded/1"]).contains("FAKE_LATENCY_MS=5"));
}
