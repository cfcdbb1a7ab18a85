//! Command-line conventions: completions and a man page generated from the clap
//! definitions, `--color never|always`, and the lean release profile.

use crate::support;

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
    // Every page the main page lists as ratchet-NAME(1), `ratchet man NAME` makes.
    let main = String::from_utf8(t.ratchet().arg("man").output().unwrap().stdout).unwrap();
    let listed: Vec<String> =
        regex::Regex::new(r"ratchet\\-([a-z]+)\(1\)").unwrap().captures_iter(&main).map(|c| c[1].to_string()).collect();
    assert!(listed.len() >= 10 && listed.iter().any(|n| n == "show"), "{listed:?}");
    for name in &listed {
        t.ratchet()
            .args(["man", name])
            .assert()
            .success()
            .stdout(predicate::str::contains(format!(".TH ratchet-{name} 1")).and(predicate::str::contains(format!("ratchet {name}"))));
    }
    t.ratchet().args(["man", "shw"]).assert().code(2).stderr(predicate::str::contains("no subcommand \"shw\" has a page"));
}

#[test]
fn the_release_binary_ships_without_debug_info() {
    let toml: toml::Value = toml::from_str(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))).unwrap();
    let release = &toml["profile"]["release"];
    assert_eq!(release["debug"].as_bool(), Some(false), "{release:?}");
    assert_eq!(release["strip"].as_str(), Some("debuginfo"));
}

#[test]
fn init_writes_the_detected_accelerators_preset() {
    let t = TestRepo::new();
    t.write("prepare.py", "print('hi')\n");
    let bin = tempfile::tempdir().unwrap();
    let smi = bin.path().join("nvidia-smi");
    std::fs::write(&smi, "#!/bin/sh\necho 'NVIDIA H100 80GB HBM3'\n").unwrap();
    std::fs::set_permissions(&smi, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let init = |path: &std::path::Path, tpu: Option<&str>| {
        let mut c = t.ratchet();
        c.args(["init", "--force"]).env("PATH", path).env_remove("TPU_ACCELERATOR_TYPE").env_remove("ACCELERATOR_TYPE");
        if let Some(v) = tpu {
            c.env("TPU_ACCELERATOR_TYPE", v);
        }
        c.assert().success();
        t.read("ratchet.toml")
    };
    let cfg = init(bin.path(), None);
    assert!(cfg.contains("preset = \"h100\""), "{cfg}");
    assert!(init(bin.path(), Some("v6e-8")).contains("preset = \"tpu-v6e\""));
    let empty = tempfile::tempdir().unwrap();
    let cfg = init(empty.path(), None);
    assert!(cfg.contains("preset = \"cpu\""), "{cfg}");
    t.ratchet()
        .args(["init", "--force"])
        .env("PATH", empty.path())
        .assert()
        .success()
        .stdout(predicate::str::contains("no TPU or known GPU detected"));
}
