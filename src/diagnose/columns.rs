//! The results-table cells of the kernel's own figures (`kernel_ops`, `meta`): compact `key=value;...`
//! strings of the candidate's last run, so that old tables stay readable (empty cells) and a
//! sweep's rows carry their tunables for spill-cliff detection.

use crate::bench::RunRecord;

/// `matmul=2;exp=2;reduce=2;dma=0;copy=0` of the candidate's kernel body (first kernel), or
/// empty when no run decoded one.
pub fn kernel_ops_cell(runs: &[&RunRecord]) -> String {
    runs.iter()
        .rev()
        .find_map(|r| r.kernel_ops.first())
        .map(|k| format!("matmul={};exp={};reduce={};dma={};copy={}", k.matmul, k.exp, k.reduce, k.dma, k.copy))
        .unwrap_or_default()
}

/// The scalar entries of the candidate's `meta`, sorted by key: `BKV=128;BQ=128;dtype=bfloat16`.
/// `;` and `=` inside values are replaced so that the cell splits back cleanly.
pub fn meta_cell(runs: &[&RunRecord]) -> String {
    let Some(serde_json::Value::Object(m)) = runs.iter().rev().find_map(|r| r.meta.as_ref()) else { return String::new() };
    let mut parts: Vec<String> = m
        .iter()
        .filter_map(|(k, v)| {
            let v = match v {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Number(n) => n.to_string(),
                serde_json::Value::Bool(b) => b.to_string(),
                _ => return None,
            };
            Some(format!("{}={}", k.replace([';', '='], "_"), v.replace([';', '='], "_")))
        })
        .collect();
    parts.sort();
    parts.join(";")
}

/// The `key=value` pairs of a cell.
pub fn parse_cell(cell: &str) -> Vec<(&str, &str)> {
    cell.split(';').filter_map(|kv| kv.split_once('=')).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_cell_round_trips_scalars_only() {
        let mut r: RunRecord = serde_json::from_value(serde_json::json!({
            "experiment": "1", "run": 1, "side": "candidate", "commit": "c", "time": "t", "status": "ok",
            "wall_s": 1.0, "out_dir": "/x",
            "meta": {"BQ": 128, "BKV": 256, "dtype": "bfloat16", "shape": [1, 2], "odd": "a;b=c"}
        }))
        .unwrap();
        let cell = meta_cell(&[&r]);
        assert_eq!(cell, "BKV=256;BQ=128;dtype=bfloat16;odd=a_b_c");
        assert_eq!(parse_cell(&cell)[1], ("BQ", "128"));
        assert_eq!(kernel_ops_cell(&[&r]), "");
        r.kernel_ops = vec![crate::trace::kernel_body::KernelOps { matmul: 2, exp: 2, reduce: 2, ..Default::default() }];
        assert_eq!(kernel_ops_cell(&[&r]), "matmul=2;exp=2;reduce=2;dma=0;copy=0");
    }
}
