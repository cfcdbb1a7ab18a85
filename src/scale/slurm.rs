//! The Slurm engine: a batch of trials becomes one job array (`sbatch --array`), task i running
//! trial i's worker with its own GPU (`--gres=gpu:1`) or node (`--exclusive`), its output in
//! the trial's run directory on the shared filesystem; submitted with `sbatch`, polled with
//! `squeue`, stopped with `scancel`, each on a thread of its own (a slow slurmctld never holds
//! the controller). A trial's handle is its array's job name, known before `sbatch` answers.

use super::command::{shell_join, unanswered, Background, Call, Output, Stops};
use super::engine::{Engine, JobHandle, JobState, TrialSpec};
use crate::error::{Error, Kind, Result, WithPath};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How long one `squeue` listing of an array answers polls of its tasks: the controller polls
/// every trial in turn, and one call per array per round is enough.
const LISTING_TTL: Duration = Duration::from_millis(1000);

/// What the Slurm engine submits with.
#[derive(Debug, Clone)]
pub struct SlurmOptions {
    /// Trials in flight at once.
    pub capacity: usize,
    pub partition: Option<String>,
    /// `--gres` of one task; `None` asks for none.
    pub gres: Option<String>,
    /// `--exclusive`: a whole node per task.
    pub exclusive: bool,
    /// More `sbatch` options, after ratchet's own.
    pub sbatch_args: Vec<String>,
    /// The limit of each Slurm command, and of the wait for a cancelled task to end.
    pub command_timeout: Duration,
    /// Where the generated batch scripts go (under `slurm/`); on the shared filesystem, like
    /// the run directories, since the compute node opens the output files through it.
    pub work_dir: PathBuf,
    /// Where `sbatch`, `squeue`, `scontrol` and `scancel` are, when not on PATH.
    pub bin_dir: Option<PathBuf>,
    /// `[engine] device_kind`: the kind of device every task gets (its noise history's name).
    pub device_kind: Option<String>,
}

impl SlurmOptions {
    pub fn new(work_dir: impl Into<PathBuf>) -> SlurmOptions {
        SlurmOptions {
            capacity: 4,
            partition: None,
            gres: Some("gpu:1".into()),
            exclusive: false,
            sbatch_args: vec![],
            command_timeout: Duration::from_secs(60),
            work_dir: work_dir.into(),
            bin_dir: None,
            device_kind: None,
        }
    }
}

/// A task's state as Slurm names it (`squeue %T`, `scontrol`'s `JobState=`) and why.
#[derive(Debug, Clone, PartialEq)]
struct TaskState {
    state: String,
    reason: String,
}

pub struct SlurmEngine {
    opts: SlurmOptions,
    /// Per array job id: when the listing that answered it started, and each task's state by
    /// `job_task` id (`None`: Slurm has forgotten the task).
    listings: HashMap<String, (Instant, Tasks)>,
    /// Per task (`job_task` id): when the controller last polled it. The arrays of the tasks
    /// polled within `WATCHED` are listed together, one `squeue` for all of them.
    asked: HashMap<String, Instant>,
    /// The listing being taken, on a thread of its own.
    call: Option<ListingCall>,
    /// Why the last listing failed (message, hint), until one succeeds: every poll's answer.
    failed: Option<(String, Option<String>)>,
    /// When the engine last changed each array (submitted it, cancelled a task and saw it end):
    /// a listing started before that says nothing of it.
    changed: HashMap<String, Instant>,
    /// The cancels under way, each on a thread of its own.
    stops: Stops,
    /// Per array job name: its `sbatch` (on a thread of its own) or the lookup of its job id by
    /// the name (a restarted controller's), and the job id once known.
    arrays: HashMap<String, Array>,
}

/// What the engine knows of a job array it named.
enum Array {
    /// `sbatch` under way: it answers with the job id.
    Submitting(Background<String>),
    /// `squeue -n NAME` under way: the job id of the newest array of that name, if Slurm has one.
    LookingUp(Background<Option<String>>),
    Known(String),
    /// Slurm has no job of that name (never submitted, or purged long after it ended).
    Absent,
}

/// Tasks' states by `job_task` id; `None`: Slurm has forgotten the task.
type Tasks = HashMap<String, Option<TaskState>>;

/// A listing under way: the arrays and tasks it asks about, and when it started.
struct ListingCall {
    jobs: Vec<String>,
    started: Instant,
    call: Background<Tasks>,
}

/// How long an array counts as watched after the controller last polled one of its tasks.
const WATCHED: Duration = Duration::from_secs(10);

impl SlurmEngine {
    pub fn new(opts: SlurmOptions) -> SlurmEngine {
        SlurmEngine {
            opts,
            listings: HashMap::new(),
            asked: HashMap::new(),
            call: None,
            failed: None,
            changed: HashMap::new(),
            stops: Stops::default(),
            arrays: HashMap::new(),
        }
    }

    /// A Slurm command that exited non-zero, as an error naming it and its stderr; the hint
    /// names the likely fix (a controller that does not answer is not a settings problem).
    fn failed(call: &str, out: &Output) -> Error {
        let e = Error::new(Kind::Infrastructure, format!("slurm engine: `{call}` failed ({}): {}", out.how(), out.tail()));
        if controller_down(out) {
            e.hint("the Slurm controller (slurmctld) does not answer: check that it runs (`scontrol ping`, `systemctl status slurmctld`) and that munge works; the sweep resumes when started again")
        } else {
            e.hint("check the [engine] settings (partition, gres, sbatch_args) against `sinfo` and the cluster's limits")
        }
    }

    /// The job name of a trial: unique to this repository's state (its engine work directory)
    /// and the trial, so a restarted controller finds a job whose id it never journaled.
    fn job_name(&self, trial: &str) -> String {
        super::engine::job_name(&self.opts.work_dir, trial)
    }

    /// The generated batch script: task i `exec`s trial i's worker.
    fn batch_script(trials: &[TrialSpec], worker: &[Vec<String>]) -> String {
        let mut s = String::from("#!/bin/sh\n");
        s.push_str(&format!("# Written by ratchet: {} trials as one Slurm job array, task i runs trial i.\n", trials.len()));
        s.push_str("case \"${SLURM_ARRAY_TASK_ID:-}\" in\n");
        for (i, (t, argv)) in trials.iter().zip(worker).enumerate() {
            s.push_str(&format!("  {i}) export RATCHET_TRIAL_ID={}; exec {} ;;\n", super::command::shell_quote(&t.id), shell_join(argv)));
        }
        s.push_str("  *) echo \"ratchet: no trial for array task ${SLURM_ARRAY_TASK_ID:-(unset)}\" >&2; exit 2 ;;\nesac\n");
        s
    }

    /// Collect a listing that finished, and start the next when a task polled within
    /// `WATCHED` has no fresh answer (its array's listing is older than `LISTING_TTL`, began
    /// before the engine last changed its array, or did not ask about it). One `squeue` lists every such
    /// array (the controller submits one array per trial, so N trials in flight cost one call a
    /// second, not N), on a thread of its own. A failed listing is every poll's answer until one
    /// succeeds (each poll after it asks again), so `[engine] poll_grace_s` measures the outage.
    fn refresh(&mut self) -> Result<()> {
        if let Some(done) = self.call.as_ref().and_then(|c| c.call.try_take()) {
            let c = self.call.take().expect("a listing under way");
            match done {
                Ok(tasks) => {
                    for j in &c.jobs {
                        let mine: Tasks = tasks.iter().filter(|(id, _)| array_of(id) == j).map(|(k, v)| (k.clone(), v.clone())).collect();
                        self.listings.insert(j.clone(), (c.started, mine));
                    }
                    self.failed = None;
                }
                Err(e) => self.failed = Some((e.message.clone(), e.hint.clone())),
            }
        }
        self.asked.retain(|_, at| at.elapsed() < WATCHED);
        let answered = |task: &String| {
            self.listed(task).is_some() && self.listings.get(array_of(task)).is_some_and(|(started, _)| started.elapsed() < LISTING_TTL)
        };
        let due = self.failed.is_some() || self.asked.keys().any(|t| !answered(t));
        if self.call.is_none() && due {
            let mut tasks: Vec<String> = self.asked.keys().cloned().collect();
            tasks.sort();
            let mut jobs: Vec<String> = tasks.iter().map(|t| array_of(t).to_string()).collect();
            jobs.dedup();
            let (o, t, j) = (self.opts.clone(), tasks, jobs.clone());
            self.call = Some(ListingCall { jobs, started: Instant::now(), call: Background::spawn(move || take_listing(&o, &j, &t)) });
        }
        match &self.failed {
            Some((message, hint)) => Err(unanswered(message, hint)),
            None => Ok(()),
        }
    }

    /// A task that ended by a cancel: a listing taken before that would still call it running.
    fn ended(&mut self, engine_id: &str) {
        let array = match parse_handle(engine_id) {
            Ok(Handle::Id(id)) => array_of(&id).to_string(),
            Ok(Handle::Named(name, _)) => match self.arrays.get(&name) {
                Some(Array::Known(job)) => job.clone(),
                _ => return,
            },
            Err(_) => return,
        };
        self.listings.remove(&array);
        self.changed.insert(array, Instant::now());
    }

    /// A task's state from the latest listing that can speak for it (`None` where none can
    /// yet: the listing under way will).
    fn listed(&self, engine_id: &str) -> Option<Option<TaskState>> {
        let job = array_of(engine_id);
        let (started, tasks) = self.listings.get(job)?;
        if self.changed.get(job).is_some_and(|s| started < s) {
            return None;
        }
        tasks.get(engine_id).cloned()
    }
}

/// The array job id of a `job_task` id.
fn array_of(engine_id: &str) -> &str {
    engine_id.split('_').next().unwrap_or(engine_id)
}

/// The state of each of `tasks` and of every task `squeue` lists of the arrays `jobs`: one
/// `squeue` for all the arrays (each on its own when Slurm refuses the list because one is
/// gone), then `scontrol` for a task squeue no longer lists; `None` for a task Slurm has
/// forgotten.
fn take_listing(o: &SlurmOptions, jobs: &[String], tasks: &[String]) -> Result<Tasks> {
    let listed = match list(o, jobs)? {
        Some(l) => l,
        None => {
            let mut all = HashMap::new();
            for j in jobs {
                all.extend(list(o, std::slice::from_ref(j))?.unwrap_or_default());
            }
            all
        }
    };
    let mut out: Tasks = listed.into_iter().map(|(k, v)| (k, Some(v))).collect();
    for t in tasks {
        if !out.contains_key(t) {
            out.insert(t.clone(), scontrol_state(o, t)?);
        }
    }
    Ok(out)
}

/// One `squeue` of these arrays' tasks by `job_task` id; `None` when Slurm says a job id is
/// unknown (a purged job) among several, an error for any other failure.
fn list(o: &SlurmOptions, jobs: &[String]) -> Result<Option<HashMap<String, TaskState>>> {
    // -r: one line per array task (pending ones too); -t all: finished ones while the
    // controller still remembers them (MinJobAge).
    let ids = jobs.join(",");
    let args: Vec<String> = ["-h", "-r", "-t", "all", "-j", &ids, "-o", "%i|%T|%r"].iter().map(|s| s.to_string()).collect();
    let out = call(o, "squeue", &args)?;
    if !out.success() {
        if gone(&out) {
            return Ok(if jobs.len() > 1 { None } else { Some(HashMap::new()) });
        }
        return Err(SlurmEngine::failed(&format!("squeue -j {ids}"), &out));
    }
    let mut tasks = HashMap::new();
    for line in out.stdout.lines() {
        let mut f = line.trim().splitn(3, '|');
        if let (Some(id), Some(state), Some(reason)) = (f.next(), f.next(), f.next()) {
            tasks.insert(id.to_string(), TaskState { state: state.to_string(), reason: reason.to_string() });
        }
    }
    Ok(Some(tasks))
}

/// A task's state from `scontrol` (a task squeue no longer lists); `None` when Slurm has
/// forgotten it.
fn scontrol_state(o: &SlurmOptions, engine_id: &str) -> Result<Option<TaskState>> {
    let out = call(o, "scontrol", &["show".into(), "job".into(), engine_id.into()])?;
    if !out.success() {
        if gone(&out) {
            return Ok(None);
        }
        return Err(SlurmEngine::failed(&format!("scontrol show job {engine_id}"), &out));
    }
    let field = |name: &str| out.stdout.split_whitespace().find_map(|w| w.strip_prefix(name).map(str::to_string)).unwrap_or_default();
    Ok(Some(TaskState { state: field("JobState="), reason: field("Reason=") }))
}

/// A task's state now, asked of Slurm on this thread (a cancel waits for its task to end).
fn task_state_now(o: &SlurmOptions, engine_id: &str) -> Result<Option<TaskState>> {
    let job = array_of(engine_id).to_string();
    Ok(take_listing(o, &[job], &[engine_id.to_string()])?.remove(engine_id).flatten())
}

/// The engine's commands end with it: no `sbatch`, `squeue` or `scancel` outlives the sweep, and
/// a submission under way lands (or fails) before the controller exits, so the job its journaled
/// name stands for exists or never will.
impl Drop for SlurmEngine {
    fn drop(&mut self) {
        self.stops.wait_all();
        for (_, a) in self.arrays.drain() {
            match a {
                Array::Submitting(b) => drop(b.wait()),
                Array::LookingUp(b) => drop(b.wait()),
                Array::Known(_) | Array::Absent => {}
            }
        }
        if let Some(c) = self.call.take() {
            let _ = c.call.wait();
        }
    }
}

/// One Slurm command (`sbatch`, `squeue`, ...) under the engine's command limit.
fn call(opts: &SlurmOptions, program: &str, args: &[String]) -> Result<Output> {
    let exe = match &opts.bin_dir {
        Some(d) => d.join(program).to_string_lossy().into_owned(),
        None => program.to_string(),
    };
    let mut argv = vec![exe];
    argv.extend(args.iter().cloned());
    // No working directory of its own: sbatch gets --chdir, and the others need none.
    Call::new(argv, opts.command_timeout)
        .run().map_err(|e| {
        let hint = e.hint.clone().unwrap_or_default();
        Error::new(e.kind, format!("slurm engine: {}", e.message)).hint(if hint.contains("install") {
            "install Slurm's client commands (Debian: slurm-client) or set the engine's bin_dir; scripts/slurm-localhost.sh starts a one-node cluster here".into()
        } else {
            hint
        })
    })
}

/// `jobid_taskid` split into its parts.
fn split_id(engine_id: &str) -> Result<(String, u32)> {
    let bad = || Error::failure(format!("slurm engine: {engine_id:?} is not a Slurm array task id (JOBID_TASKID)"));
    let (job, task) = engine_id.split_once('_').ok_or_else(bad)?;
    if job.is_empty() || !job.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    Ok((job.to_string(), task.parse().map_err(|_| bad())?))
}

/// Whether a failed Slurm command says the controller did not answer (slurmctld down or
/// unreachable), as Slurm's clients word it.
fn controller_down(out: &Output) -> bool {
    let text = format!("{}{}", out.stderr, out.stdout);
    ["Unable to contact slurm controller", "Socket timed out", "Connection refused", "slurm_load_jobs error: Unable to contact"]
        .iter()
        .any(|m| text.contains(m))
}

/// Whether a failed Slurm command says the job is unknown (finished and purged, or never was).
fn gone(out: &Output) -> bool {
    let text = format!("{}{}", out.stderr, out.stdout);
    // `scontrol show job J_T` of an array task cancelled while pending (held, say) says
    // "Job J_T not found" (Slurm 22 on the localhost cluster): it is gone too.
    text.contains("Invalid job id")
        || text.contains("already completing or completed")
        || (text.starts_with("Job ") && text.contains(" not found"))
}

/// Pending reasons (squeue(1), "JOB REASON CODES") under which Slurm will not start the job
/// until someone acts: a hold, its nodes unavailable (drained, down, reserved), its partition
/// down or inactive, a dependency that can never be met, a request no node satisfies.
fn never_starts(reason: &str) -> bool {
    // squeue spells some reasons with spaces ("Nodes required for job are DOWN, DRAINED ...",
    // as Slurm 22 on the localhost cluster prints it) where the man page has underscores.
    let reason = reason.replace(' ', "_");
    const REASONS: [&str; 10] = [
        "JobHeld",
        "ReqNodeNotAvail",
        "Nodes_required_for_job_are_DOWN",
        "NodeDown",
        "PartitionDown",
        "PartitionInactive",
        "DependencyNeverSatisfied",
        "BadConstraints",
        "InvalidAccount",
        "InvalidQOS",
    ];
    REASONS.iter().any(|r| reason.starts_with(r))
}

/// Slurm's job state names (squeue(1), "JOB STATE CODES") as the controller's states: the
/// worker exited (COMPLETED, or FAILED for a non-zero exit) is Finished, its result read from
/// the run directory; killed or lost by Slurm is Failed.
fn map_state(t: &TaskState) -> Result<JobState> {
    // scontrol may add flags (`CANCELLED+`) and squeue's reason "None" says nothing.
    let state = t.state.trim_end_matches('+');
    let why = |s: &str| match t.reason.as_str() {
        "" | "None" | "(null)" => format!("slurm: {s}"),
        r => format!("slurm: {s} ({r})"),
    };
    Ok(match state {
        "PENDING" if never_starts(&t.reason) => JobState::Stuck(why(state)),
        "REQUEUE_HOLD" | "RESV_DEL_HOLD" | "SPECIAL_EXIT" => JobState::Stuck(why(state)),
        "PENDING" | "REQUEUED" | "REQUEUE_FED" => JobState::Queued,
        "CONFIGURING" | "RUNNING" | "COMPLETING" | "SUSPENDED" | "STOPPED" | "SIGNALING" | "STAGE_OUT" | "RESIZING" => JobState::Running,
        "COMPLETED" | "FAILED" => JobState::Finished,
        "CANCELLED" | "TIMEOUT" | "NODE_FAIL" | "PREEMPTED" | "BOOT_FAIL" | "DEADLINE" | "OUT_OF_MEMORY" | "REVOKED" => {
            JobState::Failed(why(state))
        }
        other => {
            return Err(Error::failure(format!("slurm engine: unknown job state {other:?} (reason {:?})", t.reason))
                .hint("a newer Slurm may have added it; report it to ratchet"))
        }
    })
}

/// What a task asks Slurm for, as a kind of device: its partition and resources, and the node
/// features and GPU counts its `sbatch_args` ask for (`--constraint`, `-C`, `--gpus*`).
fn request(o: &SlurmOptions) -> String {
    let mut parts = vec![format!("partition={}", o.partition.as_deref().unwrap_or("(default)"))];
    match (&o.gres, o.exclusive) {
        (_, true) => parts.push("exclusive".into()),
        (Some(g), false) => parts.push(format!("gres={g}")),
        (None, false) => {}
    }
    let mut args = o.sbatch_args.iter();
    while let Some(a) = args.next() {
        if ["--constraint", "-C", "--gpus", "-G", "--gpus-per-task", "--gpus-per-node"].contains(&a.as_str()) {
            if let Some(v) = args.next() {
                parts.push(format!("{}={v}", a.trim_start_matches('-')));
            }
        } else if a.starts_with("--constraint=") || a.starts_with("--gpus") || a.starts_with("-C") && a.len() > 2 {
            parts.push(a.trim_start_matches('-').to_string());
        }
    }
    parts.join(" ")
}

impl Engine for SlurmEngine {
    fn name(&self) -> &str {
        "slurm"
    }

    fn next_device(&self) -> Option<String> {
        super::engine::device_kind("slurm", self.opts.device_kind.as_deref(), Some(request(&self.opts)))
    }

    fn capacity(&self) -> usize {
        self.opts.capacity
    }

    fn submit(&mut self, trials: &[TrialSpec], worker: &[Vec<String>]) -> Result<Vec<JobHandle>> {
        if trials.len() != worker.len() {
            return Err(Error::failure(format!("slurm engine: {} trials but {} worker commands", trials.len(), worker.len())));
        }
        if trials.is_empty() {
            return Ok(vec![]);
        }
        if let Some(i) = worker.iter().position(|w| w.is_empty()) {
            return Err(Error::failure(format!("slurm engine: trial {} has an empty worker command", trials[i].id)));
        }
        // The batch's own directory: the script, and one link per task to its run directory,
        // so that `--output=<batch>/%a/slurm.out` lands in each trial's run directory.
        let root = super::engine::absolute(&self.opts.work_dir)?.join("slurm");
        std::fs::create_dir_all(&root).with_path(&root)?;
        let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S%.3f");
        let batch = (0..1000)
            .map(|n| root.join(format!("{stamp}-{}-{n}", std::process::id())))
            .find(|p| std::fs::create_dir(p).is_ok())
            .ok_or_else(|| Error::failure(format!("slurm engine: cannot create a batch directory under {}", root.display())))?;
        for (i, t) in trials.iter().enumerate() {
            let out = super::engine::absolute(&t.out_dir)?;
            std::fs::create_dir_all(&out).with_path(&out)?;
            let link = batch.join(i.to_string());
            std::os::unix::fs::symlink(&out, &link).with_path(&link)?;
        }
        let script = batch.join("array.sh");
        std::fs::write(&script, Self::batch_script(trials, worker)).with_path(&script)?;
        // '%' starts a filename pattern in sbatch; a literal one is "%%".
        let pat = batch.to_string_lossy().replace('%', "%%");
        let mut args = vec![
            "--parsable".to_string(),
            format!("--array=0-{}", trials.len() - 1),
            // One trial per submission in practice; the name is the first trial's.
            format!("--job-name={}", self.job_name(&trials[0].id)),
            format!("--chdir={}", batch.display()),
            format!("--output={pat}/%a/slurm.out"),
            format!("--error={pat}/%a/slurm.err"),
        ];
        if self.opts.exclusive {
            args.push("--exclusive".into());
        } else if let Some(g) = &self.opts.gres {
            args.push(format!("--gres={g}"));
        }
        if let Some(p) = &self.opts.partition {
            args.push(format!("--partition={p}"));
        }
        args.extend(self.opts.sbatch_args.iter().cloned());
        args.push(script.to_string_lossy().into_owned());
        let (o, name) = (self.opts.clone(), self.job_name(&trials[0].id));
        let sbatch = Background::spawn(move || sbatch(&o, &args));
        self.arrays.insert(name.clone(), Array::Submitting(sbatch));
        Ok(trials.iter().enumerate().map(|(i, t)| JobHandle { trial: t.id.clone(), engine_id: named(&name, i), slot: None }).collect())
    }

    /// Answered at once: `queued` while its `sbatch` (or the lookup of its name) runs, then
    /// from the latest listing (taken on a thread of its own, at most once a `LISTING_TTL`, for
    /// every task in flight), `queued` until a listing can speak for the task. A failed sbatch
    /// is the poll's error.
    fn poll(&mut self, job: &JobHandle) -> Result<JobState> {
        let task = match self.task_id(&job.engine_id)? {
            Resolved::Task(t) => t,
            Resolved::Pending => return Ok(JobState::Queued),
            // Never submitted, or purged after MinJobAge: the run directory tells.
            Resolved::Absent => return Ok(JobState::Finished),
        };
        self.asked.insert(task.clone(), Instant::now());
        self.refresh()?;
        match self.listed(&task) {
            Some(Some(t)) => map_state(&t),
            // Purged after MinJobAge: it ended long ago; the run directory tells how.
            Some(None) => Ok(JobState::Finished),
            None => Ok(JobState::Queued),
        }
    }

    /// A trial's job by its name: the one a controller submitted just before it died, its
    /// handle never journaled. Nothing is asked of Slurm here: the polls look the name up.
    fn find(&mut self, trial: &TrialSpec) -> Result<Option<JobHandle>> {
        Ok(Some(JobHandle { trial: trial.id.clone(), engine_id: named(&self.job_name(&trial.id), 0), slot: None }))
    }

    fn cancel(&mut self, job: &JobHandle) -> Result<()> {
        // A stop of it under way ends first: the cancel then finds the task gone.
        let _ = self.stops.wait(&job.engine_id);
        let task = self.stop_target(&job.engine_id)?;
        stop_task(&self.opts, task)?;
        self.ended(&job.engine_id);
        Ok(())
    }

    /// The wait for its `sbatch` (or its lookup), `scancel` and the wait for the task's end, on
    /// a thread of their own.
    fn stop(&mut self, job: &JobHandle) -> Result<()> {
        let task = self.stop_target(&job.engine_id)?;
        let o = self.opts.clone();
        self.stops.start(&job.engine_id, move || stop_task(&o, task));
        Ok(())
    }

    fn stopped(&mut self, job: &JobHandle) -> Result<bool> {
        let ended = self.stops.ended(&job.engine_id)?;
        if ended {
            self.ended(&job.engine_id);
        }
        Ok(ended)
    }
}

/// A handle's task: Slurm's `JOBID_TASK` (handles journaled before submissions ran beside the
/// controller), or the array's job name and the task's index.
#[derive(Debug, Clone, PartialEq)]
enum Handle {
    Id(String),
    Named(String, u32),
}

fn named(name: &str, task: usize) -> String {
    super::engine::named_handle(name, task)
}

fn parse_handle(engine_id: &str) -> Result<Handle> {
    if let Some((name, task)) = super::engine::parse_named_handle(engine_id) {
        return Ok(Handle::Named(name, task));
    }
    split_id(engine_id).map(|_| Handle::Id(engine_id.to_string()))
}

/// Where a handle's task stands.
enum Resolved {
    /// Its `JOBID_TASK`.
    Task(String),
    /// Its sbatch or the lookup of its name has not answered yet.
    Pending,
    Absent,
}

/// What a stop cancels: a task by its id, or by its array's name once that array's sbatch (or
/// a lookup of the name) has answered, on the stop's own thread.
enum StopTarget {
    Task(String),
    Submitting(Background<String>, u32),
    ByName(String, u32),
}

impl SlurmEngine {
    /// The task behind a handle, as far as Slurm has answered: a named array's sbatch that
    /// finished gives its id; a name the engine did not submit (a restarted controller's) is
    /// looked up with `squeue -n` on a thread of its own.
    fn task_id(&mut self, engine_id: &str) -> Result<Resolved> {
        let (name, task) = match parse_handle(engine_id)? {
            Handle::Id(id) => return Ok(Resolved::Task(id)),
            Handle::Named(name, task) => (name, task),
        };
        let array = match self.arrays.remove(&name) {
            None => {
                let o = self.opts.clone();
                let n = name.clone();
                Array::LookingUp(Background::spawn(move || lookup(&o, &n)))
            }
            Some(Array::Submitting(b)) => match b.try_take() {
                None => Array::Submitting(b),
                Some(Ok(job)) => {
                    self.listings.remove(&job);
                    self.changed.insert(job.clone(), Instant::now());
                    Array::Known(job)
                }
                // Never sent again (a second sbatch could start a second job): a refused one
                // stops the sweep; after one slurmctld did not answer, the next poll looks the
                // name up (a job it took is found; none: the trial is lost, and starts again).
                Some(Err(e)) => return Err(e),
            },
            Some(Array::LookingUp(b)) => match b.try_take() {
                None => Array::LookingUp(b),
                Some(Ok(Some(job))) => Array::Known(job),
                Some(Ok(None)) => Array::Absent,
                Some(Err(e)) => return Err(e),
            },
            Some(a) => a,
        };
        let out = match &array {
            Array::Known(job) => Resolved::Task(format!("{job}_{task}")),
            Array::Absent => Resolved::Absent,
            Array::Submitting(_) | Array::LookingUp(_) => Resolved::Pending,
        };
        self.arrays.insert(name, array);
        Ok(out)
    }

    /// What a stop of `engine_id` cancels; the engine forgets a named array's sbatch under way
    /// (the stop waits for it).
    fn stop_target(&mut self, engine_id: &str) -> Result<StopTarget> {
        let (name, task) = match parse_handle(engine_id)? {
            Handle::Id(id) => return Ok(StopTarget::Task(id)),
            Handle::Named(name, task) => (name, task),
        };
        Ok(match self.arrays.remove(&name) {
            Some(Array::Known(job)) => {
                let target = StopTarget::Task(format!("{job}_{task}"));
                self.arrays.insert(name, Array::Known(job));
                target
            }
            Some(Array::Submitting(b)) => StopTarget::Submitting(b, task),
            _ => StopTarget::ByName(name, task),
        })
    }
}

/// `sbatch ARGS`: the new array's job id.
fn sbatch(o: &SlurmOptions, args: &[String]) -> Result<String> {
    let out = call(o, "sbatch", args)?;
    if !out.success() {
        let e = SlurmEngine::failed(&format!("sbatch {}", shell_join(args)), &out);
        // Refused (a partition, account or limit): a setting to fix, so the sweep stops at once.
        return Err(if controller_down(&out) { e } else { Error { kind: Kind::Config, ..e } });
    }
    let first = out.stdout.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    // --parsable prints "jobid" or "jobid;cluster".
    let job = first.split(';').next().unwrap_or("");
    if job.is_empty() || !job.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Error::new(
            Kind::Infrastructure,
            format!("slurm engine: sbatch printed {:?}, not a job id (it was run with --parsable)", out.stdout.trim()),
        ));
    }
    crate::fault::point("slurm-after-sbatch");
    Ok(job.to_string())
}

/// The job id of the newest array named `name` (`squeue -n`), if Slurm has one.
fn lookup(o: &SlurmOptions, name: &str) -> Result<Option<String>> {
    let args: Vec<String> = ["-h", "-r", "-t", "all", "-n", name, "-o", "%i|%T"].iter().map(|s| s.to_string()).collect();
    let out = call(o, "squeue", &args)?;
    if !out.success() {
        return Err(SlurmEngine::failed(&format!("squeue -n {name}"), &out));
    }
    let newest = out
        .stdout
        .lines()
        .filter_map(|l| l.trim().split('|').next())
        .filter_map(|id| split_id(id).ok())
        .max_by_key(|(job, _)| job.parse::<u64>().unwrap_or(0));
    Ok(newest.map(|(job, _)| job))
}

/// Cancel a task and wait until Slurm says its processes are gone (not running nor
/// completing): scancel only asks, and the task's processes get SIGTERM, then SIGKILL after
/// the cluster's KillWait. A task already gone is not an error.
fn stop_task(o: &SlurmOptions, target: StopTarget) -> Result<()> {
    let engine_id = match target {
        StopTarget::Task(id) => id,
        StopTarget::Submitting(b, task) => match b.wait() {
            Ok(job) => format!("{job}_{task}"),
            // No job was made.
            Err(_) => return Ok(()),
        },
        StopTarget::ByName(name, task) => match lookup(o, &name)? {
            Some(job) => format!("{job}_{task}"),
            None => return Ok(()),
        },
    };
    let engine_id = engine_id.as_str();
    let out = call(o, "scancel", &[engine_id.to_string()])?;
    if !out.success() && !gone(&out) {
        return Err(SlurmEngine::failed(&format!("scancel {engine_id}"), &out));
    }
    let deadline = Instant::now() + o.command_timeout;
    loop {
        match task_state_now(o, engine_id)? {
            None => return Ok(()),
            Some(t) if !matches!(map_state(&t), Ok(JobState::Running | JobState::Queued | JobState::Stuck(_))) => return Ok(()),
            Some(t) if Instant::now() >= deadline => {
                return Err(Error::new(
                    Kind::Infrastructure,
                    format!("slurm engine: task {engine_id} is still {} {:.0} s after scancel", t.state, o.command_timeout.as_secs_f64()),
                )
                .hint(
                    "check the node with `scontrol show node` and the task's processes; the controller will not reuse its run directory",
                ))
            }
            Some(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(state: &str, reason: &str) -> TaskState {
        TaskState { state: state.into(), reason: reason.into() }
    }

    #[test]
    fn a_tasks_kind_of_device_is_its_request_unless_the_config_names_one() {
        let kind = |f: &dyn Fn(&mut SlurmOptions)| {
            let mut o = SlurmOptions::new("/w");
            f(&mut o);
            SlurmEngine::new(o).next_device().unwrap()
        };
        assert_eq!(kind(&|_| {}), "slurm partition=(default) gres=gpu:1");
        assert_eq!(
            kind(&|o| {
                o.partition = Some("a100".into());
                o.sbatch_args = vec!["--time=1:00:00".into(), "-C".into(), "sxm".into(), "--gpus-per-task=1".into()];
            }),
            "slurm partition=a100 gres=gpu:1 C=sxm gpus-per-task=1"
        );
        assert_eq!(kind(&|o| o.exclusive = true), "slurm partition=(default) exclusive");
        assert_eq!(kind(&|o| o.device_kind = Some("h100-80gb".into())), "slurm h100-80gb");
    }

    #[test]
    fn slurm_states_map_to_the_controllers() {
        assert_eq!(map_state(&ts("PENDING", "Resources")).unwrap(), JobState::Queued);
        assert_eq!(map_state(&ts("RUNNING", "None")).unwrap(), JobState::Running);
        // Completing: the worker exited but Slurm is still cleaning up its processes.
        assert_eq!(map_state(&ts("COMPLETING", "None")).unwrap(), JobState::Running);
        assert_eq!(map_state(&ts("COMPLETED", "None")).unwrap(), JobState::Finished);
        assert_eq!(map_state(&ts("FAILED", "NonZeroExitCode")).unwrap(), JobState::Finished);
        assert_eq!(map_state(&ts("CANCELLED+", "None")).unwrap(), JobState::Failed("slurm: CANCELLED".into()));
        assert_eq!(map_state(&ts("TIMEOUT", "TimeLimit")).unwrap(), JobState::Failed("slurm: TIMEOUT (TimeLimit)".into()));
        assert!(map_state(&ts("WEIRD", "x")).unwrap_err().message.contains("WEIRD"));
        // Pending for a reason only someone's action lifts: stuck, with the reason; a queue
        // wait (priority, resources, limits) is not.
        for reason in [
            "JobHeldUser",
            "JobHeldAdmin",
            "ReqNodeNotAvail,_UnavailableNodes:n1",
            "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions",
            "PartitionDown",
            "DependencyNeverSatisfied",
        ] {
            assert_eq!(map_state(&ts("PENDING", reason)).unwrap(), JobState::Stuck(format!("slurm: PENDING ({reason})")));
        }
        for reason in ["Priority", "Resources", "QOSMaxJobsPerUserLimit", "BeginTime"] {
            assert_eq!(map_state(&ts("PENDING", reason)).unwrap(), JobState::Queued, "{reason}");
        }
        assert_eq!(map_state(&ts("REQUEUE_HOLD", "None")).unwrap(), JobState::Stuck("slurm: REQUEUE_HOLD".into()));
    }

    #[test]
    fn ids_are_job_underscore_task() {
        assert_eq!(split_id("123_4").unwrap(), ("123".to_string(), 4));
        for bad in ["123", "_4", "12a_4", "123_x", ""] {
            assert!(split_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_batch_script_runs_trial_i_for_task_i() {
        let dir = tempfile::tempdir().unwrap();
        let trial = |id: &str| TrialSpec {
            id: id.into(),
            repo: "/r".into(),
            incumbent: "a".into(),
            candidate: "b".into(),
            out_dir: dir.path().join(id),
        };
        let trials = [trial("e1"), trial("it's e2")];
        let worker = vec![
            vec!["sh".to_string(), "-c".into(), "echo one $RATCHET_TRIAL_ID".into()],
            vec!["printf".to_string(), "%s|".into(), "two words".into(), "$HOME".into()],
        ];
        let script = dir.path().join("s.sh");
        std::fs::write(&script, SlurmEngine::batch_script(&trials, &worker)).unwrap();
        let run = |task: &str| std::process::Command::new("sh").arg(&script).env("SLURM_ARRAY_TASK_ID", task).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&run("0").stdout), "one e1\n");
        assert_eq!(String::from_utf8_lossy(&run("1").stdout), "two words|$HOME|");
        let none = run("2");
        assert_eq!(none.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&none.stderr).contains("no trial for array task 2"));
    }

    #[test]
    fn a_controller_that_does_not_answer_is_named_as_such() {
        // sbatch as Slurm prints it when slurmctld is down (src/sbatch/sbatch.c, slurm_strerror).
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let down = "#!/bin/sh\necho 'sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)' >&2\nexit 1\n";
        let p = bin.join("sbatch");
        std::fs::write(&p, down).unwrap();
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let mut o = SlurmOptions::new(dir.path().join("work"));
        o.bin_dir = Some(bin);
        let mut e = SlurmEngine::new(o);
        let t =
            TrialSpec { id: "t1".into(), repo: "/r".into(), incumbent: "a".into(), candidate: "b".into(), out_dir: dir.path().join("t1") };
        // sbatch runs beside the caller: its failure is a poll's error once it has answered, the
        // machine's (polls are asked again), not a setting's.
        let jobs = e.submit(&[t], &[vec!["true".into()]]).unwrap();
        let err = loop {
            match e.poll(&jobs[0]) {
                Ok(JobState::Queued) => std::thread::sleep(Duration::from_millis(10)),
                Ok(other) => panic!("a failed sbatch polls as {other:?}"),
                Err(err) => break err,
            }
        };
        assert_eq!(err.kind, Kind::Infrastructure);
        let hint = err.hint.unwrap_or_default();
        assert!(hint.contains("slurmctld") && hint.contains("does not answer"), "{hint}");
        assert!(!hint.contains("partition"), "{hint}");
    }

    /// An engine whose `squeue` is `body` (a shell script's), logging each call's arguments.
    fn with_squeue(dir: &std::path::Path, body: &str) -> (SlurmEngine, PathBuf) {
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let log = dir.join("calls");
        let p = bin.join("squeue");
        std::fs::write(&p, format!("#!/bin/sh\necho \"$*\" >> {}\n{body}", log.display())).unwrap();
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let mut o = SlurmOptions::new(dir.join("work"));
        o.bin_dir = Some(bin);
        (SlurmEngine::new(o), log)
    }

    /// Lists task 0 of every job id given with -j, as running.
    const RUNNING: &str =
        "while [ $# -gt 0 ]; do [ \"$1\" = -j ] && ids=\"$2\"; shift; done\nfor j in $(echo \"$ids\" | tr , ' '); do echo \"${j}_0|RUNNING|None\"; done\n";

    fn handle(id: &str) -> JobHandle {
        JobHandle { trial: id.to_string(), engine_id: id.to_string(), slot: None }
    }

    /// Polls `job` until it is no longer `Queued` (the listing under way has landed).
    fn settled(e: &mut SlurmEngine, job: &JobHandle) -> JobState {
        loop {
            match e.poll(job).unwrap() {
                JobState::Queued => std::thread::sleep(Duration::from_millis(20)),
                s => return s,
            }
        }
    }

    #[test]
    fn the_tasks_of_every_watched_array_are_listed_in_one_squeue() {
        let dir = tempfile::tempdir().unwrap();
        let (mut e, log) = with_squeue(dir.path(), RUNNING);
        let jobs: Vec<JobHandle> = ["101_0", "102_0", "103_0"].iter().map(|id| handle(id)).collect();
        for j in &jobs {
            e.poll(j).unwrap();
        }
        for j in &jobs {
            assert_eq!(settled(&mut e, j), JobState::Running);
        }
        // Once the three are watched, one call answers all of them.
        std::thread::sleep(LISTING_TTL);
        let before = std::fs::read_to_string(&log).unwrap().lines().count();
        for j in &jobs {
            e.poll(j).unwrap();
        }
        drop(e);
        let calls: Vec<String> = std::fs::read_to_string(&log).unwrap().lines().skip(before).map(str::to_string).collect();
        assert_eq!(calls.len(), 1, "{calls:?}");
        assert!(calls[0].contains("-j 101,102,103"), "{calls:?}");
    }

    #[test]
    fn a_poll_answers_at_once_while_squeue_has_not() {
        // squeue answers only once `release` exists, which the test makes after the polls: a
        // poll that waited for it would never come back.
        let dir = tempfile::tempdir().unwrap();
        let release = dir.path().join("release");
        let wait = format!("while [ ! -e '{}' ] && [ -d '{}' ]; do sleep 0.05; done\n", release.display(), dir.path().display());
        let (mut e, _) = with_squeue(dir.path(), &format!("{wait}{RUNNING}"));
        let job = handle("201_0");
        for _ in 0..3 {
            assert_eq!(e.poll(&job).unwrap(), JobState::Queued, "no listing has answered yet");
        }
        std::fs::write(&release, "").unwrap();
        assert_eq!(settled(&mut e, &job), JobState::Running);
    }

    #[test]
    fn a_failed_listing_is_every_polls_error_until_one_succeeds() {
        let dir = tempfile::tempdir().unwrap();
        let ok = dir.path().join("ok");
        let body = format!(
            "[ -e '{}' ] || {{ echo 'squeue: error: Unable to contact slurm controller (connect failure)' >&2; exit 1; }}\n{RUNNING}",
            ok.display()
        );
        let (mut e, _) = with_squeue(dir.path(), &body);
        let job = handle("301_0");
        let err = loop {
            match e.poll(&job) {
                Ok(JobState::Queued) => std::thread::sleep(Duration::from_millis(20)),
                Ok(s) => panic!("{s:?} from a listing that failed"),
                Err(err) => break err,
            }
        };
        assert_eq!(err.kind, Kind::Infrastructure);
        assert!(err.hint.unwrap_or_default().contains("slurmctld"));
        assert!(e.poll(&job).is_err(), "said again at the next poll");
        std::fs::write(&ok, "").unwrap();
        let state = loop {
            match e.poll(&job) {
                Ok(JobState::Queued) | Err(_) => std::thread::sleep(Duration::from_millis(20)),
                Ok(s) => break s,
            }
        };
        assert_eq!(state, JobState::Running);
    }
}
