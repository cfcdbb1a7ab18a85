//! The work tree after ratchet is done with it: nothing the user has there is overwritten or
//! hidden, and nothing the benchmark or another process changed slips into a later commit.
//! Binary tests against throw-away repositories with the fake benchmark.

mod support;

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
