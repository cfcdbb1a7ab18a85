//! The per-run supervisor: a small process between ratchet and one benchmark run. It is the
//! run's child subreaper, so every process the run starts stays its descendant however it
//! daemonises (`setsid`, a cleared environment, a double fork); when the run's leader exits, or
//! on a timeout, a cancel or a backstop deadline, it kills all of them, and only them.
//!
//! The supervisor is the running executable itself (`/proc/self/exe`, the ratchet binary or a
//! test binary linking this crate), caught before `main` by an `.init_array` entry when it is
//! started with [`FLAG`] and [`ENV_MARK`]: a fresh single-threaded process, so no state of
//! ratchet's threads is inherited. Protocol: ratchet passes the command and the graces in the
//! environment and a pipe on fd [`STATUS_FD`]; the supervisor writes `ready PID START` once the
//! leader runs and `exit code N` / `exit signal N` once every process of the run is gone.
//! SIGTERM (or SIGHUP) asks it to stop the run with the run's grace, SIGINT with the interrupt
//! grace: SIGTERM to every process of the run, then SIGKILL.

use std::io::Write;
use std::time::{Duration, Instant};

/// The supervisor's `argv[1]` (an unknown flag to the CLI and to a test harness, so an executable
/// without the entry point refuses it instead of doing something else).
pub const FLAG: &str = "--ratchet-run-supervisor";
/// Set (to "1") in the supervisor's environment; never passed on to the benchmark.
pub const ENV_MARK: &str = "RATCHET_RUN_SUPERVISOR";
pub const ENV_COMMAND: &str = "RATCHET_SUPERVISOR_COMMAND";
pub const ENV_GRACE_MS: &str = "RATCHET_SUPERVISOR_GRACE_MS";
pub const ENV_INTERRUPT_GRACE_MS: &str = "RATCHET_SUPERVISOR_INTERRUPT_GRACE_MS";
/// Milliseconds after which the supervisor stops the run by itself: a backstop for a ratchet
/// that died (SIGKILL) and so never sends the timeout.
pub const ENV_LIMIT_MS: &str = "RATCHET_SUPERVISOR_LIMIT_MS";
/// Ratchet's pid: the supervisor stops the run as soon as its parent is no longer this process
/// (the parent-death signal covers the same case; this also covers a death before it was set).
pub const ENV_PARENT: &str = "RATCHET_SUPERVISOR_PARENT";
/// The supervisor's end of the status pipe.
pub const STATUS_FD: i32 = 3;
/// How long the final kill keeps at a run that forks faster than it is killed.
const KILL_DEADLINE: Duration = Duration::from_secs(5);

#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static ENTRY: extern "C" fn(libc::c_int, *const *const libc::c_char, *const *const libc::c_char) = entry;

/// Runs before `main` in every process of an executable linking this crate: returns at once
/// unless this process was started as a run's supervisor.
#[cfg(target_os = "linux")]
extern "C" fn entry(argc: libc::c_int, argv: *const *const libc::c_char, _envp: *const *const libc::c_char) {
    // SAFETY: glibc passes `main`'s argc/argv to .init_array functions; argv[1] is read only
    // when argc says it exists, and getenv runs before any thread exists.
    let is_supervisor = unsafe {
        !libc::getenv(c"RATCHET_RUN_SUPERVISOR".as_ptr()).is_null()
            && argc >= 2
            && !argv.is_null()
            && !(*argv.add(1)).is_null()
            && std::ffi::CStr::from_ptr(*argv.add(1)).to_bytes() == FLAG.as_bytes()
    };
    if !is_supervisor {
        return;
    }
    let code = std::panic::catch_unwind(supervise).unwrap_or(101);
    // SAFETY: ends this process without running `main` or any exit handler of the host binary.
    unsafe { libc::_exit(code) }
}

/// The fields of /proc/PID/stat that identify and place a process.
#[derive(Debug, Clone, Copy)]
pub struct ProcStat {
    pub state: char,
    pub ppid: i32,
    pub pgrp: i32,
    /// Field 22, starttime: clock ticks after boot (proc(5)).
    pub start: u64,
}

/// Read /proc/PID/stat (proc(5): the fields after the parenthesised command name start with
/// field 3, state; ppid is 4, pgrp 5, starttime 22).
pub fn proc_stat(pid: i32) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = text.rsplit_once(')')?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(ProcStat {
        state: f.first()?.chars().next()?,
        ppid: f.get(1)?.parse().ok()?,
        pgrp: f.get(2)?.parse().ok()?,
        start: f.get(19)?.parse().ok()?,
    })
}

fn status_line(line: &str) {
    // SAFETY: STATUS_FD is this process's end of the status pipe; a write to a pipe whose
    // reader (ratchet) died fails with EPIPE (SIGPIPE is ignored here), which is fine.
    let mut f = std::mem::ManuallyDrop::new(unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(STATUS_FD) });
    let _ = f.write_all(format!("{line}\n").as_bytes());
}

fn env_ms(key: &str, default: u64) -> Duration {
    Duration::from_millis(std::env::var(key).ok().and_then(|v| v.parse().ok()).unwrap_or(default))
}

/// The signals the supervisor waits for instead of handling them.
fn control_signals() -> libc::sigset_t {
    // SAFETY: sigset manipulation on a local value.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGCHLD, libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// Wait up to `d` for one of the control signals; returns it, or 0.
fn wait_signal(set: &libc::sigset_t, d: Duration) -> i32 {
    let ts = libc::timespec { tv_sec: d.as_secs() as libc::time_t, tv_nsec: d.subsec_nanos() as libc::c_long };
    // SAFETY: sigtimedwait on blocked signals with a valid timeout.
    let s = unsafe { libc::sigtimedwait(set, std::ptr::null_mut(), &ts) };
    s.max(0)
}

/// Reap every child that has exited; the leader's wait status goes into `leader_status`.
/// Returns false when no child is left at all.
fn reap(leader: i32, leader_status: &mut Option<i32>) -> bool {
    loop {
        let mut st = 0;
        // SAFETY: waitpid on any child of this (single-threaded) process.
        let pid = unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG) };
        if pid > 0 {
            if pid == leader {
                *leader_status = Some(st);
            }
            continue;
        }
        return pid == 0;
    }
}

/// Every live process below `root` in the process tree (/proc, ppid links).
pub fn descendants(root: i32) -> Vec<i32> {
    let Ok(rd) = std::fs::read_dir("/proc") else { return vec![] };
    let parent: std::collections::HashMap<i32, i32> = rd
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| Some((pid, proc_stat(pid)?.ppid)))
        .collect();
    let under = |mut pid: i32| {
        // The tree is finite and acyclic; the bound only guards against a torn /proc read.
        for _ in 0..4096 {
            match parent.get(&pid) {
                Some(&pp) if pp == root => return true,
                Some(&pp) if pp > 1 => pid = pp,
                _ => return false,
            }
        }
        false
    };
    parent.keys().copied().filter(|&p| p != root && under(p)).collect()
}

/// Signal every process below the supervisor, and the leader's group while the leader is not
/// reaped (afterwards its pid, and so the group's id, may be reused by an unrelated process;
/// the group's members are descendants anyway).
fn signal_run(leader: i32, leader_reaped: bool, sig: i32) {
    let me = std::process::id() as i32;
    // SAFETY: signals to the run's process group and to this process's own descendants.
    unsafe {
        if !leader_reaped {
            crate::process::signal_group(leader, sig);
        }
        for pid in descendants(me) {
            libc::kill(pid, sig);
        }
    }
}

fn supervise() -> i32 {
    // SAFETY: plain fcntl/signal/prctl/sigprocmask calls on this process.
    unsafe {
        // The status pipe stays with the supervisor, never with the benchmark.
        libc::fcntl(STATUS_FD, libc::F_SETFD, libc::FD_CLOEXEC);
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0 {
            status_line(&format!("error cannot become the run's subreaper: {}", std::io::Error::last_os_error()));
            return 1;
        }
        let set = control_signals();
        libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
    let set = control_signals();
    let parent: i32 = std::env::var(ENV_PARENT).ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    // SAFETY: getppid has no preconditions.
    let orphaned = || parent > 0 && unsafe { libc::getppid() } != parent;
    if orphaned() {
        status_line("error ratchet exited before the run started");
        return 1;
    }
    let started = Instant::now();
    let grace = env_ms(ENV_GRACE_MS, 5000);
    let interrupt_grace = env_ms(ENV_INTERRUPT_GRACE_MS, 1000);
    let limit = env_ms(ENV_LIMIT_MS, u64::MAX / 2);
    let command = std::env::var(ENV_COMMAND).unwrap_or_default();
    let mut cmd = std::process::Command::new("sh");
    crate::process::own_group(cmd.args(["-c", command.as_str()]).stdin(std::process::Stdio::null()));
    for k in [ENV_MARK, ENV_COMMAND, ENV_GRACE_MS, ENV_INTERRUPT_GRACE_MS, ENV_LIMIT_MS, ENV_PARENT] {
        cmd.env_remove(k);
    }
    // (std resets the signal mask and SIGPIPE in the child: the benchmark starts as usual.)
    let leader = match cmd.spawn() {
        Ok(c) => c.id() as i32,
        Err(e) => {
            status_line(&format!("error cannot start sh: {e}"));
            return 1;
        }
    };
    let start = proc_stat(leader).map(|s| s.start).unwrap_or(0);
    status_line(&format!("ready {leader} {start}"));
    // The output pipes now belong to the run alone: their readers see the end of the stream
    // when the run's processes are gone, not when the supervisor is.
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        use std::os::fd::AsRawFd;
        // SAFETY: dup2 onto this process's own stdout and stderr.
        unsafe {
            libc::dup2(null.as_raw_fd(), 1);
            libc::dup2(null.as_raw_fd(), 2);
        }
    }
    let mut leader_status = None;
    let mut stop: Option<Duration> = None;
    while leader_status.is_none() {
        reap(leader, &mut leader_status);
        if leader_status.is_some() {
            break;
        }
        if stop.is_none() && started.elapsed() >= limit {
            stop = Some(grace);
        }
        if stop.is_none() && orphaned() {
            // Ratchet died (its SIGINT may have come before the signals were blocked).
            stop = Some(interrupt_grace);
        }
        if let Some(g) = stop {
            // SIGTERM to everything, then the grace for the leader to go.
            signal_run(leader, leader_status.is_some(), libc::SIGTERM);
            let deadline = Instant::now() + g;
            while leader_status.is_none() && Instant::now() < deadline {
                reap(leader, &mut leader_status);
                wait_signal(&set, Duration::from_millis(10).min(deadline.saturating_duration_since(Instant::now())));
            }
            break;
        }
        match wait_signal(&set, Duration::from_millis(500)) {
            libc::SIGTERM | libc::SIGHUP => stop = Some(grace),
            libc::SIGINT => stop = Some(interrupt_grace),
            _ => {}
        }
    }
    // The leader is gone (or past its grace): everything of the run goes, daemons included. A
    // process whose parent dies is reparented to this subreaper, so no child left means no
    // descendant left.
    let deadline = Instant::now() + KILL_DEADLINE;
    loop {
        signal_run(leader, leader_status.is_some(), libc::SIGKILL);
        if !reap(leader, &mut leader_status) || Instant::now() > deadline {
            break;
        }
        wait_signal(&set, Duration::from_millis(5));
    }
    match leader_status {
        Some(st) if libc::WIFEXITED(st) => status_line(&format!("exit code {}", libc::WEXITSTATUS(st))),
        Some(st) if libc::WIFSIGNALED(st) => status_line(&format!("exit signal {}", libc::WTERMSIG(st))),
        _ => status_line("exit unknown"),
    }
    0
}
