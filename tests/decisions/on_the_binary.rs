//! The sequential decision end to end on the binary and the fake benchmark, where the command
//! line is part of the case: inconclusive and a failed confirmation (with `ratchet results`),
//! and `ratchet calibrate`. The early keep, futility, no-op on identical HLO,
//! the physics gate and throttled re-runs run in-process on the mock executor
//! (tests/decisions/loop_inprocess.rs).

use crate::support;

use predicates::prelude::*;
use support::TestRepo;

/// Latency decides (lower is better), by the earlier rule: 4 to `max` pairs, 4 confirmation pairs.
fn latency_config(max: u32) -> String {
    support::earlier_rule(&support::DEFAULT_CONFIG.replace("max_pairs = 8", &format!("max_pairs = {max}")))
        + "[score]\nmetric = \"latency\"\n"
}

#[test]
fn budget_running_out_is_inconclusive_and_reverted() {
    let t = TestRepo::with_config(&latency_config(4));
    let base = t.head();
    // About the minimum effect (1%) under 5% iteration noise: neither clear nor futile.
    t.write("fake.env", "FAKE_LATENCY_MS=9.9\nFAKE_NOISE_CV=0.05\n");
    t.ratchet().arg("experiment: maybe").assert().success().stdout(predicate::str::contains("INCONCLUSIVE"));
    let r = &t.rows()[0];
    assert_eq!(r["status"], "inconclusive", "{r:?}");
    // 4 pairs, then the rescue's: twice the 4 + 4 the phases could measure.
    assert_eq!(r["runs"], "32");
    assert_eq!(t.head(), base, "inconclusive is reverted");
    assert!(t.git(&["show", "refs/ratchet/discarded/1"]).contains("9.9"));
    t.ratchet().arg("results").assert().success().stdout(predicate::str::contains("inconclusive"));
}

#[test]
fn failed_confirmation_is_not_kept() {
    let t = TestRepo::with_config(&latency_config(16));
    let base = t.head();
    // Faster for the first 8 runs (the first look), as slow as the incumbent afterwards.
    t.write("fake.env", "FAKE_LATENCY_MS=8\nFAKE_LATER_FROM_RUN=8\nFAKE_LATER_LATENCY_MS=10\n");
    // A gain the confirmation does not reproduce is `unconfirmed` (was `revert`),
    // with how to settle it; the confirmation's own estimate is in its own columns.
    t.ratchet()
        .arg("experiment: a fluke")
        .assert()
        .success()
        .stdout(predicate::str::contains("UNCONFIRMED").and(predicate::str::contains("to settle it: ratchet retry 1 --pairs")));
    let r = &t.rows()[0];
    assert_eq!(r["status"], "unconfirmed", "{r:?}");
    assert!(r["note"].contains("unconfirmed") && r["note"].contains("--pairs"), "{}", r["note"]);
    assert!(r["confirm_delta_pct"].parse::<f64>().unwrap().abs() < 3.0, "{r:?}");
    // 4 + 4 pairs, then the rescue's 30 in all (its rows are the confirmation's order on).
    assert_eq!(r["runs"], "60");
    assert_eq!(t.head(), base);
    t.ratchet().args(["results", "--status", "unconfirmed"]).assert().success().stdout(predicate::str::contains("a fluke"));
}

#[test]
fn calibrate_prints_the_noise_floor_and_records_no_row() {
    let t = TestRepo::new();
    t.ratchet().args(["calibrate", "--pairs", "4"]).assert().success().stdout(
        predicate::str::contains("run-to-run CV")
            .and(predicate::str::contains("drift"))
            .and(predicate::str::contains("suggested [decision] min_effect_pct")),
    );
    assert!(t.rows().is_empty());
    let cal: serde_json::Value = serde_json::from_str(&t.read("results/calibration.json")).unwrap();
    assert_eq!(cal["values"].as_array().unwrap().len(), 8);
    assert!(cal["noise"]["pair_cv_pct"].as_f64().unwrap() > 0.0);
    // The detectable gain is the budget's of the rule that decides next: the default, the robust
    // ratio, with or without history (4 pairs are too few to borrow).
    assert_eq!(cal["noise"]["detectable_by"], "robust-ratio", "{cal}");
}
