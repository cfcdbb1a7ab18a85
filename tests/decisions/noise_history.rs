//! End to end: `ratchet calibrate` feeds the noise history, `ratchet status` shows the
//! scale in use, an experiment borrows it (and decides a clear gain in 2 + 2 pairs), and records
//! its residuals; the minimum effect is a speed-up whatever the metric; every status filters.

use crate::support;

use predicates::prelude::*;
use support::TestRepo;

#[test]
fn calibrate_feeds_the_history_that_experiments_borrow() {
    let t = TestRepo::with_config(&support::earlier_rule(support::DEFAULT_CONFIG));
    t.ratchet().arg("status").assert().success().stdout(predicate::str::contains("noise scale: no usable history yet"));
    // No history: a first experiment decides as before (its own t-test, 4 pairs at least).
    t.write("fake.env", "FAKE_LATENCY_MS=8\n");
    // Its header with -v says the plan that decides it: the two phases'.
    t.ratchet().args(["-v", "experiment: first"]).assert().success().stdout(support::says("a keep confirmed by 4 pairs in reversed order"));
    let r = &t.rows()[0];
    assert_eq!((r["status"].as_str(), r["noise_scale"].as_str()), ("keep", "own"), "{r:?}");
    assert_eq!(r["runs"], "16");

    let out = t.ratchet().args(["calibrate", "--pairs", "12"]).assert().success().stdout(
        predicate::str::contains("noise scale")
            .and(support::says("decisions pool it with their own pairs in a likelihood ratio of whole pairs")),
    );
    // The gain it says the budget keeps is the budget of the rule that decides next: the ratio's,
    // the figure the JSON records.
    let text = support::flat(&String::from_utf8_lossy(&out.get_output().stdout));
    let cal: serde_json::Value = serde_json::from_str(&t.read("results/calibration.json")).unwrap();
    assert_eq!(cal["noise"]["detectable_by"], "likelihood-ratio", "{cal}");
    let line = format!(
        "smallest gain the budget keeps with ~95% probability: {:.2}% (the likelihood ratio of whole pairs, up to 24 pairs",
        cal["noise"]["detectable_pct"].as_f64().unwrap()
    );
    assert!(text.contains(&line), "{line}\n{text}");
    // ... at the keep level the history's modes set, the one the JSON records.
    let keep_at = cal["noise"]["keep_at"].as_f64().expect("the ratio's keep level");
    assert!(text.contains(&format!("keeping at a ratio of e^{keep_at},")), "{keep_at}\n{text}");
    let noise: serde_json::Value = serde_json::from_str(&t.read(".ratchet/noise.json")).unwrap();
    let entries = noise["benchmarks"][0]["entries"].as_array().unwrap().clone();
    assert!(entries.iter().any(|e| e["source"] == "calibrate" && e["df"].as_f64().unwrap() >= 10.0), "{noise}");
    assert!(entries.iter().any(|e| e["source"] == "experiment 1"), "the first experiment's residuals: {noise}");
    t.ratchet().arg("status").assert().success().stdout(predicate::str::contains("decisions pool it with their own pairs"));

    // With history the default method reads the likelihood ratio after every pair: a clear gain
    // is kept in at most 4 pairs, one phase (the first experiment's two phases took 16 runs; no
    // gain's fit may take a correlation of log-ratios with log-sums, which on a 12-pair
    // calibration costs a 1.33x gain about one pair).
    t.write("fake.env", "FAKE_LATENCY_MS=6\n");
    t.ratchet().args(["-v", "experiment: second"]).assert().success().stdout(
        support::says("pooled noise scale")
            .and(support::says("a likelihood ratio of whole pairs after every pair, up to 24 pairs (the two phases' 4 to 8 pairs if one of the first 8 is a gross outlier)"))
            .and(predicate::str::contains("a keep confirmed by").not()),
    );
    let r = &t.rows()[1];
    assert_eq!((r["status"].as_str(), r["noise_scale"].as_str(), r["p_conditional"].as_str()), ("keep", "pooled", "false"), "{r:?}");
    assert!(r["runs"].parse::<u32>().unwrap() <= 8, "{r:?}");
    let (p, thr, adj): (f64, f64, f64) =
        (r["p_value"].parse().unwrap(), r["p_threshold"].parse().unwrap(), r["p_adjusted"].parse().unwrap());
    assert!(p <= thr && adj >= p && adj <= 1.0, "{r:?}");
    // One phase: no confirmation figures. The first experiment's two phases have them, the
    // confirmation's own estimate and interval beside the pooled one.
    assert!(r["confirm_delta_pct"].is_empty(), "{r:?}");
    let r = &t.rows()[0];
    let (lo, c, hi): (f64, f64, f64) =
        (r["confirm_ci_low_pct"].parse().unwrap(), r["confirm_delta_pct"].parse().unwrap(), r["confirm_ci_high_pct"].parse().unwrap());
    assert!(lo < c && c < hi && c > 10.0, "{r:?}");
    // The review tells one speed-up a row; the confirmation's own is `show`'s, named as such.
    t.ratchet().arg("results").assert().success().stdout(predicate::str::contains("confirmation").not());
    let own = ratchet::report::factor_from_metric_pct(c, ratchet::report::elasticity_of(&r["metric"]));
    t.ratchet().args(["show", "1"]).assert().success().stdout(support::says(format!(
        "other estimate: the confirmation batch alone (free of the first phase's selection): speed-up {}",
        ratchet::report::fmt_x(own)
    )));
}

#[test]
fn the_minimum_effect_is_a_speed_up_whatever_the_metric() {
    // The default metric is score (~ 1/latency^2): 1% speed-up is 2.01% of score.
    let t = TestRepo::new();
    t.write("fake.env", "FAKE_LATENCY_MS=8\n");
    t.ratchet()
        .args(["-v", "experiment: faster"])
        .assert()
        .success()
        .stdout(support::says("minimum effect 1% speed-up (latency terms: 2.01% of score)"));
    let r = &t.rows()[0];
    let (s, d): (f64, f64) = (r["speedup_pct"].parse().unwrap(), r["delta_pct"].parse().unwrap());
    // delta_pct stays the score's change; speedup_pct is the same estimate in latency terms.
    assert!(((1.0 + s / 100.0).powi(2) - 1.0 - d / 100.0).abs() < 1e-9, "speed-up {s} vs score {d}");
    assert!(s > 20.0 && s < 30.0, "10 ms -> 8 ms is a 25% speed-up: {s}");
}

#[test]
fn every_status_is_accepted_by_the_results_filter() {
    let t = TestRepo::new();
    for s in ["keep", "revert", "inconclusive", "unconfirmed", "no-op", "crash", "timeout", "invalid", "interrupted", "error", "skipped"] {
        t.ratchet().args(["results", "--status", s]).assert().success();
    }
    t.ratchet().args(["results", "--status", "bogus"]).assert().failure().stderr(
        predicate::str::contains("unconfirmed").and(predicate::str::contains("no-op")).and(predicate::str::contains("inconclusive")),
    );
}

#[test]
fn a_decision_records_the_scale_it_borrowed_and_every_run_its_pair_and_phase() {
    // The two phases, whose runs carry both phases.
    let t = TestRepo::with_config(&support::DEFAULT_CONFIG.replace("[decision]\n", "[decision]\nmethod = \"sequential\"\n"));
    let cal = t.ratchet().args(["calibrate", "--pairs", "12"]).assert().success();
    // The two phases alone hold the bound for a low calibration only on a full history: the
    // noise line says so, with the df it has.
    let said = support::flat(&String::from_utf8(cal.get_output().stdout.clone()).unwrap());
    assert!(
        said.contains(
            "holds the false-keep bound for a calibration that came out low from 60 df (`ratchet calibrate` gives them), not on 11"
        ),
        "{said}"
    );
    t.write("fake.env", "FAKE_LATENCY_MS=6\n");
    t.ratchet().arg("experiment: faster").assert().success();
    let r = &t.rows()[0];
    assert_eq!((r["status"].as_str(), r["noise_scale"].as_str(), r["p_conditional"].as_str()), ("keep", "history", "true"), "{r:?}");
    // The borrowed scale is in the row, as noise.json had it when the decision was made: it
    // survives the history's rotation.
    let noise: serde_json::Value = serde_json::from_str(&t.read(".ratchet/noise.json")).unwrap();
    let cal = &noise["benchmarks"][0]["entries"][0];
    assert_eq!(cal["source"], "calibrate");
    let df: f64 = r["borrowed_df"].parse().unwrap();
    assert_eq!(df, cal["df"].as_f64().unwrap(), "{r:?}");
    let sd: f64 = r["borrowed_sd_pct"].parse().unwrap();
    let cal_sd = (cal["ss"].as_f64().unwrap() / df).sqrt() * 100.0;
    assert!((sd - cal_sd).abs() <= 1e-9 * cal_sd.max(1e-12) + 1e-12, "{sd} vs {cal_sd}");
    assert_eq!(r["borrowed_from"], format!("calibrate@{}", cal["time"].as_str().unwrap()));
    assert!(!r["borrowed_sums_df"].is_empty(), "{r:?}");
    // Each run says which pair of which phase it was, in the procedure's order.
    let runs = t.runs();
    let runs: Vec<&serde_json::Value> = runs.iter().filter(|x| x["experiment"] != "calibrate").collect();
    let tags: Vec<(u64, &str, &str)> =
        runs.iter().map(|x| (x["pair"].as_u64().unwrap(), x["phase"].as_str().unwrap(), x["side"].as_str().unwrap())).collect();
    let (c, i) = ("candidate", "incumbent");
    assert_eq!(
        tags,
        [
            (0, "main", c),
            (0, "main", i),
            (1, "main", i),
            (1, "main", c),
            (0, "confirmation", i),
            (0, "confirmation", c),
            (1, "confirmation", c),
            (1, "confirmation", i)
        ],
        "{runs:?}"
    );
    // From those records alone the decision replays; an edited record exits 1, naming the row.
    t.ratchet().arg("replay").assert().success().stdout(predicate::str::contains("all 1 decide as recorded"));
    t.ratchet().args(["replay", "9"]).assert().code(2).stderr(predicate::str::contains("there is no experiment 9"));
    let runs_text = t.read("results/runs.jsonl");
    let first_candidate = runs.iter().find(|x| x["side"] == "candidate").unwrap()["value"].to_string();
    t.write("results/runs.jsonl", &runs_text.replacen(&format!("\"value\":{first_candidate}"), "\"value\":1e-3", 1));
    t.ratchet()
        .arg("replay")
        .assert()
        .code(1)
        .stdout(predicate::str::contains("DIFFERS"))
        .stderr(predicate::str::contains("1 of 1 replayed decisions differ from their rows"));
}

#[test]
fn calibrate_by_default_runs_the_pairs_that_fill_the_history_and_tell_its_modes() {
    let t = TestRepo::new();
    t.ratchet().arg("calibrate").assert().success();
    let pairs = ratchet::stats::history::CALIBRATION_PAIRS;
    let cal: serde_json::Value = serde_json::from_str(&t.read("results/calibration.json")).unwrap();
    assert_eq!(cal["pairs"].as_array().map(Vec::len), Some(pairs), "{cal}");
    let noise: serde_json::Value = serde_json::from_str(&t.read(".ratchet/noise.json")).unwrap();
    let e = &noise["benchmarks"][0]["entries"][0];
    assert_eq!((e["source"].as_str(), e["pairs"].as_u64()), (Some("calibrate"), Some(pairs as u64)), "{noise}");
    // Enough pairs to fill the pooled history and to take one mode at its word.
    assert_eq!(e["df"].as_f64(), Some(ratchet::stats::history::MAX_DF), "{noise}");
    assert!(pairs >= ratchet::stats::sequential::ONE_MODE_TOLD_PAIRS);
}
