//! Issue 16: command-line conventions: completions and a man page generated from the clap
//! definitions, `--color never|always`, and the lean release profile.

mod support;

use predicates::prelude::*;
use support::TestRepo;

#[test]
fn completions_and_man_page_come_from_the_definitions() {
    let t = TestRepo::new();
    for shell in ["bash", "zsh", "fish"] {
        t.ratchet()
            .args(["completions", shell])
            .assert()
            .success()
            .stdout(predicate::str::contains("retry").and(predicate::str::contains("wide")).and(predicate::str::contains("allow-large")));
    }
    t.ratchet().args(["completions", "tcsh"]).assert().code(2);
    t.ratchet().arg("man").assert().success().stdout(predicate::str::contains(".TH ratchet").and(predicate::str::contains("gc")));
}

#[test]
fn the_release_binary_ships_without_debug_info() {
    let toml: toml::Value = toml::from_str(include_str!("../Cargo.toml")).unwrap();
    let release = &toml["profile"]["release"];
    assert_eq!(release["debug"].as_bool(), Some(false), "{release:?}");
    assert_eq!(release["strip"].as_str(), Some("debuginfo"));
}
