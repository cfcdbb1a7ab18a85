//! Every named level of the decision core has its row in docs/decisions.md's table of levels
//! (value, constant, function, the probe that chose it), with the value the code holds.

use std::path::Path;

#[test]
fn every_decision_constant_is_in_the_docs_table_with_its_value() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let code = std::fs::read_to_string(root.join("src/stats/sequential.rs")).unwrap();
    let docs = std::fs::read_to_string(root.join("docs/decisions.md")).unwrap();
    let start = docs.find("### The levels and where they live").expect("the table of levels");
    let table: Vec<&str> = docs[start..].lines().skip_while(|l| !l.starts_with('|')).take_while(|l| l.starts_with('|')).collect();
    let consts = regex::Regex::new(r"(?m)^pub const ([A-Z_]+): [a-z0-9]+ = ([0-9.]+);").unwrap();
    let mut seen = 0;
    for c in consts.captures_iter(&code) {
        let (name, value) = (&c[1], &c[2]);
        let row =
            table.iter().find(|l| l.contains(&format!("`{name}`"))).unwrap_or_else(|| panic!("{name} has no row in the table of levels"));
        let value = value.trim_end_matches(".0");
        assert!(row.contains(value), "{name} = {value} but its row says otherwise: {row}");
        seen += 1;
    }
    assert!(seen >= 10, "found only {seen} constants");
}
