//! Harness shadowing: a hypothesis that adds `json.py` beside a protected `prepare.py` changes
//! what the harness imports (Python puts the script's directory first on `sys.path`) without
//! touching the harness itself. Such a new module is refused when the harness could import a
//! module of that name from elsewhere (the standard library, an installed package, ratchet's
//! helper), as the benchmark's own interpreter says.

use crate::config::Config;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Asks the interpreter which of the names it finds without the harness's directory on the path.
const PROBE: &str = r#"import importlib.util, os, sys
here = os.path.abspath(sys.argv[1])
sys.path[:] = [p for p in sys.path if p and os.path.abspath(p) != here]
std = set(getattr(sys, "stdlib_module_names", ())) | set(sys.builtin_module_names)
found = []
for name in sys.argv[2:]:
    try:
        if name in std or importlib.util.find_spec(name) is not None:
            found.append(name)
    except Exception:
        found.append(name)
print(" ".join(found))
"#;

/// Ratchet's own helper module, put on every run's PYTHONPATH (it is not on the probe's).
const HELPER_MODULE: &str = "ratchet_bench";

/// A new module on the harness's import path: the repo-relative path that makes it, its name,
/// and the harness directory it sits in (repo-relative, "" for the root).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewModule {
    pub path: String,
    pub name: String,
    pub dir: String,
}

/// The Python scripts the benchmark command runs (repo-relative, existing), and whether it runs
/// Python with `-m` or `-c`, which puts the working directory (the checkout's root) first on the
/// path instead.
fn harness(cfg: &Config, root: &Path) -> (Vec<String>, bool) {
    let words: Vec<&str> = cfg
        .benchmark
        .command
        .split(|c: char| c.is_whitespace() || c == ';' || c == '&' || c == '|')
        .map(|w| w.trim_matches(|c| c == '"' || c == '\''))
        .collect();
    let scripts = words
        .iter()
        .filter(|w| w.ends_with(".py") && !w.contains('$'))
        .map(|w| w.trim_start_matches("./").to_string())
        .filter(|w| !Path::new(w).is_absolute() && root.join(w).is_file())
        .collect();
    let root_on_path = words.windows(2).any(|w| is_python(w[0]) && (w[1] == "-m" || w[1] == "-c"));
    (scripts, root_on_path)
}

fn is_python(word: &str) -> bool {
    Path::new(word).file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("python"))
}

/// The interpreter the command runs its harness with: the command's program when it names a
/// Python (read as the shell will, `$RATCHET_REPO` and [benchmark.env] expanded, a relative
/// path from the repo's root, a bare name from PATH); otherwise `python3` from PATH.
fn interpreter(cfg: &Config, root: &Path) -> PathBuf {
    let vars = super::infra::run_vars(cfg, root, None);
    match super::shell::first_simple(&cfg.benchmark.command, &vars) {
        Some(cmd) if is_python(&cmd.program) && !cmd.program.contains('/') => PathBuf::from(cmd.program),
        Some(cmd) if is_python(&cmd.program) => root.join(cmd.program),
        _ => PathBuf::from("python3"),
    }
}

fn is_identifier(s: &str) -> bool {
    !s.is_empty() && !s.starts_with(|c: char| c.is_ascii_digit()) && s.chars().all(|c| c.is_alphanumeric() || c == '_')
}

/// The modules that `added` (repo-relative paths the hypothesis creates; `existed` tells
/// whether a path is in the incumbent) puts on the harness's import path.
pub fn new_modules(cfg: &Config, root: &Path, added: &[String], existed: &dyn Fn(&str) -> bool) -> Vec<NewModule> {
    let (scripts, root_on_path) = harness(cfg, root);
    let mut dirs: Vec<String> =
        scripts.iter().map(|s| Path::new(s).parent().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default()).collect();
    if root_on_path {
        dirs.push(String::new());
    }
    dirs.sort();
    dirs.dedup();
    let mut out = vec![];
    for path in added {
        for dir in &dirs {
            let rest = if dir.is_empty() { Some(path.as_str()) } else { path.strip_prefix(&format!("{dir}/")) };
            let Some(rest) = rest else { continue };
            let name = match rest.split_once('/') {
                // A new directory is a package (or a namespace package) of that name.
                Some((top, _)) => {
                    let top_path = if dir.is_empty() { top.to_string() } else { format!("{dir}/{top}") };
                    if existed(&top_path) {
                        continue;
                    }
                    top.to_string()
                }
                None => {
                    let (stem, ext) = rest.split_once('.').unwrap_or((rest, ""));
                    let module_file = ext == "py" || ext == "pyc" || ext.ends_with("so") || ext == "pyd";
                    if !module_file {
                        continue;
                    }
                    stem.to_string()
                }
            };
            if is_identifier(&name) && !out.iter().any(|m: &NewModule| m.name == name && m.dir == *dir) {
                out.push(NewModule { path: path.clone(), name, dir: dir.clone() });
            }
        }
    }
    out
}

/// Why the hypothesis must be refused, or `None` when the modules it adds shadow nothing the
/// harness could import from elsewhere. A probe that cannot run refuses too: the check is
/// cheap to satisfy (rename the module) and a wrong keep is not.
pub fn refusal(cfg: &Config, root: &Path, modules: &[NewModule]) -> Option<String> {
    if modules.is_empty() {
        return None;
    }
    let python = interpreter(cfg, root);
    let mut shadowing: Vec<&NewModule> = vec![];
    let mut dirs: Vec<&str> = modules.iter().map(|m| m.dir.as_str()).collect();
    dirs.sort_unstable();
    dirs.dedup();
    for dir in dirs {
        let here: Vec<&NewModule> = modules.iter().filter(|m| m.dir == dir).collect();
        let mut cmd = std::process::Command::new(&python);
        cmd.arg("-c").arg(PROBE).arg(root.join(dir)).args(here.iter().map(|m| &m.name)).current_dir(root).envs(&cfg.benchmark.env);
        let found = match crate::process::output_within(cmd, Duration::from_secs(60)) {
            Some(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).split_whitespace().map(str::to_string).collect::<Vec<_>>(),
            other => {
                let why = other
                    .map(|o| String::from_utf8_lossy(&o.stderr).trim().to_string())
                    .unwrap_or_else(|| "it did not run, or not within 60 s".into());
                let list: Vec<&str> = here.iter().map(|m| m.path.as_str()).collect();
                return Some(format!(
                    "it adds Python modules beside the benchmark harness ({}), and {} could not be asked whether they shadow modules the harness imports: {why}",
                    list.join(", "),
                    python.display()
                ));
            }
        };
        shadowing.extend(here.into_iter().filter(|m| m.name == HELPER_MODULE || found.contains(&m.name)));
    }
    if shadowing.is_empty() {
        return None;
    }
    let list: Vec<String> = shadowing.iter().map(|m| format!("{} shadows `{}`", m.path, m.name)).collect();
    Some(format!(
        "it adds a module on the benchmark harness's import path that shadows one the harness could import from elsewhere ({}): \
         a gain could then come from changing what the measuring stick runs, not the kernel; rename the new module",
        list.join(", ")
    ))
}

/// [`new_modules`] then [`refusal`] for the paths a hypothesis changes, against the incumbent
/// commit `base`: only paths that the incumbent does not have count as added.
pub fn check(cfg: &Config, repo: &git2::Repository, root: &Path, base: git2::Oid, changed: &[String]) -> Option<String> {
    let tree = repo.find_commit(base).and_then(|c| c.tree()).ok();
    let existed = |p: &str| tree.as_ref().is_some_and(|t| t.get_path(Path::new(p)).is_ok());
    let added: Vec<String> = changed.iter().filter(|p| !existed(p)).cloned().collect();
    refusal(cfg, root, &new_modules(cfg, root, &added, &existed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(command: &str) -> Config {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("ratchet.toml");
        std::fs::write(&p, format!("[benchmark]\ncommand = {command:?}\n[score]\nmetric = \"latency\"\n")).unwrap();
        Config::load(&p).unwrap()
    }

    #[test]
    fn new_files_beside_the_harness_are_modules_and_elsewhere_are_not() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("bench")).unwrap();
        std::fs::write(d.path().join("bench/prepare.py"), "import json\n").unwrap();
        let c = cfg("cd . && python3 bench/prepare.py --fast");
        let added: Vec<String> = [
            "bench/json.py",
            "json.py",
            "bench/pkg/__init__.py",
            "bench/old/x.py",
            "bench/notes.txt",
            "bench/fast.cpython-311-x86_64-linux-gnu.so",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let names: Vec<String> = new_modules(&c, d.path(), &added, &|p| p == "bench/old").into_iter().map(|m| m.name).collect();
        assert_eq!(names, vec!["json", "pkg", "fast"]);
        // `python -m` runs with the root on the path.
        let m = cfg("python3 -m bench.prepare");
        let names: Vec<String> = new_modules(&m, d.path(), &added, &|_| false).into_iter().map(|m| m.name).collect();
        assert_eq!(names, vec!["bench", "json"]);
    }

    #[test]
    fn the_interpreter_is_the_commands_own() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(interpreter(&cfg("python3 prepare.py"), d.path()), PathBuf::from("python3"));
        assert_eq!(interpreter(&cfg("$RATCHET_REPO/.venv/bin/python prepare.py"), d.path()), d.path().join(".venv/bin/python"));
        assert_eq!(interpreter(&cfg("sh run.sh"), d.path()), PathBuf::from("python3"));
    }
}
