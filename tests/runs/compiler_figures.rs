//! Figures the benchmark took from the compiler (the result file's `compiler_figures`) are
//! estimates, not claims: XLA's "bytes accessed" counts every operand from HBM, and a kernel
//! whose data stays in a cache beats it. The physics gate holds a run to the FLOPs it reports
//! and to the bytes it gave itself, never to the compiler's bytes. Runs `bench::measure` on an
//! executor that writes the result file.

use ratchet::bench::executor::{Executor, Exit, RunOutput, RunSpec};
use ratchet::bench::{measure, RunContext, RunRecord, RunStatus, Side};
use ratchet::config::Config;

/// Plays a benchmark that exits 0 after writing `result`.
struct Writes(String);

impl Executor for Writes {
    fn run(&mut self, spec: &RunSpec) -> std::io::Result<RunOutput> {
        std::fs::create_dir_all(&spec.log_dir)?;
        let out = spec.env.iter().find(|(k, _)| k == "RATCHET_OUT").map(|(_, v)| std::path::PathBuf::from(v)).unwrap();
        std::fs::write(out.join("ratchet-result.json"), &self.0)?;
        let (so, se) = (spec.log_dir.join("stdout.log"), spec.log_dir.join("stderr.log"));
        std::fs::write(&so, "")?;
        std::fs::write(&se, "")?;
        Ok(RunOutput {
            exit: Exit::Code(0),
            wall_s: 0.1,
            stdout_path: so,
            stderr_path: se,
            summary_lines: vec![],
            stdout_tail: String::new(),
            stderr_tail: String::new(),
            log_error: None,
        })
    }
}

fn run(result: &str) -> RunRecord {
    let d = tempfile::tempdir().unwrap();
    let state = d.path().join(".ratchet");
    std::fs::create_dir_all(&state).unwrap();
    let ctx = RunContext {
        experiment: "1",
        run: 0,
        side: Side::Candidate,
        commit: "abc",
        dir: d.path(),
        out_dir: d.path().join("out"),
        repo_root: d.path(),
        state_dir: &state,
        python_dir: d.path(),
        deep: false,
    };
    let cfg = Config::parse("[benchmark]\ncommand = \"x\"\n[hardware]\npreset = \"h100\"\n[score]\nmetric = \"latency\"\n").unwrap();
    measure(&mut Writes(result.into()), &cfg, &ctx).unwrap()
}

// 1 ms on an H100 (3350 GB/s): 10 GB is three times what HBM can move in that time.
const CACHE_FAST: &str = r#"{"version": 1, "latencies_ms": [1.0, 1.0, 1.0], "flops": 1e9, "bytes": 1e10"#;

#[test]
fn bytes_the_benchmark_gave_are_held_to_the_roofline() {
    let rec = run(&format!("{CACHE_FAST}}}"));
    assert_eq!(rec.status, RunStatus::Invalid);
    assert!(rec.error.as_deref().unwrap().contains("physics gate"), "{:?}", rec.error);
}

#[test]
fn bytes_the_compiler_estimated_are_not() {
    let rec = run(&format!(r#"{CACHE_FAST}, "compiler_figures": {{"bytes": "XLA's cost analysis"}}}}"#));
    assert_eq!(rec.status, RunStatus::Ok, "{:?}", rec.error);
    assert!(rec.compiler_bytes);
    // Still the figure every view computes the roofline from.
    assert_eq!(rec.bytes, Some(1e10));
}

#[test]
fn flops_bound_a_run_whatever_their_source() {
    // 1e16 FLOPs in 1 ms is 10 000 TFLOP/s, ten times an H100's peak.
    let rec = run(
        r#"{"version": 1, "latencies_ms": [1.0], "flops": 1e16, "bytes": 1e6, "compiler_figures": {"flops": "XLA's cost analysis", "bytes": "XLA's cost analysis"}}"#,
    );
    assert_eq!(rec.status, RunStatus::Invalid, "{:?}", rec.error);
}
