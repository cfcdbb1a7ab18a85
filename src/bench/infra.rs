//! Telling the machine's faults from the hypothesis's: a preflight before anything is committed
//! (the benchmark command exists, its Python imports what its script imports, the disk has room),
//! and telling, when measuring fails, whether the reason is the hypothesis's or the machine's
//! (no space left, the incumbent failing exactly like the candidate; `experiment::give_back`
//! then gives the hypothesis back uncommitted with nothing recorded and no experiment id used).

use crate::config::Config;
use crate::error::{Error, Kind, Result};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Free space the state directory's file system must have before an experiment starts: room
/// for the run logs (capped at 2 MiB per stream) and traces of a few runs.
pub const MIN_FREE_BYTES: u64 = 64 << 20;

/// Words the shell runs itself, or that wrap another command: the first word is then not a
/// program to look up.
const SHELL_WORDS: &[&str] = &[
    "cd", "export", ".", "source", "exec", "env", "time", "nice", "nohup", "timeout", "if", "for", "while", "case", "{", "(", "!", "set",
    "eval", "command", "builtin", "ulimit", "umask", "true", "false", ":", "test", "[", "echo", "printf", "sh", "bash",
];

/// Check, before the hypothesis is committed, what a broken set-up would otherwise turn into a
/// failed experiment. `env` is the benchmark's extra environment besides ratchet's.
pub fn preflight(cfg: &Config, root: &Path, state_dir: &Path, python_dir: &Path) -> Result<()> {
    check_space(state_dir)?;
    let Some(program) = first_program(&cfg.benchmark.command) else { return Ok(()) };
    let path_var = cfg.benchmark.env.get("PATH").cloned().or_else(|| std::env::var("PATH").ok()).unwrap_or_default();
    let Some(exe) = find_program(&program, root, &path_var) else {
        return Err(Error::new(Kind::Infrastructure, format!("the benchmark command's program `{program}` was not found")).hint(format!(
            "[benchmark] command = {:?}: install {program}, put it on PATH, or fix the command's first word; \
             nothing was committed and the hypothesis is still in the work tree",
            cfg.benchmark.command
        )));
    };
    let name = exe.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name.starts_with("python") {
        check_python(cfg, &exe, root, python_dir)?;
    }
    Ok(())
}

fn check_space(dir: &Path) -> Result<()> {
    let Some(free) = free_bytes(dir) else { return Ok(()) };
    if free < MIN_FREE_BYTES {
        return Err(Error::new(
            Kind::Infrastructure,
            format!(
                "only {} MiB free on the file system of {}; an experiment needs at least {} MiB",
                free >> 20,
                dir.display(),
                MIN_FREE_BYTES >> 20
            ),
        )
        .hint(
            "free disk space there, then run the same command again; nothing was committed and the hypothesis is still in the work tree",
        ));
    }
    Ok(())
}

/// Bytes available to this user on the file system holding `dir` (statvfs(3)).
pub fn free_bytes(dir: &Path) -> Option<u64> {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).ok()?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid NUL-terminated path and a statvfs to fill.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some(st.f_bavail as u64 * st.f_frsize as u64)
}

/// The program the command starts, when it can be told from its first word (leading
/// `VAR=value` assignments skipped; shell syntax and builtins give `None`).
pub fn first_program(command: &str) -> Option<String> {
    let word = command.split_whitespace().find(|w| !(w.contains('=') && !w.starts_with('=') && !w.starts_with('/')))?;
    if SHELL_WORDS.contains(&word) || word.contains(['$', '`', '\'', '"', '(', ')', ';', '&', '|', '<', '>', '*', '?']) {
        return None;
    }
    Some(word.to_string())
}

fn find_program(program: &str, root: &Path, path_var: &str) -> Option<PathBuf> {
    let executable = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let p = root.join(program);
        return executable(&p).then_some(p);
    }
    path_var.split(':').filter(|d| !d.is_empty()).map(|d| Path::new(d).join(program)).find(|p| executable(p))
}

/// The top-level modules a Python script imports at its top level (`import a.b`, `from a import b`).
pub fn top_level_imports(script: &str) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    for line in script.lines() {
        let names: Vec<&str> = if let Some(rest) = line.strip_prefix("import ") {
            rest.split('#').next().unwrap_or("").split(',').filter_map(|m| m.split_whitespace().next()).collect()
        } else if let Some(rest) = line.strip_prefix("from ") {
            rest.split_whitespace().next().into_iter().collect()
        } else {
            continue;
        };
        for n in names {
            let top = n.split('.').next().unwrap_or("");
            if !top.is_empty()
                && top != "__future__"
                && top.chars().all(|c| c.is_alphanumeric() || c == '_')
                && !out.iter().any(|o| o == top)
            {
                out.push(top.to_string());
            }
        }
    }
    out
}

/// Run the interpreter once and ask it (without importing anything) whether it can find every
/// module the benchmark script imports at its top level.
fn check_python(cfg: &Config, exe: &Path, root: &Path, python_dir: &Path) -> Result<()> {
    let script = cfg
        .benchmark
        .command
        .split_whitespace()
        .map(|w| w.trim_matches(|c| c == '"' || c == '\''))
        .find(|w| w.ends_with(".py"))
        .map(|w| root.join(w));
    let modules = script
        .as_deref()
        .and_then(|p| crate::safe_read::read_text_capped(p, 16 << 20).ok())
        .map(|t| top_level_imports(&t))
        .unwrap_or_default();
    let probe = "import importlib.util, sys\nmissing = [m for m in sys.argv[1:] if importlib.util.find_spec(m) is None]\nprint(' '.join(missing))\n";
    // ratchet's helper directory and the script's own directory (on sys.path when it runs) come first.
    let mut py_path = python_dir.display().to_string();
    if let Some(dir) = script.as_deref().and_then(Path::parent) {
        py_path = format!("{}:{py_path}", dir.display());
    }
    if let Ok(p) = std::env::var("PYTHONPATH") {
        if !p.is_empty() {
            py_path = format!("{py_path}:{p}");
        }
    }
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("-c").arg(probe).args(&modules).current_dir(root).envs(&cfg.benchmark.env).env("PYTHONPATH", py_path);
    let out = run_with_timeout(cmd, Duration::from_secs(60));
    let name = exe.display();
    match out {
        Some(o) if o.status.success() => {
            let missing = String::from_utf8_lossy(&o.stdout).trim().to_string();
            if missing.is_empty() {
                return Ok(());
            }
            Err(Error::new(Kind::Infrastructure, format!("the benchmark's interpreter {name} cannot import {missing}")).hint(format!(
                "install it into that interpreter (e.g. {name} -m pip install {missing}), or point [benchmark] command at a Python that \
                 has it; nothing was committed and the hypothesis is still in the work tree"
            )))
        }
        other => {
            let why = other
                .map(|o| String::from_utf8_lossy(&o.stderr).trim().to_string())
                .unwrap_or_else(|| "it did not answer within 60 s".into());
            Err(Error::new(Kind::Infrastructure, format!("the benchmark's interpreter {name} does not run: {why}"))
                .hint("repair or replace that Python (the [benchmark] command names it); nothing was committed"))
        }
    }
}

pub(crate) fn run_with_timeout(mut cmd: std::process::Command, limit: Duration) -> Option<std::process::Output> {
    use std::process::Stdio;
    let child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().ok()?;
    let (tx, rx) = std::sync::mpsc::channel();
    let pid = child.id() as i32;
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let start = Instant::now();
    match rx.recv_timeout(limit.saturating_sub(start.elapsed())) {
        Ok(r) => r.ok(),
        Err(_) => {
            // SAFETY: killing the probe we started.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
            None
        }
    }
}

/// Whether a failed run's message says the disk is full.
pub fn says_no_space(msg: &str) -> bool {
    msg.contains("No space left on device") || msg.contains("ENOSPC") || msg.contains("os error 28") || msg.contains("Errno 28")
}

/// What to do about an infrastructure failure, read from its message.
pub fn fix_for(why: &str) -> &'static str {
    if says_no_space(why) {
        "free disk space (the benchmark's output, /tmp, or the repo's file system)"
    } else if why.contains("exited with code 127") || why.contains("not found") {
        "a program the benchmark runs was not found: check [benchmark] command and PATH"
    } else if why.contains("ModuleNotFoundError") || why.contains("No module named") {
        "install the missing Python module into the benchmark's interpreter"
    } else {
        "the benchmark fails the same way without the hypothesis: repair the set-up (run the [benchmark] command by hand on the incumbent)"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_program_skips_assignments_and_shell_syntax() {
        assert_eq!(first_program("python3 prepare.py --x").as_deref(), Some("python3"));
        assert_eq!(first_program("XLA_FLAGS=--a=b CUDA=1 ./run.sh").as_deref(), Some("./run.sh"));
        assert_eq!(first_program("cd bench && python3 x.py"), None);
        assert_eq!(first_program("$PY x.py"), None);
        assert_eq!(first_program(""), None);
    }

    #[test]
    fn imports_are_the_top_level_ones() {
        let s = "import os, sys as s\nimport jax.numpy as jnp\nfrom ratchet_bench import run\nfrom . import x\nfrom __future__ import annotations\n    import inside_function\n";
        assert_eq!(top_level_imports(s), vec!["os", "sys", "jax", "ratchet_bench"]);
    }

    #[test]
    fn missing_program_is_found_missing() {
        let d = tempfile::tempdir().unwrap();
        assert!(find_program("sh", d.path(), "/usr/bin:/bin").is_some());
        assert!(find_program("no-such-tool-xyz", d.path(), "/usr/bin:/bin").is_none());
        assert!(find_program("./run.sh", d.path(), "").is_none());
    }
}
