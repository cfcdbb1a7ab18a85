//! Where benchmark processes are spawned (with [`super::preload`], which forks a Python run from
//! a pre-imported parent and reuses this file's logs and kills): each plain run is `sh -c COMMAND`
//! in its own process group, its output streamed into capped log files, with a wall-clock timeout, and a kill of
//! everything it started (SIGTERM, then SIGKILL) on timeout, interruption or exit. Behind a
//! trait so tests can fake it.
//!
//! Each run has a supervisor of its own ([`super::shim`]): the run's child subreaper, so every
//! process the run starts, however it daemonises (`setsid`, `env -i`, a double fork), stays its
//! descendant and dies with the run, and a run never kills what another run (another thread,
//! another worker) started. Every run also carries a unique `RATCHET_RUN_TOKEN` in its
//! environment. `run.pgid` records the token (before the spawn), the supervisor and the group's
//! leader with their start times, so a later ratchet stops what a dead one left behind and
//! never an unrelated process that reused a pid.

use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The environment variable that marks every process of one run.
pub const TOKEN_VAR: &str = "RATCHET_RUN_TOKEN";
/// The run's spawn time, CLOCK_MONOTONIC ns: the benchmark's first phase is measured from it.
pub const SPAWN_VAR: &str = "RATCHET_SPAWN_NS";
/// Bytes of a stream kept from its start in the run's log.
pub const LOG_HEAD_BYTES: usize = 1 << 20;
/// Bytes of a stream kept from its end in the run's log (held in memory while the run goes on).
pub const LOG_TAIL_BYTES: usize = 1 << 20;
/// Longest stdout line scanned for `RESULT:` / `REGIME:`.
const MAX_SUMMARY_LINE: usize = 4096;

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
    /// Interrupts the run (SIGTERM, then SIGKILL after a short grace) when set.
    pub cancel: crate::signals::Cancel,
    /// Fork the run from a pre-imported Python parent when its command allows
    /// ([`super::preload`]); otherwise, or when that fails to start, a plain process.
    pub preload: bool,
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
    /// The last `RESULT:` and `REGIME:` lines of stdout, as read from the stream (the log may
    /// have dropped the middle of a long output).
    pub summary_lines: Vec<String>,
    /// The last lines of each stream, kept in memory whether or not the logs could be written
    /// (on a full disk they cannot, and the benchmark's own message would be lost).
    pub stdout_tail: String,
    pub stderr_tail: String,
    /// Why a log could not be written in full (`No space left on device`), if it could not.
    pub log_error: Option<String>,
    /// Forked from a pre-imported parent ([`super::preload`]) rather than started afresh.
    pub forked: bool,
}

impl RunOutput {
    /// A run that ended as `exit`, `start` being its spawn, from what its two logs kept.
    pub(super) fn ended(exit: Exit, start: Instant, out: StreamEnd, err: StreamEnd, forked: bool) -> RunOutput {
        RunOutput {
            exit,
            wall_s: start.elapsed().as_secs_f64(),
            stdout_path: out.path,
            stderr_path: err.path,
            summary_lines: out.summary_lines,
            stdout_tail: out.tail,
            stderr_tail: err.tail,
            log_error: out.write_error.or(err.write_error),
            forked,
        }
    }
}

pub trait Executor {
    fn run(&mut self, spec: &RunSpec) -> std::io::Result<RunOutput>;
}

/// Runs benchmarks as real processes.
pub struct ProcessExecutor;

/// How long an interrupted run gets between SIGTERM and SIGKILL: short, so Ctrl-C is prompt.
pub(super) const INTERRUPT_GRACE: Duration = Duration::from_millis(1000);

/// A token no other run (of this or another ratchet) has.
pub(super) fn new_token() -> String {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("{}-{nanos}-{}", std::process::id(), N.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
}

/// What `run.pgid` holds.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunRecordFile {
    /// The group leader's pid (= pgid); 0 until the supervisor reported it.
    pub pgid: i32,
    /// The leader's start time (clock ticks after boot, /proc/PID/stat field 22), to tell it
    /// from a later process that reused the pid.
    pub start: u64,
    pub token: String,
    /// The run's supervisor (see [`super::shim`]) and its start time; 0 until the spawn returned
    /// (and in records written before there was one).
    #[serde(default)]
    pub supervisor: i32,
    #[serde(default)]
    pub supervisor_start: u64,
}

pub(super) fn write_record(path: &Path, rec: &RunRecordFile) -> std::io::Result<()> {
    let tmp = path.with_extension("pgid.tmp");
    std::fs::write(&tmp, serde_json::to_vec(rec).map_err(std::io::Error::other)?)?;
    std::fs::rename(&tmp, path)
}

impl ProcessExecutor {
    /// The run as a fresh process under its supervisor. (`ProcessExecutor`'s [`Executor`] impl,
    /// in `bench/mod.rs`, forks it from a pre-imported parent instead where it can.)
    pub fn spawn(spec: &RunSpec, token: &str) -> std::io::Result<RunOutput> {
        std::fs::create_dir_all(&spec.log_dir).map_err(crate::fsutil::io_at(&spec.log_dir))?;
        let stdout_path = spec.log_dir.join("stdout.log");
        let stderr_path = spec.log_dir.join("stderr.log");
        let token = token.to_string();
        // Written before the spawn: a ratchet killed right after it still names the run.
        if let Some(f) = &spec.pgid_file {
            write_record(f, &RunRecordFile { token: token.clone(), ..RunRecordFile::default() })?;
        }
        let interrupt_grace = INTERRUPT_GRACE.min(spec.grace);
        let (status_r, status_w) = status_pipe()?;
        let mut cmd = supervisor_command(spec, &token, interrupt_grace, &status_w);
        cmd.env(SPAWN_VAR, monotonic_ns().to_string());
        let start = Instant::now();
        let spawned = cmd.spawn();
        drop(cmd);
        drop(status_w);
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                if let Some(f) = &spec.pgid_file {
                    let _ = std::fs::remove_file(f);
                }
                return Err(std::io::Error::new(e.kind(), format!("cannot start the run's supervisor (/proc/self/exe): {e}")));
            }
        };
        let sup = child.id() as i32;
        // A ratchet killed here has recorded only the run's token: recovery must find it by that.
        crate::fault::point("after-spawn");
        let sup_start = proc_stat(sup).map(|s| s.start).unwrap_or(0);
        let mut rec = RunRecordFile { pgid: 0, start: 0, token: token.clone(), supervisor: sup, supervisor_start: sup_start };
        if let Some(f) = &spec.pgid_file {
            write_record(f, &rec)?;
        }
        let mut status = std::io::BufReader::new(status_r);
        let ready = read_status_line(&mut status);
        let Some((pgid, leader_start)) = ready.strip_prefix("ready ").and_then(|r| {
            let (p, s) = r.split_once(' ')?;
            Some((p.parse::<i32>().ok()?, s.parse::<u64>().ok()?))
        }) else {
            let _ = child.kill();
            let _ = child.wait();
            if let Some(f) = &spec.pgid_file {
                let _ = std::fs::remove_file(f);
            }
            let why = ready.strip_prefix("error ").unwrap_or("it exited without starting the benchmark");
            return Err(std::io::Error::other(format!("the run's supervisor failed: {why}")));
        };
        if let Some(f) = &spec.pgid_file {
            (rec.pgid, rec.start) = (pgid, leader_start);
            write_record(f, &rec)?;
        }
        let out_log = CappedLog::spawn(child.stdout.take(), &stdout_path, true)?;
        let err_log = CappedLog::spawn(child.stderr.take(), &stderr_path, false)?;
        let mut sleep = Duration::from_millis(2);
        // Once a stop is asked for: how the run ended, and when to stop waiting for the
        // supervisor to do it.
        let mut stopping: Option<(Exit, Instant)> = None;
        let sup_status = loop {
            if let Some(st) = child.try_wait()? {
                break Some(st);
            }
            if stopping.is_none() && spec.cancel.is_cancelled() {
                signal(sup, libc::SIGINT);
                stopping = Some((Exit::Interrupted, Instant::now() + interrupt_grace + SUPERVISOR_SLACK));
            }
            if stopping.is_none() && start.elapsed() >= spec.timeout {
                signal(sup, libc::SIGTERM);
                stopping = Some((Exit::Timeout, Instant::now() + spec.grace + SUPERVISOR_SLACK));
            }
            if stopping.is_some_and(|(_, t)| Instant::now() > t) {
                break None;
            }
            std::thread::sleep(sleep);
            sleep = (sleep * 2).min(Duration::from_millis(25));
        };
        let last = if sup_status.is_some() { read_status_line(&mut status) } else { String::new() };
        let reported = last.strip_prefix("exit ").and_then(|r| match r.split_once(' ')? {
            ("code", n) => Some(Exit::Code(n.parse().ok()?)),
            ("signal", n) => Some(Exit::Signal(n.parse().ok()?)),
            _ => None,
        });
        if reported.is_none() {
            // The supervisor is stuck or was killed before it reported the run's end: stop it,
            // and kill what is left of the run by its marks (group, token, descent).
            let _ = child.kill();
            let _ = child.wait();
            kill_run(pgid, &token);
        }
        let exit = match (stopping, reported, sup_status) {
            (Some((how, _)), _, _) => how,
            (None, Some(e), _) => e,
            (None, None, Some(st)) => status_exit(&st),
            (None, None, None) => Exit::Code(-1),
        };
        let out_end = out_log.finish();
        let err_end = err_log.finish();
        if let Some(f) = &spec.pgid_file {
            let _ = std::fs::remove_file(f);
        }
        Ok(RunOutput::ended(exit, start, out_end, err_end, false))
    }
}

/// CLOCK_MONOTONIC in ns: one clock for every process of the machine (Python's
/// `time.monotonic_ns()` on Linux), so a benchmark can subtract ratchet's stamp from its own.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given and nothing else.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// How much longer than its grace the supervisor gets to stop a run before ratchet kills it.
pub(super) const SUPERVISOR_SLACK: Duration = Duration::from_secs(3);

/// `/proc/self/exe --ratchet-run-supervisor` with the run's environment: the supervisor (see
/// [`super::shim`]) in a process group of its own, the status pipe's write end as its fd 3.
fn supervisor_command(spec: &RunSpec, token: &str, interrupt_grace: Duration, status_w: &std::os::fd::OwnedFd) -> Command {
    use super::shim;
    use std::os::fd::AsRawFd;
    let ms = |d: Duration| d.as_millis().min(u64::MAX as u128 / 4).to_string();
    let mut cmd = Command::new("/proc/self/exe");
    cmd.arg(shim::FLAG).current_dir(&spec.dir).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    // A group of its own: the terminal's SIGINT goes to ratchet alone, which decides how to stop
    // the run.
    crate::process::own_group(&mut cmd);
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    cmd.env(TOKEN_VAR, token)
        .env(shim::ENV_MARK, "1")
        .env(shim::ENV_COMMAND, &spec.command)
        .env(shim::ENV_GRACE_MS, ms(spec.grace))
        .env(shim::ENV_INTERRUPT_GRACE_MS, ms(interrupt_grace))
        // Its own backstop, for a ratchet that dies (SIGKILL) before the timeout.
        .env(shim::ENV_LIMIT_MS, ms(spec.timeout.saturating_add(spec.grace).saturating_add(Duration::from_secs(10))));
    let parent = std::process::id() as libc::pid_t;
    cmd.env(shim::ENV_PARENT, parent.to_string());
    let fd = status_w.as_raw_fd();
    // SAFETY: between fork and exec only dup2/fcntl/prctl/getppid, which are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            let r = if fd == shim::STATUS_FD { libc::fcntl(fd, libc::F_SETFD, 0) } else { libc::dup2(fd, shim::STATUS_FD) };
            if r < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The supervisor hears of ratchet's death at once (a SIGKILL leaves no time to send
            // it anything): the kernel sends it SIGINT, which stops the run as Ctrl-C would.
            // The signal follows the thread that spawns, which waits for the run to end.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGINT as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Ratchet died before the prctl took effect: start nothing.
            if libc::getppid() != parent {
                return Err(std::io::Error::other("ratchet exited while starting the run"));
            }
            Ok(())
        });
    }
    cmd
}

/// A pipe with both ends close-on-exec (the child gets its end as fd 3 by dup2).
fn status_pipe() -> std::io::Result<(std::fs::File, std::os::fd::OwnedFd)> {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two fds on success, which are then owned here.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fresh fds from pipe2, owned by nothing else.
    unsafe { Ok((std::fs::File::from_raw_fd(fds[0]), std::os::fd::OwnedFd::from_raw_fd(fds[1]))) }
}

/// One line the supervisor wrote (empty at the end of the pipe); bounded.
fn read_status_line(r: &mut impl std::io::BufRead) -> String {
    let mut line = Vec::new();
    use std::io::BufRead;
    let _ = r.by_ref().take(4096).read_until(b'\n', &mut line);
    String::from_utf8_lossy(&line).trim().to_string()
}

fn signal(pid: i32, sig: i32) {
    if pid > 1 {
        // SAFETY: a signal to the supervisor this executor started.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

fn status_exit(status: &std::process::ExitStatus) -> Exit {
    match (status.code(), status.signal()) {
        (Some(c), _) => Exit::Code(c),
        (None, Some(s)) => Exit::Signal(s),
        (None, None) => Exit::Code(-1),
    }
}

pub use super::shim::{proc_stat, ProcStat};

fn has_token(pid: i32, needle: &[u8]) -> bool {
    let Ok(f) = std::fs::File::open(format!("/proc/{pid}/environ")) else { return false };
    let mut env = Vec::new();
    // The environment is bounded by the kernel's argument limit; cap the read anyway.
    if f.take(4 << 20).read_to_end(&mut env).is_err() {
        return false;
    }
    env.split(|&b| b == 0).any(|kv| kv == needle)
}

/// Live processes of a run: those carrying its token, in its process group, or descending from
/// its leader (a descendant that cleared its environment).
fn run_processes(pgid: i32, token: &str) -> Vec<(i32, ProcStat)> {
    let me = std::process::id() as i32;
    let needle = format!("{TOKEN_VAR}={token}").into_bytes();
    let Ok(rd) = std::fs::read_dir("/proc") else { return vec![] };
    let all: Vec<(i32, ProcStat)> = rd
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .filter_map(|pid| Some((pid, proc_stat(pid)?)))
        .collect();
    let parent: std::collections::HashMap<i32, (i32, i32)> = all.iter().map(|(p, s)| (*p, (s.ppid, s.pgrp))).collect();
    // The leader is the process `pgid` still leading its group: a dead leader's pid reused by
    // an unrelated process (pids wrap at 32768 on many hosts) leads another group, and neither
    // it nor its children are the run's.
    let descends = |mut pid: i32| {
        for _ in 0..64 {
            if pid == pgid {
                return parent.get(&pid).is_some_and(|&(_, g)| g == pgid);
            }
            match parent.get(&pid) {
                Some(&(pp, _)) if pp > 1 => pid = pp,
                _ => return false,
            }
        }
        false
    };
    all.into_iter()
        .filter(|(pid, s)| s.state != 'Z' && ((pgid > 1 && (s.pgrp == pgid || descends(*pid))) || has_token(*pid, &needle)))
        .collect()
}

/// SIGKILL every process of the run and reap those that became ratchet's children, until none
/// is left (bounded: a fork bomb outpacing the kill is left after 2 s).
pub fn kill_run(pgid: i32, token: &str) -> usize {
    let mut killed = std::collections::HashSet::new();
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        crate::process::signal_group(pgid, libc::SIGKILL);
        let procs = run_processes(pgid, token);
        for (pid, _) in &procs {
            // SAFETY: signalling a process identified by the run's token or ancestry.
            unsafe {
                libc::kill(*pid, libc::SIGKILL);
            }
            killed.insert(*pid);
        }
        reap_adopted(&killed);
        if procs.is_empty() || Instant::now() > deadline {
            return killed.len();
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Reap the killed processes that were reparented to ratchet (it is their subreaper), one pid
/// at a time: a blanket wait would steal the exit status of children other code waits for
/// (tests run many experiments in one process).
fn reap_adopted(killed: &std::collections::HashSet<i32>) {
    let me = std::process::id() as i32;
    let Ok(rd) = std::fs::read_dir("/proc") else { return };
    for pid in rd.flatten().filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok()) {
        if killed.contains(&pid) && proc_stat(pid).is_some_and(|s| s.ppid == me && s.state == 'Z') {
            let mut st = 0;
            // SAFETY: waitpid on one specific pid with WNOHANG.
            unsafe {
                libc::waitpid(pid, &mut st, libc::WNOHANG);
            }
        }
    }
}

/// Kill what a dead ratchet's run left behind, as `run.pgid` at `path` records it. First its
/// supervisor, which kills every process of the run (escaped daemons included) and only those:
/// the recorded one when its start time still matches (the pid was not reused), or, when
/// ratchet died before recording it, the supervisor carrying the run's token. Then, as a
/// fallback, the group (only when its leader's start time still matches) and every process
/// carrying the token. Returns the group (or 0 when it was not known).
pub fn kill_recorded_run(path: &Path) -> Option<i32> {
    let text = std::fs::read_to_string(path).ok()?;
    let _ = std::fs::remove_file(path);
    let rec: RunRecordFile = serde_json::from_str(&text).ok()?;
    let group_is_ours =
        |rec: &RunRecordFile| rec.pgid > 1 && proc_stat(rec.pgid).is_some_and(|s| s.start == rec.start && s.pgrp == rec.pgid);
    let had_group = group_is_ours(&rec);
    let supervisors: Vec<i32> = if rec.supervisor > 1 && proc_stat(rec.supervisor).is_some_and(|s| s.start == rec.supervisor_start) {
        vec![rec.supervisor]
    } else if !rec.token.is_empty() {
        supervisors_of(&rec.token)
    } else {
        vec![]
    };
    for &s in &supervisors {
        signal(s, libc::SIGINT);
    }
    // Its interrupt grace is at most a second; then it kills and reaps the rest.
    let deadline = Instant::now() + INTERRUPT_GRACE + SUPERVISOR_SLACK;
    while supervisors.iter().any(|&s| alive(s)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    for &s in &supervisors {
        signal(s, libc::SIGKILL);
    }
    let pgid = if group_is_ours(&rec) { rec.pgid } else { 0 };
    if rec.token.is_empty() && pgid == 0 && supervisors.is_empty() {
        return None;
    }
    let killed = kill_run(pgid, &rec.token);
    (killed > 0 || had_group || !supervisors.is_empty()).then_some(if had_group { rec.pgid } else { 0 })
}

/// The supervisors (processes started with [`super::shim::FLAG`]) that carry `token`.
fn supervisors_of(token: &str) -> Vec<i32> {
    let needle = format!("{TOKEN_VAR}={token}").into_bytes();
    let Ok(rd) = std::fs::read_dir("/proc") else { return vec![] };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            cmdline.split(|&b| b == 0).nth(1) == Some(super::shim::FLAG.as_bytes()) && has_token(pid, &needle)
        })
        .collect()
}

/// Bytes of each stream's end kept in memory for error messages, apart from the log file.
const MEMORY_TAIL_BYTES: usize = 16 << 10;

/// A stream copied into its log as it arrives: the first [`LOG_HEAD_BYTES`] go straight to the
/// file, the last [`LOG_TAIL_BYTES`] are kept in a ring and written at the end after a note of
/// how much was left out. Memory stays at the ring's size whatever the benchmark prints.
pub(super) struct CappedLog {
    path: PathBuf,
    handle: std::thread::JoinHandle<StreamEnd>,
    done: std::sync::mpsc::Receiver<()>,
}

/// What a stream left: its summary lines, its last bytes as text, and why its log could not be
/// written, if it could not.
#[derive(Default)]
pub(super) struct StreamEnd {
    path: PathBuf,
    pub(super) summary_lines: Vec<String>,
    pub(super) tail: String,
    pub(super) write_error: Option<String>,
}

impl CappedLog {
    pub(super) fn spawn(stream: Option<impl Read + Send + 'static>, path: &Path, scan: bool) -> std::io::Result<CappedLog> {
        // A log that cannot even be created (a full disk) still lets the stream be drained and
        // its end kept in memory.
        let (mut file, create_error): (Box<dyn Write + Send>, Option<String>) = match std::fs::File::create(path) {
            Ok(f) => (Box::new(f), None),
            Err(e) => (Box::new(std::io::sink()), Some(format!("cannot create {}: {e}", path.display()))),
        };
        let path = path.to_path_buf();
        let log_path = path.clone();
        let (tx, done) = std::sync::mpsc::channel();
        let handle = std::thread::spawn(move || {
            let mut lines = SummaryScan::default();
            let mut tail = Ring::new(MEMORY_TAIL_BYTES);
            let mut write_error = create_error;
            if let Some(mut stream) = stream {
                let copied = copy_capped(&mut stream, &mut file, LOG_HEAD_BYTES, LOG_TAIL_BYTES, |chunk| {
                    tail.push(chunk);
                    if scan {
                        lines.feed(chunk)
                    }
                });
                if let Ok((_, Some(e))) = copied {
                    write_error.get_or_insert(format!("cannot write {}: {e}", path.display()));
                }
            }
            let _ = tx.send(());
            let (a, b) = tail.parts();
            let tail = String::from_utf8_lossy(&[a, b].concat()).into_owned();
            StreamEnd { path, summary_lines: lines.finish(), tail, write_error }
        });
        Ok(CappedLog { path: log_path, handle, done })
    }

    /// Wait for the stream to close (all writers are dead by now); a writer that escaped every
    /// kill is not waited for past 2 s.
    pub(super) fn finish(self) -> StreamEnd {
        let lost = |path: PathBuf| StreamEnd { path, ..StreamEnd::default() };
        match self.done.recv_timeout(Duration::from_secs(2)) {
            Ok(()) => self.handle.join().unwrap_or_else(|_| lost(self.path)),
            Err(_) => lost(self.path),
        }
    }
}

/// Copy `r` to `w` keeping the first `head` and the last `tail` bytes; `see` gets every chunk.
/// Returns the number of bytes left out and the first error writing to `w` (after which the
/// stream is still drained, but no more is written).
pub fn copy_capped(
    r: &mut impl Read,
    w: &mut impl Write,
    head: usize,
    tail: usize,
    mut see: impl FnMut(&[u8]),
) -> std::io::Result<(u64, Option<std::io::Error>)> {
    let mut buf = vec![0u8; 64 << 10];
    let mut written = 0usize;
    let mut ring = Ring::new(tail);
    let mut write_error = None;
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let chunk = &buf[..n];
        see(chunk);
        let to_head = (head - written).min(n);
        if to_head > 0 && write_error.is_none() {
            // A full disk must not stop the draining of the pipe (the benchmark would block).
            write_error = w.write_all(&chunk[..to_head]).err();
        }
        written += to_head;
        ring.push(&chunk[to_head..]);
    }
    let omitted = ring.total.saturating_sub(ring.len as u64);
    if write_error.is_none() {
        if omitted > 0 {
            write_error = write!(
                w,
                "\n[ratchet: {omitted} bytes left out here; the log keeps the first {} KiB and the last {} KiB of the stream]\n",
                head >> 10,
                tail >> 10
            )
            .err();
        }
        let (a, b) = ring.parts();
        if write_error.is_none() {
            write_error = w.write_all(a).and_then(|_| w.write_all(b)).and_then(|_| w.flush()).err();
        }
    }
    Ok((omitted, write_error))
}

/// The last `cap` bytes of a stream.
struct Ring {
    buf: Vec<u8>,
    start: usize,
    len: usize,
    total: u64,
}

impl Ring {
    fn new(cap: usize) -> Ring {
        Ring { buf: vec![0; cap], start: 0, len: 0, total: 0 }
    }
    fn push(&mut self, mut data: &[u8]) {
        let cap = self.buf.len();
        self.total += data.len() as u64;
        if cap == 0 {
            return;
        }
        if data.len() >= cap {
            data = &data[data.len() - cap..];
            self.buf.copy_from_slice(data);
            self.start = 0;
            self.len = cap;
            return;
        }
        // At most two copies (up to the buffer's end, then from its start): a byte loop costs
        // seconds on a flood of small pipe reads.
        let end = (self.start + self.len) % cap;
        let first = (cap - end).min(data.len());
        self.buf[end..end + first].copy_from_slice(&data[..first]);
        let rest = data.len() - first;
        self.buf[..rest].copy_from_slice(&data[first..]);
        let len = self.len + data.len();
        if len > cap {
            // The oldest bytes were overwritten.
            self.start = (self.start + (len - cap)) % cap;
            self.len = cap;
        } else {
            self.len = len;
        }
    }
    fn parts(&self) -> (&[u8], &[u8]) {
        let cap = self.buf.len();
        if self.start + self.len <= cap {
            (&self.buf[self.start..self.start + self.len], &[])
        } else {
            (&self.buf[self.start..], &self.buf[..(self.start + self.len) % cap])
        }
    }
}

/// Keeps the last `RESULT:` and `REGIME:` lines of a stream (lines longer than
/// [`MAX_SUMMARY_LINE`] are skipped).
#[derive(Default)]
struct SummaryScan {
    line: Vec<u8>,
    overlong: bool,
    result: Option<String>,
    regime: Option<String>,
}

impl SummaryScan {
    fn feed(&mut self, chunk: &[u8]) {
        for &b in chunk {
            if b == b'\n' {
                self.end_line();
            } else if self.line.len() < MAX_SUMMARY_LINE {
                self.line.push(b);
            } else {
                self.overlong = true;
            }
        }
    }
    fn end_line(&mut self) {
        if !self.overlong {
            let text = String::from_utf8_lossy(&self.line);
            let t = text.trim();
            if t.starts_with("RESULT:") {
                self.result = Some(t.to_string());
            } else if t.starts_with("REGIME:") {
                self.regime = Some(t.to_string());
            }
        }
        self.line.clear();
        self.overlong = false;
    }
    fn finish(mut self) -> Vec<String> {
        self.end_line();
        self.result.into_iter().chain(self.regime).collect()
    }
}

/// The last `n` lines of a log file, for error messages.
pub fn tail(path: &std::path::Path, n: usize) -> String {
    // Only the last 64 KiB are read, whatever the log's size.
    let Ok(mut f) = std::fs::File::open(path) else { return String::new() };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(64 * 1024)));
    let mut bytes = Vec::new();
    let _ = f.take(64 * 1024).read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes);
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
            cancel: crate::signals::Cancel::new(),
            preload: false,
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
    fn the_benchmark_starts_as_if_ratchet_had_started_it_directly() {
        // Through the supervisor the benchmark gets the signal dispositions and mask of a direct
        // `sh -c` (SIGPIPE back to default), the run's token, none of the supervisor's own
        // variables and not its status pipe (fd 3).
        let d = tempfile::tempdir().unwrap();
        let signals = "grep -E '^Sig(Blk|Ign)' /proc/self/status";
        let direct = Command::new("sh").args(["-c", signals]).process_group(0).output().unwrap();
        let cmd = format!(
            "{signals}; env | grep -c '^RATCHET_SUPERVISOR'; env | grep -c '^RATCHET_RUN_TOKEN='; [ -e /proc/self/fd/3 ] || echo no-fd-3"
        );
        let out = ProcessExecutor.run(&spec(&cmd, d.path(), 10_000)).unwrap();
        let text = std::fs::read_to_string(&out.stdout_path).unwrap();
        assert_eq!(text, format!("{}0\n1\nno-fd-3\n", String::from_utf8_lossy(&direct.stdout)));
        let ignored = text.lines().find_map(|l| l.strip_prefix("SigIgn:\t")).map(|h| u64::from_str_radix(h, 16).unwrap()).unwrap();
        assert_eq!(ignored & (1 << (libc::SIGPIPE - 1)), 0, "SIGPIPE is ignored: {text}");
        assert!(text.starts_with("SigBlk:\t0000000000000000\n"), "{text}");
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

    #[test]
    fn daemonised_descendants_are_killed() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("setsid.pid"), d.path().join("double.pid"));
        // One escapes the group with setsid, one double-forks (its parent exits at once) and
        // clears its environment; both outlive the run's leader.
        let cmd = format!(
            "setsid sh -c 'echo $$ > {}; exec sleep 30' </dev/null >/dev/null 2>&1 & \
             (env -i sh -c 'echo $$ > {}; exec sleep 30' </dev/null >/dev/null 2>&1 &) ; sleep 0.3; exit 0",
            a.display(),
            b.display()
        );
        let out = ProcessExecutor.run(&spec(&cmd, d.path(), 10_000)).unwrap();
        assert_eq!(out.exit, Exit::Code(0));
        for f in [&a, &b] {
            let pid: i32 = std::fs::read_to_string(f).unwrap().trim().parse().unwrap();
            assert!(!alive(pid), "{} ({pid}) survived the run", f.display());
        }
    }

    #[test]
    fn huge_output_is_capped_in_the_log_and_result_lines_still_parse() {
        let d = tempfile::tempdir().unwrap();
        // 64 MiB of noise between a first and a last RESULT line: the last one wins, the log
        // keeps only its head and tail.
        let cmd = "echo 'RESULT: latency=9ms'; head -c 67108864 /dev/zero | tr '\\0' x; echo; echo 'RESULT: latency=2ms'; echo 'REGIME: COMPUTE-BOUND'";
        let out = ProcessExecutor.run(&spec(cmd, d.path(), 60_000)).unwrap();
        assert_eq!(out.exit, Exit::Code(0));
        assert_eq!(out.summary_lines, vec!["RESULT: latency=2ms".to_string(), "REGIME: COMPUTE-BOUND".to_string()]);
        let len = std::fs::metadata(&out.stdout_path).unwrap().len() as usize;
        assert!(len <= LOG_HEAD_BYTES + LOG_TAIL_BYTES + 512, "log is {len} bytes");
        let t = tail(&out.stdout_path, 2);
        assert!(t.ends_with("RESULT: latency=2ms\nREGIME: COMPUTE-BOUND"), "{t}");
        let head = std::fs::read(&out.stdout_path).unwrap();
        let text = String::from_utf8_lossy(&head);
        assert!(text.starts_with("RESULT: latency=9ms\n") && text.contains("bytes left out here"));
    }

    #[test]
    fn ring_keeps_the_last_bytes() {
        let mut out = vec![];
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let (omitted, _) = copy_capped(&mut &data[..], &mut out, 100, 300, |_| {}).unwrap();
        assert_eq!(omitted, 10_000 - 400);
        assert_eq!(&out[..100], &data[..100]);
        assert_eq!(&out[out.len() - 300..], &data[data.len() - 300..]);
    }

    #[test]
    fn ring_fed_in_small_pieces_keeps_the_last_bytes() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        for piece in [1, 7, 99, 300, 301, 4096] {
            let mut ring = Ring::new(300);
            for chunk in data.chunks(piece) {
                ring.push(chunk);
            }
            let (a, b) = ring.parts();
            assert_eq!([a, b].concat(), &data[data.len() - 300..], "pieces of {piece}");
            assert_eq!(ring.total, data.len() as u64);
        }
    }

    #[test]
    fn a_reused_leader_pid_in_another_group_is_not_the_runs() {
        // A process whose pid is the group a dead run led, now in another group (the pid was
        // reused), and its child: neither is the run's.
        let mut reused = Command::new("sh").args(["-c", "sleep 30 & wait"]).spawn().unwrap();
        let pid = reused.id() as i32;
        let child = support_wait_child(pid);
        assert_eq!(kill_run(pid, &new_token()), 0, "an unrelated process was killed");
        assert!(alive(pid) && alive(child), "an unrelated process was killed");
        let _ = reused.kill();
        let _ = reused.wait();
        // SAFETY: killing the sleep this test started.
        unsafe {
            libc::kill(child, libc::SIGKILL);
        }
    }

    /// The first child of `pid`, once it has one.
    fn support_wait_child(pid: i32) -> i32 {
        loop {
            let kids = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
            if let Some(c) = kids.split_whitespace().next().and_then(|c| c.parse().ok()) {
                return c;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn recorded_run_is_killed_only_when_its_identity_matches() {
        let d = tempfile::tempdir().unwrap();
        let rec_path = d.path().join("run.pgid");
        // An unrelated process in a group of its own, recorded with a wrong start time (a pid
        // reused since the record was written): it must survive.
        let mut unrelated = Command::new("sleep").arg("30").process_group(0).spawn().unwrap();
        let pid = unrelated.id() as i32;
        let start = proc_stat(pid).unwrap().start;
        write_record(&rec_path, &RunRecordFile { pgid: pid, start: start + 1, token: new_token(), ..Default::default() }).unwrap();
        assert_eq!(kill_recorded_run(&rec_path), None);
        assert!(alive(pid), "an unrelated process was killed");
        // The same when the stale pid is the recorded supervisor's.
        let stale = RunRecordFile { token: new_token(), supervisor: pid, supervisor_start: start + 1, ..Default::default() };
        write_record(&rec_path, &stale).unwrap();
        assert_eq!(kill_recorded_run(&rec_path), None);
        std::thread::sleep(Duration::from_millis(50));
        assert!(alive(pid), "an unrelated process recorded as a supervisor was signalled");
        // With the right identity it goes.
        write_record(&rec_path, &RunRecordFile { pgid: pid, start, token: new_token(), ..Default::default() }).unwrap();
        assert_eq!(kill_recorded_run(&rec_path), Some(pid));
        // (ratchet reaps what it kills, so the handle's wait may find nothing left.)
        let _ = unrelated.wait();
        assert!(!alive(pid));
        // A run recorded by its token alone (ratchet died before it knew the pid) is found by it.
        let token = new_token();
        let mut tagged = Command::new("sleep").arg("30").env(TOKEN_VAR, &token).spawn().unwrap();
        let tagged_pid = tagged.id() as i32;
        write_record(&rec_path, &RunRecordFile { token, ..Default::default() }).unwrap();
        assert_eq!(kill_recorded_run(&rec_path), Some(0));
        let _ = tagged.wait();
        assert!(!alive(tagged_pid));
    }
}
