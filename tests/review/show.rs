//! `ratchet show` sets the incumbent's figures beside the candidate's (util,
//! bandwidth, regime word, gap, HLO and kernel-body op counts, tunables), says what each side
//! was measured with and warns when they differ, prints the candidate's diagnosis, and lists
//! spill cliffs across the results; the results rows carry `kernel_ops` and `meta`.

use crate::support;

use predicates::prelude::*;
use support::TestRepo;

fn body() -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kernel_bodies/mosaic_bq128_bkv128.mlir").display().to_string()
}

const ENV_A: &str = r#"{"jax": "0.10.2", "jaxlib": "0.10.2", "backend": "tpu", "device_kind": "TPU v5 lite", "device_count": 4}"#;
const ENV_B: &str =
    r#"{"jax": "0.10.3", "jaxlib": "0.10.2", "backend": "tpu", "device_kind": "TPU v5 lite", "device_count": 4, "XLA_FLAGS": "--xla_x=1"}"#;

#[test]
fn show_sets_incumbent_beside_candidate_and_diagnoses() {
    let t = TestRepo::new();
    // Baseline: BQ=128 at 10 ms; 1e9 FLOPs, 1e7 bytes on the v5e preset.
    t.write("fake.env", &format!("FAKE_LATENCY_MS=10\nFAKE_META={{\"BQ\": 128, \"BKV\": 128, \"grid_steps\": 16}}\nFAKE_ENV={ENV_A}\n"));
    t.git(&["commit", "-qam", "baseline meta"]);
    t.write(
        "fake.env",
        &format!(
            "FAKE_LATENCY_MS=5\nFAKE_META={{\"BQ\": 256, \"BKV\": 128, \"grid_steps\": 16}}\nFAKE_ENV={ENV_B}\nFAKE_KERNEL_BODY={}\n",
            body()
        ),
    );
    t.ratchet()
        .args(["-v", "experiment: BQ 128 -> 256"])
        .assert()
        .success()
        .stdout(predicate::str::contains("kernel body: matmul 2, exp 2"));
    let r = &t.rows()[0];
    assert_eq!(r["kernel_ops"], "matmul=2;exp=2;reduce=2;dma=0;copy=0", "{r:?}");
    assert_eq!(r["meta"], "BKV=128;BQ=256;grid_steps=16", "{r:?}");

    let out = t.ratchet().args(["show", "1"]).output().unwrap();
    assert!(out.status.success());
    let s = String::from_utf8(out.stdout).unwrap();
    assert!(s.contains("incumbent vs candidate"), "{s}");
    // 1e9 FLOPs in 10 ms vs 5 ms on 197 TFLOP/s: util 0.05% vs 0.10%; both latency-bound.
    let util = s.lines().find(|l| l.trim_start().starts_with("util ") && !l.contains("TFLOP/s")).unwrap();
    assert!(util.contains("0.05%") && util.contains("0.10%"), "{util}");
    let regime = s.lines().find(|l| l.trim_start().starts_with("regime")).unwrap();
    assert_eq!(regime.matches("LATENCY-BOUND").count(), 2, "{regime}");
    let kernel = s.lines().find(|l| l.trim_start().starts_with("kernel mm/exp")).unwrap();
    assert!(kernel.contains("2/2/2/0/0") && kernel.contains(" - "), "{kernel}");
    let tun = s.lines().find(|l| l.trim_start().starts_with("tunables")).unwrap();
    assert!(tun.contains("BKV=128 BQ=128") && tun.contains("BKV=128 BQ=256"), "{tun}");
    assert!(s.contains("jax 0.10.2, jaxlib 0.10.2, TPU v5 lite (tpu) x4"), "{s}");
    assert!(s.contains("WARNING: incumbent and candidate were measured with different set-ups"), "{s}");
    assert!(s.contains("XLA_FLAGS: - -> --xla_x=1") && s.contains("jax: 0.10.2 -> 0.10.3"), "{s}");
    assert!(s.contains("diagnosis of the candidate"), "{s}");
    assert!(s.contains("2 matmul, 2 exp, 2 reduce in the mosaic kernel body: as expected"), "{s}");
    // The kernel body's grid (1x4x4 = 16) agrees with meta.grid_steps: no grid finding.
    assert!(!s.contains("meta.grid_steps says"), "{s}");
}

#[test]
fn show_lists_a_spill_cliff_across_a_sweep() {
    let t = TestRepo::new();
    t.write("fake.env", "FAKE_LATENCY_MS=10\nFAKE_META={\"BQ\": 128, \"BKV\": 256}\n");
    t.git(&["commit", "-qam", "baseline meta"]);
    // BKV 256 -> 512 makes the kernel 60% slower: reverted; the BKV=256 point is its incumbent.
    t.write("fake.env", "FAKE_LATENCY_MS=16\nFAKE_META={\"BQ\": 128, \"BKV\": 512}\n");
    t.ratchet().arg("experiment: BKV 256 -> 512").assert().success();
    assert_eq!(t.rows()[0]["status"], "revert");
    let s = String::from_utf8(t.ratchet().args(["show", "1"]).output().unwrap().stdout).unwrap();
    assert!(s.contains("spill cliff between BKV=256 and BKV=512 (BQ=128)"), "{s}");
    assert!(s.contains("back off BKV to 256"), "{s}");
    assert!(s.contains("[experiment 1]  <- this experiment"), "{s}");
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn show_breaks_a_runs_seconds_down_as_its_recorded_runs_give_them() {
    use ratchet::bench::timing::{fmt_ms, fmt_share};
    use support::median;
    let t = TestRepo::new();
    t.write("fake.env", "FAKE_LATENCY_MS=10\nFAKE_PHASES=1\n");
    t.git(&["commit", "-qam", "phases"]);
    t.write("fake.env", "FAKE_LATENCY_MS=5\nFAKE_PHASES=1\n");
    t.ratchet().arg("experiment: halve the latency").assert().success();
    let runs: Vec<serde_json::Value> = t.runs().into_iter().filter(|r| r["experiment"] == "1" && r["status"] == "ok").collect();
    assert!(runs.len() >= 4, "{runs:?}");
    let f = |r: &serde_json::Value, k: &str| r[k].as_f64().unwrap_or_else(|| panic!("{k} missing in {r}"));
    let wall: Vec<f64> = runs.iter().map(|r| f(r, "wall_s")).collect();
    // Each figure from the runs alone: the phase's seconds per run, as runs.jsonl holds them.
    let per_run = |name: &str| -> Vec<f64> {
        runs.iter()
            .map(|r| match name {
                "outside_phases" => {
                    (f(r, "wall_s") - r["phases_s"].as_object().unwrap().values().map(|v| v.as_f64().unwrap()).sum::<f64>()).max(0.0)
                }
                "ratchet_after_exit" => f(r, "after_exit_s"),
                _ => f(&r["phases_s"], name),
            })
            .collect()
    };

    let out = t.ratchet().args(["show", "1", "--json"]).output().unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rt = &v["run_time"];
    assert_eq!(rt["runs"], runs.len());
    assert!(close(f(rt, "wall_ms"), median(wall.clone()) * 1e3), "{rt}");
    let names: Vec<&str> = rt["phases"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["start_to_import", "measured", "outside_phases", "ratchet_after_exit"]);
    let text = String::from_utf8(t.ratchet().args(["show", "1"]).env("COLUMNS", "200").output().unwrap().stdout).unwrap();
    // The fake benchmark is `python3 SCRIPT.py`: every run was forked, as runs.jsonl says.
    let forked = runs.iter().filter(|r| r["forked"] == true).count();
    assert_eq!((rt["forked"].as_u64(), forked), (Some(runs.len() as u64), runs.len()), "{rt}");
    assert!(
        text.contains(&format!(
            "where a run's seconds go ({} ok runs, each forked from a pre-imported parent, median wall {};",
            runs.len(),
            fmt_ms(f(rt, "wall_ms"))
        )),
        "{text}"
    );
    for p in rt["phases"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap();
        let secs = per_run(name);
        let shares: Vec<f64> = secs.iter().zip(&wall).map(|(s, w)| s / w * 100.0).collect();
        assert!(close(f(p, "median_ms"), median(secs.clone()) * 1e3), "{name}: {p}");
        assert!(close(f(p, "share_pct"), median(shares.clone())), "{name}: {p}");
        assert_eq!(p["runs"], runs.len());
        let cell = format!("{name} {} {}", fmt_ms(median(secs) * 1e3), fmt_share(median(shares)));
        assert!(text.contains(&cell), "{cell} not in\n{text}");
    }
    // The kernel: calls x median call time over the process's wall, run by run.
    let k = &rt["kernel"];
    let calls: Vec<f64> = runs.iter().map(|r| f(r, "kernel_calls")).collect();
    let call_ms: Vec<f64> = runs.iter().map(|r| f(r, "host_latency_ms")).collect();
    let share: Vec<f64> = runs.iter().map(|r| f(r, "kernel_calls") * f(r, "host_latency_ms") / (f(r, "wall_s") * 1e3) * 100.0).collect();
    assert!(close(f(k, "calls"), median(calls)) && close(f(k, "call_ms"), median(call_ms)), "{k}");
    assert!(close(f(k, "share_pct"), median(share.clone())), "{k}");
    assert!(text.contains(&format!("kernel {} of the wall", fmt_share(median(share)))), "{text}");
    // Every run's own record travels with the JSON.
    assert!(v["runs"].as_array().unwrap().iter().all(|r| r["phases_s"].is_object() && r["after_exit_s"].is_number()), "{v}");
}

#[test]
fn show_vs_sets_two_experiments_candidates_side_by_side() {
    let t = TestRepo::new();
    t.write("fake.env", "FAKE_LATENCY_MS=10\nFAKE_META={\"BQ\": 128}\n");
    t.git(&["commit", "-qam", "baseline"]);
    t.write("fake.env", "FAKE_LATENCY_MS=5\n");
    t.ratchet().arg("experiment: halve it").assert().success();
    t.write("fake.env", "FAKE_LATENCY_MS=4\n");
    t.ratchet().arg("experiment: a little more").assert().success();
    let median_of = |exp: &str| {
        support::median(
            t.runs()
                .iter()
                .filter(|r| r["experiment"] == exp && r["side"] == "candidate" && r["status"] == "ok")
                .map(|r| r["latency_ms"].as_f64().unwrap())
                .collect(),
        )
    };
    let out = t.ratchet().args(["show", "2", "--vs", "1", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((v["type"].as_str(), v["baseline"].as_u64(), v["experiment"].as_u64()), (Some("compare"), Some(1), Some(2)));
    let (a, b) = (median_of("1"), median_of("2"));
    assert_eq!(v["ab"]["step_time_ms"], serde_json::json!([a, b]));
    assert!((v["ab"]["step_time_delta_pct"].as_f64().unwrap() - (b / a - 1.0) * 100.0).abs() < 1e-9);

    let out = t.ratchet().args(["show", "2", "--vs", "1"]).output().unwrap();
    let s = String::from_utf8(out.stdout).unwrap();
    assert!(s.contains("experiment 1: experiment: halve it (keep)") && s.contains("experiment 2: experiment: a little more"), "{s}");
    assert!(s.contains("A/B: experiment 2 vs experiment 1"), "{s}");
    let step = s.lines().find(|l| l.trim_start().starts_with("step time")).unwrap();
    assert!(step.contains(&format!("{:+.1}%", (b / a - 1.0) * 100.0)), "{step}");

    t.ratchet()
        .args(["show", "2", "--vs", "9"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("there is no experiment 9 to compare with"));
    // An experiment whose runs are not on record has nothing to take medians of.
    std::fs::remove_file(t.path().join("results/runs.jsonl")).unwrap();
    t.ratchet()
        .args(["show", "2", "--vs", "1"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("experiment 1 has no ok candidate run in results/runs.jsonl to compare"));
}
