//! The Rust version ratchet claims (`rust-version` in Cargo.toml, and the README's set-up line)
//! is no lower than what the locked dependencies declare they need.

use std::path::Path;
use std::process::Command;

/// "1.88", "1.85.0" as (major, minor, patch).
fn parse(v: &str) -> (u64, u64, u64) {
    let mut parts = v.trim().split('.').map(|p| p.parse::<u64>().unwrap_or_else(|_| panic!("not a Rust version: {v:?}")));
    (parts.next().unwrap(), parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

fn declared() -> String {
    let toml: toml::Value = toml::from_str(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))).unwrap();
    toml["package"]["rust-version"].as_str().expect("Cargo.toml sets package.rust-version").to_string()
}

/// `cargo metadata` over the locked graph, offline: every platform's packages where their
/// sources are at hand, else the host's (the ones this build downloaded).
fn locked_metadata() -> serde_json::Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let run = |extra: &[&str]| {
        Command::new(&cargo)
            .args(["metadata", "--format-version", "1", "--offline", "--locked"])
            .args(extra)
            .current_dir(root)
            .output()
            .expect("cargo runs")
    };
    let mut out = run(&[]);
    if !out.status.success() {
        let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
        let vv = String::from_utf8(Command::new(rustc).arg("-vV").output().expect("rustc runs").stdout).unwrap();
        let host = vv.lines().find_map(|l| l.strip_prefix("host: ")).expect("rustc -vV names the host").to_string();
        eprintln!("note: not every platform's sources are downloaded; checking the {host} dependency graph");
        out = run(&["--filter-platform", &host]);
    }
    assert!(out.status.success(), "cargo metadata failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn rust_version_covers_every_locked_dependency() {
    let ours = declared();
    let meta = locked_metadata();
    let packages = meta["packages"].as_array().unwrap();
    assert!(packages.len() > 50, "the locked graph was read ({} packages)", packages.len());
    let mut needs: Vec<(String, String)> = packages
        .iter()
        .filter(|p| p["name"] != "ratchet")
        .filter_map(|p| Some((p["rust_version"].as_str()?.to_string(), format!("{} {}", p["name"].as_str()?, p["version"].as_str()?))))
        .collect();
    needs.sort_by_key(|(v, _)| parse(v));
    let (newest, who) = needs.last().expect("some dependency declares a rust-version");
    let too_new: Vec<String> = needs.iter().rev().filter(|(v, _)| parse(v) > parse(&ours)).map(|(v, p)| format!("{p} needs {v}")).collect();
    assert!(
        too_new.is_empty(),
        "Cargo.toml says rust-version = {ours}, but {} locked dependencies need newer ({}, ...); \
         raise rust-version (and the README's set-up line) to {newest}, or lock older versions",
        too_new.len(),
        too_new.iter().take(4).cloned().collect::<Vec<_>>().join(", ")
    );
    eprintln!("rust-version {ours}; the newest any locked dependency needs is {newest} ({who})");
}

#[test]
fn the_readme_states_the_same_rust_version() {
    let ours = declared();
    let readme = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"));
    let claim = format!("Rust toolchain ({ours}+");
    assert!(readme.contains(&claim), "README's set-up section should say {claim:?} (Cargo.toml's rust-version)");
}
