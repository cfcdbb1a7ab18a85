//! Forked runs: a Python benchmark's runs are forked from a parent that did the imports once
//! (`python/ratchet_preload.py`; docs/protocol.md, "Forked runs"), so a run pays its backend,
//! allocations, compile or cache load and calls, but not `import jax` again.
//!
//! A parent serves one run at a time; parents are pooled per interpreter and environment, so
//! both sides of an experiment (and parallel slots, each with a parent of its own) fork from
//! parents made the same way. Anything this module cannot do (a command that is not
//! `python SCRIPT.py`, a parent that will not start or refuses to fork) returns `None`, and the
//! run is a plain process.

use super::executor::{Exit, RunOutput, RunRecordFile, RunSpec};
use std::io::{BufRead, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The parent's source, as built into this binary (installed beside `ratchet_bench`).
pub const SOURCE: &str = include_str!("../../python/ratchet_preload.py");
pub const FILE_NAME: &str = "ratchet_preload.py";

/// `[VAR=value ...] python[3[.N]] [flags] SCRIPT.py [args]`, the form a parent can serve.
#[derive(Debug, Clone, PartialEq)]
pub struct PyCommand {
    pub env: Vec<(String, String)>,
    /// The interpreter and its flags, as the command gives them.
    pub interpreter: Vec<String>,
    /// The script and its arguments (`sys.argv`).
    pub argv: Vec<String>,
}

/// Interpreter flags that take no value and change nothing a fork could not reproduce.
const PLAIN_FLAGS: &[&str] = &["-u", "-B", "-O", "-OO", "-s", "-S", "-E", "-I", "-P", "-b", "-bb", "-q", "-R"];

/// Read `command` as a Python script run, or `None` when a shell is needed to run it (quotes,
/// expansions, redirections, several commands) or it runs something else (`-c`, `-m`).
pub fn parse(command: &str) -> Option<PyCommand> {
    if command.chars().any(|c| "'\"\\$`;&|<>(){}*?[]~#!\n\r".contains(c)) {
        return None;
    }
    let mut words = command.split([' ', '\t']).filter(|w| !w.is_empty()).peekable();
    let mut env = vec![];
    while let Some((k, v)) = words.peek().and_then(|w| w.split_once('=')) {
        if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') || k.starts_with(|c: char| c.is_ascii_digit()) {
            return None;
        }
        env.push((k.to_string(), v.to_string()));
        words.next();
    }
    let program = words.next()?;
    let base = program.rsplit('/').next().unwrap_or(program);
    let version = base.strip_prefix("python")?;
    let version_ok = version.is_empty()
        || version == "3"
        || version.strip_prefix("3.").is_some_and(|m| !m.is_empty() && m.chars().all(|c| c.is_ascii_digit()));
    if !version_ok {
        return None;
    }
    let mut interpreter = vec![program.to_string()];
    loop {
        let w = words.next()?;
        if PLAIN_FLAGS.contains(&w) {
            interpreter.push(w.into());
        } else if w == "-X" || w == "-W" {
            interpreter.push(w.into());
            interpreter.push(words.next()?.into());
        } else if w.starts_with('-') || !w.ends_with(".py") {
            return None;
        } else {
            let argv = std::iter::once(w).chain(words).map(String::from).collect();
            return Some(PyCommand { env, interpreter, argv });
        }
    }
}

/// What a parent answers, one JSON object a line.
#[derive(Debug)]
enum Reply {
    Hello,
    Refuse(String),
    Ready {
        pid: i32,
        start: u64,
    },
    Exit(Exit),
    Retire(String),
    /// Its stdout ended: the parent is gone.
    Gone,
}

fn reply(line: &str) -> Reply {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else { return Reply::Retire(format!("unreadable reply {line:?}")) };
    let int = |k: &str| v.get(k).and_then(|x| x.as_i64());
    let text = |k: &str| v.get(k).and_then(|x| x.as_str()).map(String::from);
    if v.get("hello").is_some() {
        Reply::Hello
    } else if let Some(why) = text("refuse") {
        Reply::Refuse(why)
    } else if let (Some(pid), Some(start)) = (int("ready"), int("start")) {
        Reply::Ready { pid: pid as i32, start: start as u64 }
    } else if let (Some(how), Some(n)) = (text("exit"), int("n")) {
        Reply::Exit(if how == "signal" { Exit::Signal(n as i32) } else { Exit::Code(n as i32) })
    } else {
        Reply::Retire(text("retire").unwrap_or_else(|| format!("unreadable reply {line:?}")))
    }
}

/// One parent: an interpreter that has done the imports and forks a run on request.
struct Parent {
    key: Key,
    child: Child,
    stdin: ChildStdin,
    replies: Receiver<Reply>,
    pid: i32,
    start: u64,
}

impl Parent {
    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    fn end(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What makes two parents interchangeable: the interpreter, the environment it imports in, and
/// the state dir whose helper and module list it uses.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    interpreter: Vec<String>,
    env: Vec<(String, String)>,
    state: PathBuf,
}

#[derive(Default)]
struct Pool {
    idle: Vec<Parent>,
    /// Why a parent cannot serve runs of this key (they are plain processes from then on).
    refused: std::collections::HashMap<Key, String>,
}

static POOL: Mutex<Option<Pool>> = Mutex::new(None);

fn with_pool<T>(f: impl FnOnce(&mut Pool) -> T) -> T {
    let mut guard = POOL.lock().unwrap_or_else(|e| e.into_inner());
    f(guard.get_or_insert_with(Pool::default))
}

/// Variables a run's environment has that its parent's must not: they differ run to run, and
/// what the run reads of them it reads after the fork.
fn per_run(name: &str) -> bool {
    name.starts_with("RATCHET_") || matches!(name, "PWD" | "OLDPWD" | "_" | "SHLVL")
}

/// The run, forked from a pooled parent; `None` means "run it as a plain process". The pool
/// remembers a parent that refused or failed, so that choice is made once per interpreter and
/// environment.
pub fn run(spec: &RunSpec, token: &str, spawn: impl Fn() -> String) -> Option<std::io::Result<RunOutput>> {
    if !spec.preload {
        return None;
    }
    let cmd = parse(&spec.command)?;
    let state = spec.env.iter().find(|(k, _)| k == "RATCHET_STATE_DIR").map(|(_, v)| PathBuf::from(v))?;
    let script = state.join("python").join(FILE_NAME);
    if !script.is_file() {
        return None;
    }
    // The run's environment as `sh -c` would hand it to Python.
    let mut env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    env.extend(spec.env.iter().cloned());
    env.extend(cmd.env.iter().cloned());
    let key = Key {
        interpreter: cmd.interpreter.clone(),
        env: env.iter().filter(|(k, _)| !per_run(k)).map(|(k, v)| (k.clone(), v.clone())).collect(),
        state: state.clone(),
    };
    if with_pool(|p| p.refused.contains_key(&key)) {
        return None;
    }
    let start = Instant::now();
    let parent = match take_or_start(&key, &script, spec) {
        Ok(p) => p,
        Err(why) => {
            with_pool(|p| p.refused.insert(key, why));
            return None;
        }
    };
    env.insert(super::executor::TOKEN_VAR.into(), token.into());
    env.insert(super::executor::SPAWN_VAR.into(), spawn());
    match serve(parent, spec, &cmd, env, token, start) {
        Served::Done(out, parent) => {
            if let Some(p) = parent {
                with_pool(|pool| pool.idle.push(*p));
            }
            Some(out)
        }
        Served::Lost(why) => {
            with_pool(|p| p.refused.insert(key, why));
            // The plain run that follows must not read what the lost one left.
            if let Some((_, out)) = spec.env.iter().find(|(k, _)| k == "RATCHET_OUT") {
                let _ = std::fs::remove_dir_all(out);
                let _ = std::fs::create_dir_all(out);
            }
            None
        }
    }
}

/// An idle parent for `key`, or a new one once it has said hello.
fn take_or_start(key: &Key, script: &Path, spec: &RunSpec) -> Result<Parent, String> {
    let state = &key.state;
    // Parents that died idle (their spawning thread ended) are reaped here.
    let dead = with_pool(|pool| {
        let mut dead = vec![];
        let mut i = 0;
        while i < pool.idle.len() {
            if pool.idle[i].alive() {
                i += 1;
            } else {
                dead.push(pool.idle.swap_remove(i));
            }
        }
        dead
    });
    dead.into_iter().for_each(Parent::end);
    while let Some(mut p) = with_pool(|pool| pool.idle.iter().position(|p| &p.key == key).map(|i| pool.idle.swap_remove(i))) {
        // A parent that retired after its last run, or died idle, is ended here.
        let pending = p.replies.try_recv();
        if p.alive() && pending.is_err() {
            return Ok(p);
        }
        p.end();
    }
    let mut cmd = Command::new(&key.interpreter[0]);
    cmd.args(&key.interpreter[1..])
        .arg(script)
        .arg(state.join("cache").join("preload.json"))
        .current_dir(&spec.dir)
        .env_clear()
        .envs(key.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    crate::process::own_group(&mut cmd);
    let ratchet = std::process::id() as libc::pid_t;
    // SAFETY: between fork and exec only prctl and getppid, which are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            // Ratchet's death (or the spawning thread's end) stops the parent and its run.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != ratchet {
                return Err(std::io::Error::other("ratchet exited while starting the run"));
            }
            Ok(())
        });
    }
    let _ = std::fs::create_dir_all(state.join("cache"));
    let mut child = cmd.spawn().map_err(|e| format!("cannot start {}: {e}", key.interpreter[0]))?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        let _ = child.kill();
        return Err("no pipes to the parent".into());
    };
    let (tx, replies) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(reply(&line)).is_err() {
                return;
            }
        }
        let _ = tx.send(Reply::Gone);
    });
    let pid = child.id() as i32;
    let start = super::executor::proc_stat(pid).map(|s| s.start).unwrap_or(0);
    let parent = Parent { key: key.clone(), child, stdin, replies, pid, start };
    // Its imports are the run's own start: they get the run's limit.
    let deadline = Instant::now() + spec.timeout;
    loop {
        if spec.cancel.is_cancelled() {
            parent.end();
            return Err("interrupted while the parent imported".into());
        }
        match parent.replies.recv_timeout(Duration::from_millis(25)) {
            Ok(Reply::Hello) => return Ok(parent),
            Ok(Reply::Refuse(why)) => {
                parent.end();
                return Err(why);
            }
            Ok(other) => {
                parent.end();
                return Err(format!("the parent did not start: {other:?}"));
            }
            Err(RecvTimeoutError::Timeout) if Instant::now() < deadline => {}
            Err(_) => {
                parent.end();
                return Err("the parent did not start within the run's timeout".into());
            }
        }
    }
}

enum Served {
    /// The run ended (its output), and the parent, when it can serve again.
    Done(std::io::Result<RunOutput>, Option<Box<Parent>>),
    /// The parent failed before the run could be judged: run it as a plain process.
    Lost(String),
}

/// A FIFO for one of the run's streams; its read end opened first, so the child's open for
/// writing does not block, and the path removed once the child holds it.
fn fifo(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::remove_file(path);
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    // SAFETY: mkfifo on a NUL-terminated path.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)
}

fn set_blocking(f: &std::fs::File) {
    use std::os::fd::AsRawFd;
    // SAFETY: fcntl on an fd this function's caller owns.
    unsafe {
        let flags = libc::fcntl(f.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(f.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK);
    }
}

fn serve(
    mut parent: Parent,
    spec: &RunSpec,
    cmd: &PyCommand,
    env: std::collections::BTreeMap<String, String>,
    token: &str,
    start: Instant,
) -> Served {
    let lost = |parent: Parent, why: String| {
        parent.end();
        Served::Lost(why)
    };
    if let Err(e) = std::fs::create_dir_all(&spec.log_dir) {
        return Served::Done(Err(e), Some(Box::new(parent)));
    }
    let (out_fifo, err_fifo) = (spec.log_dir.join(".stdout.fifo"), spec.log_dir.join(".stderr.fifo"));
    let (out_r, err_r) = match (fifo(&out_fifo), fifo(&err_fifo)) {
        (Ok(o), Ok(e)) => (o, e),
        (Err(e), _) | (_, Err(e)) => return lost(parent, format!("cannot make the run's pipes: {e}")),
    };
    let request = serde_json::json!({"run": {
        "argv": cmd.argv, "cwd": spec.dir, "env": env,
        "stdout": out_fifo, "stderr": err_fifo, "grace_s": spec.grace.as_secs_f64(),
    }});
    if let Some(f) = &spec.pgid_file {
        let rec = RunRecordFile { token: token.into(), supervisor: parent.pid, supervisor_start: parent.start, ..Default::default() };
        if let Err(e) = super::executor::write_record(f, &rec) {
            return Served::Done(Err(e), Some(Box::new(parent)));
        }
    }
    if writeln!(parent.stdin, "{request}").and_then(|_| parent.stdin.flush()).is_err() {
        return lost(parent, "the parent stopped reading".into());
    }
    // A ratchet killed here has recorded the token and the parent alone (as for a process run).
    crate::fault::point("after-spawn");
    let ready = loop {
        match parent.replies.recv_timeout(Duration::from_millis(25)) {
            Ok(Reply::Ready { pid, start }) => break (pid, start),
            Ok(Reply::Retire(why)) => return lost(parent, why),
            Ok(other) => return lost(parent, format!("the parent did not start the run: {other:?}")),
            Err(RecvTimeoutError::Timeout) if start.elapsed() < spec.timeout => {}
            Err(_) => return lost(parent, "the parent did not start the run".into()),
        }
    };
    let _ = std::fs::remove_file(&out_fifo);
    let _ = std::fs::remove_file(&err_fifo);
    let (pgid, leader_start) = ready;
    if let Some(f) = &spec.pgid_file {
        let rec = RunRecordFile { pgid, start: leader_start, token: token.into(), supervisor: parent.pid, supervisor_start: parent.start };
        let _ = super::executor::write_record(f, &rec);
    }
    set_blocking(&out_r);
    set_blocking(&err_r);
    let (stdout_path, stderr_path) = (spec.log_dir.join("stdout.log"), spec.log_dir.join("stderr.log"));
    let logs = super::executor::CappedLog::spawn(Some(out_r), &stdout_path, true)
        .and_then(|o| Ok((o, super::executor::CappedLog::spawn(Some(err_r), &stderr_path, false)?)));
    let (out_log, err_log) = match logs {
        Ok(l) => l,
        Err(e) => {
            super::executor::kill_run(pgid, token);
            return lost(parent, format!("cannot read the run's output: {e}"));
        }
    };
    // Once a stop is asked for: how the run ended, when to send SIGKILL, when to give up on
    // the parent's report.
    let mut stopping: Option<(Exit, Instant, Instant)> = None;
    let interrupt_grace = super::executor::INTERRUPT_GRACE.min(spec.grace);
    let reported = loop {
        match parent.replies.recv_timeout(Duration::from_millis(25)) {
            Ok(Reply::Exit(e)) => break Some(e),
            Ok(_) => break None,
            Err(RecvTimeoutError::Disconnected) => break None,
            Err(RecvTimeoutError::Timeout) => {}
        }
        let now = Instant::now();
        let stop = |how, grace| {
            crate::process::signal_group(pgid, libc::SIGTERM);
            Some((how, now + grace, now + grace + super::executor::SUPERVISOR_SLACK))
        };
        if stopping.is_none() && spec.cancel.is_cancelled() {
            stopping = stop(Exit::Interrupted, interrupt_grace);
        } else if stopping.is_none() && start.elapsed() >= spec.timeout {
            stopping = stop(Exit::Timeout, spec.grace);
        }
        if let Some((_, kill_at, give_up)) = stopping {
            if now >= kill_at {
                super::executor::kill_run(pgid, token);
            }
            if now >= give_up {
                break None;
            }
        }
    };
    if reported.is_none() {
        // The parent died or is stuck: what is left of the run dies by its marks.
        super::executor::kill_run(pgid, token);
    }
    let out_end = out_log.finish();
    let err_end = err_log.finish();
    if let Some(f) = &spec.pgid_file {
        let _ = std::fs::remove_file(f);
    }
    let exit = match (stopping, reported) {
        (Some((how, _, _)), _) => how,
        (None, Some(e)) => e,
        (None, None) => return lost(parent, "the parent died during the run".into()),
    };
    let parent = if reported.is_some() {
        Some(Box::new(parent))
    } else {
        parent.end();
        None
    };
    Served::Done(Ok(RunOutput::ended(exit, start, out_end, err_end, true)), parent)
}

/// Write the parent's source beside `ratchet_bench` (when its content changed).
pub fn install(python_dir: &Path) -> crate::error::Result<()> {
    let path = python_dir.join(FILE_NAME);
    if std::fs::read_to_string(&path).ok().as_deref() != Some(SOURCE) {
        crate::fsutil::write_atomic(&path, SOURCE.as_bytes())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn a_python_script_with_flags_arguments_and_variables_is_forkable() {
        let c = parse("FA_SEQ=256 python3 -u -X dev examples/fa/prepare.py --quick 3").unwrap();
        assert_eq!(c.env, vec![("FA_SEQ".to_string(), "256".to_string())]);
        assert_eq!(c.interpreter, ["python3", "-u", "-X", "dev"]);
        assert_eq!(c.argv, ["examples/fa/prepare.py", "--quick", "3"]);
        assert_eq!(parse("/opt/venv/bin/python3.11 bench.py").unwrap().interpreter, ["/opt/venv/bin/python3.11"]);
        assert_eq!(parse("python prepare.py").unwrap().argv, ["prepare.py"]);
    }

    #[test]
    fn what_needs_a_shell_or_is_not_a_script_runs_as_a_plain_process() {
        for cmd in [
            "python3 -c 'print(1)'",
            "python3 -m bench",
            "python3 prepare.py > out.txt",
            "python3 prepare.py; echo done",
            "cd sub && python3 prepare.py",
            "python3 $SCRIPT",
            "python3 prepare.py \"a b\"",
            "python2 prepare.py",
            "pythonista prepare.py",
            "python3 prepare",
            "./prepare.py",
            "sh run.sh",
            "python3",
            "1X=2 python3 prepare.py",
            "python3 -X",
            "python3 -W",
        ] {
            assert_eq!(parse(cmd), None, "{cmd}");
        }
    }
}
