//! CPU captures of every JAX layout (tests/fixtures/captures, made by
//! tests/helpers/make_version_captures.py): op events with or without `run_id`, ops run on the
//! caller's thread, captures with no op events at all; the two readers agreeing; a trace that
//! contradicts the host's steps; and files that are not JAX captures, refused for what they are.
//!
//! Expected figures come from tests/helpers/xplane_reference.py (an independent decoder):
//! `python3 tests/helpers/xplane_reference.py tests/fixtures/captures/<dir>/steps.xplane.pb`.

use crate::support;

use ratchet::trace::{analyze, AnalyzeOptions, TraceReport};

/// (module, executions, median us, min us, max us) from the reference decoder.
type Expected = [(&'static str, usize, f64, f64, f64); 3];

const LAYOUTS: [(&str, &str, Expected); 4] = [
    (
        "jax-0.4.38-cpu",
        "split by host dispatch",
        [
            ("jit_pallas_add(7)", 9, 18.375, 15.339, 118.713),
            ("jit_small(9)", 9, 1411.727, 888.095, 1938.695),
            ("jit_tiny(11)", 9, 0.411, 0.271, 0.511),
        ],
    ),
    (
        "jax-0.5.3-cpu",
        "split by host dispatch",
        [
            ("jit_pallas_add(7)", 9, 74.751, 23.764, 853.801),
            ("jit_small(9)", 9, 1139.617, 605.165, 2092.694),
            ("jit_tiny(11)", 9, 2.425, 1.213, 3.978),
        ],
    ),
    (
        "jax-0.7.2-cpu",
        "grouped by hlo_module, run_id",
        [
            ("jit_pallas_add(7)", 9, 35.577, 20.247, 124.534),
            ("jit_small(9)", 9, 1545.798, 1268.589, 2788.969),
            ("jit_tiny(11)", 9, 2.415, 1.914, 2.986),
        ],
    ),
    (
        "jax-0.10.2-cpu",
        "grouped by hlo_module, run_id",
        [
            ("jit_pallas_add(6)", 9, 27.681, 16.181, 550.492),
            ("jit_small(8)", 9, 988.264, 534.813, 1594.069),
            ("jit_tiny(10)", 9, 2.264, 1.443, 3.076),
        ],
    ),
];

fn capture(dir: &str, ext: &str) -> std::path::PathBuf {
    support::own_fixture(&format!("captures/{dir}/steps.{ext}"))
}

fn read(dir: &str, ext: &str) -> TraceReport {
    analyze(&capture(dir, ext), &AnalyzeOptions { kernel: Some("pallas_add".into()), ..Default::default() })
        .unwrap_or_else(|e| panic!("{dir} {ext}: {e:#}"))
}

fn within(a: f64, b: f64, what: &str) {
    // The readers keep picoseconds; the reference prints microseconds to 1e-3.
    assert!((a - b).abs() <= 1e-3_f64.max(b.abs() * 1e-9), "{what}: {a} != {b}");
}

#[test]
fn every_cpu_layout_gives_each_call_its_own_execution() {
    for (dir, grouping, expected) in LAYOUTS {
        let r = read(dir, "xplane.pb");
        assert!(r.source.contains(grouping), "{dir}: {}", r.source);
        assert_eq!(r.modules.len(), 3, "{dir}: {:?}", r.modules.iter().map(|m| &m.name).collect::<Vec<_>>());
        for (name, executions, median, min, max) in expected {
            let m = r.modules.iter().find(|m| m.name == name).unwrap_or_else(|| panic!("{dir}: no {name}"));
            assert_eq!(m.executions, executions, "{dir} {name}");
            within(m.median_us, median, &format!("{dir} {name} median"));
            within(m.min_us, min, &format!("{dir} {name} min"));
            within(m.max_us, max, &format!("{dir} {name} max"));
        }
        // Every call waited for inside its step: no execution is longer than the steps.
        assert_eq!(r.host_steps_us.len(), 9, "{dir}");
        assert_eq!(r.host_contradiction(), None, "{dir}");
        assert!(r.warnings.is_empty(), "{dir}: {:?}", r.warnings);
    }
}

#[test]
fn a_computation_run_on_the_callers_thread_is_read() {
    // jax runs `tiny` inline: its op events are on the `python3` line.
    for (dir, _, _) in LAYOUTS {
        let r = read(dir, "xplane.pb");
        assert!(r.source.contains("python3"), "{dir}: {}", r.source);
        assert!(r.modules.iter().any(|m| m.module == "jit_tiny" && m.executions == 9), "{dir}");
    }
}

/// The figures both readers give: per module, (module name, executions, median, min, max).
fn figures(r: &TraceReport) -> Vec<(String, usize, f64, f64, f64)> {
    let mut v: Vec<_> = r.modules.iter().map(|m| (m.module.clone(), m.executions, m.median_us, m.min_us, m.max_us)).collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

fn readers_agree(xplane: &TraceReport, json: &TraceReport, what: &str) {
    let (a, b) = (figures(xplane), figures(json));
    assert_eq!(a.len(), b.len(), "{what}: {a:?} vs {b:?}");
    for (x, j) in a.iter().zip(&b) {
        assert_eq!((&x.0, x.1), (&j.0, j.1), "{what}");
        // The Chrome trace rounds times to nanoseconds (microseconds with 3 decimals).
        for (p, q) in [(x.2, j.2), (x.3, j.3), (x.4, j.4)] {
            assert!((p - q).abs() <= 2e-3, "{what} {}: {p} vs {q}", x.0);
        }
    }
    let steps = |r: &TraceReport| r.host_steps_us.len();
    assert_eq!(steps(xplane), steps(json), "{what}");
}

#[test]
fn the_xplane_and_chrome_trace_readers_agree_on_every_capture_with_both() {
    for (dir, _, _) in LAYOUTS {
        readers_agree(&read(dir, "xplane.pb"), &read(dir, "trace.json.gz"), dir);
    }
    let shared = support::fixture("jax-cpu-0.10.2/flash_attention_5iters.xplane.pb");
    if !shared.exists() {
        eprintln!("SKIPPED (shared capture): ../shared/fixtures is absent (a clone of the project alone)");
        return;
    }
    let opts = AnalyzeOptions { kernel: Some("flash_attention".into()), ..Default::default() };
    let json = support::fixture("jax-cpu-0.10.2/flash_attention_5iters.trace.json.gz");
    readers_agree(&analyze(&shared, &opts).unwrap(), &analyze(&json, &opts).unwrap(), "jax-cpu-0.10.2");
}

#[test]
fn a_cpu_capture_without_op_events_is_refused_by_name() {
    for dir in ["jax-0.4.30-cpu", "jax-0.6.2-cpu"] {
        for ext in ["xplane.pb", "trace.json.gz"] {
            let e = analyze(&capture(dir, ext), &AnalyzeOptions::default()).expect_err(dir);
            let msg = format!("{e:#}");
            assert!(msg.contains("records the host's calls"), "{dir} {ext}: {msg}");
            assert!(msg.contains("no XLA op events"), "{msg}");
            assert!(msg.contains("[trace] latency = \"host\""), "{msg}");
        }
    }
}

/// One experiment on the mock executor whose runs all report `ms` and carry `capture` as their
/// trace; the candidate's run records.
fn runs_with_trace(capture: &std::path::Path, kernel: &str, ms: f64) -> Vec<serde_json::Value> {
    use ratchet::bench::mock::{MockExecutor, Step};
    use ratchet::events::Effects;
    use ratchet::experiment::{self, Options};
    use ratchet::signals::Cancel;
    use ratchet::workspace::Workspace;
    support::isolate_git();
    let repo = support::TestRepo::with_config(
        "[benchmark]\ncommand = \"true\"\ntimeout_s = 20\nkill_grace_s = 0.5\nwarmup = 0\niters = 5\nprofile_iters = 2\n\
         [decision]\nmin_pairs = 4\nmax_pairs = 4\nconfirm_pairs = 4\n[score]\nmetric = \"latency\"\n",
    );
    repo.write("kernel.py", "BQ = 256\n");
    let step = Step::Trace { ms, capture: capture.to_path_buf(), kernel: kernel.into() };
    let mut exec = MockExecutor::sides(step.clone(), step);
    let mut events = vec![];
    let ws = Workspace::discover(repo.path()).unwrap().lock("test", &mut events).unwrap();
    let mut fx = Effects::new(&mut events, Cancel::new());
    ratchet::sweep::recover(&ws, &mut fx).unwrap();
    experiment::run(&ws, &Options { message: "exp: BQ 256".into(), ..Default::default() }, &mut exec, &mut fx).unwrap();
    repo.runs().into_iter().filter(|r| r["side"] == "candidate").collect()
}

#[test]
fn a_run_takes_the_kernel_time_from_a_capture_without_run_id() {
    let runs = runs_with_trace(&capture("jax-0.4.38-cpu", "xplane.pb"), "pallas_add", 10.0);
    assert!(!runs.is_empty());
    for r in runs {
        assert_eq!(r["latency_source"], "trace", "{r}");
        within(r["latency_ms"].as_f64().unwrap(), 18.375e-3, "latency_ms");
        assert_eq!(r["trace_kernel"]["executions"], 9, "{r}");
    }
}

#[test]
fn a_trace_longer_than_the_hosts_steps_keeps_the_hosts_timing() {
    // Two calls that share one run_id (the class: execution boundaries from one field): read
    // as one execution of 1,050 us, longer than either 500 us step that waited for a call.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("merged.trace.json.gz");
    let step = |ts: u32| format!(r#"{{"ph":"X","pid":1,"tid":1,"ts":{ts},"dur":500,"name":"kernel_step","args":{{}}}}"#);
    let op = |ts: u32, dur: u32| {
        format!(
            r#"{{"ph":"X","pid":1,"tid":2,"ts":{ts},"dur":{dur},"name":"add.1","args":{{"hlo_op":"add.1","hlo_module":"jit_k","run_id":"5"}}}}"#
        )
    };
    let json = format!(
        r#"{{"traceEvents":[{{"ph":"M","pid":1,"name":"process_name","args":{{"name":"/host:CPU"}}}},{},{},{},{}]}}"#,
        step(0),
        step(1000),
        op(40, 100),
        op(1040, 50)
    );
    let mut gz = flate2::write::GzEncoder::new(std::fs::File::create(&path).unwrap(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, json.as_bytes()).unwrap();
    gz.finish().unwrap();
    let r = analyze(&path, &AnalyzeOptions::default()).unwrap();
    assert_eq!(r.kernel.as_ref().unwrap().per_execution_us, vec![1050.0]);
    assert!(r.warnings.iter().any(|w| w.contains("is longer than the longest of the host's 2 kernel_step")), "{:?}", r.warnings);

    let runs = runs_with_trace(&path, "jit_k", 10.0);
    assert!(!runs.is_empty());
    for r in runs {
        assert_eq!(r["latency_source"], "host", "{r}");
        assert!(r["trace_error"].as_str().unwrap().contains("its time is not used"), "{r}");
        assert!((r["latency_ms"].as_f64().unwrap() - 10.0).abs() < 1.0, "{r}");
    }
}

#[test]
fn show_reads_deep_snapshots_with_the_kernel_their_run_named() {
    // A snapshot directory has no result file; its capture holds three modules run 9 times
    // each, so only the run's own kernel name tells which is the kernel.
    let snap = capture("jax-0.7.2-cpu", "xplane.pb");
    let run: ratchet::bench::RunRecord = serde_json::from_value(serde_json::json!({
        "experiment": "1", "run": 0, "side": "candidate", "commit": "abc", "status": "ok",
        "time": "2026-12-02T00:00:00Z", "out_dir": "/nonexistent", "wall_s": 1.0, "latency_ms": 1.0, "latency_source": "host",
        "value": 1.0, "flops": null, "bytes": null, "min_bytes": null, "kernel": "small", "snapshots": [{"path": snap}],
    }))
    .unwrap();
    let (from, ops) = ratchet::cli::show::op_breakdown(&[run], ratchet::bench::Side::Candidate, &AnalyzeOptions::default())
        .expect("the snapshots' op breakdown");
    assert_eq!(from, "1 snapshots");
    let names: Vec<&str> = ops.iter().map(|o| o.name.as_str()).collect();
    assert!(names.iter().any(|n| n.starts_with("dot")), "jit_small's ops: {names:?}");
}

fn gzip_to(path: &std::path::Path, text: &str) {
    let mut gz = flate2::write::GzEncoder::new(std::fs::File::create(path).unwrap(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, text.as_bytes()).unwrap();
    gz.finish().unwrap();
}

#[test]
fn files_that_are_not_jax_captures_are_refused_for_what_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let refusal = |path: &std::path::Path| format!("{:#}", analyze(path, &AnalyzeOptions::default()).expect_err("a refusal"));
    // A PyTorch profiler (Kineto) trace: a string process id and PyTorch's own top-level keys.
    let torch = dir.path().join("worker0.pt.trace.json.gz");
    gzip_to(
        &torch,
        r#"{"schemaVersion": 1, "deviceProperties": [], "traceEvents": [
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 4121, "tid": 4121, "ts": 10.0, "dur": 5.0, "args": {"External id": 1}},
            {"ph": "X", "cat": "python_function", "name": "train.py(10): step", "pid": 4121, "tid": 4121, "ts": 1.0, "dur": 30.0},
            {"ph": "i", "name": "Iteration Start: PyTorch Profiler", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 0.0, "s": "g"}]}"#,
    );
    let msg = refusal(&torch);
    assert!(msg.contains("is a PyTorch profiler trace (Kineto), not a JAX capture"), "{msg}");
    // A zero-byte capture: the profiler did not finish it.
    let empty = dir.path().join("host.xplane.pb");
    std::fs::write(&empty, b"").unwrap();
    let msg = refusal(&empty);
    assert!(msg.contains("is empty (0 bytes): the profiler did not finish writing it"), "{msg}");
    // Valid protobuf with no planes (field 4, a hostname, alone).
    let bare = dir.path().join("bare.xplane.pb");
    std::fs::write(&bare, [0x22, 0x02, b'v', b'm']).unwrap();
    let msg = refusal(&bare);
    assert!(msg.contains("(4 bytes) holds no planes: it is not a jax.profiler capture"), "{msg}");
}
