//! The preflight of the benchmark command's program, against real repos and the built binary:
//! a program the incumbent's checkout will not have (a git-ignored `.venv`), one named through
//! `$VAR`, one missing, one not executable or outside the repo is refused before anything is
//! committed (exit 6), with the fix, the hypothesis left in the work tree, no experiment id used.

use crate::support;

use std::path::Path;
use support::TestRepo;

const CONFIG: &str = "[benchmark]\ncommand = '{cmd}'\ntimeout_s = 20\nkill_grace_s = 0.5\nwarmup = 0\niters = 5\nprofile_iters = 0\n\
{env}[hardware]\npreset = \"tpu-v5e\"\n[decision]\nmin_pairs = 4\nmax_pairs = 8\nconfirm_pairs = 4\n";

/// A repo whose benchmark command is `cmd` ({bench} is the fake benchmark's path), with
/// `[benchmark.env]` lines `env`, committed.
fn repo(cmd: &str, env: &str) -> TestRepo {
    let env = if env.is_empty() { String::new() } else { format!("[benchmark.env]\n{env}\n") };
    let t = TestRepo::with_config(&CONFIG.replace("{cmd}", cmd).replace("{env}", &env));
    t.write(".gitignore", ".venv/\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-qm", "ignore the venv"]);
    t
}

/// The interpreter running python3 (a venv's `bin/python` is a link to one like it).
fn real_python() -> String {
    let out = std::process::Command::new("python3").args(["-c", "import sys; print(sys.executable)"]).output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A project venv as `python3 -m venv .venv` leaves it: bin/python, ignored by git.
fn make_venv(t: &TestRepo) {
    std::fs::create_dir_all(t.path().join(".venv/bin")).unwrap();
    std::os::unix::fs::symlink(real_python(), t.path().join(".venv/bin/python")).unwrap();
}

fn hypothesis(t: &TestRepo) {
    t.write("kernel.py", "BQ = 512\nBKV = 256\n");
}

/// Refused with exit 6 before anything started; the hypothesis is untouched; the stderr.
fn refused(t: &TestRepo) -> String {
    let base = t.head();
    hypothesis(t);
    let out = t.ratchet().arg("experiment: bigger BQ").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(6), "{err}");
    assert!(err.contains("nothing was committed") && err.contains("work tree"), "{err}");
    assert_eq!(t.head(), base, "nothing committed: {err}");
    assert_eq!(t.read("kernel.py"), "BQ = 512\nBKV = 256\n", "the edit is still in the work tree");
    assert!(t.rows().is_empty() && t.runs().is_empty(), "nothing recorded: {err}");
    assert!(!t.path().join(".ratchet/experiments/1").exists(), "no run started: {err}");
    err
}

#[test]
fn a_relative_program_git_ignores_is_refused_with_the_ratchet_repo_form() {
    let t = repo(".venv/bin/python {bench}", "");
    make_venv(&t);
    let err = refused(&t);
    assert!(err.contains("`.venv/bin/python` is not in the last commit (git ignores it or it is not committed)"), "{err}");
    let fixed = format!("$RATCHET_REPO/.venv/bin/python {}", support::fake_bench().display());
    assert!(err.contains(&format!("{fixed:?}")), "the hint gives the command to write: {err}");
    assert!(err.contains(&t.path().display().to_string()), "and what RATCHET_REPO will be: {err}");

    // The command the hint gives passes the preflight and runs on both sides.
    let cfg = t.read("ratchet.toml").replace(".venv/bin/python", "$RATCHET_REPO/.venv/bin/python");
    t.write("ratchet.toml", &cfg);
    t.git(&["commit", "-qm", "the venv by the repo's root", "--", "ratchet.toml"]);
    t.ratchet().arg("experiment: bigger BQ").assert().success();
    let rows = t.rows();
    assert_eq!(rows.len(), 1);
    assert_ne!(rows[0]["status"], "error", "{rows:?}");
}

#[test]
fn an_untracked_or_absent_relative_program_is_refused() {
    let t = repo("tools/bench.sh", "");
    std::fs::create_dir_all(t.path().join("tools")).unwrap();
    let err = refused(&t);
    assert!(err.contains("`tools/bench.sh` is not in the last commit (there is no such file)"), "{err}");
    assert!(err.contains("$RATCHET_REPO/tools/bench.sh"), "{err}");
}

#[test]
fn a_program_named_through_a_variable_is_still_checked() {
    // A variable ratchet sets for every run.
    let t = repo("$RATCHET_REPO/.venv/bin/python {bench}", "");
    let err = refused(&t);
    let expanded = format!("`$RATCHET_REPO/.venv/bin/python` ({}/.venv/bin/python) does not exist", t.path().display());
    assert!(err.contains(&expanded), "{err}");

    // One from [benchmark.env], braced.
    let t = repo("${TOOLS}/python {bench}", "TOOLS = \"/nonexistent-tools\"");
    let err = refused(&t);
    assert!(err.contains("`${TOOLS}/python` (/nonexistent-tools/python) does not exist"), "{err}");

    // One set nowhere: the shell would make it `/python`.
    let t = repo("${NO_SUCH_VAR_XYZ}/python {bench}", "");
    let err = refused(&t);
    assert!(err.contains("`${NO_SUCH_VAR_XYZ}/python` (/python) does not exist ($NO_SUCH_VAR_XYZ not set"), "{err}");
}

#[test]
fn a_missing_or_non_executable_program_is_refused() {
    let t = repo("no-such-benchmark-tool-xyz {bench}", "");
    let err = refused(&t);
    assert!(err.contains("`no-such-benchmark-tool-xyz` was not found"), "{err}");

    let t = repo("./run.sh", "");
    t.write("run.sh", "#!/bin/sh\nexit 0\n");
    t.git(&["add", "run.sh"]);
    t.git(&["commit", "-qm", "a benchmark without its execute bit"]);
    let err = refused(&t);
    assert!(err.contains("`./run.sh` is not executable") && err.contains("chmod +x"), "{err}");
}

#[test]
fn a_relative_program_outside_the_repo_is_refused() {
    let t = repo("../bin/python {bench}", "");
    let err = refused(&t);
    assert!(err.contains("lies outside the repo") && err.contains("$RATCHET_REPO"), "{err}");
}

#[test]
fn committed_and_absolute_programs_pass() {
    let t = repo("./run.sh", "");
    let bench = support::fake_bench();
    t.write("run.sh", &format!("#!/bin/sh\nexec python3 {} \"$@\"\n", bench.display()));
    std::fs::set_permissions(t.path().join("run.sh"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    t.git(&["add", "run.sh"]);
    t.git(&["commit", "-qm", "the benchmark"]);
    hypothesis(&t);
    t.ratchet().arg("experiment: bigger BQ").assert().success();

    let python = real_python();
    assert!(Path::new(&python).is_absolute());
    let t = repo(&format!("\"{python}\" {{bench}}"), "");
    hypothesis(&t);
    t.ratchet().arg("experiment: bigger BQ").assert().success();
}
