//! The diagnosis rules are documented with their sources: every rule id the code emits has a
//! row in docs/diagnosis.md's rule table, every row says where its threshold comes from (a seed's
//! section, chapter or note, or "ours"), and every threshold constant in `src/diagnose/` says
//! the same in its comment. A rule added without its source fails here.

use std::collections::BTreeSet;
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn diagnose_sources() -> Vec<(String, String)> {
    let dir = root().join("src/diagnose");
    let mut out: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read_to_string(&p).unwrap()))
        .collect();
    out.sort();
    out
}

/// The rule ids of every `Finding::new("rule", ...)` in src/diagnose.
fn emitted_rules() -> BTreeSet<String> {
    let re = regex::Regex::new(r#"Finding::new\(\s*"([a-z-]+)""#).unwrap();
    diagnose_sources().iter().flat_map(|(_, text)| re.captures_iter(text).map(|c| c[1].to_string()).collect::<Vec<_>>()).collect()
}

/// docs/diagnosis.md's rule table: (rule ids of the first cell, the threshold cell).
fn documented_rows() -> Vec<(Vec<String>, String)> {
    let readme = std::fs::read_to_string(root().join("docs/diagnosis.md")).unwrap();
    let start = readme.find("| rule | threshold (source) | says |").expect("docs/diagnosis.md's rule table");
    let id = regex::Regex::new(r"`([a-z-]+)`").unwrap();
    readme[start..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.split(" | ").collect();
            (id.captures_iter(cells[0]).map(|c| c[1].to_string()).collect(), cells[1].to_string())
        })
        .collect()
}

#[test]
fn every_emitted_rule_has_a_row_and_every_row_a_rule() {
    let emitted = emitted_rules();
    assert!(emitted.len() >= 20 && emitted.contains("gap") && emitted.contains("overlap"), "{emitted:?}");
    let documented: BTreeSet<String> = documented_rows().into_iter().flat_map(|(ids, _)| ids).collect();
    let missing: Vec<_> = emitted.difference(&documented).collect();
    assert!(missing.is_empty(), "rules without a row in docs/diagnosis.md's rule table: {missing:?}");
    let stale: Vec<_> = documented.difference(&emitted).filter(|r| *r != "ratchet").collect();
    assert!(stale.is_empty(), "rows for rules the code no longer emits: {stale:?}");
}

#[test]
fn every_row_names_the_source_of_its_threshold() {
    let source = regex::Regex::new(r#"\b00[0-4](,| §| chapter| ")|\*\*ours\*\*|^no threshold"#).unwrap();
    for (ids, threshold) in documented_rows() {
        assert!(source.is_match(&threshold), "row {ids:?} names no seed section and says not \"ours\": {threshold}");
    }
}

#[test]
fn every_threshold_constant_says_where_it_comes_from() {
    // The comment block above a constant (or above the group of constants it belongs to).
    let says = regex::Regex::new(r"(?i)section|seed|\bours\b|ratchet's").unwrap();
    let konst = regex::Regex::new(r"^pub const ([A-Z_]+): (f64|usize)").unwrap();
    let mut checked = 0;
    for (file, text) in diagnose_sources() {
        let mut comment = String::new();
        let mut previous_was_const = false;
        for line in text.lines() {
            let t = line.trim_start();
            if let Some(doc) = t.strip_prefix("///").or_else(|| t.strip_prefix("//")) {
                if previous_was_const {
                    comment.clear();
                }
                comment.push_str(doc);
                previous_was_const = false;
            } else if let Some(c) = konst.captures(t) {
                assert!(says.is_match(&comment), "{file}: {} has no source in its comment: {comment:?}", &c[1]);
                checked += 1;
                previous_was_const = true;
            } else {
                comment.clear();
                previous_was_const = false;
            }
        }
    }
    assert!(checked >= 15, "{checked} constants checked");
}

#[test]
fn every_findings_source_is_its_rows() {
    let cited = regex::Regex::new(r"00[0-4]|§[0-9.]+|chapter [0-9]+|step [0-9]+").unwrap();
    for (ids, threshold) in documented_rows() {
        for id in ids.iter().filter(|id| *id != "ratchet") {
            let source = ratchet::diagnose::source(id);
            if source == "ours" {
                assert!(threshold.contains("**ours**"), "{id}: the code says ours, the row: {threshold}");
            } else if source.starts_with("no threshold") {
                assert!(threshold.starts_with("no threshold"), "{id}: the code says no threshold, the row: {threshold}");
            } else {
                for c in cited.find_iter(source) {
                    assert!(
                        threshold.contains(c.as_str()),
                        "{id}: the code cites {source:?}, the row does not say {:?}: {threshold}",
                        c.as_str()
                    );
                }
            }
        }
    }
}

/// Every capture kept as a fixture (the project's own and, where present, the shared ones) and
/// every run directory (a result file with the kernel's figures, its HLO and body).
fn captures() -> Vec<std::path::PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.join("ratchet-result.json").is_file() {
                    out.push(p.clone());
                }
                walk(&p, out);
            } else if p.to_string_lossy().ends_with(".xplane.pb") {
                out.push(p);
            }
        }
    }
    let mut out = vec![];
    walk(&root().join("tests/fixtures"), &mut out);
    walk(&root().join("../shared/fixtures"), &mut out);
    out.sort();
    out
}

#[test]
fn every_finding_on_every_capture_prints_its_figure_and_its_source() {
    if !root().join("../shared/fixtures").is_dir() {
        eprintln!("note: ../shared/fixtures is absent: only the project's own captures are read");
    }
    let mut read = 0;
    let mut bad = vec![];
    for p in captures() {
        let Ok(out) = ratchet::cli::inspect::build_inspect(&ratchet::cli::inspect::InspectArgs::of(p.clone())) else { continue };
        read += 1;
        let text = ratchet::diagnose::render(&out.findings);
        for f in &out.findings {
            // A threshold rule says the figure of this capture that crossed (or kept within) it.
            if !f.source.starts_with("no threshold") && !f.what.chars().any(|c| c.is_ascii_digit()) {
                bad.push(format!("{}: [{}] {}", p.display(), f.rule, f.what));
            }
            assert!(text.contains(&format!("({}: {})", f.rule, f.source)), "{text}");
        }
    }
    assert!(read >= 3, "{read} captures read");
    assert!(bad.is_empty(), "findings without their figure:\n{}", bad.join("\n"));
}
