//! How trials reach devices: the [`Engine`] trait that the controller drives, and the types it
//! persists in the journal so a restarted controller can find (or cancel) every trial in flight.
//! Engines only start, watch and stop workers; they never read a result or decide anything.

use crate::error::Result;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// One trial: the candidate measured against the incumbent on one device, by a worker
/// (`ratchet worker ...`) that writes `out_dir` and decides nothing.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TrialSpec {
    /// Unique within the repository (the experiment id it will be recorded under, plus an
    /// attempt suffix for a re-measurement of a stale winner).
    pub id: String,
    /// The repository the worker fetches both commits from: a path every worker can read (the
    /// repository itself on one host, a shared bare repository or a bundle on a cluster).
    pub repo: PathBuf,
    /// Commit ids (full hex).
    pub incumbent: String,
    pub candidate: String,
    /// The run directory the worker fills; the trial is finished when its result file (written
    /// last, atomically) exists there.
    pub out_dir: PathBuf,
}

/// An engine's own name for a submitted trial (a pid, a Slurm `jobid_taskid`, a hook's token),
/// stored in the journal before the controller waits on it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Hash)]
pub struct JobHandle {
    pub trial: String,
    pub engine_id: String,
    /// The local device slot it runs on, where the engine has slots.
    pub slot: Option<usize>,
}

/// What an engine knows about a job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobState {
    Queued,
    Running,
    /// The worker exited; whether it produced a result is read from `out_dir`, not from here.
    Finished,
    /// The engine lost it or it was killed (the reason, as the engine reports it).
    Failed(String),
    /// Queued, but the engine will not start it by itself (held, its nodes drained or down, a
    /// dependency never met): the reason, as the engine reports it.
    Stuck(String),
}

/// A way of running workers: local device slots, Slurm, or a user's submit/poll/cancel hook.
pub trait Engine {
    /// For messages and the journal (`local`, `slurm`, `hook`).
    fn name(&self) -> &str;
    /// How many trials may be in flight at once.
    fn capacity(&self) -> usize;
    /// Start these trials; `worker` is the argument vector of the worker command for each trial
    /// (same order), to be run with the engine's device binding. Slurm submits one job array.
    fn submit(&mut self, trials: &[TrialSpec], worker: &[Vec<String>]) -> Result<Vec<JobHandle>>;
    fn poll(&mut self, job: &JobHandle) -> Result<JobState>;
    /// Stop a job and every process it started, and wait until it has ended; a job already
    /// gone is not an error.
    fn cancel(&mut self, job: &JobHandle) -> Result<()>;
    /// Start stopping a job as [`Engine::cancel`] does, without waiting for it to end: the
    /// controller asks [`Engine::stopped`] until it has. By default the stop is the cancel.
    fn stop(&mut self, job: &JobHandle) -> Result<()> {
        self.cancel(job)
    }
    /// Whether a job [`Engine::stop`] was asked for has ended (the error of a stop that failed).
    fn stopped(&mut self, _job: &JobHandle) -> Result<bool> {
        Ok(true)
    }
    /// The device the next submitted trial will run on, as the noise history names it: a local
    /// slot's ([`slot_device`]), or on a cluster, whose node is not known before the trial
    /// starts, the kind of device every node of its request has ([`device_kind`]). The trial
    /// borrows that history and feeds it. `None`: it decides on its own spread.
    fn next_device(&self) -> Option<String> {
        None
    }
    /// The job of a trial that was submitted but whose handle was never journaled (the
    /// controller died between the engine taking it and the journal's write), found by the name
    /// the engine gave it; `None` when the engine has no such job or cannot look one up.
    fn find(&mut self, _trial: &TrialSpec) -> Result<Option<JobHandle>> {
        Ok(None)
    }
    /// Bring the run directory to the controller where it is not on a shared filesystem (a
    /// hook's fetch command); a no-op by default.
    fn fetch(&mut self, _job: &JobHandle, _trial: &TrialSpec) -> Result<()> {
        Ok(())
    }
}

/// A local slot's device as the noise history names it: `host slot 3` where the slot binds a
/// device, the host alone where it binds none (every such slot measures on the same host).
pub fn slot_device(host: &str, slot: usize, bound: bool) -> String {
    if bound {
        format!("{host} slot {slot}")
    } else {
        host.to_string()
    }
}

/// A cluster engine's kind of device as the noise history names it: `[engine] device_kind` when
/// set (one GPU model, say), else what the engine asks for (`request`; `None`: nothing that
/// names a kind, so no history).
pub fn device_kind(engine: &str, configured: Option<&str>, request: Option<String>) -> Option<String> {
    match configured {
        Some(k) => Some(format!("{engine} {k}")),
        None => request.map(|r| format!("{engine} {r}")),
    }
}

/// The name a trial's job carries on an external engine (Slurm's job name, Ray's submission id,
/// a hook's `RATCHET_JOB_NAME`): `ratchet-<hash of the engine's work directory>-<trial>`, unique
/// to this repository's state and the trial, so that a restarted controller finds (and
/// `ratchet recover` cancels) a job whose handle it never journaled.
pub fn job_name(work_dir: &std::path::Path, trial: &str) -> String {
    let dir = absolute(work_dir).unwrap_or_else(|_| work_dir.to_path_buf());
    // FNV-1a: stable across builds (the name must be the same for the next controller).
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in dir.to_string_lossy().bytes() {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    format!("ratchet-{:08x}-{trial}", h as u32)
}

/// The handle of a job an engine named before its launcher answered: the job's name and its task
/// (`NAME[i]`; an array's task i, else 0), journaled at once while the submission runs beside
/// the controller.
pub fn named_handle(name: &str, task: usize) -> String {
    format!("{name}[{task}]")
}

/// The name and task of a [`named_handle`]; `None` for any other engine id (a launcher's own id
/// or token, as handles were journaled before submissions ran beside the controller).
pub fn parse_named_handle(engine_id: &str) -> Option<(String, u32)> {
    let (name, task) = engine_id.strip_suffix(']')?.rsplit_once('[')?;
    let task = task.parse::<u32>().ok()?;
    (name.starts_with("ratchet-") && !name.is_empty()).then(|| (name.to_string(), task))
}

/// `p` made absolute against the current directory (an engine's files are named to processes
/// that run elsewhere).
pub(super) fn absolute(p: &std::path::Path) -> Result<std::path::PathBuf> {
    if p.is_absolute() {
        Ok(p.to_path_buf())
    } else {
        Ok(std::env::current_dir()?.join(p))
    }
}
