//! The work tree after ratchet is done with it: nothing the user has there is overwritten or
//! hidden, and nothing the benchmark or another process changed slips into a later commit.
//! Binary tests against throw-away repositories with the fake benchmark.

use crate::support;

use predicates::prelude::*;
use support::TestRepo;

#[test]
fn retry_never_overwrites_an_ignored_file_at_a_path_the_parked_change_adds() {
    let t = TestRepo::new();
    t.write("fake.env", "FAKE_LATENCY_MS=50\n");
    t.write("gen.py", "X = 1\n");
    t.ratchet().arg("experiment: slower, with gen.py").assert().success();
    assert!(!t.path().join("gen.py").exists(), "reverted");
    // Later the user ignores gen.py and keeps a file of their own there.
    t.write(".gitignore", "gen.py\n");
    t.git(&["add", ".gitignore"]);
    t.git(&["commit", "-qm", "ignore gen.py"]);
    t.write("gen.py", "precious\n");
    t.ratchet().args(["retry", "1"]).assert().code(4).stderr(
        predicate::str::contains("adds gen.py, but an ignored file is there already")
            .and(predicate::str::contains("mv gen.py ../gen.py.saved")),
    );
    assert_eq!(t.read("gen.py"), "precious\n");
    assert_eq!(t.read("fake.env"), "FAKE_LATENCY_MS=10\n", "nothing of the change was applied");
    // Moved out of the work tree, the retry goes through.
    let keep = tempfile::tempdir().unwrap();
    std::fs::rename(t.path().join("gen.py"), keep.path().join("gen.py.saved")).unwrap();
    t.ratchet().args(["retry", "1"]).assert().success();
    assert_eq!(t.read("gen.py"), "X = 1\n");
}

#[test]
fn retry_never_writes_through_a_symbolic_link() {
    let t = TestRepo::new();
    t.write("fake.env", "FAKE_LATENCY_MS=50\n");
    t.write("gen/k.py", "X = 1\n");
    t.ratchet().arg("experiment: slower, with gen/k.py").assert().success();
    assert!(!t.path().join("gen").exists(), "reverted");
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("k.py"), "outside\n").unwrap();
    t.write(".gitignore", "gen\n");
    t.git(&["add", ".gitignore"]);
    t.git(&["commit", "-qm", "ignore gen"]);
    std::os::unix::fs::symlink(outside.path(), t.path().join("gen")).unwrap();
    t.ratchet().args(["retry", "1"]).assert().code(4).stderr(predicate::str::contains("gen is a symbolic link"));
    assert_eq!(std::fs::read_to_string(outside.path().join("k.py")).unwrap(), "outside\n");
}

#[test]
fn recovery_leaves_edits_made_after_a_crash_in_the_work_tree() {
    // Killed while measuring, and while reverting (the hypothesis parked, the tree untouched).
    for point in ["after-commit", "mid-revert"] {
        let t = TestRepo::new();
        let base = t.head();
        t.write("kernel.py", "BQ = 256\nBKV = 256\n");
        t.write("fake.env", "FAKE_LATENCY_MS=50\n");
        let out = t.ratchet().arg("experiment: BQ 256").env("RATCHET_FAULT", point).output().unwrap();
        assert!(!out.status.success(), "killed at {point}");
        // After the crash the user goes on editing the kernel, on top of what the tree shows.
        t.write("kernel.py", "BQ = 256\nBKV = 512\n");
        let said = t.ratchet().arg("recover").assert().success().get_output().stdout.clone();
        assert_eq!(t.head(), base, "{point}: rolled back");
        assert_eq!(t.read("kernel.py"), "BQ = 256\nBKV = 512\n", "{point}: the later edit stays");
        let said = String::from_utf8(said).unwrap();
        assert!(
            said.contains("kernel.py changed after experiment 1's commit") && said.contains("left in the work tree as found"),
            "{said}"
        );
        assert_eq!(t.read("fake.env"), "FAKE_LATENCY_MS=10\n", "{point}: the rest of the hypothesis is reverted");
        assert_eq!(t.git(&["show", "refs/ratchet/discarded/1:kernel.py"]), "BQ = 256\nBKV = 256\n", "{point}: parked as measured");
        assert_eq!(t.git(&["status", "--porcelain"]), " M kernel.py\n", "{point}: an uncommitted change against the incumbent");
        // The next experiment tests it instead of finding nothing to test.
        t.ratchet().arg("experiment: BKV 512").assert().success();
        assert_eq!(t.git(&["show", "--name-only", "--format=", "refs/ratchet/discarded/2"]).trim(), "kernel.py", "{point}");
    }
}
