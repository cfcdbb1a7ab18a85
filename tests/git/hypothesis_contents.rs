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
    t.ratchet().args(["-v", "experiment: bigger BQ"]).assert().success().stderr(
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
        .args(["-v", "experiment: with weights", "--allow-large"])
        .assert()
        .success()
        .stderr(predicate::str::contains("new weights.bin (5 B)"));
    let csv = t.read("results/results.csv");
    assert_eq!(csv.lines().count(), 2, "{csv}");
}

/// `rel` (raw bytes, as git's paths are) in the repo.
fn raw_path(t: &TestRepo, rel: &[u8]) -> std::path::PathBuf {
    use std::os::unix::ffi::OsStrExt;
    t.path().join(std::ffi::OsStr::from_bytes(rel))
}

/// `ratchet ARGS` refuses with exit 4, naming the file `shown` (its bytes escaped) and the fix,
/// with nothing committed, parked or recorded.
fn refused_naming(t: &TestRepo, args: &[&str], shown: &str) {
    let base = head(t);
    let out = t.ratchet().args(args).assert().code(4).get_output().stderr.clone();
    let err = String::from_utf8_lossy(&out);
    assert!(err.contains(shown) && err.contains("not UTF-8") && err.contains("rename"), "{err}");
    assert_eq!(head(t), base, "nothing committed");
    assert_eq!(t.git(&["for-each-ref", "refs/ratchet/"]), "");
    assert!(t.rows().is_empty());
}

#[test]
fn an_edit_to_a_file_whose_name_is_not_utf8_is_refused_naming_it() {
    let t = TestRepo::new();
    std::fs::write(raw_path(&t, b"w\xffights.py"), "W = 1\n").unwrap();
    t.git(&["add", "-A"]);
    t.git(&["commit", "-qm", "weights under a Latin-1 name"]);
    std::fs::write(raw_path(&t, b"w\xffights.py"), "W = 2\n").unwrap();
    refused_naming(&t, &["experiment: new weights"], "w\\xffights.py");
    assert_eq!(std::fs::read_to_string(raw_path(&t, b"w\xffights.py")).unwrap(), "W = 2\n", "the edit stays");
}

#[test]
fn a_new_file_whose_name_is_not_utf8_is_refused_by_an_experiment_and_a_sweep() {
    let t = TestRepo::new();
    t.write("fake.env", "FAKE_LATENCY_MS=5\n");
    std::fs::write(raw_path(&t, b"n\xe9w.py"), "X = 1\n").unwrap();
    refused_naming(&t, &["experiment: faster"], "n\\xe9w.py");
    assert_eq!(t.read("fake.env"), "FAKE_LATENCY_MS=5\n");

    // The sweep's clean-tree check sees it too.
    t.write("fake.env", "FAKE_LATENCY_MS=10\n");
    t.write(
        "experiments/01-faster.toml",
        "message = \"experiment: faster\"\n[[edit]]\nfile = \"fake.env\"\nfind = \"=10\"\nreplace = \"=5\"\n",
    );
    t.git(&["add", "experiments"]);
    t.git(&["commit", "-qm", "a hypothesis"]);
    refused_naming(&t, &["sweep"], "n\\xe9w.py");
    assert!(raw_path(&t, b"n\xe9w.py").exists());
}

#[test]
fn the_incumbent_checkout_follows_a_commit_of_a_file_whose_name_is_not_utf8() {
    let t = TestRepo::new();
    t.write("fake.env", "FAKE_LATENCY_MS=20\n");
    t.ratchet().arg("experiment: slower, to make the incumbent checkout").assert().success();
    std::fs::write(raw_path(&t, b"d\xffta.txt"), "data\n").unwrap();
    t.git(&["add", "-A"]);
    t.git(&["commit", "-qm", "data under a Latin-1 name"]);
    t.write("fake.env", "FAKE_LATENCY_MS=5\n");
    t.ratchet().arg("experiment: faster").assert().success();
    use std::os::unix::ffi::OsStrExt;
    let inc = t.path().join(".ratchet/worktrees/incumbent").join(std::ffi::OsStr::from_bytes(b"d\xffta.txt"));
    assert_eq!(std::fs::read_to_string(inc).unwrap(), "data\n", "the incumbent measured had the file");
}
