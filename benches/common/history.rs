//! A long results history made from a real sweep's (shared by `benches/controller.rs` and the
//! controller's in-process tests, through `#[path]`).

use ratchet::store::{ResultRow, Status, Store};
use std::io::Write;
use std::path::Path;
use std::process::Command;

/// Give the repository at `to` a history of `rows` rows copied from the results of `from` (ids
/// 1..=rows, each with its template row's runs), a parked ref for each reverted row (packed, as
/// `git gc` leaves them) and the id counter at `rows`. Returns the sizes of results.csv and
/// runs.jsonl.
pub fn grow(from: &Path, to: &Path, rows: usize) -> (u64, u64) {
    let template_store = Store::new(&from.join("results"));
    let template: Vec<ResultRow> = template_store.rows().unwrap();
    let text = std::fs::read_to_string(template_store.runs_path()).unwrap_or_default();
    let runs: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let results = to.join("results");
    std::fs::create_dir_all(&results).unwrap();
    let mut csv = csv::Writer::from_path(results.join("results.csv")).unwrap();
    let mut lines = std::io::BufWriter::new(std::fs::File::create(results.join("runs.jsonl")).unwrap());
    let head = String::from_utf8(Command::new("git").args(["rev-parse", "HEAD"]).current_dir(to).output().unwrap().stdout).unwrap();
    let mut refs = vec![];
    for i in 0..rows {
        let t = &template[i % template.len()];
        let id = i as u64 + 1;
        csv.serialize(ResultRow { id, ..t.clone() }.for_csv()).unwrap();
        for r in runs.iter().filter(|r| r["experiment"].as_str() == Some(t.id.to_string().as_str())) {
            let mut r = r.clone();
            r["experiment"] = serde_json::Value::String(id.to_string());
            serde_json::to_writer(&mut lines, &r).unwrap();
            lines.write_all(b"\n").unwrap();
        }
        if t.status == Status::Revert {
            refs.push(ratchet::vcs::discarded_ref(&id.to_string()));
        }
    }
    csv.flush().unwrap();
    drop(csv);
    lines.flush().unwrap();
    drop(lines);
    refs.sort();
    let packed: String = std::iter::once("# pack-refs with: peeled fully-peeled sorted \n".to_string())
        .chain(refs.iter().map(|r| format!("{} {r}\n", head.trim())))
        .collect();
    std::fs::write(to.join(".git/packed-refs"), packed).unwrap();
    std::fs::create_dir_all(to.join(".git/ratchet")).unwrap();
    std::fs::write(to.join(".git/ratchet/last-id"), rows.to_string()).unwrap();
    let size = |f: &str| std::fs::metadata(results.join(f)).map(|m| m.len()).unwrap_or(0);
    (size("results.csv"), size("runs.jsonl"))
}
