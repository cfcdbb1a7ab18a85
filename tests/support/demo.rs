//! The demo night of the review's tests: rows (and their raw runs) like a real sweep's, written
//! into a throw-away repo.

#![allow(dead_code)]

use ratchet::bench::RunRecord;
use ratchet::store::{ResultRow, Status, Store};

/// A night like the demo's: score (1/latency^2) from 1.23 to 232 over kept gains, with reverts,
/// an inconclusive, a no-op, a crash whose note spans many lines, and a skipped hypothesis.
pub fn demo_rows() -> Vec<ResultRow> {
    let mut rows = vec![];
    let mut inc = 1.23f64;
    let mut intensity = 31.0;
    let new_intensity = [60.0, 31.0, 80.0, 80.5, 80.0, 0.0, 104.0, 0.0, 140.0];
    let spec: &[(Status, &str, Option<f64>)] = &[
        (Status::Keep, "experiment: bump BQ from 128 to 512 rows so each block reuses K and V more", Some(85.0)),
        (Status::Revert, "experiment: BKV 256 -> 128", Some(-4.0)),
        (Status::Keep, "experiment: fuse the softmax rescale into the PV matmul", Some(140.0)),
        (Status::Inconclusive, "experiment: unroll the inner loop twice", Some(1.5)),
        (Status::NoOp, "experiment: rename a local variable", Some(0.1)),
        (Status::Crash, "experiment: use bf16 accumulators", None),
        (Status::Keep, "experiment: causal block skipping: skip fully masked KV blocks entirely", Some(900.0)),
        (Status::Skipped, "experiment: double-buffer the KV copies", None),
        (Status::Keep, "experiment: BQ 512 -> 1024", Some(340.0)),
    ];
    for (i, (status, msg, d)) in spec.iter().enumerate() {
        let id = i as u64 + 1;
        let mut r = ResultRow::unmeasured(id, *status, msg, format!("{:08x}{}", 0x1234567u64 * (id + 7), "0".repeat(32)), "0".repeat(40));
        r.metric = "score".into();
        r.runs = if d.is_some() { 16 } else { 2 };
        r.wall_s = 60.0;
        if let Some(d) = d {
            let v = inc * (1.0 + d / 100.0);
            r.incumbent_value = Some(inc);
            r.value = Some(v);
            r.delta_pct = Some(*d);
            r.ci_low_pct = Some(d - 3.0);
            r.ci_high_pct = Some(d + 3.0);
            r.speedup_pct = Some(((1.0 + d / 100.0).sqrt() - 1.0) * 100.0);
            r.p_value = Some(0.001);
            r.latency_ms = Some(10.0 / (v / 1.23).sqrt());
            let i_new = if *status == Status::Keep || *status == Status::Inconclusive { new_intensity[i] } else { intensity };
            r.intensity = Some(i_new);
            r.tflops = Some(4.0 / r.latency_ms.unwrap());
            r.regime = Some("memory-bound".into());
            if *status == Status::Keep {
                inc = v;
                intensity = i_new;
            }
        }
        r.note = match status {
            Status::Crash => "candidate crashed (exit 1):\nTraceback (most recent call last):\n  File \"prepare.py\", line 3\n    import kernel\n  File \"kernel.py\", line 9\nValueError: bf16 accumulation overflowed\n".into(),
            _ => "the decision's reason".into(),
        };
        rows.push(r);
    }
    rows
}

/// Raw runs for the measured rows: eight per side, latencies spread around the row's figures,
/// FLOPs fixed and bytes falling as the kernel improves (intensity 31 -> 104 and beyond).
pub fn demo_runs(rows: &[ResultRow]) -> Vec<RunRecord> {
    let mut out = vec![];
    let flops = 4.0e9;
    let mut inc_lat = 10.0;
    let mut inc_bytes = flops / 31.0;
    for r in rows {
        let Some(lat) = r.latency_ms else { continue };
        let cand_bytes = flops / r.intensity.unwrap_or(31.0);
        for k in 0..16usize {
            let cand = k % 2 == 1;
            let jitter = 1.0 + 0.08 * (((k * 7 + r.id as usize * 3) % 11) as f64 / 10.0 - 0.5);
            let (l, bytes) = if cand { (lat * jitter, cand_bytes) } else { (inc_lat * jitter, inc_bytes) };
            let v = serde_json::json!({
                "experiment": r.id.to_string(), "run": k, "side": if cand { "candidate" } else { "incumbent" },
                "commit": if cand { r.commit.clone() } else { r.incumbent.clone() }, "time": "2026-11-22T01:00:00Z",
                "status": "ok", "wall_s": 1.0, "latency_ms": l, "latency_source": "host",
                "value": 1.23 * (10.0 / l) * (10.0 / l), "flops": flops, "bytes": bytes, "min_bytes": null, "out_dir": "/x"
            });
            out.push(serde_json::from_value(v).unwrap());
        }
        if r.status == Status::Keep {
            inc_lat = lat;
            inc_bytes = cand_bytes;
        }
    }
    out
}

/// Write the demo's rows and runs into `results/` under `root`.
pub fn write_demo(root: &std::path::Path) {
    let store = Store::new(&root.join("results"));
    let rows = demo_rows();
    for r in &rows {
        store.append_row(r).unwrap();
    }
    for run in demo_runs(&rows) {
        store.append_run(&run).unwrap();
    }
}
