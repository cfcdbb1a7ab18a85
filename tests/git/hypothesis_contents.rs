//! What goes into a hypothesis is shown (paths and sizes); the helper's output
//! directories stay out; conflict markers and large or binary untracked files are refused
//! (binary ones allowed with --allow-large), with nothing committed or recorded.

use crate::support;

use predicates::prelude::*;
use support::TestRepo;

fn head(t: &TestRepo) -> String {
    t.git(&["rev-parse", "HEAD"]).trim().to_string()
}

#[test]
fn profile_data_stays_out_and_the_commit_is_listed() {
    let t = TestRepo::new();
    t.write("kernel.py", "BQ = 256\nBKV = 256\n");
    // What running prepare.py by hand leaves behind: 5.5 MB of traces.
    std::fs::create_dir_all(t.path().join("profile_data/profile")).unwrap();
    std::fs::write(t.path().join("profile_data/profile/host.xplane.pb"), vec![7u8; 5_500_000]).unwrap();
    t.write("profile_data/ratchet-result.json", "{}");
    t.ratchet().arg("experiment: bigger BQ").assert().success().stderr(
        predicate::str::contains("hypothesis: 1 file, 19 B: kernel.py (19 B)")
            .and(predicate::str::contains("left out of the hypothesis: 2 untracked files in profile_data/")),
    );
    let files = t.git(&["show", "--name-only", "--format=", "HEAD"]);
    let parked = t.git(&["for-each-ref", "--format=%(refname)", "refs/ratchet/discarded/"]);
    let commit = if parked.trim().is_empty() { "HEAD".to_string() } else { parked.trim().to_string() };
    let files = if parked.trim().is_empty() { files } else { t.git(&["show", "--name-only", "--format=", &commit]) };
    assert_eq!(files.trim(), "kernel.py", "{files}");
    assert!(t.path().join("profile_data/profile/host.xplane.pb").exists(), "left in place, not deleted");
    // Benchmark output alone is nothing to test.
    let before = head(&t);
    t.ratchet().arg("experiment: nothing").assert().code(4).stderr(predicate::str::contains("nothing to test"));
    assert_eq!(head(&t), before);
}

#[test]
fn conflict_markers_are_refused_with_nothing_committed() {
    let t = TestRepo::new();
    let before = head(&t);
    t.write("kernel.py", "<<<<<<< HEAD\nBQ = 256\n=======\nBQ = 512\n>>>>>>> other\nBKV = 256\n");
    t.ratchet().arg("experiment: merged").assert().code(4).stderr(
        predicate::str::contains("merge-conflict markers")
            .and(predicate::str::contains("kernel.py"))
            .and(predicate::str::contains("nothing was committed")),
    );
    assert_eq!(head(&t), before);
    assert!(!t.path().join("results/results.csv").exists());
    assert!(t.read("kernel.py").starts_with("<<<<<<<"), "the working tree is untouched");
}

#[test]
fn large_or_binary_untracked_files_need_allow_large() {
    let t = TestRepo::new();
    let before = head(&t);
    t.write("kernel.py", "BQ = 256\nBKV = 256\n");
    std::fs::write(t.path().join("weights.bin"), [0u8, 1, 2, 0, 5]).unwrap();
    // No terminal on stdin: no question, a refusal with the fix.
    t.ratchet()
        .arg("experiment: with weights")
        .assert()
        .code(4)
        .stderr(predicate::str::contains("weights.bin (5 B, binary)").and(predicate::str::contains("--allow-large")));
    assert_eq!(head(&t), before);
    assert!(!t.path().join("results/results.csv").exists());
    t.ratchet()
        .args(["experiment: with weights", "--allow-large"])
        .assert()
        .success()
        .stderr(predicate::str::contains("new weights.bin (5 B)"));
    let csv = t.read("results/results.csv");
    assert_eq!(csv.lines().count(), 2, "{csv}");
}
