//! The Ray engine: each trial is one Ray job (`ray job submit --no-wait`) named by the trial,
//! with the CPUs and GPUs of one trial as its entrypoint resources; every job in flight is
//! polled with one `ray list jobs` per poll interval and stopped with `ray job stop`.

use super::command::{shell_join, shell_quote, unanswered, Background, Call, Output, Stops};
use super::engine::{Engine, JobHandle, JobState, TrialSpec};
use crate::error::{Error, Kind, Result, WithPath};
use serde::Deserialize;
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The job server a local `ray start --head` listens on (Ray's own default for `ray job`).
pub const DEFAULT_ADDRESS: &str = "http://127.0.0.1:8265";
/// The least time between two listings of the cluster's jobs: each `ray` call is a Python
/// start (about 1.5 s of CPU), and the listing answers every trial in flight at once.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(5);
/// Jobs one listing asks for; a cluster with more than this falls back to one lookup per job.
const LIST_LIMIT: usize = 10_000;
/// The metadata key that ties a job to its trial's candidate commit, so that a job of an
/// earlier sweep with the same trial id is never taken for this one.
const CANDIDATE_KEY: &str = "ratchet_candidate";

/// What the Ray engine submits with.
#[derive(Debug, Clone)]
pub struct RayOptions {
    /// Trials in flight at once.
    pub capacity: usize,
    /// The cluster's job server (`--address`).
    pub address: String,
    /// Entrypoint resources of one trial (`--entrypoint-num-cpus`, `--entrypoint-num-gpus`; a
    /// whole number of GPUs, so that trials never share a device).
    pub cpus: f64,
    pub gpus: f64,
    /// More `ray job submit` options, after ratchet's own.
    pub submit_args: Vec<String>,
    /// The limit of each `ray` call (a `ray job stop` waits within it for the job to end).
    pub command_timeout: Duration,
    /// The least time between two `ray list jobs`.
    pub poll_interval: Duration,
    /// Where the generated job scripts go (under `ray/`); on a filesystem every Ray node sees
    /// at the same path, like the run directories.
    pub work_dir: PathBuf,
    /// The `ray` command (a virtual environment's `bin/ray`, say); `ray` on PATH by default.
    pub ray: PathBuf,
    /// `[engine] device_kind`: the kind of device every trial gets (its noise history's name).
    pub device_kind: Option<String>,
}

impl RayOptions {
    pub fn new(work_dir: impl Into<PathBuf>) -> RayOptions {
        RayOptions {
            capacity: 4,
            address: DEFAULT_ADDRESS.into(),
            cpus: 1.0,
            gpus: 1.0,
            submit_args: vec![],
            command_timeout: Duration::from_secs(60),
            poll_interval: DEFAULT_POLL_INTERVAL,
            work_dir: work_dir.into(),
            ray: "ray".into(),
            device_kind: None,
        }
    }
}

/// One job as `ray list jobs --format json --detail` prints it (the fields ratchet reads).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
struct RayJob {
    #[serde(default)]
    submission_id: Option<String>,
    #[serde(default)]
    status: String,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    error_type: Option<String>,
    #[serde(default)]
    driver_exit_code: Option<i64>,
    #[serde(default)]
    metadata: Option<HashMap<String, String>>,
}

pub struct RayEngine {
    opts: RayOptions,
    /// The latest listing of this repository's jobs.
    listing: Option<Listing>,
    /// The listing being taken, on a thread of its own.
    listing_call: Option<Background<Listing>>,
    /// Why the last listing failed (message, hint), until one succeeds.
    listing_failed: Option<(String, Option<String>)>,
    /// Each submission by submission id: `ray job submit` runs on a thread of its own.
    submits: HashMap<String, Submission>,
    /// Jobs taken by their name (a restarted controller's, whose handle was never journaled): the
    /// candidate commit each must carry to be this trial's.
    expected: HashMap<String, String>,
    /// The stops under way, each on a thread of its own.
    stops: Stops,
}

/// One `ray list jobs` (and, past `LIST_LIMIT`, the lookups of the jobs in flight it missed).
struct Listing {
    /// When it was asked for: a job submitted after that may be missing from it.
    started: Instant,
    jobs: HashMap<String, RayJob>,
}

/// A trial's `ray job submit`.
struct Submission {
    args: Vec<String>,
    state: Submit,
}

enum Submit {
    Running(Background<()>),
    /// Ray took it at this instant.
    Done(Instant),
    /// No job server answered: asked again from `again_at`; the controller hears the error at
    /// each poll (and bears it for `[engine] poll_grace_s`).
    Unanswered {
        message: String,
        hint: Option<String>,
        again_at: Instant,
    },
}

impl RayEngine {
    pub fn new(opts: RayOptions) -> RayEngine {
        RayEngine {
            opts,
            listing: None,
            listing_call: None,
            listing_failed: None,
            submits: HashMap::new(),
            expected: HashMap::new(),
            stops: Stops::default(),
        }
    }

    /// A trial's submission id: unique to this repository's state and the trial, so that a
    /// restarted controller finds (and `ray job stop` cancels) a job whose handle it never
    /// journaled.
    pub fn submission_id(&self, trial: &str) -> String {
        format!("{}{}", prefix(&self.opts), url_safe(trial))
    }

    /// The job script: the controller's environment (as sbatch's `--export=ALL` passes it,
    /// less what Ray sets per job), then the worker, its output in the run directory.
    fn job_script(trial: &TrialSpec, worker: &[String], env: &[(String, String)]) -> String {
        let mut s = String::from("#!/bin/sh\n");
        s.push_str(&format!("# Written by ratchet: trial {} as one Ray job.\n", trial.id));
        for (k, v) in env.iter().filter(|(k, _)| passes(k)) {
            s.push_str(&format!("export {k}={}\n", shell_quote(v)));
        }
        s.push_str(&format!("export RATCHET_TRIAL_ID={}\n", shell_quote(&trial.id)));
        let out = shell_quote(&trial.out_dir.to_string_lossy());
        s.push_str(&format!("cd {out} || exit 2\nexec {} >>worker.log 2>&1\n", shell_join(worker)));
        s
    }

    /// Write the trial's job script and start its `ray job submit` on a thread of its own.
    fn submit_one(&mut self, trial: &TrialSpec, worker: &[String]) -> Result<JobHandle> {
        let id = self.submission_id(&trial.id);
        let out_dir = super::engine::absolute(&trial.out_dir)?;
        std::fs::create_dir_all(&out_dir).with_path(&out_dir)?;
        let dir = super::engine::absolute(&self.opts.work_dir)?.join("ray");
        std::fs::create_dir_all(&dir).with_path(&dir)?;
        let script = dir.join(format!("{id}.sh"));
        let env: Vec<(String, String)> = std::env::vars().collect();
        let spec = TrialSpec { out_dir, ..trial.clone() };
        std::fs::write(&script, Self::job_script(&spec, worker, &env)).with_path(&script)?;
        // It may hold the controller's secrets (tokens in its environment): its owner only.
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o700)).with_path(&script)?;
        let metadata = serde_json::json!({ CANDIDATE_KEY: trial.candidate, "ratchet_trial": trial.id }).to_string();
        let mut args: Vec<String> = vec!["job".into(), "submit".into()];
        args.extend(address_args(&self.opts));
        args.extend([
            "--no-wait".to_string(),
            format!("--submission-id={id}"),
            format!("--entrypoint-num-cpus={}", self.opts.cpus),
            format!("--entrypoint-num-gpus={}", self.opts.gpus),
            format!("--metadata-json={metadata}"),
        ]);
        args.extend(self.opts.submit_args.iter().cloned());
        args.extend(["--".to_string(), "sh".into(), script.to_string_lossy().into_owned()]);
        // A fresh submission under this name is this trial's, whatever a lookup expected.
        self.expected.remove(&id);
        let state = Submit::Running(self.spawn_submit(&id, &args));
        self.submits.insert(id.clone(), Submission { args, state });
        Ok(JobHandle { trial: trial.id.clone(), engine_id: id, slot: None })
    }

    fn spawn_submit(&self, id: &str, args: &[String]) -> Background<()> {
        let (o, id, args) = (self.opts.clone(), id.to_string(), args.to_vec());
        Background::spawn(move || submit_job(&o, &id, &args))
    }

    /// Where the trial's submission stands: `Some` answers the poll (it is not Ray's yet, or
    /// Ray could not be reached), `None` once Ray has it. A refused submission is an error that
    /// stops the sweep, as a settings problem does.
    fn submission(&mut self, id: &str) -> Option<Result<JobState>> {
        let sub = self.submits.get_mut(id)?;
        let retry_pause = self.opts.poll_interval.max(Duration::from_secs(1));
        match &sub.state {
            Submit::Done(_) => None,
            Submit::Running(b) => match b.try_take() {
                None => Some(Ok(JobState::Queued)),
                Some(Ok(())) => {
                    sub.state = Submit::Done(Instant::now());
                    None
                }
                Some(Err(e)) if e.kind == Kind::Infrastructure => {
                    let (message, hint) = (e.message.clone(), e.hint.clone());
                    sub.state = Submit::Unanswered { message, hint, again_at: Instant::now() + retry_pause };
                    Some(Err(e))
                }
                Some(Err(e)) => {
                    self.submits.remove(id);
                    Some(Err(e))
                }
            },
            Submit::Unanswered { message, hint, again_at } => {
                let e = unanswered(message, hint);
                if Instant::now() >= *again_at {
                    let args = sub.args.clone();
                    let b = self.spawn_submit(id, &args);
                    if let Some(sub) = self.submits.get_mut(id) {
                        sub.state = Submit::Running(b);
                    }
                }
                Some(Err(e))
            }
        }
    }

    /// Collect a listing that finished and start the next one when the last is older than the
    /// poll interval. A failed listing is every poll's answer until one succeeds (each poll
    /// after it asks again), so the controller's `[engine] poll_grace_s` measures the outage.
    fn refresh(&mut self) -> Result<()> {
        if let Some(b) = &self.listing_call {
            match b.try_take() {
                None => {}
                Some(Ok(l)) => {
                    self.listing = Some(l);
                    self.listing_call = None;
                    self.listing_failed = None;
                }
                Some(Err(e)) => {
                    self.listing_call = None;
                    self.listing_failed = Some((e.message.clone(), e.hint.clone()));
                    return Err(e);
                }
            }
        }
        let due = self.listing_failed.is_some() || self.listing.as_ref().is_none_or(|l| l.started.elapsed() >= self.opts.poll_interval);
        if self.listing_call.is_none() && due {
            let o = self.opts.clone();
            let wanted: Vec<String> = self.submits.keys().chain(self.expected.keys()).cloned().collect();
            self.listing_call = Some(Background::spawn(move || take_listing(&o, &wanted)));
        }
        match &self.listing_failed {
            Some((message, hint)) => Err(unanswered(message, hint)),
            None => Ok(()),
        }
    }
}

/// The engine's commands end with it: a submission under way lands (or fails) before the
/// controller exits, so the journal's handle names a job Ray has or never will, and no `ray`
/// process outlives the sweep. Each waits no longer than its command limit.
impl Drop for RayEngine {
    fn drop(&mut self) {
        for (_, sub) in self.submits.drain() {
            if let Submit::Running(b) = sub.state {
                let _ = b.wait();
            }
        }
        if let Some(b) = self.listing_call.take() {
            let _ = b.wait();
        }
        self.stops.wait_all();
    }
}

/// `ratchet-<hash of the work directory>-`: what every job of this repository starts with.
fn prefix(o: &RayOptions) -> String {
    super::engine::job_name(&o.work_dir, "")
}

fn address_args(o: &RayOptions) -> Vec<String> {
    vec!["--address".into(), o.address.clone()]
}

fn call(o: &RayOptions, args: &[String]) -> Result<Output> {
    let mut argv = vec![o.ray.to_string_lossy().into_owned()];
    argv.extend(args.iter().cloned());
    Call::new(argv, o.command_timeout).run().map_err(|e| {
        let hint = e.hint.clone().unwrap_or_default();
        if hint.contains("install") {
            // No `ray` to run: a setting to fix, not a cluster to wait for.
            Error::new(Kind::Config, format!("ray engine: {}", e.message)).hint(
                "install Ray's command line (`pip install \"ray[default]\"`) or set [engine] ray_bin; scripts/ray-localhost.sh starts a one-node cluster here",
            )
        } else {
            Error::new(e.kind, format!("ray engine: {}", e.message)).hint(hint)
        }
    })
}

/// A `ray` call that exited non-zero, as an error naming it and the last line Ray printed
/// (its tracebacks end with the server's message): no job server answering is the machine's
/// problem (Infrastructure: asked again); a server that answered no is the settings' (Config).
fn failed(o: &RayOptions, what: &str, out: &Output) -> Error {
    let message = format!("ray engine: `ray {what}` failed ({}): {}", out.how(), last_line(out));
    if unreachable(out) {
        Error::new(Kind::Infrastructure, message).hint(format!(
            "no Ray job server answers at {}: check that the cluster runs (`ray status`) and that [engine] address names its dashboard; once it answers, run the sweep again to resume it (finished trials are kept)",
            o.address
        ))
    } else {
        Error::new(Kind::Config, message)
            .hint("check the [engine] settings (cpus, gpus, submit_args) against `ray status` and the cluster's resources")
    }
}

/// Jobs listed by `ray list jobs` (with `filter`, one `--filter key=value`), by submission id,
/// and whether the listing was complete (fewer jobs than `LIST_LIMIT`).
fn list(o: &RayOptions, filter: Option<&str>) -> Result<(bool, HashMap<String, RayJob>)> {
    let mut args: Vec<String> = ["list", "jobs"].iter().map(|s| s.to_string()).collect();
    args.extend(address_args(o));
    args.extend(["--format", "json", "--detail", "--limit"].iter().map(|s| s.to_string()));
    args.push(LIST_LIMIT.to_string());
    if let Some(f) = filter {
        args.extend(["--filter".to_string(), f.to_string()]);
    }
    // A listing that fails (a loaded head timing out) is an Infrastructure error: the
    // controller asks again for up to `[engine] poll_grace_s` before the sweep hears of it.
    let out = call(o, &args)?;
    if !out.success() {
        let e = failed(o, &format!("list jobs{}", filter.map(|f| format!(" --filter {f}")).unwrap_or_default()), &out);
        // Whatever it says, a listing that failed is not a setting to fix.
        return Err(Error { kind: Kind::Infrastructure, ..e });
    }
    let jobs = parse_listing(&out.stdout)?;
    let complete = jobs.len() < LIST_LIMIT;
    let prefix = prefix(o);
    let ours = jobs.into_iter().filter_map(|j| j.submission_id.clone().filter(|id| id.starts_with(&prefix)).map(|id| (id, j))).collect();
    Ok((complete, ours))
}

/// One job by its submission id, listed alone; `None` when Ray has no such job.
fn lookup(o: &RayOptions, id: &str) -> Result<Option<RayJob>> {
    Ok(list(o, Some(&format!("submission_id={id}")))?.1.remove(id))
}

/// This repository's jobs: one listing answers every trial in flight; on a cluster with more
/// jobs than one listing holds, the `wanted` ones it missed are looked up one by one.
fn take_listing(o: &RayOptions, wanted: &[String]) -> Result<Listing> {
    let started = Instant::now();
    let (complete, mut jobs) = list(o, None)?;
    if !complete {
        for id in wanted {
            if !jobs.contains_key(id) {
                if let Some(j) = lookup(o, id)? {
                    jobs.insert(id.clone(), j);
                }
            }
        }
    }
    Ok(Listing { started, jobs })
}

/// `ray job submit` (run on a thread of its own). A submission id an earlier sweep of this
/// repository used (trial ids restart) whose job has ended is deleted, so the name stays the
/// trial's; one still running is another controller's.
fn submit_job(o: &RayOptions, id: &str, args: &[String]) -> Result<()> {
    let mut out = call(o, args)?;
    if !out.success() && format!("{}{}", out.stderr, out.stdout).contains("already exists") {
        match lookup(o, id)? {
            Some(old) if is_terminal(&old.status) => {
                let mut del = vec!["job".to_string(), "delete".into()];
                del.extend(address_args(o));
                del.push(id.to_string());
                let d = call(o, &del)?;
                if !d.success() {
                    return Err(failed(o, &format!("job delete {id}"), &d));
                }
                out = call(o, args)?;
            }
            Some(old) => {
                return Err(Error::new(Kind::Config, format!("ray engine: a job named {id} is still {} on the cluster", old.status))
                    .hint(format!("another controller may be running on this repository; stop it or run `ray job stop {id}`")))
            }
            None => {}
        }
    }
    if !out.success() {
        return Err(failed(o, &format!("job submit {}", shell_join(&args[2..])), &out));
    }
    Ok(())
}

/// Ray's job states (`ray.job_submission.JobStatus`) as the controller's: the worker exited on
/// its own (SUCCEEDED, or FAILED with the exit code of a worker that returned one) is Finished,
/// its result read from the run directory; stopped, killed by a signal, or lost with its node
/// or job supervisor is Failed.
fn map_state(job: &RayJob) -> Result<JobState> {
    let first_line = |m: &Option<String>| m.as_deref().unwrap_or("").lines().next().unwrap_or("").trim().to_string();
    Ok(match job.status.as_str() {
        "PENDING" => JobState::Queued,
        "RUNNING" => JobState::Running,
        "SUCCEEDED" => JobState::Finished,
        "STOPPED" => JobState::Failed("ray: STOPPED".into()),
        "FAILED" => {
            let ran = job.error_type.as_deref() == Some("JOB_ENTRYPOINT_COMMAND_ERROR");
            match job.driver_exit_code {
                // 1..=128: the worker's own exit status; above, the shell's 128+N for a signal;
                // below zero, the signal itself.
                Some(c) if ran && (1..=128).contains(&c) => JobState::Finished,
                Some(c) if ran && !(0..=128).contains(&c) => {
                    let sig = if c > 128 { c - 128 } else { -c };
                    JobState::Failed(format!("ray: FAILED (killed by {})", crate::process::signal(sig as i32)))
                }
                _ => {
                    let why = job.error_type.clone().unwrap_or_else(|| first_line(&job.message));
                    JobState::Failed(if why.is_empty() { "ray: FAILED".into() } else { format!("ray: FAILED ({why})") })
                }
            }
        }
        other => {
            return Err(Error::failure(format!("ray engine: unknown job status {other:?} ({})", first_line(&job.message)))
                .hint("a newer Ray may have added it; report it to ratchet"))
        }
    })
}

/// A job the cluster no longer knows: its head restarted (Ray keeps no job table across a
/// restart without an external store, and `ray stop` takes the jobs' processes with it), or it
/// was deleted (`ray job delete`). Whatever its worker wrote is still read: a result written
/// before counts; without one, the trial is lost and starts again.
fn vanished() -> JobState {
    JobState::Failed("ray: the job is gone from the cluster (its head restarted, or the job was deleted)".into())
}

fn is_terminal(status: &str) -> bool {
    matches!(status, "SUCCEEDED" | "FAILED" | "STOPPED")
}

/// What `ray list jobs` prints instead of JSON when no job matches, in every format (Ray
/// 2.60's `format_list_api_output`): on a head restarted since its last job, or a lookup of a
/// job the cluster does not know.
const NO_JOBS: &str = "No resource in the cluster";

/// `ray list jobs --format json` output; a line of log text before the JSON is skipped.
fn parse_listing(stdout: &str) -> Result<Vec<RayJob>> {
    if !stdout.contains('[') && stdout.lines().any(|l| l.trim() == NO_JOBS) {
        return Ok(vec![]);
    }
    let start = stdout
        .find('[')
        .ok_or_else(|| Error::new(Kind::Infrastructure, format!("ray engine: `ray list jobs` printed no JSON list: {:?}", clip(stdout))))?;
    serde_json::from_str(stdout[start..].trim()).map_err(|e| {
        Error::new(
            Kind::Infrastructure,
            format!("ray engine: cannot read `ray list jobs --format json`: {e}: {:?}", clip(&stdout[start..])),
        )
    })
}

fn clip(s: &str) -> String {
    s.chars().take(300).collect()
}

/// Whether a variable of the controller's environment goes into the job script: not the
/// device binding Ray gives each job, not Ray's own, not the shell's bookkeeping.
fn passes(name: &str) -> bool {
    const SET_PER_JOB: &[&str] = &[
        "CUDA_VISIBLE_DEVICES",
        "HIP_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES",
        "NEURON_RT_VISIBLE_CORES",
        "TPU_VISIBLE_CHIPS",
        "ONEAPI_DEVICE_SELECTOR",
        "RATCHET_TRIAL_ID",
        "PWD",
        "OLDPWD",
        "SHLVL",
        "_",
    ];
    let ident =
        !name.is_empty() && !name.starts_with(|c: char| c.is_ascii_digit()) && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    ident && !name.starts_with("RAY_") && !SET_PER_JOB.contains(&name)
}

/// A trial id as a submission id may spell it (it goes into the job server's URLs).
fn url_safe(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect()
}

/// FNV-1a: stable across builds (the name must be the same for the next controller).
/// The last non-empty line of stderr (or stdout): a failed `ray` call ends its traceback with
/// the job server's answer.
fn last_line(out: &Output) -> String {
    let text = if out.stderr.trim().is_empty() { &out.stdout } else { &out.stderr };
    // Ray ends some tracebacks with a line of its own that says nothing (".").
    text.lines().rev().map(str::trim).find(|l| l.chars().any(|c| c.is_alphanumeric())).unwrap_or("").to_string()
}

/// Whether a failed `ray` call says no job server answered.
fn unreachable(out: &Output) -> bool {
    let text = format!("{}{}", out.stderr, out.stdout);
    // The last is what `ray list jobs` says while the head is down (Ray 2.60).
    ["Failed to connect to Ray", "Connection refused", "Cannot connect", "Max retries exceeded", "Failed to connect to API server"]
        .iter()
        .any(|m| text.contains(m))
}

/// Whether a failed `ray` call says the job does not exist.
fn gone(out: &Output) -> bool {
    last_line(out).contains("does not exist")
}

impl Engine for RayEngine {
    fn name(&self) -> &str {
        "ray"
    }

    /// The cluster and the resources a trial asks for (`--entrypoint-resources` included, which
    /// is how a Ray cluster names an accelerator type).
    fn next_device(&self) -> Option<String> {
        let o = &self.opts;
        let mut request = format!("{} gpus={}", o.address, o.gpus);
        let mut args = o.submit_args.iter();
        while let Some(a) = args.next() {
            if a == "--entrypoint-resources" {
                request.push_str(&format!(" resources={}", args.next().map(String::as_str).unwrap_or("")));
            } else if let Some(v) = a.strip_prefix("--entrypoint-resources=") {
                request.push_str(&format!(" resources={v}"));
            }
        }
        super::engine::device_kind("ray", o.device_kind.as_deref(), Some(request))
    }

    fn capacity(&self) -> usize {
        self.opts.capacity
    }

    /// One `ray job submit` per trial: Ray has no job arrays.
    fn submit(&mut self, trials: &[TrialSpec], worker: &[Vec<String>]) -> Result<Vec<JobHandle>> {
        if trials.len() != worker.len() {
            return Err(Error::failure(format!("ray engine: {} trials but {} worker commands", trials.len(), worker.len())));
        }
        if let Some(i) = worker.iter().position(|w| w.is_empty()) {
            return Err(Error::failure(format!("ray engine: trial {} has an empty worker command", trials[i].id)));
        }
        trials.iter().zip(worker).map(|(t, w)| self.submit_one(t, w)).collect()
    }

    /// Answered at once: from the trial's submission while Ray has not taken it yet, then from
    /// the latest listing (taken on a thread of its own, once per poll interval, for every trial
    /// in flight). A job missing from a listing asked for after Ray took it is gone.
    fn poll(&mut self, job: &JobHandle) -> Result<JobState> {
        let id = &job.engine_id;
        if let Some(answer) = self.submission(id) {
            // The listing goes on being taken for the other trials.
            let _ = self.refresh();
            return answer;
        }
        self.refresh()?;
        let taken = match self.submits.get(id) {
            Some(Submission { state: Submit::Done(at), .. }) => Some(*at),
            _ => None,
        };
        let Some(l) = &self.listing else { return Ok(JobState::Queued) };
        if taken.is_some_and(|at| l.started < at) {
            // Ray said PENDING when it took it; this listing is older than that.
            return Ok(JobState::Queued);
        }
        match (l.jobs.get(id), self.expected.get(id)) {
            (Some(j), Some(candidate)) if j.metadata.as_ref().and_then(|m| m.get(CANDIDATE_KEY)) != Some(candidate) => {
                Ok(JobState::Failed("ray: the job of that name is an earlier sweep's, not this trial's".into()))
            }
            (Some(j), _) => map_state(j),
            (None, Some(_)) => Ok(JobState::Failed(
                "ray: no job of this trial on the cluster (the controller stopped before Ray took it, or it was deleted)".into(),
            )),
            (None, None) => Ok(vanished()),
        }
    }

    /// A trial's job by its submission id (the name is the trial's): the one a controller
    /// submitted just before it died, its handle never journaled. Nothing is asked of Ray here
    /// (a lookup on a loaded head can take a command's whole limit): the polls tell whether the
    /// job is there and this trial's (its candidate commit), or lost.
    fn find(&mut self, trial: &TrialSpec) -> Result<Option<JobHandle>> {
        let id = self.submission_id(&trial.id);
        self.expected.insert(id.clone(), trial.candidate.clone());
        Ok(Some(JobHandle { trial: trial.id.clone(), engine_id: id, slot: None }))
    }

    /// `ray job stop`, which waits until the job has ended: Ray sends SIGTERM to the worker's
    /// process group and SIGKILL a few seconds later. A submission still under way is waited
    /// for first, so that no job starts after its trial was stopped.
    fn cancel(&mut self, job: &JobHandle) -> Result<()> {
        let _ = self.stops.wait(&job.engine_id);
        let submit = self.take_submit(&job.engine_id);
        stop_job(&self.opts, &job.engine_id, submit)
    }

    /// [`Engine::cancel`]'s wait for the submission and its `ray job stop`, on a thread of
    /// their own.
    fn stop(&mut self, job: &JobHandle) -> Result<()> {
        let submit = self.take_submit(&job.engine_id);
        let (o, id) = (self.opts.clone(), job.engine_id.clone());
        self.stops.start(&job.engine_id, move || stop_job(&o, &id, submit));
        Ok(())
    }

    fn stopped(&mut self, job: &JobHandle) -> Result<bool> {
        self.stops.ended(&job.engine_id)
    }
}

impl RayEngine {
    /// Forget a job being stopped: its submission under way (to wait for before the stop), and
    /// the listing, which may still call it running.
    fn take_submit(&mut self, id: &str) -> Option<Background<()>> {
        self.expected.remove(id);
        self.listing = None;
        match self.submits.remove(id) {
            Some(Submission { state: Submit::Running(b), .. }) => Some(b),
            _ => None,
        }
    }
}

/// `ray job stop ID` once its submission (if one is under way) has landed; a job Ray does not
/// have is not an error.
fn stop_job(o: &RayOptions, id: &str, submit: Option<Background<()>>) -> Result<()> {
    if let Some(b) = submit {
        let _ = b.wait();
    }
    let mut args = vec!["job".to_string(), "stop".into()];
    args.extend(address_args(o));
    args.push(id.to_string());
    let out = call(o, &args)?;
    if !out.success() && !gone(&out) {
        return Err(failed(o, &format!("job stop {id}"), &out));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(status: &str, error_type: Option<&str>, code: Option<i64>, message: &str) -> RayJob {
        RayJob {
            submission_id: Some("x".into()),
            status: status.into(),
            message: Some(message.into()),
            error_type: error_type.map(str::to_string),
            driver_exit_code: code,
            metadata: None,
        }
    }

    #[test]
    fn a_trials_kind_of_device_is_the_cluster_and_resources_unless_the_config_names_one() {
        let mut o = RayOptions::new("/w");
        assert_eq!(RayEngine::new(o.clone()).next_device().unwrap(), "ray http://127.0.0.1:8265 gpus=1");
        o.submit_args = vec!["--entrypoint-resources".into(), r#"{"accelerator_type:H100": 1}"#.into()];
        assert_eq!(
            RayEngine::new(o.clone()).next_device().unwrap(),
            r#"ray http://127.0.0.1:8265 gpus=1 resources={"accelerator_type:H100": 1}"#
        );
        o.device_kind = Some("h100".into());
        assert_eq!(RayEngine::new(o).next_device().unwrap(), "ray h100");
    }

    #[test]
    fn ray_states_map_to_the_controllers() {
        assert_eq!(map_state(&job("PENDING", None, None, "waiting for resources")).unwrap(), JobState::Queued);
        assert_eq!(map_state(&job("RUNNING", None, None, "")).unwrap(), JobState::Running);
        assert_eq!(map_state(&job("SUCCEEDED", None, Some(0), "")).unwrap(), JobState::Finished);
        assert_eq!(
            map_state(&job("STOPPED", None, None, "Job was intentionally stopped.")).unwrap(),
            JobState::Failed("ray: STOPPED".into())
        );
        // The worker exited non-zero on its own: its run directory says how (as Slurm's FAILED).
        let cmd = Some("JOB_ENTRYPOINT_COMMAND_ERROR");
        assert_eq!(map_state(&job("FAILED", cmd, Some(3), "exit code 3")).unwrap(), JobState::Finished);
        // Killed: the shell's 137 (128 + SIGKILL), or a negative signal.
        assert_eq!(
            map_state(&job("FAILED", cmd, Some(137), "")).unwrap(),
            JobState::Failed("ray: FAILED (killed by signal 9 (SIGKILL))".into())
        );
        assert_eq!(
            map_state(&job("FAILED", cmd, Some(-15), "")).unwrap(),
            JobState::Failed("ray: FAILED (killed by signal 15 (SIGTERM))".into())
        );
        // Lost with its supervisor or node, never started: failed, with Ray's reason.
        assert_eq!(
            map_state(&job("FAILED", Some("JOB_SUPERVISOR_ACTOR_DIED"), None, "node died\nmore")).unwrap(),
            JobState::Failed("ray: FAILED (JOB_SUPERVISOR_ACTOR_DIED)".into())
        );
        assert_eq!(map_state(&job("FAILED", None, None, "first\nsecond")).unwrap(), JobState::Failed("ray: FAILED (first)".into()));
        assert!(map_state(&job("WEIRD", None, None, "")).unwrap_err().message.contains("WEIRD"));
    }

    #[test]
    fn a_submission_id_names_the_repository_and_the_trial() {
        let a = RayEngine::new(RayOptions::new("/repo/a/.ratchet"));
        let b = RayEngine::new(RayOptions::new("/repo/b/.ratchet"));
        let id = a.submission_id("t7");
        assert!(id.starts_with("ratchet-") && id.ends_with("-t7"), "{id}");
        assert_eq!(id.len(), "ratchet-".len() + 8 + "-t7".len(), "{id}");
        // The same for the next controller of the same repository, another for another one.
        assert_eq!(id, RayEngine::new(RayOptions::new("/repo/a/.ratchet")).submission_id("t7"));
        assert_ne!(id, b.submission_id("t7"));
        assert_ne!(id, a.submission_id("t8"));
        // Only characters that go into a URL path as they are.
        assert!(a.submission_id("it's t/7 ü").ends_with("-it_s_t_7__"), "{}", a.submission_id("it's t/7 ü"));
    }

    #[test]
    fn the_listing_is_read_from_rays_json() {
        let text = r#"[{"type": "SUBMISSION", "job_id": null, "submission_id": "ratchet-1-t1", "status": "FAILED", "entrypoint": "sh x", "message": "Job entrypoint command failed with exit code 137", "error_type": "JOB_ENTRYPOINT_COMMAND_ERROR", "start_time": 1, "end_time": 2, "metadata": {"ratchet_candidate": "abc"}, "runtime_env": {}, "driver_exit_code": 137},
            {"type": "DRIVER", "job_id": "01000000", "submission_id": null, "status": "RUNNING", "metadata": {}}]"#;
        let jobs = parse_listing(text).unwrap();
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[0].submission_id.as_deref(), Some("ratchet-1-t1"));
        assert_eq!(jobs[0].metadata.as_ref().unwrap()[CANDIDATE_KEY], "abc");
        assert_eq!(map_state(&jobs[0]).unwrap(), JobState::Failed("ray: FAILED (killed by signal 9 (SIGKILL))".into()));
        assert!(parse_listing("Traceback: boom").unwrap_err().message.contains("no JSON list"));
        // No job at all (a head restarted since): Ray prints a sentence, not `[]`.
        assert_eq!(parse_listing("No resource in the cluster\n").unwrap(), vec![]);
        assert!(parse_listing("No resource in the cluster yet? boom").is_err());
    }

    #[test]
    fn the_job_script_runs_the_worker_with_the_controllers_environment() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run dir");
        std::fs::create_dir_all(&out).unwrap();
        let t = TrialSpec { id: "t1".into(), repo: "/r".into(), incumbent: "a".into(), candidate: "b".into(), out_dir: out.clone() };
        let env = vec![
            ("FAKE_META".to_string(), r#"{"via": "it's ray"}"#.to_string()),
            ("CUDA_VISIBLE_DEVICES".to_string(), "7".to_string()),
            ("RAY_ADDRESS".to_string(), "x".to_string()),
            ("BAD-NAME".to_string(), "x".to_string()),
        ];
        let worker = vec![
            "sh".to_string(),
            "-c".into(),
            "echo \"$FAKE_META|${CUDA_VISIBLE_DEVICES-unset}|$RAY_ADDRESS|$RATCHET_TRIAL_ID|$(pwd)\"; echo err >&2".into(),
        ];
        let script = dir.path().join("job.sh");
        std::fs::write(&script, RayEngine::job_script(&t, &worker, &env)).unwrap();
        let run =
            std::process::Command::new("sh").arg(&script).env_remove("CUDA_VISIBLE_DEVICES").env_remove("RAY_ADDRESS").output().unwrap();
        assert!(run.status.success());
        let log = std::fs::read_to_string(out.join("worker.log")).unwrap();
        // The device binding and Ray's own variables are the cluster's, not the controller's.
        assert_eq!(log, format!("{{\"via\": \"it's ray\"}}|unset||t1|{}\nerr\n", out.display()));
    }
}
