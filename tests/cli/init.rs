//! `ratchet init` on real directories: the project venv's Python named from the repo's root, a
//! starter benchmark where there is none (never overwriting a file), the helper's output ignored
//! once, and a warning outside a git repository.

use crate::support;

use std::path::Path;
use support::TestRepo;

const STARTER_PREPARE: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/assets/starter/prepare.py"));
const STARTER_KERNEL: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/assets/starter/kernel.py"));

fn init(dir: &Path, args: &[&str]) -> std::process::Output {
    let mut c = assert_cmd::Command::cargo_bin("ratchet").unwrap();
    c.arg("init").args(args).current_dir(dir).env("GIT_CONFIG_NOSYSTEM", "1").env_remove("TPU_ACCELERATOR_TYPE");
    c.output().unwrap()
}

fn ok(out: &std::process::Output) -> String {
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    text
}

fn command_of(dir: &Path) -> String {
    let text = std::fs::read_to_string(dir.join("ratchet.toml")).unwrap();
    ratchet::config::Config::parse(&text).unwrap().benchmark.command
}

fn executable(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
    std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

#[test]
fn a_project_venv_is_named_from_the_repo_root() {
    for venv in [".venv", "venv", "env"] {
        let t = TestRepo::empty();
        t.write("prepare.py", "print('RESULT: latency=1ms')\n");
        executable(&t.path().join(venv).join("bin/python"), "#!/bin/sh\n");
        let text = ok(&init(t.path(), &[]));
        assert_eq!(command_of(t.path()), format!("$RATCHET_REPO/{venv}/bin/python prepare.py"), "{text}");
        // The venv itself is kept out of hypotheses.
        assert!(t.git(&["check-ignore", &format!("{venv}/bin/python")]).contains(venv), "{venv} is ignored");
    }
    // No venv: the python3 on PATH.
    let t = TestRepo::empty();
    t.write("prepare.py", "print('RESULT: latency=1ms')\n");
    std::fs::create_dir_all(t.path().join("env/bin")).unwrap(); // no interpreter in it
    ok(&init(t.path(), &[]));
    assert_eq!(command_of(t.path()), "python3 prepare.py");
}

#[test]
fn a_starter_benchmark_is_written_where_there_is_none_and_nothing_is_overwritten() {
    let t = TestRepo::empty();
    let text = ok(&init(t.path(), &[]));
    assert_eq!(t.read("prepare.py"), STARTER_PREPARE);
    assert_eq!(t.read("kernel.py"), STARTER_KERNEL);
    assert_eq!(command_of(t.path()), "python3 prepare.py");
    assert!(text.contains("git add ratchet.toml prepare.py kernel.py .gitignore"), "{text}");

    // A kernel.py of the user's own is kept; only prepare.py is written, with a word on it.
    let t = TestRepo::empty();
    t.write("kernel.py", "def mine(): pass\n");
    let text = ok(&init(t.path(), &[]));
    assert_eq!(t.read("kernel.py"), "def mine(): pass\n");
    assert_eq!(t.read("prepare.py"), STARTER_PREPARE);
    assert!(text.contains("point it at your kernel.py"), "{text}");

    // The user's kernel.py, found untracked, belongs in the set-up commit too.
    assert!(text.contains("git add ratchet.toml prepare.py .gitignore kernel.py"), "{text}");

    // An existing prepare.py: no starter at all, nothing touched; found untracked, it is in the
    // next line (the incumbent's checkout has only what is committed); committed, it is not.
    let t = TestRepo::empty();
    t.write("prepare.py", "print('mine')\n");
    let text = ok(&init(t.path(), &[]));
    assert_eq!(t.read("prepare.py"), "print('mine')\n");
    assert!(!t.path().join("kernel.py").exists());
    assert!(text.contains("next: git add ratchet.toml .gitignore prepare.py &&"), "{text}");
    let t = TestRepo::empty();
    t.write("prepare.py", "print('mine')\n");
    t.git(&["add", "prepare.py"]);
    t.git(&["commit", "-qm", "bench"]);
    let text = ok(&init(t.path(), &[]));
    assert!(text.contains("next: git add ratchet.toml .gitignore &&"), "{text}");

    // A command of the user's own: no starter either.
    let t = TestRepo::empty();
    ok(&init(t.path(), &["--command", "sh bench.sh \"a b\""]));
    assert!(!t.path().join("prepare.py").exists() && !t.path().join("kernel.py").exists());
    assert_eq!(command_of(t.path()), "sh bench.sh \"a b\"", "quotes survive the TOML");
}

#[test]
fn the_helpers_output_is_ignored_once() {
    let t = TestRepo::empty();
    t.write(".gitignore", "*.log"); // no final newline
    ok(&init(t.path(), &[]));
    ok(&init(t.path(), &["--force"]));
    assert_eq!(t.read(".gitignore"), "*.log\nprofile_data/\n");
    t.write("profile_data/profile/x.xplane.pb", "x");
    t.write("examples/fa/profile_data/kernel.hlo.txt", "x");
    let status = t.git(&["status", "--porcelain", "--untracked-files=all"]);
    assert!(!status.contains("profile_data"), "{status}");

    // Already ignored some other way: nothing added.
    let t = TestRepo::empty();
    t.write(".gitignore", "/profile_data\n");
    ok(&init(t.path(), &[]));
    assert_eq!(t.read(".gitignore"), "/profile_data\n");
}

#[test]
fn outside_a_git_repository_it_warns() {
    let d = tempfile::tempdir().unwrap();
    let out = init(d.path(), &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("warning:") && err.contains("is not inside a git repository") && err.contains("git init"), "{err}");
    assert!(d.path().join("ratchet.toml").exists() && d.path().join("prepare.py").exists());
    assert_eq!(std::fs::read_to_string(d.path().join(".gitignore")).unwrap(), "profile_data/\n");

    // Inside one: no warning.
    let t = TestRepo::empty();
    let out = init(t.path(), &[]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("warning"), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn the_starter_benchmark_runs_and_passes_its_check() {
    let jax = std::process::Command::new("python3").args(["-c", "import jax"]).output().is_ok_and(|o| o.status.success());
    if !jax {
        eprintln!("NOTE: python3 with jax not available (scripts/test.sh provides one): skipping the starter's run");
        return;
    }
    let t = TestRepo::empty();
    ok(&init(t.path(), &[]));
    let pp = t.ratchet().arg("pythonpath").output().unwrap();
    assert!(pp.status.success());
    let out_dir = tempfile::tempdir().unwrap();
    // One sample as ratchet takes it, and one with a hypothesis's bigger tile.
    for block in ["64", "128"] {
        let k = t.read("kernel.py").replace("BLOCK_M = 64", "BLOCK_M = 128").replace("BLOCK_M = 128", &format!("BLOCK_M = {block}"));
        t.write("kernel.py", &k);
        let run = std::process::Command::new("python3")
            .arg("prepare.py")
            .current_dir(t.path())
            .env("PYTHONPATH", String::from_utf8(pp.stdout.clone()).unwrap().trim())
            .env("RATCHET_OUT", out_dir.path())
            .env("RATCHET_WARMUP", "1")
            .env("RATCHET_ITERS", "3")
            .env("RATCHET_PROFILE_ITERS", "0")
            .env("RATCHET_STATE_DIR", t.path().join(".ratchet"))
            .output()
            .unwrap();
        let log = format!("{}{}", String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
        assert!(run.status.success(), "{log}");
        let result: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out_dir.path().join("ratchet-result.json")).unwrap()).unwrap();
        assert_eq!(result["check"]["passed"], true, "{result}");
        assert_eq!(result["latencies_ms"].as_array().unwrap().len(), 3, "{result}");
        assert_eq!(result["meta"]["BLOCK_M"].as_i64(), Some(block.parse().unwrap()), "{result}");
    }
}
