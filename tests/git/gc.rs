//! `ratchet gc` keeps the run directories of kept experiments and of the last N, removes
//! the others (all but the sequential test's looks.json), never touches results.csv or runs.jsonl;
//! `ratchet status` shows the sizes.

use crate::support;

use predicates::prelude::*;
use support::TestRepo;

#[test]
fn gc_keeps_kept_and_recent_experiments() {
    let t = TestRepo::new();
    for (lat, msg) in [(5, "faster"), (50, "slower"), (60, "slower still")] {
        t.write("fake.env", &format!("FAKE_LATENCY_MS={lat}\n"));
        t.ratchet().arg(format!("experiment: {msg}")).assert().success();
    }
    let exp = |id: u64| t.path().join(".ratchet/experiments").join(id.to_string());
    for id in 1..=3 {
        assert!(exp(id).is_dir(), "experiment {id} has a run directory");
    }
    // A fat trace in the reverted experiment 2.
    std::fs::write(exp(2).join("big.xplane.pb"), vec![1u8; 3_000_000]).unwrap();
    t.ratchet()
        .arg("status")
        .assert()
        .success()
        .stdout(predicate::str::contains("disk: .ratchet ").and(predicate::str::contains("experiments ")));
    let csv = t.read("results/results.csv");
    let runs = t.read("results/runs.jsonl");

    t.ratchet()
        .args(["gc", "--keep-last", "1", "--dry-run"])
        .assert()
        .success()
        .stdout(predicate::str::contains("would remove the run directories of 1 experiment (2): 3.0 MB"));
    assert!(exp(2).is_dir(), "a dry run removes nothing");
    t.ratchet().args(["gc", "--keep-last", "1"]).assert().success().stdout(
        predicate::str::contains("removed the run directories of 1 experiment (2)")
            .and(predicate::str::contains("kept experiments and of the last 1 stay")),
    );
    // Only the decision's record stays: it cannot be rebuilt from the runs, and it is tiny.
    let left: Vec<String> = std::fs::read_dir(exp(2)).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(left, vec!["looks.json".to_string()], "collected experiment 2 keeps only its looks record");
    t.ratchet().args(["plot", "--looks", "2"]).assert().success().stdout(predicate::str::contains("looks-2"));
    assert!(exp(1).is_dir(), "kept");
    assert!(exp(3).is_dir(), "the last one");
    assert_eq!(t.read("results/results.csv"), csv);
    assert_eq!(t.read("results/runs.jsonl"), runs);
    // The collected experiment still shows (its row and runs), and the table is unchanged.
    t.ratchet().args(["show", "2"]).assert().success();
    t.ratchet().args(["gc"]).assert().success().stdout(predicate::str::contains("nothing to collect"));
}
