//! The README's set-up on a fresh machine: `scripts/demo.sh` and `scripts/test.sh` get their
//! Python from one bootstrap (`scripts/python-env.sh`), which finds or makes a Python with jax and
//! puts it first on PATH, so the two commands work in either order with no variable set.
//!
//! The bootstrap only asks whether `import jax` works; the venvs here hold a stand-in `jax`
//! package so that the choice and the PATH can be checked in seconds, without PyPI.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn project() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(project().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// A project root holding only the bootstrap, as a fresh clone has it.
fn scratch_root() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("scripts")).unwrap();
    std::fs::copy(project().join("scripts/python-env.sh"), d.path().join("scripts/python-env.sh")).unwrap();
    d
}

/// A real venv at `dir` (no pip), with a stand-in `jax` package when `jax` is set; `None` where
/// this Python cannot make venvs.
fn venv(dir: &Path, jax: bool) -> Option<PathBuf> {
    let ok = Command::new("python3").args(["-m", "venv", "--without-pip"]).arg(dir).status().is_ok_and(|s| s.success());
    if !ok {
        return None;
    }
    let py = dir.join("bin/python3");
    if jax {
        let out = Command::new(&py).args(["-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).output().unwrap();
        let site = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
        std::fs::create_dir_all(site.join("jax")).unwrap();
        std::fs::write(site.join("jax/__init__.py"), "__version__ = '0.0+stand-in'\n").unwrap();
    }
    Some(py)
}

/// `source scripts/python-env.sh`, then `then` (a shell snippet), in `root` with `path` as PATH
/// (plus the system's tool directories) and `env`.
fn bootstrap(root: &Path, path: &Path, env: &[(&str, &str)], then: &str) -> Output {
    let script = format!("set -euo pipefail\nsource scripts/python-env.sh\n{then}\n");
    Command::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(root)
        .env("PATH", format!("{}:/usr/local/bin:/usr/bin:/bin", path.display()))
        .env_remove("RATCHET_PYTHON")
        .env_remove("PYTHONPATH")
        .env_remove("VIRTUAL_ENV")
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

#[test]
fn both_set_up_commands_take_their_python_from_the_one_bootstrap() {
    for script in ["scripts/test.sh", "scripts/demo.sh"] {
        let s = read(script);
        let source = s.lines().position(|l| l.trim_start().starts_with("source ") && l.contains("scripts/python-env.sh"));
        let source = source.unwrap_or_else(|| panic!("{script} does not source scripts/python-env.sh"));
        // No Python runs before the bootstrap has chosen it.
        let first_python = s.lines().position(|l| !l.trim_start().starts_with('#') && (l.contains("python3 ") || l.contains("\"$PY\"")));
        assert!(first_python.is_none_or(|p| p > source), "{script} runs Python before sourcing the bootstrap");
    }
    // CI makes no Python environment of its own: it goes through the README's path.
    let ci = read(".ci/run");
    assert!(!ci.contains("pip install") && !ci.contains("-m venv"), ".ci/run installs Python packages itself:\n{ci}");
    assert!(ci.contains("./scripts/test.sh"), "{ci}");
}

#[test]
fn a_python3_with_jax_on_path_is_used_as_it_is() {
    let root = scratch_root();
    let tools = tempfile::tempdir().unwrap();
    let Some(py) = venv(&tools.path().join("withjax"), true) else {
        eprintln!("NOTE: python3 cannot make a venv here: skipping");
        return;
    };
    let o = bootstrap(root.path(), py.parent().unwrap(), &[], "command -v python3; echo \"$RATCHET_PY\"");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines, [py.to_str().unwrap(); 2], "{out}");
    assert!(!root.path().join(".venv").exists(), "no venv is made when PATH has jax");
}

#[test]
fn without_jax_on_path_the_projects_venv_is_first_on_path_for_every_child() {
    let root = scratch_root();
    let tools = tempfile::tempdir().unwrap();
    let Some(bare) = venv(&tools.path().join("nojax"), false) else {
        eprintln!("NOTE: python3 cannot make a venv here: skipping");
        return;
    };
    let venv_py = venv(&root.path().join(".venv"), true).unwrap();
    std::fs::write(root.path().join(".venv/.ratchet-complete"), "").unwrap();
    // A grandchild shell's `python3` (as a benchmark command's is) sees the venv too.
    let o = bootstrap(
        root.path(),
        bare.parent().unwrap(),
        &[],
        "echo \"$RATCHET_PY\"; sh -c 'python3 -c \"import jax, sys; print(sys.prefix, jax.__version__)\"'",
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let venv_dir = root.path().join(".venv");
    assert_eq!(out, format!("{}\n{} 0.0+stand-in\n", venv_py.display(), venv_dir.display()), "stderr: {}", text(&o.stderr));
    assert!(!text(&o.stderr).contains("creating"), "an existing complete venv is reused: {}", text(&o.stderr));
}

#[test]
fn a_venv_that_cannot_be_installed_is_refused_with_the_fix_and_completed_later() {
    let root = scratch_root();
    let tools = tempfile::tempdir().unwrap();
    let Some(bare) = venv(&tools.path().join("nojax"), false) else {
        eprintln!("NOTE: python3 cannot make a venv here: skipping");
        return;
    };
    // No index: pip can install nothing, as on a machine without network.
    let offline = [("PIP_NO_INDEX", "1"), ("PIP_FIND_LINKS", ""), ("PIP_CONFIG_FILE", "/dev/null")];
    let o = bootstrap(root.path(), bare.parent().unwrap(), &offline, "echo unreachable");
    let err = text(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(!text(&o.stdout).contains("unreachable"), "the caller stops");
    if err.contains("python3 -m venv") {
        eprintln!("NOTE: this Python has no ensurepip: the bootstrap said so ({err}); skipping the rest");
        return;
    }
    assert!(err.contains("creating") && err.contains(".venv"), "{err}");
    assert!(err.contains("pip could not install jax[cpu]") && err.contains("RATCHET_PYTHON"), "{err}");
    assert!(!root.path().join(".venv/.ratchet-complete").exists(), "a half-made venv is not marked complete");
    // The next run completes the half-made venv instead of making another.
    let o = bootstrap(root.path(), bare.parent().unwrap(), &offline, "echo unreachable");
    let err = text(&o.stderr);
    assert!(!o.status.success() && !err.contains("creating") && err.contains("installing jax[cpu]"), "{err}");
}

#[test]
fn a_named_python_without_jax_is_refused() {
    let root = scratch_root();
    let tools = tempfile::tempdir().unwrap();
    let Some(bare) = venv(&tools.path().join("nojax"), false) else {
        eprintln!("NOTE: python3 cannot make a venv here: skipping");
        return;
    };
    let o = bootstrap(root.path(), bare.parent().unwrap(), &[("RATCHET_PYTHON", bare.to_str().unwrap())], "echo unreachable");
    let err = text(&o.stderr);
    assert!(!o.status.success() && err.contains("cannot import jax") && err.contains("RATCHET_PYTHON"), "{err}");
    assert!(!root.path().join(".venv").exists());
}
