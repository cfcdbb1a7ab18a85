//! A mistyped subcommand never runs an experiment, global options work before
//! a subcommand, and the article's `ratchet "experiment: ..."` (with a trailing ` --deep`) works.

use crate::support;

use predicates::prelude::*;
use support::TestRepo;

/// Nothing was committed, run or recorded, and the edit is still in the working tree.
fn untouched(t: &TestRepo, base: &str) {
    assert_eq!(t.head(), base, "nothing was committed");
    assert!(t.rows().is_empty(), "no results row");
    assert!(t.runs().is_empty(), "no benchmark ran");
    assert_eq!(t.read("kernel.py"), "BQ = 64\n", "the edit is still in the working tree");
    assert!(!t.path().join(".ratchet/experiments").exists(), "no experiment directory");
}

#[test]
fn a_mistyped_subcommand_with_uncommitted_edits_runs_nothing() {
    let t = TestRepo::new();
    let base = t.head();
    t.write("kernel.py", "BQ = 64\n");
    for (typo, meant) in [("reslts", "results"), ("stauts", "status"), ("swep", "sweep"), ("shwo", "show")] {
        t.ratchet().arg(typo).assert().code(2).stderr(
            predicate::str::contains(format!("did you mean `ratchet {meant}`")).and(predicate::str::contains("Nothing was committed")),
        );
        untouched(&t, &base);
    }
    // With --json the refusal is an error object on stdout.
    let out = t.ratchet().args(["stauts", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["type"], "error");
    assert_eq!(v["kind"], "usage");
    assert!(v["message"].as_str().unwrap().contains("did you mean `ratchet status`"));
    // A trailing --deep (as a flag or in the message) does not smuggle a typo through.
    t.ratchet().args(["reslts", "--deep"]).assert().code(2);
    t.ratchet().arg("reslts --deep").assert().code(2);
    untouched(&t, &base);
    // A typo followed by its arguments is named too, not clap's "cannot be used with [MESSAGE]".
    t.ratchet().args(["shwo", "2"]).assert().code(2).stderr(
        predicate::str::contains("there is no command \"shwo\"; did you mean `ratchet show`?")
            .and(predicate::str::contains("[MESSAGE]").not()),
    );
    untouched(&t, &base);
    // `ratchet run` says an experiment is meant: the word is taken as its message.
    t.ratchet().args(["run", "reslts"]).assert().success();
    assert_eq!(t.rows()[0]["message"], "reslts");
}

#[test]
fn global_options_before_a_subcommand_run_the_subcommand() {
    let t = TestRepo::new();
    let base = t.head();
    t.write("kernel.py", "BQ = 64\n");
    let elsewhere = tempfile::tempdir().unwrap();
    let dir = t.path().display().to_string();
    t.ratchet().current_dir(elsewhere.path()).args(["-C", &dir, "results"]).assert().success();
    t.ratchet()
        .current_dir(elsewhere.path())
        .args([&format!("--repo={dir}"), "status"])
        .assert()
        .success()
        .stdout(predicate::str::contains("incumbent on main"));
    untouched(&t, &base);
}

#[test]
fn the_articles_form_still_runs_an_experiment_with_a_trailing_deep() {
    let t = TestRepo::new();
    let base = t.head();
    t.write("fake.env", "FAKE_LATENCY_MS=5\n");
    let elsewhere = tempfile::tempdir().unwrap();
    let dir = t.path().display().to_string();
    t.ratchet()
        .current_dir(elsewhere.path())
        .args(["-C", &dir, "experiment: halve the latency --deep"])
        .assert()
        .success()
        .stderr(predicate::str::contains("--deep"));
    let rows = t.rows();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["message"], "experiment: halve the latency");
    assert_eq!(rows[0]["status"], "keep");
    assert_ne!(t.head(), base);
}

#[test]
fn the_color_choice_reaches_clap_s_own_errors() {
    let t = TestRepo::new();
    // Piped, clap colours nothing by itself: `always` must come from the command line...
    let out = t.ratchet().args(["--color", "always", "results", "--bogus"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("\u{1b}["), "{}", String::from_utf8_lossy(&out.stderr));
    // ... and `never` keeps it plain, wherever the option stands.
    let out = t.ratchet().args(["results", "--bogus", "--color=never"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(!String::from_utf8_lossy(&out.stderr).contains('\u{1b}'));
}
