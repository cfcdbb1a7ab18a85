//! `--quiet` prints results only; the default prints each run and what a hypothesis
//! commits.

use crate::support;

use support::TestRepo;

#[test]
fn quiet_prints_the_result_and_nothing_of_the_runs() {
    let t = TestRepo::new();
    t.write("fake.env", "FAKE_LATENCY_MS=5\n");
    let out = t.ratchet().args(["-q", "experiment: twice as fast"]).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("KEEP"), "the decision is still printed: {stdout}");
    assert!(!stderr.contains("run 1 ") && !stderr.contains("hypothesis: "), "no progress or listing: {stderr}");
    assert_eq!(t.rows().len(), 1);

    // Without it, every run and the listing are on stderr.
    t.write("fake.env", "FAKE_LATENCY_MS=2\n");
    let out = t.ratchet().arg("experiment: faster still").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("run 1 ") && stderr.contains("hypothesis: 1 file"), "{stderr}");
    // --quiet and --verbose contradict each other.
    t.ratchet().args(["-q", "-v", "status"]).assert().code(2);
}
