//! The sequential decision end to end on the fake benchmark: early keep, futility, inconclusive,
//! a failed confirmation, no-op on identical HLO, the physics gate, throttled re-runs and
//! `ratchet calibrate`. The fake benchmark reports latencies without sleeping, so these are fast.

mod support;

use predicates::prelude::*;
use support::TestRepo;

/// Latency decides (lower is better), 4 to `max` pairs, 4 confirmation pairs.
fn latency_config(max: u32) -> String {
    support::DEFAULT_CONFIG.replace("max_pairs = 8", &format!("max_pairs = {max}")) + "[score]\nmetric = \"latency\"\n"
}

#[test]
fn big_gain_is_kept_early_and_confirmed() {
    let t = TestRepo::with_config(&latency_config(16));
    t.write("fake.env", "FAKE_LATENCY_MS=8\n");
    t.ratchet().arg("experiment: 20% faster").assert().success().stdout(predicate::str::contains("confirmed by 4 pairs"));
    let r = &t.rows()[0];
    assert_eq!(r["status"], "keep", "{r:?}");
    // 4 pairs at the first look, well under the budget of 16, plus 4 confirmation pairs.
    assert_eq!(r["runs"], "16");
    assert!(r["delta_pct"].parse::<f64>().unwrap() > 15.0);
}

#[test]
fn a_loss_stops_for_futility_at_the_first_look() {
    let t = TestRepo::with_config(&latency_config(16));
    let base = t.head();
    t.write("fake.env", "FAKE_LATENCY_MS=10.5\n");
    t.ratchet().arg("experiment: slower").assert().success();
    let r = &t.rows()[0];
    assert_eq!(r["status"], "revert");
    assert_eq!(r["runs"], "8");
    assert!(r["note"].contains("no worthwhile gain"), "{}", r["note"]);
    assert_eq!(t.head(), base);
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
    assert_eq!(r["runs"], "8");
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
    // Issue 14: a gain the confirmation does not reproduce is `unconfirmed` (was `revert`),
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
    assert_eq!(r["runs"], "16");
    assert_eq!(t.head(), base);
    t.ratchet().args(["results", "--status", "unconfirmed"]).assert().success().stdout(predicate::str::contains("a fluke"));
}

#[test]
fn identical_hlo_is_a_no_op_after_one_pair() {
    let t = TestRepo::new();
    let base = t.head();
    t.write("fake.env", "FAKE_LATENCY_MS=10\n# a comment that cannot change the kernel\n");
    t.ratchet()
        .env("FAKE_HLO", "HloModule jit_kernel\nENTRY main { ROOT x = f32[] constant(1) }\n")
        .arg("experiment: comment")
        .assert()
        .success();
    let r = &t.rows()[0];
    assert_eq!(r["status"], "no-op", "{r:?}");
    assert_eq!(r["runs"], "2");
    assert!(r["note"].contains("byte-identical"), "{}", r["note"]);
    assert_eq!(t.head(), base);
}

#[test]
fn a_run_beating_the_roofline_is_invalid() {
    let t = TestRepo::new();
    let base = t.head();
    // 1e13 FLOPs in 5 ms is 2000 TFLOP/s on a 197 TFLOP/s chip.
    t.write("fake.env", "FAKE_LATENCY_MS=5\nFAKE_FLOPS=1e13\n");
    t.ratchet().arg("experiment: too good").assert().success();
    let r = &t.rows()[0];
    assert_eq!(r["status"], "invalid");
    assert!(r["note"].contains("physics gate") && r["note"].contains("of peak FLOP/s"), "{}", r["note"]);
    assert_eq!(t.head(), base);
}

#[test]
fn throttled_runs_are_run_again_a_bounded_number_of_times() {
    let t = TestRepo::with_config(&support::DEFAULT_CONFIG.replace("timeout_s = 20", "timeout_s = 20\nthrottle_reruns = 1"));
    t.write("fake.env", "FAKE_LATENCY_MS=12\nFAKE_THROTTLED=1\n");
    t.ratchet().arg("experiment: throttled").assert().success();
    let runs = t.runs();
    let superseded = runs.iter().filter(|r| r["superseded"] == true).count();
    // Only the candidate reports throttling: each of its 4 runs once more, the first one superseded.
    assert_eq!(superseded, 4, "{runs:?}");
    assert_eq!(t.rows()[0]["runs"], "12");
    assert_eq!(t.rows()[0]["status"], "revert");
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
}

#[test]
fn simulate_prints_the_table() {
    let t = TestRepo::new();
    t.ratchet()
        .args(["simulate", "--trials", "20", "--defaults"])
        .assert()
        .success()
        .stdout(predicate::str::contains("| cv 1% + drift | +0% |").and(predicate::str::contains("MWU 10+10 keeps")));
}
