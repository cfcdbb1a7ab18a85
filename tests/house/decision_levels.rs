//! Every named level of the decision core (`src/stats/sequential/`) has its row in
//! docs/decisions.md's table of levels (value, constant, why), with the value the code holds.

use std::path::Path;

#[test]
fn every_decision_constant_is_in_the_docs_table_with_its_value() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("src/stats/sequential");
    let mut code = String::new();
    for f in std::fs::read_dir(&dir).unwrap() {
        let f = f.unwrap().path();
        if f.extension().is_some_and(|e| e == "rs") {
            code += &std::fs::read_to_string(f).unwrap();
        }
    }
    let docs = std::fs::read_to_string(root.join("docs/decisions.md")).unwrap();
    // The section's tables (the robust ratio's, the earlier rule's), up to the next section.
    let start = docs.find("## The levels").expect("the table of levels");
    let end = docs[start + 1..].find("\n## ").map_or(docs.len(), |e| start + 1 + e);
    let table: Vec<&str> = docs[start..end].lines().filter(|l| l.starts_with('|')).collect();
    // Any literal (1.25, 6.0, 1e-12): a constant the pattern cannot read fails below, not silently.
    let consts = regex::Regex::new(r"(?m)^pub const ([A-Z_0-9]+): ([a-z0-9]+) = ([^;]+);").unwrap();
    let mut seen = 0;
    for c in consts.captures_iter(&code) {
        let (name, value) = (&c[1], &c[3]);
        assert!(value.parse::<f64>().is_ok(), "{name} = {value}: a level is a literal number");
        let row = table
            .iter()
            .find(|l| l.contains(&format!("`{name}`")) || l.contains(&format!("::{name}`")))
            .unwrap_or_else(|| panic!("{name} has no row in the table of levels"));
        let value = value.trim_end_matches(".0");
        assert!(row.contains(value), "{name} = {value} but its row says otherwise: {row}");
        seen += 1;
    }
    assert!(seen >= 14, "found only {seen} constants");
}
