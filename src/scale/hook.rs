//! The hook engine: the user's own submit / poll / cancel / fetch shell commands drive any
//! launcher (SkyPilot, Kubernetes Jobs, CI runners) through a small line protocol, documented in
//! docs/scale-out.md ("Hook"); each call is bounded and killed as a process group when it overruns.

use super::command::{shell_join, Background, Call, Output, Stops};
use super::engine::{Engine, JobHandle, JobState, TrialSpec};
use crate::error::{Error, Kind, Result, WithPath};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The longest token a submit hook may print.
pub const MAX_TOKEN: usize = 1024;

/// The user's commands, each run with `sh -c` from `dir`.
#[derive(Debug, Clone)]
pub struct HookOptions {
    pub capacity: usize,
    pub submit: String,
    /// `submit` takes a whole batch at once (`[engine] submit_batch`): a JSON array on stdin,
    /// one token line per trial out, for launchers that start many tasks as one job (a
    /// Kubernetes Indexed Job).
    pub batch: bool,
    pub poll: String,
    pub cancel: String,
    pub fetch: Option<String>,
    /// Optional: prints the token of the job named `$RATCHET_JOB_NAME` (what submit was given),
    /// or nothing when there is none; how a restarted controller finds a job whose token it
    /// never journaled, and `ratchet recover` cancels it.
    pub find: Option<String>,
    /// The engine's work directory: what a job's name (`RATCHET_JOB_NAME`) is derived from.
    pub work_dir: PathBuf,
    /// The limit of each call.
    pub timeout: Duration,
    /// The least time between two polls of one job; it doubles (up to [`MAX_BACKOFF`] times)
    /// while the job's state stays the same. A launcher's API has rate limits (GitHub's: 5000
    /// calls an hour), and a trial takes minutes.
    pub poll_interval: Duration,
    /// The repository root: the hooks' working directory.
    pub dir: PathBuf,
    /// `[engine] device_kind`: the kind of device every trial gets (its noise history's name);
    /// without it a hook's trials decide on their own spread (a hook's request is its own).
    pub device_kind: Option<String>,
}

/// The poll interval when `[engine] poll_interval_s` is not set.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(5);
/// The back-off's cap, as a multiple of the poll interval.
pub const MAX_BACKOFF: u32 = 4;

pub struct HookEngine {
    opts: HookOptions,
    /// Per job token: when it was last polled, what the hook said, and the wait until the next.
    polled: HashMap<String, (Instant, JobState, Duration)>,
    /// Per job token: the poll hook under way, on a thread of its own (a hook may take seconds:
    /// a `kubectl`, a REST call), so the controller never waits on it.
    polling: HashMap<String, Background<JobState>>,
    /// The cancel hooks under way, each on a thread of its own.
    stops: Stops,
    /// Per handle (`NAME[0]`, [`super::engine::named_handle`]): the token its submit hook gave.
    tokens: HashMap<String, String>,
    /// Submit hook calls under way, each on a thread of its own, with the handles they answer.
    submits: Vec<(Vec<String>, Background<Vec<String>>)>,
    /// Per handle the engine did not submit (a restarted controller's): the find hook under way.
    finding: HashMap<String, Background<Option<String>>>,
    /// Handles with no job: why (their submission failed, or no job has the name).
    gone: HashMap<String, Gone>,
    /// Jobs whose stop was asked for before their submission answered, by handle.
    stop_wanted: HashMap<String, JobHandle>,
}

/// Why a handle has no job.
#[derive(Clone)]
enum Gone {
    /// Its submit hook failed: the trial never ran.
    Refused(String),
    /// No job has its name (never submitted, or gone from the launcher since it ended).
    Unknown,
}

/// Where a handle's job stands.
enum Resolved {
    Token(String),
    /// Its submit (or find) hook has not answered yet.
    Pending,
    Gone(Gone),
}

/// Which hook, for messages.
#[derive(Clone, Copy)]
enum Hook {
    Submit,
    SubmitBatch,
    Poll,
    Cancel,
    Fetch,
    Find,
}

impl Hook {
    fn name(self) -> &'static str {
        match self {
            Hook::Submit => "submit",
            Hook::SubmitBatch => "submit_batch",
            Hook::Poll => "poll",
            Hook::Cancel => "cancel",
            Hook::Fetch => "fetch",
            Hook::Find => "find",
        }
    }
}

impl HookEngine {
    pub fn new(opts: HookOptions) -> HookEngine {
        HookEngine {
            opts,
            polled: HashMap::new(),
            polling: HashMap::new(),
            stops: Stops::default(),
            tokens: HashMap::new(),
            submits: vec![],
            finding: HashMap::new(),
            gone: HashMap::new(),
            stop_wanted: Default::default(),
        }
    }

    /// Stop polling a job being cancelled: its poll hook under way, to wait for first.
    fn forget(&mut self, job: &JobHandle) -> Option<Background<JobState>> {
        self.polled.remove(&job.engine_id);
        self.polling.remove(&job.engine_id)
    }

    /// The cancel hook, once a poll hook under way for the job has ended.
    fn cancel_now(&self, job: &JobHandle, polling: Option<Background<JobState>>) -> Result<()> {
        if let Some(b) = polling {
            let _ = b.wait();
        }
        self.call(Hook::Cancel, &job.trial, Self::job_env(job), None).map(|_| ())
    }

    fn command(&self, hook: Hook) -> &str {
        match hook {
            Hook::Submit | Hook::SubmitBatch => &self.opts.submit,
            Hook::Poll => &self.opts.poll,
            Hook::Cancel => &self.opts.cancel,
            Hook::Fetch => self.opts.fetch.as_deref().unwrap_or(""),
            Hook::Find => self.opts.find.as_deref().unwrap_or(""),
        }
    }

    /// Run one hook; a failure to start, an overrun or a non-zero exit is an error naming the
    /// hook, the trial and what the hook printed.
    fn call(&self, hook: Hook, trial: &str, env: Vec<(String, String)>, stdin: Option<Vec<u8>>) -> Result<Output> {
        let cmd = self.command(hook);
        let mut call = Call::new(vec!["sh".into(), "-c".into(), cmd.into()], self.opts.timeout);
        call.env = env;
        call.stdin = stdin;
        call.dir = Some(self.opts.dir.clone());
        let what = format!("hook engine: the {} hook (`{cmd}`) for trial {trial}", hook.name());
        let out = call.run().map_err(|e| {
            let msg = e.message.replace(&format!("`{}`", call.display()), "it");
            Error::new(e.kind, format!("{what}: {msg}")).hint(e.hint.unwrap_or_default())
        })?;
        if !out.success() {
            let tail = out.tail();
            let said = if tail.is_empty() { String::new() } else { format!(":\n{tail}") };
            return Err(Error::new(Kind::Infrastructure, format!("{what} failed ({}){said}", out.how()))
                .hint(format!("run the [engine] {} command by hand with the same environment to see why", hook.name())));
        }
        Ok(out)
    }

    /// The one line a hook must print on stdout.
    fn one_line(hook: Hook, trial: &str, out: &Output, expected: &str) -> Result<String> {
        let lines: Vec<&str> = out.stdout.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        match lines.as_slice() {
            [one] => Ok(one.to_string()),
            _ => Err(Error::new(
                Kind::Infrastructure,
                format!(
                    "hook engine: the {} hook for trial {trial} printed {} lines on stdout ({:?}); it must print exactly one: {expected}",
                    hook.name(),
                    lines.len(),
                    clip(&out.stdout)
                ),
            )
            .hint("send the hook's other messages to stderr (>&2)")),
        }
    }

    /// What the poll hook last said of the job (queued before it first answered).
    fn last_state(&self, id: &str) -> JobState {
        self.polled.get(id).map(|(_, s, _)| s.clone()).unwrap_or(JobState::Queued)
    }

    /// Run the poll hook and read its line.
    fn poll_now(&self, job: &JobHandle) -> Result<JobState> {
        let out = self.call(Hook::Poll, &job.trial, Self::job_env(job), None)?;
        let expected = "queued, running, finished, failed or failed: REASON";
        let line = Self::one_line(Hook::Poll, &job.trial, &out, expected)?;
        parse_state(&line).ok_or_else(|| {
            Error::new(
                Kind::Infrastructure,
                format!("hook engine: the poll hook for trial {} printed {:?}; expected one of: {expected}", job.trial, clip(&line)),
            )
        })
    }

    fn job_env(job: &JobHandle) -> Vec<(String, String)> {
        vec![("RATCHET_JOB".into(), job.engine_id.clone()), ("RATCHET_TRIAL_ID".into(), job.trial.clone())]
    }

    fn trial_env(&self, t: &TrialSpec) -> Vec<(String, String)> {
        vec![
            ("RATCHET_TRIAL_ID".into(), t.id.clone()),
            ("RATCHET_JOB_NAME".into(), super::engine::job_name(&self.opts.work_dir, &t.id)),
            ("RATCHET_OUT_DIR".into(), t.out_dir.to_string_lossy().into_owned()),
            ("RATCHET_REPO".into(), t.repo.to_string_lossy().into_owned()),
            ("RATCHET_INCUMBENT".into(), t.incumbent.clone()),
            ("RATCHET_CANDIDATE".into(), t.candidate.clone()),
        ]
    }
}

/// The poll and cancel hooks under way end before the engine does: no hook outlives the sweep.
impl Drop for HookEngine {
    fn drop(&mut self) {
        // A submission under way lands (or fails) first, so a stop asked for meanwhile reaches
        // its job.
        for (ids, b) in std::mem::take(&mut self.submits) {
            if let Ok(tokens) = b.wait() {
                self.tokens.extend(ids.into_iter().zip(tokens));
            }
        }
        for (id, job) in std::mem::take(&mut self.stop_wanted) {
            if let Some(token) = self.tokens.get(&id).cloned() {
                let _ = self.stop(&JobHandle { engine_id: token, ..job });
            }
        }
        for (_, b) in self.polling.drain() {
            let _ = b.wait();
        }
        for (_, b) in self.finding.drain() {
            let _ = b.wait();
        }
        self.stops.wait_all();
    }
}

fn clip(s: &str) -> String {
    let s = s.trim();
    match s.char_indices().nth(200) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

/// A poll hook's line as a state: `queued`, `running`, `finished`, `failed` or `failed: REASON`,
/// `stuck` or `stuck: REASON` (queued, and the scheduler will not start it by itself).
fn parse_state(line: &str) -> Option<JobState> {
    if let Some(reason) = line.strip_prefix("stuck:") {
        return Some(JobState::Stuck(format!("the poll hook says: {}", clip(reason))));
    }
    match line {
        "queued" => Some(JobState::Queued),
        "stuck" => Some(JobState::Stuck("the poll hook said stuck".into())),
        "running" => Some(JobState::Running),
        "finished" => Some(JobState::Finished),
        "failed" => Some(JobState::Failed("the poll hook said failed".into())),
        _ => {
            let reason = line.strip_prefix("failed:")?.trim();
            Some(JobState::Failed(if reason.is_empty() { "the poll hook said failed".into() } else { reason.to_string() }))
        }
    }
}

/// The trial as the submit hook reads it on stdin.
#[derive(serde::Serialize)]
struct SubmitInput<'a> {
    #[serde(flatten)]
    trial: &'a TrialSpec,
    worker: &'a [String],
}

impl Engine for HookEngine {
    fn name(&self) -> &str {
        "hook"
    }

    fn next_device(&self) -> Option<String> {
        super::engine::device_kind("hook", self.opts.device_kind.as_deref(), None)
    }

    fn capacity(&self) -> usize {
        self.opts.capacity
    }

    /// One submit call per trial (or one for the batch), on a thread of its own: each trial's
    /// handle is its job's name (`RATCHET_JOB_NAME`), known before the hook answers; polls say
    /// `queued` until it has. When one call fails, those already submitted are cancelled, so a
    /// failed submit leaves nothing running that the controller does not know of, and its
    /// trials poll as failed (lost: started again).
    fn submit(&mut self, trials: &[TrialSpec], worker: &[Vec<String>]) -> Result<Vec<JobHandle>> {
        if trials.len() != worker.len() {
            return Err(Error::failure(format!("hook engine: {} trials but {} worker commands", trials.len(), worker.len())));
        }
        if trials.is_empty() {
            return Ok(vec![]);
        }
        let prepared = trials.iter().zip(worker).map(|(t, argv)| Self::prepare(t, argv)).collect::<Result<Vec<_>>>()?;
        let handles: Vec<JobHandle> = trials
            .iter()
            .map(|t| JobHandle { trial: t.id.clone(), engine_id: super::engine::named_handle(&self.job_name(&t.id), 0), slot: None })
            .collect();
        let ids: Vec<String> = handles.iter().map(|h| h.engine_id.clone()).collect();
        let (hooks, worker, names) = (HookEngine::new(self.opts.clone()), worker.to_vec(), ids.clone());
        self.submits.push((ids, Background::spawn(move || hooks.submit_now(&prepared, &worker, &names))));
        Ok(handles)
    }

    /// At most one poll hook call per job per interval (the controller asks far more often):
    /// in between, the last answer stands. The interval doubles while the answer stays the same,
    /// up to `MAX_BACKOFF` times the configured one, and starts over when it changes.
    /// Answered at once: the poll hook runs on a thread of its own, at most once per interval
    /// (backing off while the state does not change), and each poll says what it last said
    /// (queued before it first answered); a hook that failed is the next poll's error.
    fn poll(&mut self, job: &JobHandle) -> Result<JobState> {
        let job = &match self.resolve(&job.engine_id, &job.trial)? {
            Resolved::Token(token) => JobHandle { engine_id: token, ..job.clone() },
            Resolved::Pending => return Ok(JobState::Queued),
            Resolved::Gone(Gone::Refused(why)) => return Ok(JobState::Failed(why)),
            // The run directory tells whether it ran.
            Resolved::Gone(Gone::Unknown) => return Ok(JobState::Finished),
        };
        let id = &job.engine_id;
        if let Some(b) = self.polling.get(id) {
            let Some(answer) = b.try_take() else { return Ok(self.last_state(id)) };
            self.polling.remove(id);
            let state = answer?;
            let base = self.opts.poll_interval;
            let wait = match self.polled.get(id) {
                Some((_, last, wait)) if *last == state => (*wait * 2).min(base * MAX_BACKOFF),
                _ => base,
            };
            self.polled.insert(id.clone(), (Instant::now(), state.clone(), wait));
            return Ok(state);
        }
        if let Some((at, state, wait)) = self.polled.get(id) {
            if at.elapsed() < *wait {
                return Ok(state.clone());
            }
        }
        let (hooks, job) = (HookEngine::new(self.opts.clone()), job.clone());
        self.polling.insert(id.clone(), Background::spawn(move || hooks.poll_now(&job)));
        Ok(self.last_state(id))
    }

    fn cancel(&mut self, job: &JobHandle) -> Result<()> {
        let _ = self.stops.wait(&job.engine_id);
        self.stop_wanted.remove(&job.engine_id);
        // The one call that waits: for the job's submission or lookup, then the cancel hook.
        loop {
            match self.resolve(&job.engine_id, &job.trial)? {
                Resolved::Token(token) => {
                    let job = JobHandle { engine_id: token, ..job.clone() };
                    let polling = self.forget(&job);
                    return HookEngine::new(self.opts.clone()).cancel_now(&job, polling);
                }
                Resolved::Pending => std::thread::sleep(Duration::from_millis(20)),
                Resolved::Gone(_) => return Ok(()),
            }
        }
    }

    /// The cancel hook (after a poll hook under way for the job), on a thread of its own; for a
    /// job whose submission has not answered, once it has.
    fn stop(&mut self, job: &JobHandle) -> Result<()> {
        match self.resolve(&job.engine_id, &job.trial)? {
            Resolved::Token(token) => {
                let j = JobHandle { engine_id: token, ..job.clone() };
                let (polling, hooks) = (self.forget(&j), HookEngine::new(self.opts.clone()));
                self.stops.start(&job.engine_id, move || hooks.cancel_now(&j, polling));
            }
            Resolved::Pending => {
                self.stop_wanted.insert(job.engine_id.clone(), job.clone());
            }
            Resolved::Gone(_) => {}
        }
        Ok(())
    }

    fn stopped(&mut self, job: &JobHandle) -> Result<bool> {
        if self.stop_wanted.contains_key(&job.engine_id) {
            if matches!(self.resolve(&job.engine_id, &job.trial)?, Resolved::Pending) {
                return Ok(false);
            }
            self.stop_wanted.remove(&job.engine_id);
            self.stop(job)?;
        }
        self.stops.ended(&job.engine_id)
    }

    fn fetch(&mut self, job: &JobHandle, trial: &TrialSpec) -> Result<()> {
        if self.opts.fetch.is_none() {
            return Ok(());
        }
        let cwd = std::env::current_dir()?;
        let trial = &TrialSpec { repo: cwd.join(&trial.repo), out_dir: cwd.join(&trial.out_dir), ..trial.clone() };
        let token = match self.resolve(&job.engine_id, &job.trial)? {
            Resolved::Token(t) => t,
            _ => job.engine_id.clone(),
        };
        let mut env = self.trial_env(trial);
        env.push(("RATCHET_JOB".into(), token));
        self.call(Hook::Fetch, &trial.id, env, None).map(|_| ())
    }

    /// A trial's job by its name: the one a controller submitted just before it died, its
    /// handle never journaled. Nothing is called here: a poll reads the token the submit hook
    /// gave (kept under the work directory), else asks the `find` hook, on a thread of its own.
    fn find(&mut self, trial: &TrialSpec) -> Result<Option<JobHandle>> {
        Ok(Some(JobHandle { trial: trial.id.clone(), engine_id: super::engine::named_handle(&self.job_name(&trial.id), 0), slot: None }))
    }
}

impl HookEngine {
    fn job_name(&self, trial: &str) -> String {
        super::engine::job_name(&self.opts.work_dir, trial)
    }

    /// Where the submit hook's token for a handle is kept: a restarted controller's engine
    /// reads it there.
    fn token_file(&self, handle: &str) -> PathBuf {
        self.opts.work_dir.join("hook").join(format!("{handle}.token"))
    }

    /// The token behind a handle, as far as the hooks have answered: from its submission (once
    /// it has answered), the token it left under the work directory, or the `find` hook (on a
    /// thread of its own). A handle journaled before submissions ran beside the controller is
    /// the token itself.
    fn resolve(&mut self, handle: &str, trial: &str) -> Result<Resolved> {
        if super::engine::parse_named_handle(handle).is_none() {
            return Ok(Resolved::Token(handle.to_string()));
        }
        let mut i = 0;
        while i < self.submits.len() {
            let Some(answer) = self.submits[i].1.try_take() else {
                i += 1;
                continue;
            };
            let (ids, _) = self.submits.remove(i);
            match answer {
                Ok(tokens) => {
                    for (id, token) in ids.into_iter().zip(tokens) {
                        self.polled.insert(token.clone(), (Instant::now(), JobState::Queued, self.opts.poll_interval));
                        self.tokens.insert(id, token);
                    }
                }
                Err(e) => {
                    let why = format!("{}{}", e.message, e.hint.map(|h| format!(" ({h})")).unwrap_or_default());
                    ids.into_iter().for_each(|id| drop(self.gone.insert(id, Gone::Refused(why.clone()))));
                }
            }
        }
        if let Some(t) = self.tokens.get(handle) {
            return Ok(Resolved::Token(t.clone()));
        }
        if let Some(g) = self.gone.get(handle) {
            return Ok(Resolved::Gone(g.clone()));
        }
        if self.submits.iter().any(|(ids, _)| ids.iter().any(|id| id == handle)) {
            return Ok(Resolved::Pending);
        }
        if let Ok(token) = std::fs::read_to_string(self.token_file(handle)) {
            self.tokens.insert(handle.to_string(), token.clone());
            return Ok(Resolved::Token(token));
        }
        let Some((name, _)) = super::engine::parse_named_handle(handle) else { unreachable!("checked above") };
        if self.opts.find.is_none() {
            self.gone.insert(handle.to_string(), Gone::Unknown);
            return Ok(Resolved::Gone(Gone::Unknown));
        }
        let b = match self.finding.remove(handle) {
            Some(b) => b,
            None => {
                let (hooks, trial) = (HookEngine::new(self.opts.clone()), trial.to_string());
                Background::spawn(move || hooks.find_now(&name, &trial))
            }
        };
        match b.try_take() {
            None => {
                self.finding.insert(handle.to_string(), b);
                Ok(Resolved::Pending)
            }
            Some(Ok(Some(token))) => {
                self.tokens.insert(handle.to_string(), token.clone());
                Ok(Resolved::Token(token))
            }
            Some(Ok(None)) => {
                self.gone.insert(handle.to_string(), Gone::Unknown);
                Ok(Resolved::Gone(Gone::Unknown))
            }
            Some(Err(e)) => Err(e),
        }
    }

    /// Run the submit hook for these trials (one call per trial, or one for the batch) and keep
    /// each token beside its handle `ids`; when a call fails, cancel the trials it submitted.
    fn submit_now(&self, trials: &[TrialSpec], worker: &[Vec<String>], ids: &[String]) -> Result<Vec<String>> {
        let tokens = if self.opts.batch {
            self.submit_batch(trials, worker)?
        } else {
            let mut tokens: Vec<String> = vec![];
            for (t, argv) in trials.iter().zip(worker) {
                match self.submit_one(t, argv) {
                    Ok(token) => tokens.push(token),
                    Err(e) => {
                        let mut undone = vec![];
                        for (token, t) in tokens.iter().zip(trials) {
                            let job = JobHandle { trial: t.id.clone(), engine_id: token.clone(), slot: None };
                            if let Err(c) = self.cancel_now(&job, None) {
                                undone.push(format!("{token} ({})", c.message));
                            }
                        }
                        return Err(if undone.is_empty() {
                            e
                        } else {
                            let hint = format!("these were submitted and could not be cancelled: {}", undone.join(", "));
                            Error::new(e.kind, e.message).hint(hint)
                        });
                    }
                }
            }
            tokens
        };
        for (id, token) in ids.iter().zip(&tokens) {
            let path = self.token_file(id);
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).with_path(dir)?;
            }
            crate::fsutil::write_atomic(&path, token.as_bytes())?;
        }
        Ok(tokens)
    }

    /// The `find` hook's token for trial `trial`'s job named `name`, where there is one.
    fn find_now(&self, name: &str, trial: &str) -> Result<Option<String>> {
        let env = vec![("RATCHET_JOB_NAME".to_string(), name.to_string()), ("RATCHET_TRIAL_ID".to_string(), trial.to_string())];
        let out = self.call(Hook::Find, name, env, None)?;
        if out.stdout.trim().is_empty() {
            return Ok(None);
        }
        let token = Self::one_line(Hook::Find, name, &out, "the job's token, or nothing when there is no such job")?;
        Self::check_token(Hook::Find, name, token).map(Some)
    }

    /// The trial as the hooks see it: its paths absolute (the hooks run from the repository
    /// root, not from the controller's directory), its run directory created, for a hook that
    /// logs into it.
    fn prepare(t: &TrialSpec, argv: &[String]) -> Result<TrialSpec> {
        if argv.is_empty() {
            return Err(Error::failure(format!("hook engine: trial {} has an empty worker command", t.id)));
        }
        let cwd = std::env::current_dir()?;
        let t = TrialSpec { repo: cwd.join(&t.repo), out_dir: cwd.join(&t.out_dir), ..t.clone() };
        std::fs::create_dir_all(&t.out_dir).with_path(&t.out_dir)?;
        Ok(t)
    }

    fn check_token(hook: Hook, trial: &str, token: String) -> Result<String> {
        if token.len() > MAX_TOKEN || token.chars().any(char::is_control) {
            return Err(Error::new(
                Kind::Infrastructure,
                format!(
                    "hook engine: the {} hook for trial {trial} printed a token of {} bytes or with control characters; at most {MAX_TOKEN} printable bytes",
                    hook.name(),
                    token.len()
                ),
            ));
        }
        Ok(token)
    }

    /// The batch form: every trial in one call, one token line per trial in the same order.
    fn submit_batch(&self, trials: &[TrialSpec], worker: &[Vec<String>]) -> Result<Vec<String>> {
        let input: Vec<SubmitInput> = trials.iter().zip(worker).map(|(t, w)| SubmitInput { trial: t, worker: w }).collect();
        let json = serde_json::to_vec(&input).map_err(|e| Error::failure(e.to_string()))?;
        let env = vec![("RATCHET_TRIAL_COUNT".to_string(), trials.len().to_string())];
        let label = format!("{}..{}", trials[0].id, trials[trials.len() - 1].id);
        let out = self.call(Hook::SubmitBatch, &label, env, Some(json))?;
        let lines: Vec<String> = out.stdout.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string).collect();
        if lines.len() != trials.len() {
            return Err(Error::new(
                Kind::Infrastructure,
                format!(
                    "hook engine: the submit_batch hook for {} trials printed {} token lines ({:?}); it must print one per trial, in order",
                    trials.len(),
                    lines.len(),
                    clip(&out.stdout)
                ),
            )
            .hint(
                "send the hook's other messages to stderr (>&2); whatever it started is not known to ratchet and must be stopped by hand",
            ));
        }
        trials.iter().zip(lines).map(|(t, token)| Self::check_token(Hook::SubmitBatch, &t.id, token)).collect()
    }

    fn submit_one(&self, t: &TrialSpec, argv: &[String]) -> Result<String> {
        let mut env = self.trial_env(t);
        env.push(("RATCHET_WORKER".into(), shell_join(argv)));
        let input = serde_json::to_vec(&SubmitInput { trial: t, worker: argv }).map_err(|e| Error::failure(e.to_string()))?;
        let out = self.call(Hook::Submit, &t.id, env, Some(input))?;
        let token = Self::one_line(Hook::Submit, &t.id, &out, "the job's token")?;
        Self::check_token(Hook::Submit, &t.id, token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poll_lines_parse_strictly() {
        assert_eq!(parse_state("queued"), Some(JobState::Queued));
        assert_eq!(parse_state("stuck"), Some(JobState::Stuck("the poll hook said stuck".into())));
        assert_eq!(parse_state("stuck: held by admin"), Some(JobState::Stuck("the poll hook says: held by admin".into())));
        assert_eq!(parse_state("running"), Some(JobState::Running));
        assert_eq!(parse_state("finished"), Some(JobState::Finished));
        assert_eq!(parse_state("failed: node lost"), Some(JobState::Failed("node lost".into())));
        assert!(matches!(parse_state("failed"), Some(JobState::Failed(_))));
        for bad in ["Running", "done", "failed node lost", ""] {
            assert_eq!(parse_state(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_job_is_polled_no_more_often_than_the_interval_allows() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("polls");
        let opts = HookOptions {
            capacity: 1,
            submit: "cat >/dev/null; echo job-$RATCHET_TRIAL_ID".into(),
            batch: false,
            poll: format!("echo poll >> {}; echo running", log.display()),
            cancel: "true".into(),
            fetch: None,
            find: None,
            work_dir: dir.path().to_path_buf(),
            timeout: Duration::from_secs(10),
            poll_interval: Duration::from_millis(200),
            dir: dir.path().to_path_buf(),
            device_kind: None,
        };
        assert_eq!(HookEngine::new(opts.clone()).next_device(), None, "a hook names no kind of device by itself");
        let kind = HookEngine::new(HookOptions { device_kind: Some("tpu-v5e".into()), ..opts.clone() }).next_device();
        assert_eq!(kind.as_deref(), Some("hook tpu-v5e"));
        let mut e = HookEngine::new(opts);
        let t = TrialSpec {
            id: "t1".into(),
            repo: dir.path().into(),
            incumbent: "a".into(),
            candidate: "b".into(),
            out_dir: dir.path().join("t1"),
        };
        let h = e.submit(std::slice::from_ref(&t), &[vec!["true".to_string()]]).unwrap().pop().unwrap();
        // The controller asks every 25 ms for 1.5 s: 60 asks.
        let start = Instant::now();
        let mut asked = 0;
        while start.elapsed() < Duration::from_millis(1500) {
            assert!(matches!(e.poll(&h).unwrap(), JobState::Queued | JobState::Running));
            asked += 1;
            std::thread::sleep(Duration::from_millis(25));
        }
        let calls = std::fs::read_to_string(&log).map(|s| s.lines().count()).unwrap_or(0);
        // Not before 200 ms after submit, then at 200 ms, 400 ms (state changed: queued to
        // running), then backing off: 400 ms, 800 ms apart: 1.5 s allow at most 4 calls.
        assert!(asked > 40, "{asked}");
        assert!((2..=4).contains(&calls), "{calls} poll hook calls in 1.5 s");
    }
}
