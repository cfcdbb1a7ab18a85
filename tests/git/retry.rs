//! Retrying a reverted hypothesis is one command. `ratchet retry ID` puts the parked
//! change back uncommitted (HEAD untouched), `--pairs N` runs it again at once, and the printed
//! hints name it instead of a cherry-pick that would make the untested change the incumbent.

use crate::support;

use predicates::prelude::*;
use support::TestRepo;

#[test]
fn retry_reapplies_then_runs_with_more_pairs() {
    let t = TestRepo::new();
    let base = t.git(&["rev-parse", "HEAD"]);
    t.write("fake.env", "FAKE_LATENCY_MS=50\n");
    // The summary reads as a slow-down in x and in latency terms; -v names the retry.
    t.ratchet()
        .args(["-v", "experiment: slower"])
        .assert()
        .success()
        .stdout(predicate::str::contains("ratchet retry 1 re-applies it").and(predicate::str::contains("speed-up 0.2")));
    assert_eq!(t.read("fake.env"), "FAKE_LATENCY_MS=10\n", "reverted");
    t.ratchet().args(["show", "1"]).assert().success().stdout(predicate::str::contains("bring it back: ratchet retry 1"));

    t.ratchet().args(["retry", "1"]).assert().success().stdout(
        predicate::str::contains("re-applied experiment 1 (revert) to the working tree: fake.env")
            .and(predicate::str::contains("ratchet retry 1 --run")),
    );
    assert_eq!(t.read("fake.env"), "FAKE_LATENCY_MS=50\n");
    assert_eq!(t.git(&["rev-parse", "HEAD"]), base, "nothing committed");
    // A second retry on top of the change is refused: it would mix the two.
    t.ratchet().args(["retry", "1"]).assert().code(4).stderr(predicate::str::contains("the working tree has changes (fake.env)"));

    t.git(&["checkout", "--", "fake.env"]);
    t.ratchet()
        .args(["retry", "1", "--pairs", "4"])
        .assert()
        .success()
        .stdout(predicate::str::contains("experiment 2: experiment: slower (retry of 1)"));
    let csv = t.read("results/results.csv");
    assert!(csv.contains("experiment: slower (retry of 1)"), "{csv}");
    assert_eq!(t.read("fake.env"), "FAKE_LATENCY_MS=10\n", "slower again: reverted again");
}

#[test]
fn retry_refuses_what_cannot_be_retried() {
    let t = TestRepo::new();
    t.ratchet().args(["retry", "7"]).assert().code(2).stderr(predicate::str::contains("no experiment 7"));
    t.write("fake.env", "FAKE_LATENCY_MS=5\n");
    t.ratchet().arg("experiment: faster").assert().success();
    t.ratchet().args(["retry", "1"]).assert().code(2).stderr(predicate::str::contains("was kept"));
}
