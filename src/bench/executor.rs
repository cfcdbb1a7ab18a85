//! The only place that spawns benchmark processes: each run is `sh -c COMMAND` in its own process
//! group, with its output in log files, a wall-clock timeout, and a kill of the whole group
//! (SIGTERM, then SIGKILL) on timeout or interruption. Behind a trait so tests can fake it.

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// One run to execute.
#[derive(Debug, Clone)]
pub struct RunSpec {
    pub command: String,
    pub dir: PathBuf,
    pub env: Vec<(String, String)>,
    /// stdout.log and stderr.log are written here.
    pub log_dir: PathBuf,
    pub timeout: Duration,
    /// Time between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// Where to record the run's process group while it runs, so that a ratchet started after
    /// this one died can kill what it left behind.
    pub pgid_file: Option<PathBuf>,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
    Timeout,
    Interrupted,
}

#[derive(Debug, Clone)]
pub struct RunOutput {
    pub exit: Exit,
    pub wall_s: f64,
    pub stdout_path: PathBuf,
    pub stderr_path: PathBuf,
}

pub trait Executor {
    fn run(&mut self, spec: &RunSpec) -> std::io::Result<RunOutput>;
}

/// Runs benchmarks as real processes.
pub struct ProcessExecutor;

/// How long an interrupted run gets between SIGTERM and SIGKILL: short, so Ctrl-C is prompt.
const INTERRUPT_GRACE: Duration = Duration::from_millis(1000);

impl Executor for ProcessExecutor {
    fn run(&mut self, spec: &RunSpec) -> std::io::Result<RunOutput> {
        std::fs::create_dir_all(&spec.log_dir)?;
        let stdout_path = spec.log_dir.join("stdout.log");
        let stderr_path = spec.log_dir.join("stderr.log");
        let mut expr = duct::cmd("sh", ["-c", spec.command.as_str()])
            .dir(&spec.dir)
            .stdin_null()
            .stdout_path(&stdout_path)
            .stderr_path(&stderr_path)
            .unchecked()
            // A group of its own: a timeout or Ctrl-C can then reach grandchildren too, and the
            // terminal's SIGINT goes to ratchet alone, which decides how to stop the run.
            .before_spawn(|c| {
                c.process_group(0);
                Ok(())
            });
        for (k, v) in &spec.env {
            expr = expr.env(k, v);
        }
        let start = Instant::now();
        let handle = expr.start()?;
        let pgid = handle.pids().first().copied().unwrap_or(0) as i32;
        if let Some(f) = &spec.pgid_file {
            std::fs::write(f, pgid.to_string())?;
        }
        let mut sleep = Duration::from_millis(2);
        let exit = loop {
            if let Some(out) = handle.try_wait()? {
                break status_exit(&out.status);
            }
            if crate::signals::interrupted() {
                stop_group(&handle, pgid, INTERRUPT_GRACE.min(spec.grace))?;
                break Exit::Interrupted;
            }
            if start.elapsed() >= spec.timeout {
                stop_group(&handle, pgid, spec.grace)?;
                break Exit::Timeout;
            }
            std::thread::sleep(sleep);
            sleep = (sleep * 2).min(Duration::from_millis(25));
        };
        // The leader is gone; whatever it left behind in its group goes too.
        kill_group(pgid, libc::SIGKILL);
        if let Some(f) = &spec.pgid_file {
            let _ = std::fs::remove_file(f);
        }
        Ok(RunOutput { exit, wall_s: start.elapsed().as_secs_f64(), stdout_path, stderr_path })
    }
}

fn status_exit(status: &std::process::ExitStatus) -> Exit {
    match (status.code(), status.signal()) {
        (Some(c), _) => Exit::Code(c),
        (None, Some(s)) => Exit::Signal(s),
        (None, None) => Exit::Code(-1),
    }
}

fn kill_group(pgid: i32, sig: i32) {
    if pgid > 1 {
        // SAFETY: killpg has no memory effects; ESRCH (no such group) is the expected outcome
        // when everything already exited.
        unsafe {
            libc::killpg(pgid, sig);
        }
    }
}

/// SIGTERM the group, wait up to `grace` for the leader, then SIGKILL the group and reap.
fn stop_group(handle: &duct::Handle, pgid: i32, grace: Duration) -> std::io::Result<()> {
    kill_group(pgid, libc::SIGTERM);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if handle.try_wait()?.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    kill_group(pgid, libc::SIGKILL);
    handle.wait()?;
    Ok(())
}

/// The last `n` lines of a log file, for error messages.
pub fn tail(path: &std::path::Path, n: usize) -> String {
    let Ok(bytes) = std::fs::read(path) else { return String::new() };
    let start = bytes.len().saturating_sub(64 * 1024);
    let text = String::from_utf8_lossy(&bytes[start..]);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Whether process `pid` still runs (a zombie waiting to be reaped does not count).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state is the first field after the parenthesised command name.
        Ok(stat) => stat.rsplit_once(')').map(|(_, rest)| !rest.trim_start().starts_with('Z')).unwrap_or(false),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(cmd: &str, dir: &std::path::Path, timeout_ms: u64) -> RunSpec {
        RunSpec {
            command: cmd.into(),
            dir: dir.to_path_buf(),
            env: vec![("GREETING".into(), "hi".into())],
            log_dir: dir.join("logs"),
            timeout: Duration::from_millis(timeout_ms),
            grace: Duration::from_millis(200),
            pgid_file: None,
        }
    }

    #[test]
    fn exit_code_env_and_logs() {
        let d = tempfile::tempdir().unwrap();
        let out = ProcessExecutor.run(&spec("echo $GREETING; echo oops >&2; exit 3", d.path(), 10_000)).unwrap();
        assert_eq!(out.exit, Exit::Code(3));
        assert_eq!(std::fs::read_to_string(&out.stdout_path).unwrap(), "hi\n");
        assert_eq!(tail(&out.stderr_path, 5), "oops");
    }

    #[test]
    fn timeout_kills_the_whole_group() {
        let d = tempfile::tempdir().unwrap();
        let pidfile = d.path().join("child.pid");
        let cmd = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
        let out = ProcessExecutor.run(&spec(&cmd, d.path(), 300)).unwrap();
        assert_eq!(out.exit, Exit::Timeout);
        assert!(out.wall_s < 5.0);
        let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
        assert!(!alive(pid), "grandchild {pid} survived the timeout");
    }

    #[test]
    fn leftover_background_process_is_killed_after_exit() {
        let d = tempfile::tempdir().unwrap();
        let pidfile = d.path().join("bg.pid");
        let cmd = format!("(sleep 30 & echo $! > {}) ; exit 0", pidfile.display());
        let out = ProcessExecutor.run(&spec(&cmd, d.path(), 10_000)).unwrap();
        assert_eq!(out.exit, Exit::Code(0));
        let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert!(!alive(pid), "background process {pid} survived");
    }
}
