//! Telling the machine's faults from the hypothesis's: a preflight before anything is committed
//! (the benchmark command exists, its Python imports what its script imports, the disk has room),
//! and telling, when measuring fails, whether the reason is the hypothesis's or the machine's
//! (no space left, the incumbent failing exactly like the candidate; `experiment::give_back`
//! then gives the hypothesis back uncommitted with nothing recorded and no experiment id used).

use super::shell;
use crate::config::Config;
use crate::error::{Error, Kind, Result};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Free space the state directory's file system must have before an experiment starts: room
/// for the run logs (capped at 2 MiB per stream) and traces of a few runs.
pub const MIN_FREE_BYTES: u64 = 64 << 20;

/// Words the shell runs itself, or that wrap another command: the first word is then not a
/// program to look up.
const SHELL_WORDS: &[&str] = &[
    "cd", "export", ".", "source", "exec", "env", "time", "nice", "nohup", "timeout", "if", "for", "while", "case", "{", "(", "!", "set",
    "eval", "command", "builtin", "ulimit", "umask", "true", "false", ":", "test", "[", "echo", "printf", "sh", "bash",
];

/// ratchet's per-run variables: their values exist only once a run starts, so a program named
/// through one of them is not checked beforehand.
const PER_RUN_VARS: &[&str] = &[
    "RATCHET_OUT",
    "RATCHET_WARMUP",
    "RATCHET_ITERS",
    "RATCHET_PROFILE_ITERS",
    "RATCHET_SIDE",
    "RATCHET_RUN",
    "RATCHET_PHASE",
    "RATCHET_PAIR",
    "RATCHET_COMMIT",
    "RATCHET_EXPERIMENT",
    "RATCHET_DEEP",
    "RATCHET_TRACE_MODE",
    "RATCHET_PEAK_TFLOPS",
    "RATCHET_HBM_GBPS",
];

/// Check, before the hypothesis is committed, what a broken set-up would otherwise turn into a
/// failed experiment: the command's program (found, executable, and present in the incumbent's
/// checkout), its Python's imports, the free space. `root` is the checkout the candidate runs
/// in, which ratchet passes to every run as `RATCHET_REPO`.
pub fn preflight(cfg: &Config, root: &Path, state_dir: &Path, python_dir: &Path) -> Result<()> {
    check_space(state_dir)?;
    let lookup = run_vars(cfg, root, Some(state_dir));
    let Some(cmd) = shell::first_simple(&cfg.benchmark.command, &lookup) else { return Ok(()) };
    if SHELL_WORDS.contains(&cmd.program.as_str()) {
        return Ok(());
    }
    let exe = check_program(cfg, &cmd, root)?;
    let name = exe.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name.starts_with("python") {
        // The script: the first argument naming a .py file (`python3 -u prepare.py`).
        let script = cmd.args.iter().flatten().find(|w| w.ends_with(".py")).map(|w| root.join(w));
        check_python(cfg, &exe, script.as_deref(), root, python_dir)?;
    }
    Ok(())
}

/// The variables as a run will see them, for [`shell::first_simple`]: ratchet's own (`root` is
/// the checkout passed as `RATCHET_REPO`), then [benchmark.env], then ratchet's environment.
pub(crate) fn run_vars<'a>(cfg: &'a Config, root: &'a Path, state_dir: Option<&'a Path>) -> impl Fn(&str) -> Option<Option<String>> + 'a {
    move |name: &str| match name {
        "RATCHET_REPO" => Some(Some(root.display().to_string())),
        "RATCHET_STATE_DIR" => state_dir.map(|d| Some(d.display().to_string())),
        n if PER_RUN_VARS.contains(&n) => None,
        n => Some(cfg.benchmark.env.get(n).cloned().or_else(|| std::env::var(n).ok())),
    }
}

/// Where the command's program is, or why it will not run in both checkouts.
fn check_program(cfg: &Config, cmd: &shell::Simple, root: &Path) -> Result<PathBuf> {
    let program = &cmd.program;
    let command = &cfg.benchmark.command;
    let kept = "nothing was committed or changed, and edits in the work tree are as they were";
    let unset = if cmd.unset.is_empty() {
        String::new()
    } else {
        let names: Vec<String> = cmd.unset.iter().map(|n| format!("${n}")).collect();
        format!(" ({} not set in ratchet's environment or [benchmark.env], so the shell expands it to nothing)", names.join(", "))
    };
    // The program as written and, when a variable or `~` changed it, as the shell will see it.
    let shown = if cmd.program_raw == *program { format!("`{program}`") } else { format!("`{}` ({program})", cmd.program_raw) };
    let fail = |what: String, fix: String| Err(Error::new(Kind::Infrastructure, what).hint(format!("{fix}; {kept}")));
    if !program.contains('/') {
        let path_var = cmd
            .assignments
            .iter()
            .rev()
            .find(|(n, _)| n == "PATH")
            .and_then(|(_, v)| v.clone())
            .or_else(|| cfg.benchmark.env.get("PATH").cloned())
            .or_else(|| std::env::var("PATH").ok())
            .unwrap_or_default();
        let dirs = path_var.split(':').filter(|d| !d.is_empty()).map(|d| Path::new(d).join(program));
        let found: Vec<PathBuf> = dirs.filter(|p| p.is_file()).collect();
        return match found.iter().find(|p| executable(p)) {
            Some(p) => Ok(p.clone()),
            None if !found.is_empty() => fail(
                format!("the benchmark command's program `{program}` ({}) is not executable", found[0].display()),
                format!("make it executable (chmod +x {}) or fix [benchmark] command = {command:?}", found[0].display()),
            ),
            None => fail(
                format!("the benchmark command's program `{program}` was not found{unset}"),
                format!("[benchmark] command = {command:?}: install {program}, put it on PATH, or fix the command's first word"),
            ),
        };
    }
    let path = Path::new(program);
    if path.is_relative() {
        // The candidate runs in `root`, the incumbent in a checkout of the last commit elsewhere:
        // a relative program must be in that commit, and inside the repo.
        let fixed = |rel: &str| command.replacen(cmd.program_raw.as_str(), &format!("$RATCHET_REPO/{rel}"), 1);
        let Some(rel) = inside(path) else {
            return fail(
                format!("the benchmark command's program `{program}` lies outside the repo, relative to the checkout being measured; the incumbent runs from a checkout elsewhere (under .ratchet/), where that path leads somewhere else"),
                format!("name it by an absolute path, or from the repo's root as $RATCHET_REPO/... (ratchet sets RATCHET_REPO={} for every run), in [benchmark] command = {command:?}", root.display()),
            );
        };
        let rel_s = rel.display().to_string();
        if committed(root, &rel) == Some(false) {
            let why = if root.join(&rel).exists() { "git ignores it or it is not committed" } else { "there is no such file" };
            return fail(
                format!(
                    "the benchmark command's program `{program}` is not in the last commit ({why}): the incumbent runs from a checkout of that commit under .ratchet/, which will not have it"
                ),
                format!(
                    "name it from the repo's root, which ratchet passes to every run as $RATCHET_REPO ({}): [benchmark] command = {:?}, or commit the program",
                    root.display(),
                    fixed(&rel_s)
                ),
            );
        }
    }
    let full = root.join(path);
    if !full.exists() {
        return fail(
            format!("the benchmark command's program {shown} does not exist{unset}"),
            format!("[benchmark] command = {command:?}: fix the path, or create the program there"),
        );
    }
    if !full.is_file() {
        return fail(
            format!("the benchmark command's program {shown} is a directory, not a program"),
            format!("[benchmark] command = {command:?}: name the program inside it"),
        );
    }
    if !executable(&full) {
        return fail(
            format!("the benchmark command's program {shown} is not executable"),
            format!(
                "make it executable (chmod +x {}{}), or run it through its interpreter (e.g. `sh {program}`)",
                full.display(),
                if path.is_relative() { ", and commit that" } else { "" }
            ),
        );
    }
    Ok(full)
}

/// Whether `p` is a regular file (through symlinks) with an execute bit.
fn executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `rel` with `.` and `..` resolved, or `None` when it climbs out of the directory.
fn inside(rel: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in rel.components() {
        match c {
            std::path::Component::Normal(n) => out.push(n),
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            _ => return None,
        }
    }
    Some(out)
}

/// Whether the commit checked out at `root` (its HEAD) holds `rel`; a committed symlink on the
/// way counts, as the incumbent's checkout has it too. `None` where `root` is no git checkout
/// with a commit.
fn committed(root: &Path, rel: &Path) -> Option<bool> {
    let repo = git2::Repository::open(root).ok()?;
    let tree = repo.head().ok()?.peel_to_tree().ok()?;
    let mut prefix = PathBuf::new();
    for c in rel.components() {
        prefix.push(c);
        match tree.get_path(&prefix) {
            Ok(e) if e.filemode() == 0o120000 => return Some(true),
            Ok(_) => {}
            Err(_) => return Some(false),
        }
    }
    Some(true)
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
            "free disk space there, then run the same command again; nothing was committed or changed, and edits in the work tree are as they were",
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
fn check_python(cfg: &Config, exe: &Path, script: Option<&Path>, root: &Path, python_dir: &Path) -> Result<()> {
    let modules =
        script.and_then(|p| crate::safe_read::read_text_capped(p, 16 << 20).ok()).map(|t| top_level_imports(&t)).unwrap_or_default();
    let probe = "import importlib.util, sys\nmissing = [m for m in sys.argv[1:] if importlib.util.find_spec(m) is None]\nprint(' '.join(missing))\n";
    // ratchet's helper directory and the script's own directory (on sys.path when it runs) come first.
    let mut py_path = python_dir.display().to_string();
    if let Some(dir) = script.and_then(Path::parent) {
        py_path = format!("{}:{py_path}", dir.display());
    }
    if let Ok(p) = std::env::var("PYTHONPATH") {
        if !p.is_empty() {
            py_path = format!("{py_path}:{p}");
        }
    }
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("-c").arg(probe).args(&modules).current_dir(root).envs(&cfg.benchmark.env).env("PYTHONPATH", py_path);
    let out = crate::process::output_within(cmd, Duration::from_secs(60));
    let name = exe.display();
    match out {
        Some(o) if o.status.success() => {
            let missing = String::from_utf8_lossy(&o.stdout).trim().to_string();
            if missing.is_empty() {
                return Ok(());
            }
            Err(Error::new(Kind::Infrastructure, format!("the benchmark's interpreter {name} cannot import {missing}")).hint(format!(
                "install it into that interpreter (e.g. {name} -m pip install {missing}), or point [benchmark] command at a Python that \
                 has it; nothing was committed or changed, and edits in the work tree are as they were"
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
    fn relative_paths_resolve_inside_the_repo_or_not_at_all() {
        assert_eq!(inside(Path::new("./.venv/bin/../bin/python")), Some(PathBuf::from(".venv/bin/python")));
        assert_eq!(inside(Path::new("../other/python")), None);
        assert_eq!(inside(Path::new("a/../../python")), None);
    }

    #[test]
    fn imports_are_the_top_level_ones() {
        let s = "import os, sys as s\nimport jax.numpy as jnp\nfrom ratchet_bench import run\nfrom . import x\nfrom __future__ import annotations\n    import inside_function\n";
        assert_eq!(top_level_imports(s), vec!["os", "sys", "jax", "ratchet_bench"]);
    }

    #[test]
    fn committed_reads_the_checked_out_commit() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(committed(d.path(), Path::new("x")), None, "no repository");
        let repo = git2::Repository::init(d.path()).unwrap();
        std::fs::create_dir_all(d.path().join("bin")).unwrap();
        std::fs::write(d.path().join("bin/run.sh"), "#!/bin/sh\n").unwrap();
        std::os::unix::fs::symlink("/usr/bin", d.path().join("linked")).unwrap();
        std::fs::write(d.path().join("loose.sh"), "#!/bin/sh\n").unwrap();
        assert_eq!(committed(d.path(), Path::new("bin/run.sh")), None, "no commit yet");
        let mut index = repo.index().unwrap();
        index.add_path(Path::new("bin/run.sh")).unwrap();
        index.add_path(Path::new("linked")).unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("t", "t@example.com").unwrap();
        repo.commit(Some("HEAD"), &sig, &sig, "c", &tree, &[]).unwrap();
        assert_eq!(committed(d.path(), Path::new("bin/run.sh")), Some(true));
        assert_eq!(committed(d.path(), Path::new("linked/python3")), Some(true), "through a committed symlink");
        assert_eq!(committed(d.path(), Path::new("loose.sh")), Some(false), "untracked");
        assert_eq!(committed(d.path(), Path::new("bin/other")), Some(false));
    }
}
