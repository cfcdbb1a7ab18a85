//! The engines' control commands (`sbatch`, `squeue`, a user's submit/poll hook): short calls
//! whose output is parsed, each in its own process group with a wall-clock limit, killed as a
//! group (SIGTERM, then SIGKILL) when it overruns. Benchmark runs go through `bench::executor`.

use crate::error::{Error, Kind, Result};
use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Bytes of each stream kept (a control command prints a line or a table, not a log).
const MAX_OUTPUT: usize = 1 << 20;
/// Between SIGTERM and SIGKILL of an overrunning command's group.
const KILL_GRACE: Duration = Duration::from_secs(2);
/// How long to wait for the output pipes to close after the command exited: a hook that starts
/// the worker in the background without redirecting its output leaves the pipe open, and that
/// must not hold the controller until the worker ends.
const PIPE_GRACE: Duration = Duration::from_millis(500);

/// One control command to run.
#[derive(Debug, Clone)]
pub struct Call {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub stdin: Option<Vec<u8>>,
    pub dir: Option<PathBuf>,
    pub timeout: Duration,
}

/// What a finished command printed.
#[derive(Debug, Clone)]
pub struct Output {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
    /// "exit code 1" / "killed by signal 9 (SIGKILL)", for messages.
    pub fn how(&self) -> String {
        match (self.code, self.signal) {
            (Some(c), _) => format!("exit code {c}"),
            (None, Some(s)) => format!("killed by {}", crate::process::signal(s)),
            _ => "an unknown exit status".into(),
        }
    }
    /// The last lines of stderr (or stdout when stderr is empty), for an error message.
    pub fn tail(&self) -> String {
        let text = if self.stderr.trim().is_empty() { &self.stdout } else { &self.stderr };
        let lines: Vec<&str> = text.trim_end().lines().collect();
        let from = lines.len().saturating_sub(8);
        lines[from..].join("\n")
    }
}

impl Call {
    pub fn new(argv: Vec<String>, timeout: Duration) -> Call {
        Call { argv, env: vec![], stdin: None, dir: None, timeout }
    }

    /// The command as a shell would spell it, for messages.
    pub fn display(&self) -> String {
        self.argv.iter().map(|a| shell_quote(a)).collect::<Vec<_>>().join(" ")
    }

    /// Run it to its end or its limit. A command that cannot start or overruns is an error
    /// naming it; a non-zero exit is not (the caller reads `Output`).
    pub fn run(&self) -> Result<Output> {
        let (program, args) = self.argv.split_first().ok_or_else(|| Error::failure("an empty command"))?;
        let mut cmd = Command::new(program);
        cmd.args(args)
            .stdin(if self.stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // A group of its own, so a timeout reaches everything the command started.
        crate::process::own_group(&mut cmd);
        if let Some(d) = &self.dir {
            // Checked here: spawn reports a missing directory as a missing program.
            if !d.is_dir() {
                return Err(Error::new(
                    Kind::Infrastructure,
                    format!("cannot run `{}`: its working directory {} does not exist", self.display(), d.display()),
                ));
            }
            cmd.current_dir(d);
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().map_err(|e| {
            let hint = if e.kind() == std::io::ErrorKind::NotFound {
                format!("install {program} or put it on PATH")
            } else {
                "check the command and its permissions".into()
            };
            Error::new(Kind::Infrastructure, format!("cannot run `{}`: {e}", self.display())).hint(hint)
        })?;
        let pgid = child.id() as i32;
        if let (Some(mut pipe), Some(data)) = (child.stdin.take(), self.stdin.clone()) {
            // A thread, so a command that never reads its input cannot block us; a closed pipe
            // (the command ignored stdin and exited) is not an error.
            std::thread::spawn(move || {
                let _ = pipe.write_all(&data);
            });
        }
        let out = Collector::spawn(child.stdout.take());
        let err = Collector::spawn(child.stderr.take());
        let start = Instant::now();
        let mut sleep = Duration::from_millis(1);
        let status = loop {
            if let Some(st) = child.try_wait()? {
                break st;
            }
            if start.elapsed() >= self.timeout {
                crate::process::signal_group(pgid, libc::SIGTERM);
                let deadline = Instant::now() + KILL_GRACE;
                while Instant::now() < deadline && child.try_wait()?.is_none() {
                    std::thread::sleep(Duration::from_millis(10));
                }
                crate::process::signal_group(pgid, libc::SIGKILL);
                let _ = child.wait();
                let so_far = Output { code: None, signal: None, stdout: out.take(), stderr: err.take() };
                return Err(Error::new(
                    Kind::Infrastructure,
                    format!("`{}` did not finish within {} s; it was killed", self.display(), seconds(self.timeout)),
                )
                .hint(match so_far.tail() {
                    t if t.is_empty() => "raise the engine's timeout or find out why the command hangs".to_string(),
                    t => format!("it had printed:\n{t}"),
                }));
            }
            std::thread::sleep(sleep);
            sleep = (sleep * 2).min(Duration::from_millis(20));
        };
        let deadline = Instant::now() + PIPE_GRACE;
        while Instant::now() < deadline && !(out.done() && err.done()) {
            std::thread::sleep(Duration::from_millis(2));
        }
        Ok(Output { code: status.code(), signal: status.signal(), stdout: out.take(), stderr: err.take() })
    }
}

/// A failure an engine keeps to say again (at each poll, until the engine answers), as the
/// error it was: an engine that does not answer is Infrastructure, whatever its message.
pub fn unanswered(message: &str, hint: &Option<String>) -> Error {
    let e = Error::new(Kind::Infrastructure, message);
    match hint {
        Some(h) => e.hint(h.clone()),
        None => e,
    }
}

/// Work (an engine's control commands) on a thread of its own, so the controller never waits
/// on it: [`Background::try_take`] answers at once, with the result once the work is done.
pub struct Background<T> {
    rx: std::sync::mpsc::Receiver<Result<T>>,
    /// When the work started.
    pub started: Instant,
}

impl<T: Send + 'static> Background<T> {
    pub fn spawn(work: impl FnOnce() -> Result<T> + Send + 'static) -> Background<T> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(work());
        });
        Background { rx, started: Instant::now() }
    }

    /// The result, once the work is done; `None` while it runs.
    pub fn try_take(&self) -> Option<Result<T>> {
        match self.rx.try_recv() {
            Ok(r) => Some(r),
            Err(std::sync::mpsc::TryRecvError::Empty) => None,
            Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                Some(Err(Error::failure("an engine command's thread stopped without an answer")))
            }
        }
    }

    /// Wait for the result (each command in it has its own limit).
    pub fn wait(self) -> Result<T> {
        self.rx.recv().unwrap_or_else(|_| Err(Error::failure("an engine command's thread stopped without an answer")))
    }
}

/// Jobs being stopped, each by work on a thread of its own (a cancel that waits for its job to
/// end can take the cluster's kill wait), by engine id: the controller asks whether each has
/// ended instead of waiting on it.
#[derive(Default)]
pub struct Stops(std::collections::HashMap<String, Background<()>>);

impl Stops {
    /// Start stopping `id` unless a stop of it is under way.
    pub fn start(&mut self, id: &str, work: impl FnOnce() -> Result<()> + Send + 'static) {
        self.0.entry(id.to_string()).or_insert_with(|| Background::spawn(work));
    }

    /// Whether the stop of `id` has ended (a job never stopped here has): `Ok(false)` while it
    /// runs, its error once it failed.
    pub fn ended(&mut self, id: &str) -> Result<bool> {
        let Some(b) = self.0.get(id) else { return Ok(true) };
        let Some(r) = b.try_take() else { return Ok(false) };
        self.0.remove(id);
        r.map(|()| true)
    }

    /// Wait for the stop of `id`, where one is under way.
    pub fn wait(&mut self, id: &str) -> Result<()> {
        self.0.remove(id).map_or(Ok(()), Background::wait)
    }

    /// Wait for every stop under way (each command in them has its own limit).
    pub fn wait_all(&mut self) {
        for (_, b) in self.0.drain() {
            let _ = b.wait();
        }
    }
}

/// A stream read into memory by a thread (capped), readable before the stream closes.
struct Collector {
    buf: Arc<Mutex<(Vec<u8>, bool)>>,
}

impl Collector {
    fn spawn<R: Read + Send + 'static>(pipe: Option<R>) -> Collector {
        let buf = Arc::new(Mutex::new((Vec::new(), false)));
        let shared = buf.clone();
        std::thread::spawn(move || {
            if let Some(mut p) = pipe {
                let mut chunk = [0u8; 8192];
                while let Ok(n) = p.read(&mut chunk) {
                    if n == 0 {
                        break;
                    }
                    let mut g = shared.lock().unwrap_or_else(|e| e.into_inner());
                    let room = MAX_OUTPUT.saturating_sub(g.0.len());
                    g.0.extend_from_slice(&chunk[..n.min(room)]);
                }
            }
            shared.lock().unwrap_or_else(|e| e.into_inner()).1 = true;
        });
        Collector { buf }
    }
    fn done(&self) -> bool {
        self.buf.lock().unwrap_or_else(|e| e.into_inner()).1
    }
    fn take(&self) -> String {
        let g = self.buf.lock().unwrap_or_else(|e| e.into_inner());
        String::from_utf8_lossy(&g.0).into_owned()
    }
}

/// "60" or "0.5": whole seconds without a fraction.
fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0}")
    } else {
        format!("{s:.1}")
    }
}

/// Quote one word for a POSIX shell: safe words stay as they are, others go in single quotes.
pub fn shell_quote(s: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c);
    if !s.is_empty() && s.chars().all(safe) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// An argument vector as one shell command line.
pub fn shell_join(argv: &[String]) -> String {
    argv.iter().map(|a| shell_quote(a)).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, timeout_ms: u64) -> Call {
        Call::new(vec!["sh".into(), "-c".into(), script.into()], Duration::from_millis(timeout_ms))
    }

    #[test]
    fn quoting_round_trips_through_a_real_shell() {
        let words: Vec<String> =
            ["plain", "", "two words", "it's", "$HOME", "a\"b", "back\\slash", "new\nline", "*"].iter().map(|s| s.to_string()).collect();
        let line = shell_join(&words);
        let script = format!("for a in {line}; do printf '%s\\0' \"$a\"; done");
        let out = sh(&script, 5000).run().unwrap();
        let got: Vec<&str> = out.stdout.split('\0').collect();
        assert_eq!(&got[..words.len()], words.iter().map(|s| s.as_str()).collect::<Vec<_>>().as_slice());
    }

    #[test]
    fn stdin_env_and_exit_code_reach_the_command() {
        let mut c = sh("read x; echo \"$x-$FOO\"; echo oops >&2; exit 3", 5000);
        c.stdin = Some(b"hello\n".to_vec());
        c.env.push(("FOO".into(), "bar".into()));
        let out = c.run().unwrap();
        assert_eq!(out.stdout, "hello-bar\n");
        assert_eq!(out.code, Some(3));
        assert_eq!(out.tail(), "oops");
        assert!(!out.success());
    }

    #[test]
    fn an_overrunning_command_and_its_children_are_killed() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        // The sleep outlives any test: a call that waited for it instead of killing it would
        // not come back with the timeout's error.
        let script = format!("sleep 3000 & echo $! > {}; wait", pidfile.display());
        let err = sh(&script, 300).run().unwrap_err();
        assert!(err.message.contains("did not finish within 0.3 s"), "{}", err.message);
        let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
        // The background sleep was in the group: gone (or a zombie awaiting its reaper) once
        // the kernel has delivered the SIGKILL.
        assert!(crate::process::wait_gone(pid), "{}", std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default());
    }

    #[test]
    fn a_background_child_holding_the_pipe_does_not_hold_the_call() {
        // The child holds the pipe until `release` exists, which this test makes only after the
        // call came back: a call that waited for the pipe to close would end at its timeout,
        // with an error, instead.
        let dir = tempfile::tempdir().unwrap();
        let release = dir.path().join("release");
        // It also ends once the directory is gone: the test's end removes `release` with it, at
        // once, and a child that missed it between two looks would poll forever.
        let script =
            format!("(while [ ! -e '{}' ] && [ -d '{}' ]; do sleep 0.05; done) & echo token-1", release.display(), dir.path().display());
        let out = sh(&script, 600_000).run();
        std::fs::write(&release, "").unwrap();
        assert_eq!(out.unwrap().stdout.trim(), "token-1");
    }

    #[test]
    fn a_missing_working_directory_is_not_called_a_missing_program() {
        let mut c = Call::new(vec!["true".into()], Duration::from_secs(1));
        c.dir = Some("/no/such/dir".into());
        let err = c.run().unwrap_err();
        assert!(err.message.contains("working directory /no/such/dir does not exist"), "{}", err.message);
    }

    #[test]
    fn a_missing_program_is_named() {
        let err = Call::new(vec!["no-such-program-xyz".into()], Duration::from_secs(1)).run().unwrap_err();
        assert!(err.message.contains("no-such-program-xyz"), "{}", err.message);
        assert_eq!(err.kind, Kind::Infrastructure);
    }
}
