//! `ratchet sweep --jobs N`: hypotheses measured on parallel local slots, decided one
//! at a time on one trunk; a stale winner is rechecked against the head before it merges; a
//! killed controller loses no trial, merges nothing twice and leaves no worker running.

use crate::support;

use support::TestRepo;

/// fake.env lines are read in order and a later key wins, so hypotheses that each replace their
/// own marker line compose: `#b` -> FAKE_LATENCY_MS=4 beats `#a` -> FAKE_LATENCY_MS=5.
const ENV: &str = "FAKE_LATENCY_MS=10\n#a\n#b\n#c\n#d\n";

fn hypothesis(t: &TestRepo, name: &str, msg: &str, from: &str, to: &str) {
    t.write(
        &format!("experiments/{name}"),
        &format!("message = {msg:?}\n[[edit]]\nfile = \"fake.env\"\nfind = {from:?}\nreplace = {to:?}\n"),
    );
}

/// A repo with four hypotheses; the benchmark's sleep per run comes from FAKE_SLEEP_S in the
/// environment, so a resumed sweep can run without it.
fn repo() -> TestRepo {
    let t = TestRepo::new();
    t.write("fake.env", ENV);
    hypothesis(&t, "01-faster.toml", "exp: 10 -> 5 ms", "#a\n", "FAKE_LATENCY_MS=5\n");
    hypothesis(&t, "02-faster-still.toml", "exp: -> 4 ms", "#b\n", "FAKE_LATENCY_MS=4\n");
    hypothesis(&t, "03-crash.toml", "exp: crash", "#c\n", "FAKE_MODE=crash\n");
    hypothesis(&t, "04-slower.toml", "exp: -> 20 ms", "#d\n", "FAKE_LATENCY_MS=20\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-qm", "queue"]);
    t
}

fn check_trunk(t: &TestRepo, base: &str) {
    check_trunk_of(t, base, &["01-faster.toml", "02-faster-still.toml", "03-crash.toml", "04-slower.toml"]);
}

fn check_trunk_of(t: &TestRepo, base: &str, queue: &[&str]) {
    let rows = t.rows();
    let mut names: Vec<String> = rows.iter().map(|r| r["hypothesis"].split('@').next().unwrap().to_string()).collect();
    names.sort();
    assert_eq!(names, queue, "{rows:?}");
    t.check_kept_chain(base);
    assert_eq!(t.git(&["status", "--porcelain"]), "");
    assert_eq!(t.git(&["for-each-ref", "refs/ratchet/trials/"]), "", "trial refs are cleaned up");
}

#[test]
fn jobs_two_decides_on_one_trunk_and_rechecks_the_stale_winner() {
    let t = repo();
    let base = t.head();
    let out = t.ratchet().args(["sweep", "--jobs", "2"]).assert().success().get_output().stdout.clone();
    let out = crate::support::flat(&String::from_utf8(out).unwrap());
    check_trunk(&t, &base);
    let rows = t.rows();
    let by = |n: &str| rows.iter().find(|r| r["hypothesis"].starts_with(n)).unwrap().clone();
    // 01 and 02 start together on the base; whichever wins second is stale and rechecked
    // against the first: 02 (4 ms) still beats 5 ms and is kept; 01 (5 ms, shadowed by 02's
    // later line) no longer beats 4 ms and is not.
    assert_eq!(by("02")["status"], "keep", "{out}");
    assert_eq!(by("03")["status"], "crash");
    assert_eq!(by("04")["status"], "revert");
    assert!(out.contains("measured again against the head"), "{out}");
    let stale: Vec<_> = rows.iter().filter(|r| r["note"].starts_with("stale winner")).collect();
    assert_eq!(stale.len(), 1, "{rows:?}");
    if by("01")["status"] == "keep" {
        assert!(by("02")["note"].starts_with("stale winner"), "{rows:?}");
        assert_eq!(t.read("fake.env"), "FAKE_LATENCY_MS=10\nFAKE_LATENCY_MS=5\nFAKE_LATENCY_MS=4\n#c\n#d\n");
    } else {
        assert!(by("01")["note"].starts_with("stale winner"), "{rows:?}");
        assert_eq!(t.read("fake.env"), "FAKE_LATENCY_MS=10\n#a\nFAKE_LATENCY_MS=4\n#c\n#d\n");
    }
    assert!(rows.iter().all(|r| r["note"].contains("[slot ")), "the slot is recorded: {rows:?}");
    // Every run of every row is in runs.jsonl under its row's id.
    let runs = t.runs();
    for r in &rows {
        let n = runs.iter().filter(|x| x["experiment"] == r["id"].as_str()).count();
        assert_eq!(n.to_string(), r["runs"], "{r:?}");
    }
    // Nothing is run twice.
    t.ratchet().args(["sweep", "--jobs", "2"]).assert().success().stdout(predicates::str::contains("4 already done"));
    assert_eq!(t.rows().len(), 4);
    assert!(t.live_workers().is_empty());
    // gc's retention covers the trials' run directories: the kept experiment's trial stays.
    let trials = || -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(t.path().join(".ratchet/trials"))
            .unwrap()
            .map(|e| std::fs::read_to_string(e.unwrap().path().join("experiment")).unwrap_or_default())
            .collect();
        v.sort();
        v
    };
    assert_eq!(trials().len(), 5, "4 trials and one recheck, each recorded as its experiment");
    let kept: Vec<String> = t.rows().iter().filter(|r| r["status"] == "keep").map(|r| r["id"].clone()).collect();
    t.ratchet().args(["gc", "--keep-last", "0"]).assert().success().stdout(predicates::str::contains("parallel-sweep trial"));
    let left = trials();
    assert!(!left.is_empty() && left.iter().all(|id| kept.contains(id)), "left {left:?}, kept {kept:?}");
}

#[test]
fn sigkill_mid_sweep_then_resume_records_each_hypothesis_once() {
    let t = repo();
    let base = t.head();
    let mut child = t.spawn(&["sweep", "--jobs", "2"], &[("FAKE_SLEEP_S", "0.3")]);
    // Kill it once two workers are measuring.
    t.wait_for_workers(2, 30);
    std::thread::sleep(std::time::Duration::from_millis(800));
    unsafe {
        libc::kill(child.id() as i32, libc::SIGKILL);
    }
    child.wait().unwrap();
    assert!(!t.live_workers().is_empty(), "the workers outlive a SIGKILLed controller");
    // `status` only reports: it names the parallel sweep's journal in what recovery will do.
    let status = t.ratchet().arg("status").assert().success().get_output().stdout.clone();
    let status = String::from_utf8_lossy(&status);
    assert!(status.contains("settle the") && status.contains("unfinished trial(s) of a parallel sweep journaled"), "{status}");
    assert!(!t.live_workers().is_empty(), "status stops nothing");
    t.ratchet().arg("recover").assert().success();
    assert!(t.live_workers().is_empty(), "recover stops them");
    assert!(!String::from_utf8_lossy(&t.ratchet().arg("status").assert().success().get_output().stdout).contains("parallel sweep"));
    t.ratchet().args(["sweep", "--jobs", "2"]).assert().success();
    check_trunk(&t, &base);
    assert!(t.live_workers().is_empty());
}

#[test]
fn sigint_stops_the_workers_and_records_nothing_half_done() {
    let t = repo();
    let base = t.head();
    let mut child = t.spawn(&["sweep", "--jobs", "2"], &[("FAKE_SLEEP_S", "1")]);
    t.wait_for_workers(2, 30);
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "exits as interrupted");
    assert!(t.live_workers().is_empty(), "Ctrl-C stops every worker");
    assert_eq!(t.head(), base);
    assert_eq!(t.git(&["status", "--porcelain"]), "");
    assert!(t.rows().is_empty(), "{:?}", t.rows());
}

/// Two winners on a small budget: the first recorded is a merge, the second a stale winner.
fn two_winners() -> TestRepo {
    let cfg = support::DEFAULT_CONFIG.replace("max_pairs = 8", "max_pairs = 4").replace("confirm_pairs = 4", "confirm_pairs = 2");
    let t = TestRepo::with_config(&cfg);
    t.write("fake.env", ENV);
    hypothesis(&t, "01-faster.toml", "exp: 10 -> 5 ms", "#a\n", "FAKE_LATENCY_MS=5\n");
    hypothesis(&t, "02-faster-still.toml", "exp: -> 4 ms", "#b\n", "FAKE_LATENCY_MS=4\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-qm", "queue"]);
    t
}

#[test]
fn a_kill_while_recording_merges_nothing_twice() {
    for point in ["scale-before-record", "scale-after-merge", "scale-before-append"] {
        let t = two_winners();
        let base = t.head();
        let out = t.ratchet().args(["sweep", "--jobs", "2"]).env("RATCHET_FAULT", point).output().unwrap();
        assert!(!out.status.success(), "{point}: the fault point was not reached");
        t.ratchet().args(["sweep", "--jobs", "2"]).assert().success();
        // Each hypothesis has one row, the trunk holds exactly the kept commits (merged once),
        // and the first winner was kept (the second may lose against it once it merged).
        check_trunk_of(&t, &base, &["01-faster.toml", "02-faster-still.toml"]);
        assert!(t.rows().iter().any(|r| r["status"] == "keep"), "{point}");
        assert!(t.live_workers().is_empty(), "{point}");
    }
}
