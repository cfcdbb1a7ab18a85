//! Benchmark runs: spawn one (through an [`executor::Executor`]), then read what it reported
//! into a [`RunRecord`], the raw sample that every decision is made from and that is kept.

pub mod executor;
pub mod infra;
pub mod mock;
pub mod preload;
pub mod protocol;
pub mod shadow;
pub mod shell;
pub mod shim;
pub mod timing;

use crate::config::{Config, LatencySource, Metric};
use crate::hardware::Hardware;
use crate::safe_read;
use executor::{Executor, Exit, RunSpec};
use protocol::{Check, LegacyResult, RESULT_FILE};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Which commit a run measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Incumbent,
    Candidate,
}

impl Side {
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Incumbent => "incumbent",
            Side::Candidate => "candidate",
        }
    }
}

/// How one run ended, as far as measuring goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Ok,
    /// Non-zero exit or killed by a signal.
    Crash,
    Timeout,
    /// Ran, but reported nothing usable, or its correctness check failed.
    Invalid,
    Interrupted,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Ok => "ok",
            RunStatus::Crash => "crash",
            RunStatus::Timeout => "timeout",
            RunStatus::Invalid => "invalid",
            RunStatus::Interrupted => "interrupted",
        }
    }
}

/// One benchmark process: the raw sample, kept in `results/runs.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    pub experiment: String,
    pub run: usize,
    pub side: Side,
    pub commit: String,
    pub time: String,
    pub status: RunStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    pub wall_s: f64,
    /// The sample's latency: median of its iterations, the trace's kernel time, or as reported.
    pub latency_ms: Option<f64>,
    /// `host` (benchmark timings), `trace` (kernel time in the profile) or `reported` (RESULT line).
    pub latency_source: Option<String>,
    /// The deciding metric's value for this sample.
    pub value: Option<f64>,
    #[serde(default)]
    pub iter_latencies_ms: Vec<f64>,
    pub flops: Option<f64>,
    pub bytes: Option<f64>,
    pub min_bytes: Option<f64>,
    /// `bytes` is the compiler's estimate (the result file's `compiler_figures`), not a count
    /// the benchmark gave: caches can beat it, so the physics gate does not hold a run to it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub compiler_bytes: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reported: Option<LegacyResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check: Option<Check>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hlo: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throttled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta: Option<serde_json::Value>,
    /// The kernel's time as the trace shows it, when a trace was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_kernel: Option<TraceKernel>,
    /// Why the trace could not give the latency (the host timings were used instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_error: Option<String>,
    /// Median of the benchmark's own per-iteration timings, whatever the latency source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_latency_ms: Option<f64>,
    /// Counts of the compiled HLO the benchmark dumped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hlo_stats: Option<crate::trace::HloStats>,
    /// The Pallas kernels' bodies the benchmark decoded (TPU, GPU), and their op counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_body: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel_ops: Vec<crate::trace::kernel_body::KernelOps>,
    /// What the run was measured with (the result file's `environment`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<std::collections::BTreeMap<String, serde_json::Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub out_dir: PathBuf,
    /// Continuous-profiling snapshots of a `--deep` run, each with the kernel time it shows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub snapshots: Vec<Snapshot>,
    /// The run was throttled and run again; its value does not enter the decision.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub superseded: bool,
    /// The parallel sweep's trial that measured it (`t3`): a stale winner's row holds two
    /// trials' runs, each numbered from 1. Absent for a serial experiment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trial: Option<String>,
    /// The pair this run belongs to (0-based within its phase) and the phase (`main` or
    /// `confirmation`; a calibration's A/A pairs are `main`): with `side`, how the decision read
    /// the run. Absent for a crash's cross-check run and in runs recorded before they were kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pair: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Where the benchmark's seconds went (the result file's `phases_s`), by phase name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases_s: Option<std::collections::BTreeMap<String, f64>>,
    /// Kernel calls the process made (the result file's `kernel_calls`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_calls: Option<u64>,
    /// The device's peak memory in use, bytes (the result file's `peak_memory_bytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_memory_bytes: Option<f64>,
    /// Ratchet's own time after the process exited: reading the result file, the HLO, the
    /// kernel bodies and the trace, and the gates, up to the record being complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_exit_s: Option<f64>,
    /// Forked from a pre-imported Python parent (docs/protocol.md, "Forked runs"), not
    /// started as a fresh process.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub forked: bool,
}

/// One `--deep` snapshot of a run, summarised: a kernel time far from the others reveals a
/// transient regression (a throttle, a recompile, a slow phase) that the median hides.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Snapshot {
    pub path: PathBuf,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Median kernel time in this snapshot, from its trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_median_us: Option<f64>,
    #[serde(default)]
    pub executions: usize,
    /// Why the snapshot's trace could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What the trace says about the kernel in one run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TraceKernel {
    /// The module chosen as the kernel.
    pub name: String,
    pub executions: usize,
    pub median_us: f64,
    pub per_execution_us: Vec<f64>,
    /// Plane and line the times come from.
    pub source: String,
    pub capture: String,
}

/// Everything one run needs besides the config.
pub struct RunContext<'a> {
    pub experiment: &'a str,
    pub run: usize,
    pub side: Side,
    pub commit: &'a str,
    /// The checkout the command runs in.
    pub dir: &'a Path,
    /// `RATCHET_OUT` for this run (created empty).
    pub out_dir: PathBuf,
    pub repo_root: &'a Path,
    pub state_dir: &'a Path,
    /// Directory holding `ratchet_bench.py`, prepended to PYTHONPATH.
    pub python_dir: &'a Path,
    pub deep: bool,
    /// The phase (`main` or `confirmation`) and the pair within it this run measures, told to
    /// the benchmark; `None` for a run outside the pairs.
    pub pair: Option<(&'static str, usize)>,
}

/// The (incumbent, candidate) values of an experiment's pairs, read from its run records as
/// they were measured: successful runs that were not superseded by a re-run. Runs that carry
/// their pair (`trial`, `phase`, `pair`) are matched by it, so a pair with a failed run drops out
/// whole and never shifts the others; older records are taken two at a time in order (each pair
/// is one run of each side, in either order). A pair missing a side is left out.
pub fn pairs_of<'a>(records: impl IntoIterator<Item = &'a RunRecord>) -> Vec<(f64, f64)> {
    let used: Vec<&RunRecord> = records.into_iter().filter(|r| r.status == RunStatus::Ok && !r.superseded).collect();
    let value = |p: &[&RunRecord], side| p.iter().find(|r| r.side == side).and_then(|r| r.value);
    if !used.is_empty() && used.iter().all(|r| r.pair.is_some()) {
        type PairKey<'k> = (Option<&'k str>, Option<&'k str>, Option<usize>);
        let mut groups: Vec<(PairKey, Vec<&RunRecord>)> = vec![];
        for r in used {
            let key = (r.trial.as_deref(), r.phase.as_deref(), r.pair);
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, g)) => g.push(r),
                None => groups.push((key, vec![r])),
            }
        }
        return groups
            .iter()
            .filter(|(_, g)| g.len() == 2)
            .filter_map(|(_, g)| Some((value(g, Side::Incumbent)?, value(g, Side::Candidate)?)))
            .collect();
    }
    used.chunks_exact(2).filter_map(|p| Some((value(p, Side::Incumbent)?, value(p, Side::Candidate)?))).collect()
}

/// Real runs: forked from a pre-imported Python parent where the command allows
/// ([`preload`]), else a fresh process ([`executor::ProcessExecutor::spawn`]).
impl executor::Executor for executor::ProcessExecutor {
    fn run(&mut self, spec: &RunSpec) -> std::io::Result<executor::RunOutput> {
        let token = executor::new_token();
        if let Some(out) = preload::run(spec, &token, || executor::monotonic_ns().to_string()) {
            return out;
        }
        executor::ProcessExecutor::spawn(spec, &token)
    }
}

/// Run the benchmark once and read its report; a stop signal interrupts it.
pub fn measure(exec: &mut dyn Executor, cfg: &Config, ctx: &RunContext) -> std::io::Result<RunRecord> {
    measure_with(exec, cfg, ctx, &crate::signals::Cancel::signals())
}

/// [`measure`], interrupted when `cancel` is set.
pub fn measure_with(
    exec: &mut dyn Executor,
    cfg: &Config,
    ctx: &RunContext,
    cancel: &crate::signals::Cancel,
) -> std::io::Result<RunRecord> {
    if ctx.out_dir.exists() {
        std::fs::remove_dir_all(&ctx.out_dir).map_err(crate::fsutil::io_at(&ctx.out_dir))?;
    }
    std::fs::create_dir_all(&ctx.out_dir).map_err(crate::fsutil::io_at(&ctx.out_dir))?;
    let b = &cfg.benchmark;
    let mut env: Vec<(String, String)> = b.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let py = match std::env::var("PYTHONPATH") {
        Ok(p) if !p.is_empty() => format!("{}:{p}", ctx.python_dir.display()),
        _ => ctx.python_dir.display().to_string(),
    };
    env.extend([
        ("RATCHET_OUT".into(), ctx.out_dir.display().to_string()),
        ("RATCHET_WARMUP".into(), b.warmup.to_string()),
        ("RATCHET_ITERS".into(), b.iters.to_string()),
        ("RATCHET_PROFILE_ITERS".into(), b.profile_iters.to_string()),
        ("RATCHET_SIDE".into(), ctx.side.as_str().into()),
        ("RATCHET_RUN".into(), ctx.run.to_string()),
        ("RATCHET_COMMIT".into(), ctx.commit.into()),
        ("RATCHET_EXPERIMENT".into(), ctx.experiment.into()),
        ("RATCHET_REPO".into(), ctx.repo_root.display().to_string()),
        ("RATCHET_STATE_DIR".into(), ctx.state_dir.display().to_string()),
        ("RATCHET_DEEP".into(), if ctx.deep { "1" } else { "0" }.into()),
        ("RATCHET_TRACE_MODE".into(), cfg.trace.depth.as_str().into()),
        ("PYTHONPATH".into(), py),
    ]);
    // JAX's persistent compilation cache from the interpreter's start, so that what a
    // benchmark compiles before ratchet_bench.run (its inputs, a reference output) is loaded,
    // not compiled, by every run after the first. A user's own setting stands.
    let cache_dir = ctx.state_dir.join("cache").join("jax");
    for (k, v) in [
        ("JAX_COMPILATION_CACHE_DIR", cache_dir.display().to_string()),
        ("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0".into()),
        ("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "-1".into()),
    ] {
        if !b.env.contains_key(k) && std::env::var_os(k).is_none() {
            env.push((k.into(), v));
        }
    }
    if let Some((phase, i)) = ctx.pair {
        env.push(("RATCHET_PHASE".into(), phase.into()));
        env.push(("RATCHET_PAIR".into(), i.to_string()));
    }
    // Read once: the figures the benchmark is told are the ones its run is judged by.
    let hw = cfg.hardware();
    if let Some(hw) = &hw {
        // The benchmark's own summary lines can then use the same roofline as ratchet.
        env.push(("RATCHET_PEAK_TFLOPS".into(), hw.peak_tflops.to_string()));
        env.push(("RATCHET_HBM_GBPS".into(), hw.hbm_gbps.to_string()));
    }
    let spec = RunSpec {
        command: b.command.clone(),
        dir: ctx.dir.to_path_buf(),
        env,
        log_dir: ctx.out_dir.clone(),
        timeout: Duration::from_secs_f64(b.timeout_s),
        grace: Duration::from_secs_f64(b.kill_grace_s),
        pgid_file: Some(crate::layout::pgid_path(ctx.state_dir)),
        cancel: cancel.clone(),
        preload: b.preload,
    };
    let out = exec.run(&spec)?;
    // Ratchet's own share of a run: from the process's exit to its record complete.
    let exited = std::time::Instant::now();
    let mut rec = read_run(&out, cfg, ctx, hw.as_ref());
    rec.after_exit_s = Some(exited.elapsed().as_secs_f64());
    Ok(rec)
}

/// The record of a run that has ended: how it exited, what it reported, its trace and gates.
fn read_run(out: &executor::RunOutput, cfg: &Config, ctx: &RunContext, hw: Option<&Hardware>) -> RunRecord {
    let b = &cfg.benchmark;
    let mut rec = RunRecord {
        experiment: ctx.experiment.into(),
        run: ctx.run,
        side: ctx.side,
        commit: ctx.commit.into(),
        time: crate::fsutil::now(),
        status: RunStatus::Ok,
        exit_code: None,
        signal: None,
        wall_s: out.wall_s,
        latency_ms: None,
        latency_source: None,
        value: None,
        iter_latencies_ms: vec![],
        flops: None,
        bytes: None,
        min_bytes: None,
        compiler_bytes: false,
        reported: None,
        check: None,
        trace: None,
        hlo: None,
        kernel: None,
        backend: None,
        device: None,
        throttled: None,
        meta: None,
        trace_kernel: None,
        trace_error: None,
        host_latency_ms: None,
        hlo_stats: None,
        kernel_body: None,
        kernel_ops: vec![],
        environment: None,
        error: None,
        out_dir: ctx.out_dir.clone(),
        snapshots: vec![],
        superseded: false,
        trial: None,
        pair: None,
        phase: None,
        phases_s: None,
        kernel_calls: None,
        peak_memory_bytes: None,
        after_exit_s: None,
        forked: out.forked,
    };
    match out.exit {
        Exit::Code(0) => {}
        Exit::Code(c) => {
            rec.exit_code = Some(c);
            let rec = fail(rec, RunStatus::Crash, format!("exited with code {c}"), &out.stderr_path, &out.stderr_tail);
            return disk_full_check(rec, out, ctx, cfg);
        }
        Exit::Signal(s) => {
            rec.signal = Some(s);
            let rec = fail(rec, RunStatus::Crash, format!("killed by {}", crate::process::signal(s)), &out.stderr_path, &out.stderr_tail);
            return disk_full_check(rec, out, ctx, cfg);
        }
        Exit::Timeout => {
            let msg = format!("ran past the {} s timeout; its process group was killed", b.timeout_s);
            return fail(rec, RunStatus::Timeout, msg, &out.stderr_path, &out.stderr_tail);
        }
        Exit::Interrupted => {
            rec.status = RunStatus::Interrupted;
            rec.error = Some("interrupted".into());
            return rec;
        }
    }
    rec.exit_code = Some(0);
    let stdout_tail = last_lines(&out.stdout_tail, &out.stdout_path);
    if let Err(msg) = read_report(&mut rec, &out.summary_lines) {
        let rec = fail(rec, RunStatus::Invalid, msg, &out.stdout_path, &out.stdout_tail).with_context_tail(&stdout_tail);
        return disk_full_check(rec, out, ctx, cfg);
    }
    if let Some(c) = &rec.check {
        if !c.passed {
            let detail = match (&c.message, c.max_abs_err, c.tolerance) {
                (Some(m), _, _) => m.clone(),
                (None, Some(e), Some(t)) => format!("max abs error {e:.3e} > tolerance {t:.3e}"),
                _ => "the benchmark reported a failed check".into(),
            };
            rec.status = RunStatus::Invalid;
            rec.error = Some(format!("correctness check failed: {detail}"));
            return rec;
        }
    }
    let roots = [ctx.out_dir.as_path(), ctx.dir, ctx.repo_root];
    read_hlo(&mut rec, &roots);
    read_kernel_body(&mut rec, &roots);
    read_snapshots(&mut rec, cfg, &roots);
    if rec.trace.is_some() && cfg.trace.latency != LatencySource::Host {
        read_trace(&mut rec, cfg, &roots);
    }
    if cfg.trace.latency == LatencySource::Trace && rec.latency_source.as_deref() != Some("trace") {
        let why = rec.trace_error.clone().unwrap_or_else(|| "the run names no trace (result file field \"trace\")".into());
        rec.status = RunStatus::Invalid;
        rec.error = Some(format!("[trace] latency = \"trace\", but no kernel time could be read from the trace: {why}"));
        return rec;
    }
    // One roofline per run: the physics gate and the deciding metric read the same figures.
    let roofline = hw.zip(rec.latency_ms).map(|(hw, lat)| crate::metrics::roofline(rec.flops, rec.bytes, rec.min_bytes, lat, hw));
    if let Err(msg) = physics_gate(&rec, roofline.as_ref(), hw) {
        rec.status = RunStatus::Invalid;
        rec.error = Some(msg);
        return rec;
    }
    match metric_value(&rec, cfg.score.metric, roofline.as_ref()).and_then(|v| usable_value(&rec, cfg.score.metric, v)) {
        Ok(v) => rec.value = Some(v),
        Err(msg) => {
            rec.status = RunStatus::Invalid;
            rec.error = Some(msg);
        }
    }
    rec
}

/// No kernel beats the roofline: a run claiming more than 100% of peak FLOP/s or bandwidth,
/// i.e. a latency below max(compute-only, memory-only) for its FLOPs and bytes, measured
/// something else (an unwaited asynchronous call, a wrong FLOP or byte count, a cache hit),
/// or `[hardware]` understates the chip. Such a run is invalid, whatever its value. Only a floor
/// bounds a run: `min_bytes` (each input read once, each output written once) when the benchmark
/// gives it, since its `bytes` with re-reads is a model that a cache beats (on an H200 the
/// example's K/V re-reads come from L2, and its true 0.37 ms at seq 16384 read as 122% of HBM
/// bandwidth); `bytes` alone when it is all the benchmark gives. Bytes the compiler estimated
/// are no claim at all, so only FLOPs bound such a run.
pub fn physics_gate(rec: &RunRecord, m: Option<&crate::metrics::Metrics>, hw: Option<&Hardware>) -> Result<(), String> {
    let fix = "check that every timed call is waited on (jax.block_until_ready), that \"flops\" and \"bytes\" \
               count one call, and that [hardware] names this chip";
    if let (Some(m), Some(hw)) = (m, hw) {
        let lat = m.latency_ms;
        // The memory floor: the minimum bytes' time when given, else the bytes' unless the
        // compiler estimated them.
        let memory_ms = match (m.min_memory_ms, rec.compiler_bytes) {
            (Some(floor), _) => Some(floor),
            (None, true) => None,
            (None, false) => m.memory_only_ms,
        };
        let floor = match (m.compute_only_ms, memory_ms) {
            (Some(c), Some(b)) => Some(c.max(b)),
            (c, b) => c.or(b),
        };
        if let Some(floor) = floor {
            if lat < floor {
                // A floor time over the latency is the share of peak the run claims.
                let mut claims = vec![];
                if let Some(u) = m.compute_only_ms.map(|c| c / lat * 100.0).filter(|u| *u > 100.0) {
                    claims.push(format!("{u:.0}% of peak FLOP/s"));
                }
                if let Some(b) = memory_ms.map(|b| b / lat * 100.0).filter(|b| *b > 100.0) {
                    claims.push(format!("{b:.0}% of peak bandwidth"));
                }
                return Err(format!(
                    "physics gate: {lat:.4} ms is faster than the roofline allows ({}; the lower bound for its FLOPs and {} \
                     is {floor:.4} ms on {} TFLOP/s, {} GB/s); {fix}",
                    claims.join(", "),
                    if rec.min_bytes.is_some() { "minimum bytes" } else { "bytes" },
                    hw.peak_tflops,
                    hw.hbm_gbps
                ));
            }
        }
    }
    if let Some(r) = &rec.reported {
        for (what, v) in [("util", r.util_pct), ("BW", r.bw_pct)] {
            if let Some(v) = v.filter(|v| *v > 100.0) {
                return Err(format!("physics gate: the benchmark reports {what}={v}%, above 100% of the chip's peak; {fix}"));
            }
        }
    }
    Ok(())
}

impl RunRecord {
    fn with_context_tail(mut self, tail: &str) -> Self {
        if !tail.is_empty() {
            if let Some(e) = &mut self.error {
                e.push_str("\n--- last lines of stdout ---\n");
                e.push_str(tail);
            }
        }
        self
    }
}

/// The last lines of a stream: from the run's memory (`kept`, which a full disk cannot lose), or
/// from its log when the executor kept none (a scripted one).
fn last_lines(kept: &str, log: &Path) -> String {
    if kept.is_empty() {
        return executor::tail(log, 10);
    }
    let lines: Vec<&str> = kept.lines().collect();
    lines[lines.len().saturating_sub(10)..].join("\n")
}

/// Free space under which a file system counts as full when a run fails on it.
pub const FULL_DISK_BYTES: u64 = 1 << 20;

/// A failed run on a full disk is the machine's fault, whatever the benchmark said (its message
/// may be lost, or may not name the cause): when a log could not be written for lack of space,
/// or a file system the run writes to (its `RATCHET_OUT`, its checkout, the temporary directory)
/// has under [`FULL_DISK_BYTES`] free, the error says so. Its wording names "No space left on
/// device", which `infra::says_no_space` reads as the machine's fault.
fn disk_full_check(mut rec: RunRecord, out: &executor::RunOutput, ctx: &RunContext, cfg: &Config) -> RunRecord {
    let log_full = out.log_error.as_deref().filter(|e| infra::says_no_space(e));
    let tmp = cfg.benchmark.env.get("TMPDIR").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let full = [ctx.out_dir.as_path(), ctx.dir, tmp.as_path()]
        .into_iter()
        .find_map(|d| infra::free_bytes(d).filter(|&f| f < FULL_DISK_BYTES).map(|f| (d.to_path_buf(), f)));
    let why = match (log_full, full) {
        (_, Some((dir, free))) => format!("the file system of {} has {} KiB free", dir.display(), free >> 10),
        (Some(e), None) => format!("the run's log could not be written ({e})"),
        (None, None) => return rec,
    };
    let note = format!(
        "the disk is full (No space left on device): {why}; the run most likely failed for lack of space, not because of the \
         hypothesis; free disk space there, then run the experiment again"
    );
    rec.error = Some(match rec.error.take() {
        Some(e) => format!("{note}\n{e}"),
        None => note,
    });
    rec
}

fn fail(mut rec: RunRecord, status: RunStatus, msg: String, log: &Path, kept: &str) -> RunRecord {
    rec.status = status;
    let tail = last_lines(kept, log);
    let name = log.file_name().and_then(|n| n.to_str()).unwrap_or("log");
    rec.error = Some(if tail.is_empty() || status == RunStatus::Invalid {
        msg
    } else {
        // The first line is what a results row shows: name the benchmark's own last error
        // there (`ratchet_bench: error: compiling the kernel failed: ... RESOURCE_EXHAUSTED`).
        let head = match last_error_line(&tail) {
            Some(e) => format!("{msg}: {e}"),
            None => msg,
        };
        format!("{head}\n--- last lines of {name} ---\n{tail}")
    });
    rec
}

/// The last line of a log tail that reports an error (`...Error: ...`, `error: ...`), trimmed
/// to a row's length.
fn last_error_line(tail: &str) -> Option<String> {
    const MAX: usize = 200;
    let line = tail.lines().rev().map(str::trim).find(|l| {
        let lower = l.to_ascii_lowercase();
        lower.contains("error:") || lower.contains("error(") || lower.starts_with("error")
    })?;
    Some(if line.chars().count() > MAX { format!("{}...", line.chars().take(MAX).collect::<String>()) } else { line.to_string() })
}

/// Count the ops of the HLO text the run dumped; a missing or unreadable file only loses the
/// counts. A path outside the run's places, or not a regular file, is dropped from the record
/// (later readers, such as the no-op check, then never open it).
fn read_hlo(rec: &mut RunRecord, roots: &[&Path]) {
    let Some(p) = rec.hlo.clone() else { return };
    match safe_read::confine(&p, roots).and_then(|real| safe_read::read_text_capped(&real, safe_read::MAX_HLO_BYTES)) {
        Ok(text) => rec.hlo_stats = Some(crate::trace::hlo_stats_from_text(&text)),
        Err(_) => rec.hlo = None,
    }
}

/// Count the ops of the Pallas kernel bodies the run decoded; like the HLO, a missing or
/// unreadable file only loses the counts (and a path outside the run's places is dropped).
fn read_kernel_body(rec: &mut RunRecord, roots: &[&Path]) {
    let Some(p) = rec.kernel_body.clone() else { return };
    match safe_read::confine(&p, roots).and_then(|real| safe_read::read_text_capped(&real, safe_read::MAX_HLO_BYTES)) {
        Ok(text) => rec.kernel_ops = crate::trace::kernel_body::parse_kernel_bodies(&text).unwrap_or_default(),
        Err(_) => rec.kernel_body = None,
    }
}

/// What a run's traces are read for: the kernel's time per execution, nothing more.
fn kernel_times_only(cfg: &Config, rec: &RunRecord) -> crate::trace::AnalyzeOptions {
    crate::trace::AnalyzeOptions { kernel: cfg.trace.kernel.clone().or_else(|| rec.kernel.clone()), times_only: true }
}

/// Summarise each deep snapshot by the kernel's median time in it (failures are kept per snapshot).
fn read_snapshots(rec: &mut RunRecord, cfg: &Config, roots: &[&Path]) {
    let opts = kernel_times_only(cfg, rec);
    for s in &mut rec.snapshots {
        match safe_read::check_trace_path(&s.path, roots).map_err(anyhow::Error::from).and_then(|p| crate::trace::analyze(&p, &opts)) {
            Ok(report) => {
                if let Some(k) = report.kernel {
                    s.kernel_median_us = Some(k.median_us);
                    s.executions = k.executions;
                }
            }
            Err(e) => s.error = Some(format!("{e:#}")),
        }
    }
}

/// Take the kernel's time from the run's trace: the device's (or the CPU executor's) view of
/// the kernel, free of dispatch and host waits. On failure the host timings stay in place.
fn read_trace(rec: &mut RunRecord, cfg: &Config, roots: &[&Path]) {
    let Some(path) = rec.trace.clone() else { return };
    let opts = kernel_times_only(cfg, rec);
    match safe_read::check_trace_path(&path, roots).map_err(anyhow::Error::from).and_then(|p| crate::trace::analyze(&p, &opts)) {
        // A trace that contradicts the host's own steps keeps the host's timing.
        Ok(report) if report.host_contradiction().is_some() => rec.trace_error = report.host_contradiction(),
        Ok(report) => match report.kernel {
            Some(k) if k.executions > 0 && k.median_us > 0.0 => {
                rec.latency_ms = Some(k.median_us / 1e3);
                rec.latency_source = Some("trace".into());
                rec.trace_kernel = Some(TraceKernel {
                    name: k.name,
                    executions: k.executions,
                    median_us: k.median_us,
                    per_execution_us: k.per_execution_us,
                    source: report.source,
                    capture: report.capture,
                });
            }
            _ => rec.trace_error = Some("the trace holds no execution of the kernel".into()),
        },
        Err(e) => rec.trace_error = Some(format!("{e:#}")),
    }
}

/// Fill the record from the result file, or else from RESULT/REGIME lines on stdout.
fn read_report(rec: &mut RunRecord, summary_lines: &[String]) -> Result<(), String> {
    let result_path = rec.out_dir.join(RESULT_FILE);
    if result_path.exists() {
        let r = protocol::read_result_file(&result_path).map_err(|e| e.0)?;
        let resolve = |p: &String| {
            let p = PathBuf::from(p);
            if p.is_absolute() {
                p
            } else {
                rec.out_dir.join(p)
            }
        };
        rec.latency_ms = crate::metrics::median(&r.latencies_ms);
        rec.host_latency_ms = rec.latency_ms;
        rec.latency_source = Some("host".into());
        rec.iter_latencies_ms = r.latencies_ms.clone();
        rec.flops = r.flops;
        rec.bytes = r.bytes;
        rec.compiler_bytes = r.compiler_figures.as_ref().is_some_and(|c| c.contains_key("bytes"));
        rec.min_bytes = r.min_bytes;
        rec.check = r.check.clone();
        rec.trace = r.trace.as_ref().map(resolve);
        rec.hlo = r.hlo.as_ref().map(resolve);
        rec.kernel = r.kernel.clone();
        rec.backend = r.backend.clone();
        rec.device = r.device.clone();
        rec.throttled = r.throttled;
        rec.meta = r.meta.clone();
        rec.kernel_body = r.kernel_body.as_ref().map(resolve);
        rec.environment = r.environment.clone();
        rec.phases_s = r.phases_s.clone();
        rec.kernel_calls = r.kernel_calls;
        rec.peak_memory_bytes = r.peak_memory_bytes;
        rec.snapshots = r
            .snapshots
            .iter()
            .flatten()
            .map(|s| Snapshot {
                path: resolve(&s.path),
                step: s.step,
                time_s: s.time_s,
                source: s.source.clone(),
                kernel_median_us: None,
                executions: 0,
                error: None,
            })
            .collect();
        return Ok(());
    }
    let stdout = summary_lines.join("\n");
    match protocol::parse_legacy(&stdout).map_err(|e| e.0)? {
        Some(l) => {
            rec.latency_ms = Some(l.latency_ms);
            rec.latency_source = Some("reported".into());
            rec.reported = Some(l);
            Ok(())
        }
        None => Err(format!(
            "the benchmark exited 0 but wrote no {RESULT_FILE} in $RATCHET_OUT and printed no RESULT: line; \
             see docs/protocol.md for what it must report"
        )),
    }
}

/// The decision works on log ratios of values, so a value must be positive and finite with a
/// finite logarithm of any ratio to another (|ln v| < 460 keeps every difference far from
/// overflow). Anything else (score=0, a trace time of 1e-320 ms, an infinite tflops) makes the
/// run invalid with the reason instead of reaching the statistics.
fn usable_value(rec: &RunRecord, metric: Metric, v: f64) -> Result<f64, String> {
    if let Some(l) = rec.latency_ms.filter(|l| !protocol::latency_in_range(*l)) {
        return Err(format!(
            "latency {l:e} ms ({}) is not a usable time; it must lie in [{:e}, {:e}] ms",
            rec.latency_source.as_deref().unwrap_or("reported"),
            protocol::MIN_LATENCY_MS,
            protocol::MAX_LATENCY_MS
        ));
    }
    if v.is_finite() && v > 0.0 && v.ln().abs() < 460.0 {
        return Ok(v);
    }
    Err(format!(
        "the deciding metric {} = {v:e} is not a usable value: it must be a positive finite number (between 1e-200 and 1e200)",
        metric.as_str()
    ))
}

/// The deciding metric of one sample.
/// `m` is the run's roofline (`None` without `[hardware]`).
pub fn metric_value(rec: &RunRecord, metric: Metric, m: Option<&crate::metrics::Metrics>) -> Result<f64, String> {
    let lat = rec.latency_ms.ok_or("no latency")?;
    let reported = rec.reported.as_ref();
    let computed = |f: fn(&crate::metrics::Metrics) -> Option<f64>| m.and_then(f);
    match metric {
        Metric::Latency => Ok(lat),
        Metric::Score => computed(|m| m.score).or_else(|| reported.and_then(|r| r.score)).ok_or_else(|| {
            "the deciding metric is score (util x 100 / latency), but the run reported no FLOP count \
             (result file field \"flops\") and no score=; report flops, or set [score] metric = \"latency\""
                .to_string()
        }),
        Metric::Tflops => computed(|m| m.tflops).or_else(|| reported.and_then(|r| r.tflops)).ok_or_else(|| {
            "the deciding metric is tflops, but the run reported no FLOP count (\"flops\") and no tflops=; \
             report flops, or set [score] metric = \"latency\""
                .to_string()
        }),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_crash_names_the_benchmarks_last_error_line() {
        let tail = "Traceback (most recent call last):\n  File \"x.py\", line 3\njax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Shared memory size limit exceeded\nratchet_bench: error: compiling the kernel failed: JaxRuntimeError: RESOURCE_EXHAUSTED\n";
        assert_eq!(
            super::last_error_line(tail).as_deref(),
            Some("ratchet_bench: error: compiling the kernel failed: JaxRuntimeError: RESOURCE_EXHAUSTED")
        );
        assert_eq!(super::last_error_line("all fine\nexiting\n"), None);
        assert!(super::last_error_line(&format!("error: {}", "x".repeat(500))).unwrap().chars().count() <= 203);
    }

    use super::*;

    fn run(side: Side, status: RunStatus, value: f64, pair: Option<usize>) -> RunRecord {
        let text = format!(
            r#"{{"experiment":"1","run":0,"side":"{}","commit":"c","time":"t","status":"{}","wall_s":1.0,"value":{value},"out_dir":"/x"}}"#,
            if side == Side::Incumbent { "incumbent" } else { "candidate" },
            if status == RunStatus::Ok { "ok" } else { "crash" }
        );
        let mut r: RunRecord = serde_json::from_str(&text).unwrap();
        r.pair = pair;
        r.phase = pair.map(|_| "main".to_string());
        r
    }

    #[test]
    fn a_pair_with_a_failed_run_drops_out_whole_and_shifts_no_other() {
        use RunStatus::*;
        use Side::*;
        // Pair 0 complete, pair 1's candidate crashed, pair 2 complete.
        let runs = [
            run(Candidate, Ok, 5.0, Some(0)),
            run(Incumbent, Ok, 10.0, Some(0)),
            run(Incumbent, Ok, 11.0, Some(1)),
            run(Candidate, Crash, 0.0, Some(1)),
            run(Incumbent, Ok, 12.0, Some(2)),
            run(Candidate, Ok, 6.0, Some(2)),
        ];
        assert_eq!(pairs_of(&runs), vec![(10.0, 5.0), (12.0, 6.0)]);
        // Records from before runs carried their pair: two at a time.
        let old: Vec<RunRecord> = runs
            .iter()
            .cloned()
            .map(|mut r| {
                r.pair = None;
                r.phase = None;
                r
            })
            .collect();
        assert_eq!(pairs_of(&[old[0].clone(), old[1].clone(), old[4].clone(), old[5].clone()]), vec![(10.0, 5.0), (12.0, 6.0)]);
    }
}
