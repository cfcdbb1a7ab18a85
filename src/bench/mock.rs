//! A scripted [`Executor`] for exact, in-process tests of the whole loop: it spawns nothing and
//! writes what a benchmark would (the result file and logs in `$RATCHET_OUT`) for the ending
//! that its script gives each run, so everything after the spawn (reading the report, the
//! physics gate, deciding, keeping or reverting, recording) is the real code.

use super::executor::{Executor, Exit, RunOutput, RunSpec};
use super::protocol::RESULT_FILE;
use super::Side;
use crate::stats::rng::Rng;
use std::path::Path;

/// How one scripted run ends.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Exits 0 reporting `RATCHET_ITERS` latencies around this median (ms).
    Latency(f64),
    /// As `Latency`, marked throttled by the benchmark.
    Throttled(f64),
    /// Exits with this (non-zero) code.
    Crash(i32),
    /// Killed by this signal.
    Signal(i32),
    /// Runs past its timeout and is killed.
    Timeout,
    /// Stopped by a signal to ratchet.
    Interrupted,
    /// Exits 0 without reporting anything: an invalid run.
    Silent,
    /// Exits 0 with a latency, but its correctness check failed.
    BadCheck(f64),
    /// Exits 0 with a latency and this compiled HLO text.
    Hlo(f64, String),
    /// Exits 0 with a latency (ms) and this FLOP count instead of the executor's.
    Claims(f64, f64),
    /// Exits 0 with a latency (ms) and a copy of this capture as its trace, whose kernel is the
    /// module `kernel` names.
    Trace { ms: f64, capture: std::path::PathBuf, kernel: String },
}

impl Step {
    /// Read a step from text: `latency 8.5`, `throttled 10`, `crash 3`, `signal 9`, `timeout`,
    /// `interrupted`, `silent`, `badcheck 10`.
    pub fn parse(text: &str) -> Option<Step> {
        let mut w = text.split_whitespace();
        let (kind, arg) = (w.next()?, w.next());
        let ms = || arg.and_then(|a| a.parse::<f64>().ok());
        let code = || arg.and_then(|a| a.parse::<i32>().ok());
        Some(match kind {
            "latency" => Step::Latency(ms()?),
            "throttled" => Step::Throttled(ms()?),
            "badcheck" => Step::BadCheck(ms()?),
            "crash" => Step::Crash(code()?),
            "signal" => Step::Signal(code()?),
            "timeout" => Step::Timeout,
            "interrupted" => Step::Interrupted,
            "silent" => Step::Silent,
            _ => return None,
        })
    }
}

/// One run asked of the mock.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    pub side: Side,
    /// Runs of this side before this one.
    pub n: usize,
    /// The checkout the run is in.
    pub dir: &'a Path,
}

/// The script: the step of each run.
pub type Script = Box<dyn FnMut(&Call) -> Step>;

/// Runs nothing; answers each run from its script.
pub struct MockExecutor {
    script: Script,
    /// Runs so far per side: [incumbent, candidate].
    counts: [usize; 2],
    /// Relative spread of one run's iterations (default 1%), drawn from a seeded generator so
    /// every test is exact.
    pub cv: f64,
    /// FLOPs and bytes each run reports (for the roofline and the score).
    pub flops: f64,
    pub bytes: f64,
    /// Every run in order: its side and the step it got.
    pub log: Vec<(Side, Step)>,
}

impl MockExecutor {
    pub fn new(script: impl FnMut(&Call) -> Step + 'static) -> MockExecutor {
        MockExecutor { script: Box::new(script), counts: [0, 0], cv: 0.01, flops: 1e9, bytes: 1e7, log: vec![] }
    }

    /// The same step for every run of each side.
    pub fn sides(incumbent: Step, candidate: Step) -> MockExecutor {
        MockExecutor::new(move |c| match c.side {
            Side::Incumbent => incumbent.clone(),
            Side::Candidate => candidate.clone(),
        })
    }

    /// Each run's step is read from `file` in the checkout it runs in (see [`Step::parse`]), so a
    /// hypothesis that edits the file changes the benchmark's behaviour, as a kernel edit would.
    /// A missing or unreadable file is a crash (exit 2).
    pub fn from_checkout(file: &str) -> MockExecutor {
        let file = file.to_string();
        MockExecutor::new(move |c| std::fs::read_to_string(c.dir.join(&file)).ok().and_then(|t| Step::parse(&t)).unwrap_or(Step::Crash(2)))
    }

    /// Runs made of `side`.
    pub fn runs(&self, side: Side) -> usize {
        self.counts[(side == Side::Candidate) as usize]
    }
}

fn env<'a>(spec: &'a RunSpec, key: &str) -> Option<&'a str> {
    spec.env.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

impl Executor for MockExecutor {
    fn run(&mut self, spec: &RunSpec) -> std::io::Result<RunOutput> {
        let side = match env(spec, "RATCHET_SIDE") {
            Some("incumbent") => Side::Incumbent,
            Some("candidate") => Side::Candidate,
            other => return Err(std::io::Error::other(format!("mock executor: RATCHET_SIDE is {other:?}"))),
        };
        let run: u64 = env(spec, "RATCHET_RUN").and_then(|v| v.parse().ok()).unwrap_or(0);
        let iters: usize = env(spec, "RATCHET_ITERS").and_then(|v| v.parse().ok()).unwrap_or(10).max(1);
        let slot = (side == Side::Candidate) as usize;
        let step = if spec.cancel.is_cancelled() {
            Step::Interrupted
        } else {
            (self.script)(&Call { side, n: self.counts[slot], dir: &spec.dir })
        };
        self.counts[slot] += 1;
        self.log.push((side, step.clone()));

        std::fs::create_dir_all(&spec.log_dir)?;
        let stdout_path = spec.log_dir.join("stdout.log");
        let stderr_path = spec.log_dir.join("stderr.log");
        std::fs::write(&stdout_path, format!("mock benchmark: {step:?} side={} run={run}\n", side.as_str()))?;
        let stderr = match step {
            Step::Crash(_) | Step::Signal(_) => "Traceback (most recent call last):\nRuntimeError: mock kernel exploded\n",
            _ => "",
        };
        std::fs::write(&stderr_path, stderr)?;
        let mut rng = Rng::new(run * 1000 + slot as u64 + 1);
        let mut report = |median: f64, throttled: bool, passed: bool, hlo: Option<&str>, flops: Option<f64>| -> std::io::Result<()> {
            let lats: Vec<f64> = (0..iters).map(|_| median * (1.0 + self.cv * rng.normal()).max(0.05)).collect();
            let mut r = serde_json::json!({
                "version": 1,
                "latencies_ms": lats,
                "flops": flops.unwrap_or(self.flops),
                "bytes": self.bytes,
                "check": {"passed": passed, "max_abs_err": if passed { 1e-6 } else { 0.5 }, "tolerance": 1e-3},
            });
            if throttled {
                r["throttled"] = true.into();
            }
            if let Some(text) = hlo {
                std::fs::write(spec.log_dir.join("kernel.hlo.txt"), text)?;
                r["hlo"] = "kernel.hlo.txt".into();
            }
            if let Step::Trace { capture, kernel, .. } = &step {
                let name = capture.file_name().and_then(|n| n.to_str()).unwrap_or("capture.xplane.pb");
                std::fs::copy(capture, spec.log_dir.join(name))?;
                r["trace"] = name.into();
                r["kernel"] = kernel.as_str().into();
            }
            std::fs::write(spec.log_dir.join(RESULT_FILE), serde_json::to_vec(&r).map_err(std::io::Error::other)?)
        };
        let exit = match &step {
            Step::Latency(ms) => report(*ms, false, true, None, None).map(|_| Exit::Code(0))?,
            Step::Throttled(ms) => report(*ms, true, true, None, None).map(|_| Exit::Code(0))?,
            Step::BadCheck(ms) => report(*ms, false, false, None, None).map(|_| Exit::Code(0))?,
            Step::Hlo(ms, text) => report(*ms, false, true, Some(text), None).map(|_| Exit::Code(0))?,
            Step::Claims(ms, flops) => report(*ms, false, true, None, Some(*flops)).map(|_| Exit::Code(0))?,
            Step::Trace { ms, .. } => report(*ms, false, true, None, None).map(|_| Exit::Code(0))?,
            Step::Silent => Exit::Code(0),
            Step::Crash(c) => Exit::Code(*c),
            Step::Signal(s) => Exit::Signal(*s),
            Step::Timeout => Exit::Timeout,
            Step::Interrupted => Exit::Interrupted,
        };
        // A fixed, short wall time: summaries and budgets stay exact.
        Ok(RunOutput {
            exit,
            wall_s: 0.01,
            stdout_path,
            stderr_path,
            summary_lines: vec![],
            stdout_tail: String::new(),
            stderr_tail: String::new(),
            log_error: None,
            forked: false,
        })
    }
}
