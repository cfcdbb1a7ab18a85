//! What each benchmark run is told through its environment agrees with what `runs.jsonl`
//! records of it: its index, side, phase and pair.

use crate::support;

use support::TestRepo;

const CONFIG: &str = "[benchmark]\ncommand = \"sh bench.sh\"\ntimeout_s = 20\nwarmup = 0\niters = 5\nprofile_iters = 0\n\
[score]\nmetric = \"latency\"\n[decision]\nmethod = \"auto\"\nmin_pairs = 2\nmax_pairs = 4\nconfirm_pairs = 2\n";

/// The candidate is 20% faster; each run notes what it was told in `seen.log` (outside git).
const BENCH: &str = r#"echo "$RATCHET_RUN $RATCHET_SIDE ${RATCHET_PHASE-unset} ${RATCHET_PAIR-unset}" >> "$RATCHET_REPO/seen.log"
ms=10; [ "$RATCHET_SIDE" = candidate ] && ms=8
j=$((RATCHET_RUN % 3))
printf '{"version": 1, "latencies_ms": [%s.0%s, %s.1, %s.2]}' "$ms" "$j" "$ms" "$ms" > "$RATCHET_OUT/ratchet-result.json"
"#;

#[test]
fn each_run_is_told_its_phase_and_pair_as_runs_jsonl_records_them() {
    let t = TestRepo::with_config(CONFIG);
    t.write("bench.sh", BENCH);
    t.write(".gitignore", "seen.log\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-qm", "the benchmark"]);
    t.write("kernel.py", "BQ = 512\n");
    t.ratchet().arg("experiment: bigger BQ").assert().success();
    assert_eq!(t.rows()[0]["status"], "keep", "{:?}", t.rows());
    let seen: Vec<String> = t.read("seen.log").lines().map(str::to_string).collect();
    let recorded: Vec<String> = t
        .runs()
        .iter()
        .map(|r| format!("{} {} {} {}", r["run"], r["side"].as_str().unwrap(), r["phase"].as_str().unwrap(), r["pair"]))
        .collect();
    assert_eq!(seen, recorded);
    // A kept change went through both phases, and each phase counts its pairs from 0.
    assert!(seen.iter().any(|l| l.ends_with(" main 0")) && seen.iter().any(|l| l.ends_with(" confirmation 0")), "{seen:?}");
}
