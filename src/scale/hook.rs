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
        HookEngine { opts, polled: HashMap::new(), polling: HashMap::new(), stops: Stops::default() }
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

    /// A job just submitted counts as polled (queued): its first poll comes an interval later.
    fn submitted(&mut self, h: &JobHandle) {
        self.polled.insert(h.engine_id.clone(), (Instant::now(), JobState::Queued, self.opts.poll_interval));
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
        for (_, b) in self.polling.drain() {
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

    /// One submit call per trial (or one for the batch); when one fails, those already
    /// submitted are cancelled, so a failed submit leaves nothing running that the controller
    /// does not know of.
    fn submit(&mut self, trials: &[TrialSpec], worker: &[Vec<String>]) -> Result<Vec<JobHandle>> {
        if trials.len() != worker.len() {
            return Err(Error::failure(format!("hook engine: {} trials but {} worker commands", trials.len(), worker.len())));
        }
        if trials.is_empty() {
            return Ok(vec![]);
        }
        if self.opts.batch {
            let handles = self.submit_batch(trials, worker)?;
            handles.iter().for_each(|h| self.submitted(h));
            return Ok(handles);
        }
        let mut handles: Vec<JobHandle> = vec![];
        for (t, argv) in trials.iter().zip(worker) {
            match self.submit_one(t, argv) {
                Ok(h) => {
                    self.submitted(&h);
                    handles.push(h)
                }
                Err(e) => {
                    let mut undone = vec![];
                    for h in &handles {
                        if let Err(c) = self.cancel(h) {
                            undone.push(format!("{} ({})", h.engine_id, c.message));
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
        Ok(handles)
    }

    /// At most one poll hook call per job per interval (the controller asks far more often):
    /// in between, the last answer stands. The interval doubles while the answer stays the same,
    /// up to `MAX_BACKOFF` times the configured one, and starts over when it changes.
    /// Answered at once: the poll hook runs on a thread of its own, at most once per interval
    /// (backing off while the state does not change), and each poll says what it last said
    /// (queued before it first answered); a hook that failed is the next poll's error.
    fn poll(&mut self, job: &JobHandle) -> Result<JobState> {
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
        let polling = self.forget(job);
        HookEngine::new(self.opts.clone()).cancel_now(job, polling)
    }

    /// The cancel hook (after a poll hook under way for the job), on a thread of its own.
    fn stop(&mut self, job: &JobHandle) -> Result<()> {
        let polling = self.forget(job);
        let (hooks, j) = (HookEngine::new(self.opts.clone()), job.clone());
        self.stops.start(&job.engine_id, move || hooks.cancel_now(&j, polling));
        Ok(())
    }

    fn stopped(&mut self, job: &JobHandle) -> Result<bool> {
        self.stops.ended(&job.engine_id)
    }

    fn fetch(&mut self, job: &JobHandle, trial: &TrialSpec) -> Result<()> {
        if self.opts.fetch.is_none() {
            return Ok(());
        }
        let cwd = std::env::current_dir()?;
        let trial = &TrialSpec { repo: cwd.join(&trial.repo), out_dir: cwd.join(&trial.out_dir), ..trial.clone() };
        let mut env = self.trial_env(trial);
        env.push(("RATCHET_JOB".into(), job.engine_id.clone()));
        self.call(Hook::Fetch, &trial.id, env, None).map(|_| ())
    }

    /// The `find` hook, where there is one: the token it prints for the job named by the trial
    /// (`None` when it prints nothing, or when no `find` hook is configured).
    fn find(&mut self, trial: &TrialSpec) -> Result<Option<JobHandle>> {
        if self.opts.find.is_none() {
            return Ok(None);
        }
        let out = self.call(Hook::Find, &trial.id, self.trial_env(trial), None)?;
        if out.stdout.trim().is_empty() {
            return Ok(None);
        }
        let token = Self::one_line(Hook::Find, &trial.id, &out, "the job's token, or nothing when there is no such job")?;
        Ok(Some(JobHandle { trial: trial.id.clone(), engine_id: Self::check_token(Hook::Find, &trial.id, token)?, slot: None }))
    }
}

impl HookEngine {
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
    fn submit_batch(&mut self, trials: &[TrialSpec], worker: &[Vec<String>]) -> Result<Vec<JobHandle>> {
        let prepared = trials.iter().zip(worker).map(|(t, argv)| Self::prepare(t, argv)).collect::<Result<Vec<_>>>()?;
        let input: Vec<SubmitInput> = prepared.iter().zip(worker).map(|(t, w)| SubmitInput { trial: t, worker: w }).collect();
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
        trials
            .iter()
            .zip(lines)
            .map(|(t, token)| {
                Ok(JobHandle { trial: t.id.clone(), engine_id: Self::check_token(Hook::SubmitBatch, &t.id, token)?, slot: None })
            })
            .collect()
    }

    fn submit_one(&mut self, t: &TrialSpec, argv: &[String]) -> Result<JobHandle> {
        let t = &Self::prepare(t, argv)?;
        let mut env = self.trial_env(t);
        env.push(("RATCHET_WORKER".into(), shell_join(argv)));
        let input = serde_json::to_vec(&SubmitInput { trial: t, worker: argv }).map_err(|e| Error::failure(e.to_string()))?;
        let out = self.call(Hook::Submit, &t.id, env, Some(input))?;
        let token = Self::one_line(Hook::Submit, &t.id, &out, "the job's token")?;
        Ok(JobHandle { trial: t.id.clone(), engine_id: Self::check_token(Hook::Submit, &t.id, token)?, slot: None })
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
