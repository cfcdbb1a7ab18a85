//! `ratchet status` only reports. It says what recovery will do and changes
//! nothing; `ratchet recover` (or the next experiment) does it. After a manual commit it shows
//! HEAD, not ratchet's stale incumbent.

use crate::support;

use predicates::prelude::*;
use std::os::unix::process::ExitStatusExt;
use support::TestRepo;

fn status_json(t: &TestRepo) -> serde_json::Value {
    let out = t.ratchet().args(["status", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn status_reports_a_killed_experiment_and_recover_rolls_it_back() {
    let t = TestRepo::new();
    let base = t.head();
    t.write("fake.env", "FAKE_LATENCY_MS=20\n");
    let out = t.ratchet().arg("experiment: killed").env("RATCHET_FAULT", "after-commit").output().unwrap();
    assert_eq!(out.status.signal(), Some(9));
    let candidate = t.head();
    assert_ne!(candidate, base);
    for _ in 0..2 {
        t.ratchet().arg("status").assert().success().stdout(
            predicate::str::contains("unfinished experiment 1")
                .and(predicate::str::contains("recovery pending"))
                .and(predicate::str::contains("roll the branch back to the incumbent"))
                .and(predicate::str::contains("refs/ratchet/discarded/1")),
        );
    }
    // HEAD is the killed experiment's candidate, not a branch that moved.
    t.ratchet().arg("status").assert().success().stdout(
        predicate::str::contains(format!("incumbent on main: {} (HEAD {} is experiment 1's candidate", &base[..12], &candidate[..12]))
            .and(predicate::str::contains("moved since").not()),
    );
    let v = status_json(&t);
    assert_eq!(v["type"], "status");
    assert_eq!((v["head_moved"].as_bool(), v["incumbent"].as_str()), (Some(false), Some(base.as_str())));
    assert_eq!(v["experiment_in_flight"]["id"], 1);
    assert!(v["recovery"].as_array().unwrap().iter().any(|s| s.as_str().unwrap().contains("record it as interrupted")), "{v}");
    // Nothing was changed by looking.
    assert_eq!(t.head(), candidate, "status did not roll back");
    assert!(t.rows().is_empty(), "status recorded nothing");
    assert!(t.path().join(".ratchet/journal.json").exists(), "the journal is still there for recovery");

    t.ratchet().arg("recover").assert().success().stdout(predicate::str::contains("recovered: experiment 1"));
    assert_eq!(t.head(), base);
    assert_eq!(t.rows()[0]["status"], "interrupted");
    t.ratchet().arg("status").assert().success().stdout(predicate::str::contains("no unfinished experiment"));
    assert!(status_json(&t)["recovery"].as_array().unwrap().is_empty());
    t.ratchet().arg("recover").assert().success().stdout(predicate::str::contains("nothing to recover"));
}

#[test]
fn the_next_experiment_recovers_what_status_reported() {
    let t = TestRepo::new();
    let base = t.head();
    t.write("fake.env", "FAKE_LATENCY_MS=20\n");
    let out = t.ratchet().arg("experiment: killed").env("RATCHET_FAULT", "after-commit").output().unwrap();
    assert_eq!(out.status.signal(), Some(9));
    t.ratchet().arg("status").assert().success();
    assert_ne!(t.head(), base);
    t.ratchet().args(["experiment: next", "--allow-empty"]).assert().success().stderr(predicate::str::contains("recovered: experiment 1"));
    let ids: Vec<String> = t.rows().iter().map(|r| r["id"].clone()).collect();
    assert_eq!(ids, ["1", "2"]);
}

#[test]
fn status_shows_head_after_a_manual_commit_not_a_stale_incumbent() {
    let t = TestRepo::new();
    t.write("fake.env", "FAKE_LATENCY_MS=5\n");
    t.ratchet().arg("experiment: faster").assert().success();
    let kept = t.head();
    assert_eq!(t.rows()[0]["status"], "keep");
    t.ratchet().arg("status").assert().success().stdout(predicate::str::contains(format!("incumbent on main: {}", &kept[..12])));
    t.write("kernel.py", "BQ = 32\n");
    t.git(&["commit", "-qam", "a manual commit"]);
    let head = t.head();
    t.ratchet()
        .arg("status")
        .assert()
        .success()
        .stdout(predicate::str::contains(format!("incumbent on main: HEAD {}", &head[..12])).and(predicate::str::contains("moved since")));
    let v = status_json(&t);
    assert_eq!(v["incumbent"], head.as_str());
    assert_eq!(v["head_moved"], true);
    assert_eq!(v["remembered_incumbent"], kept.as_str());
}
