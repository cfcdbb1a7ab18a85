//! An engine that runs each trial's worker in this process, on a given executor (the mock's, in
//! tests): the controller's whole code runs exactly, and what its workers cost is kept apart
//! from what the controller costs (`cargo bench --bench controller`).

use super::engine::{Engine, JobHandle, JobState, TrialSpec};
use super::worker::{self, WorkerOptions};
use crate::bench::executor::Executor;
use crate::error::Result;
use crate::events::{Discard, Effects};
use crate::signals::Cancel;
use std::collections::VecDeque;
use std::time::Duration;

/// What this thread has spent so far: CPU time, bytes read (`rchar`: from the page cache or the
/// disk) and fsyncs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Cost {
    pub cpu: Duration,
    pub read_bytes: u64,
    pub syncs: u64,
}

impl Cost {
    /// This thread's totals (Linux: the thread's CPU clock and `/proc/thread-self/io`).
    pub fn of_this_thread() -> Cost {
        // SAFETY: clock_gettime fills the timespec it is given.
        let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        let read_bytes = std::fs::read_to_string("/proc/thread-self/io")
            .ok()
            .and_then(|t| t.lines().find_map(|l| l.strip_prefix("rchar:").and_then(|v| v.trim().parse().ok())))
            .unwrap_or(0);
        Cost { cpu: Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32), read_bytes, syncs: crate::fsutil::syncs() }
    }

    /// What was spent after `before` (or: this, less `before`; never below zero).
    pub fn since(self, before: Cost) -> Cost {
        Cost {
            cpu: self.cpu.saturating_sub(before.cpu),
            read_bytes: self.read_bytes.saturating_sub(before.read_bytes),
            syncs: self.syncs.saturating_sub(before.syncs),
        }
    }

    pub fn add(&mut self, other: Cost) {
        self.cpu += other.cpu;
        self.read_bytes += other.read_bytes;
        self.syncs += other.syncs;
    }
}

/// Trials finish one per poll, in submission order; each worker runs in this process.
pub struct InlineEngine<E: Executor> {
    pub capacity: usize,
    pending: VecDeque<(TrialSpec, Vec<String>)>,
    pub exec: E,
    /// Every worker command line, in order.
    pub argvs: Vec<Vec<String>>,
    /// Stop the controller (as a kill would) right after this many workers wrote their result,
    /// before it has seen the last one finish.
    pub die_after: Option<(usize, Cancel)>,
    pub finished: usize,
    /// What [`Engine::next_device`] names: this host (as a local slot does), a cluster's kind of
    /// device; `None`: no history, the trials decide on their own spread.
    pub device: Option<String>,
    /// What the workers cost this thread (a worker is its own process in a real sweep).
    pub workers: Cost,
}

impl<E: Executor> InlineEngine<E> {
    pub fn new(capacity: usize, exec: E) -> Self {
        InlineEngine {
            capacity,
            pending: VecDeque::new(),
            exec,
            argvs: vec![],
            die_after: None,
            finished: 0,
            device: None,
            workers: Cost::default(),
        }
    }
}

impl<E: Executor> Engine for InlineEngine<E> {
    fn name(&self) -> &str {
        "inline"
    }
    fn capacity(&self) -> usize {
        self.capacity
    }
    fn next_device(&self) -> Option<String> {
        self.device.clone()
    }
    fn submit(&mut self, trials: &[TrialSpec], worker: &[Vec<String>]) -> Result<Vec<JobHandle>> {
        let mut hs = vec![];
        for (t, a) in trials.iter().zip(worker) {
            self.pending.push_back((t.clone(), a.clone()));
            self.argvs.push(a.clone());
            hs.push(JobHandle { trial: t.id.clone(), engine_id: t.id.clone(), slot: Some(self.pending.len() - 1) });
        }
        Ok(hs)
    }
    fn poll(&mut self, job: &JobHandle) -> Result<JobState> {
        if self.pending.front().map(|(t, _)| &t.id) != Some(&job.trial) {
            return Ok(if self.pending.iter().any(|(t, _)| t.id == job.trial) { JobState::Running } else { JobState::Finished });
        }
        let (t, argv) = self.pending.pop_front().expect("the front was just read");
        let arg = |k: &str| argv.iter().position(|a| a == k).map(|i| argv[i + 1].clone());
        let noise = |k: &str| arg(k).and_then(|s| worker::parse_noise(&s).ok());
        let o = WorkerOptions {
            repo: t.repo.clone(),
            incumbent: t.incumbent.clone(),
            candidate: t.candidate.clone(),
            out: t.out_dir.clone(),
            id: Some(t.id.clone()),
            config: arg("--config").map(Into::into),
            pairs: arg("--pairs").and_then(|p| p.parse().ok()),
            noise_scale: noise("--noise-scale"),
            sums_scale: noise("--sums-scale"),
            recheck: argv.iter().any(|a| a == "--recheck"),
            deep: false,
            work: None,
        };
        let before = Cost::of_this_thread();
        let exec: &mut dyn Executor = &mut self.exec;
        let ran = worker::run(&o, exec, &mut Effects::new(&mut Discard, Cancel::new()));
        self.workers.add(Cost::of_this_thread().since(before));
        ran?;
        self.finished += 1;
        if let Some((n, cancel)) = &self.die_after {
            if self.finished == *n {
                cancel.cancel();
                return Ok(JobState::Running);
            }
        }
        Ok(JobState::Finished)
    }
    fn cancel(&mut self, job: &JobHandle) -> Result<()> {
        self.pending.retain(|(t, _)| t.id != job.trial);
        Ok(())
    }
}
