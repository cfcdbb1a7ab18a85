//! The one integration-test binary (one link instead of seventy): the tests live by subject in
//! an area directory each, declared in that area's `mod.rs`. `cargo test --test runner AREA::`
//! runs one area, `cargo test --test runner AREA::FILE::` one file.

#[macro_use]
mod support;

mod cli;
mod decisions;
mod fuzz;
mod git;
mod house;
mod review;
mod runs;
mod scale;
mod traces;

/// Cargo builds only this binary (`autotests = false`), so a test file that no `mod.rs`
/// declares would never run: every `.rs` under tests/ (support and helpers aside) is declared
/// by the `mod.rs` of its directory, and every area directory by this file.
#[test]
fn every_test_file_is_declared_and_so_runs() {
    let tests = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let runner = std::fs::read_to_string(tests.join("runner.rs")).unwrap();
    let mut forgotten = vec![];
    for area in std::fs::read_dir(&tests).unwrap().map(|e| e.unwrap().path()) {
        let name = area.file_name().unwrap().to_string_lossy().to_string();
        if !area.is_dir() || ["support", "helpers", "fixtures", "snapshots"].contains(&name.as_str()) {
            if area.extension().is_some_and(|x| x == "rs") && name != "runner.rs" {
                forgotten.push(name);
            }
            continue;
        }
        if !runner.contains(&format!("\nmod {name};\n")) {
            forgotten.push(format!("{name}/"));
            continue;
        }
        let decl = std::fs::read_to_string(area.join("mod.rs")).unwrap_or_default();
        for f in std::fs::read_dir(&area).unwrap().map(|e| e.unwrap().path()) {
            let stem = f.file_stem().unwrap().to_string_lossy().to_string();
            if f.extension().is_some_and(|x| x == "rs") && stem != "mod" && !decl.contains(&format!("mod {stem};")) {
                forgotten.push(format!("{name}/{stem}.rs"));
            }
        }
    }
    assert!(forgotten.is_empty(), "test files no mod.rs declares (they would never run): {forgotten:?}");
}
