//! How much an experiment prints: `--quiet` the result only, the default a short report of at
//! most six lines, `-v` each run, what the hypothesis commits and the test's reasoning.

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
    // --quiet and --verbose contradict each other.
    t.ratchet().args(["-q", "-v", "status"]).assert().code(2);
}

#[test]
fn the_default_report_is_six_short_lines_and_verbose_adds_the_runs_and_reasons() {
    let t = TestRepo::new();
    t.write("fake.env", "FAKE_LATENCY_MS=5\n");
    let out = t.ratchet().arg("experiment: twice as fast").output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let lines: Vec<&str> = stdout.lines().chain(stderr.lines()).collect();
    assert!(lines.iter().all(|l| l.chars().count() <= 100), "{stdout}{stderr}");
    // A note (this fake benchmark's noise raises one) is a warning of its own, two lines at most.
    let note =
        stderr.lines().skip_while(|l| !l.starts_with("note: ")).take_while(|l| l.starts_with("note: ") || l.starts_with("  ")).count();
    assert!(note <= 2, "{stderr}");
    assert!(lines.len() - note <= 6, "{} lines:\n{stdout}{stderr}", lines.len());
    // What is measured, the decision with its speed-up and interval, where the evidence is.
    assert!(stdout.starts_with("experiment 1: experiment: twice as fast\n  candidate "), "{stdout}");
    assert!(stdout.contains("  KEEP: speed-up ") && stdout.contains("% CI "), "{stdout}");
    assert!(stdout.contains("ratchet show 1"), "{stdout}");
    // The runs, the listing and the test's reasoning wait for -v.
    assert!(!stderr.contains("run 1 ") && !stderr.contains("hypothesis: "), "{stderr}");
    assert!(!stdout.contains("why: ") && !stdout.contains("plan: "), "{stdout}");

    t.write("fake.env", "FAKE_LATENCY_MS=2\n");
    let out = t.ratchet().args(["-v", "experiment: faster still"]).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stderr.contains("run 1 ") && stderr.contains("hypothesis: 1 file"), "{stderr}");
    // One phase: the pairs the ratio read, its p valid at each look.
    assert!(support::flat(&stdout).contains(" pairs; p = ") && stdout.contains("  why: ") && stdout.contains("  plan: "), "{stdout}");
    assert!(support::flat(&stdout).contains("valid at each of ") && !stdout.contains("confirming"), "{stdout}");
    assert!(support::flat(&stdout).contains("runs: .ratchet/experiments/2/runs"), "{stdout}");
}
