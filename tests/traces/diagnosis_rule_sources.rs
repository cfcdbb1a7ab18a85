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
