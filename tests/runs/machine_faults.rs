//! The machine's faults are not blamed on the hypothesis. A missing command, a
//! Python without a module the benchmark imports, a full disk, and an incumbent failing exactly
//! like the candidate stop ratchet (exit 6) with the fix named, the hypothesis left in the work
//! tree uncommitted, nothing recorded and no experiment id used.

use crate::support;

use std::path::Path;
use support::TestRepo;

const CONFIG: &str = "[benchmark]\ncommand = \"{cmd}\"\ntimeout_s = 20\nkill_grace_s = 0.5\nwarmup = 0\niters = 5\n\
profile_iters = 0\n[score]\nmetric = \"latency\"\n[decision]\nmethod = \"fixed\"\nmin_pairs = 2\nmax_pairs = 2\nconfirm = false\n";

/// Reports 10 ms, unless the machine is "broken": a marker file outside git, from run
/// $BREAK_FROM on, or a directory to write to that is full.
const BENCH: &str = r#"from=$(cat "$RATCHET_REPO/break_from" 2>/dev/null || echo 1000000)
if [ "$RATCHET_RUN" -ge "$from" ]; then echo "fatal: cannot open /dev/accel0: device busy" >&2; exit 4; fi
if [ -e "$RATCHET_REPO/full_dir" ]; then head -c 4194304 /dev/zero > "$(cat "$RATCHET_REPO/full_dir")/scratch" || exit 1; fi
printf '{"version": 1, "latencies_ms": [10.0, 10.1, 9.9]}' > "$RATCHET_OUT/ratchet-result.json"
"#;

fn repo(cmd: &str) -> TestRepo {
    let t = TestRepo::with_config(&CONFIG.replace("{cmd}", cmd));
    t.write("bench.sh", BENCH);
    t.write(".gitignore", "break_from\nfull_dir\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-qm", "the benchmark"]);
    t
}

/// The hypothesis: an edit and a new file.
fn hypothesis(t: &TestRepo) {
    t.write("kernel.py", "BQ = 512\nBKV = 256\n");
    t.write("notes.txt", "a new file of the hypothesis\n");
}

/// Nothing happened to the hypothesis and nothing was recorded.
fn assert_given_back(t: &TestRepo, base: &str, out: &std::process::Output, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{err}");
    assert!(err.contains(needle), "{err}");
    // It says the edits are kept: before a commit (the preflight) or after one is undone.
    assert!(err.contains("edits in the work tree are as they were") || err.contains("hypothesis is back in the work tree"), "{err}");
    assert_eq!(t.head(), base, "nothing stays committed");
    assert_eq!(t.read("kernel.py"), "BQ = 512\nBKV = 256\n", "the edit is still in the work tree");
    assert!(t.path().join("notes.txt").exists(), "the new file too");
    let status = t.git(&["status", "--porcelain"]);
    assert!(status.contains(" M kernel.py") && status.contains("?? notes.txt"), "{status}");
    assert!(t.rows().is_empty(), "no row");
    assert!(t.runs().is_empty(), "no runs");
    assert!(t.git(&["for-each-ref", "refs/ratchet/"]).is_empty(), "nothing parked");
}

/// Once the set-up is fixed the same hypothesis runs as experiment 1.
fn assert_next_id_is_1(t: &TestRepo) {
    t.ratchet().arg("experiment: bigger BQ").assert().success();
    let rows = t.rows();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["id"], "1");
}

#[test]
fn a_missing_benchmark_command_is_caught_before_committing() {
    let t = repo("no-such-benchmark-tool-xyz bench.sh");
    let base = t.head();
    hypothesis(&t);
    let out = t.ratchet().arg("experiment: bigger BQ").output().unwrap();
    assert_given_back(&t, &base, &out, "`no-such-benchmark-tool-xyz` was not found");
    assert!(!t.path().join(".ratchet/experiments/1").exists(), "no run was even started");
}

#[test]
fn a_python_lacking_a_module_the_benchmark_imports_is_caught_before_committing() {
    let t = repo("python3 bench.py");
    t.write("bench.py", "import os\nimport no_such_module_xyz\nfrom json import dumps\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-qm", "python benchmark"]);
    let base = t.head();
    hypothesis(&t);
    let out = t.ratchet().arg("experiment: bigger BQ").output().unwrap();
    assert_given_back(&t, &base, &out, "cannot import no_such_module_xyz");
    assert!(String::from_utf8_lossy(&out.stderr).contains("pip install no_such_module_xyz"));
}

#[test]
fn an_incumbent_failing_like_the_candidate_is_the_set_up_not_the_hypothesis() {
    // Broken from the start: the incumbent fails, the candidate is run once and fails the same way.
    let t = repo("sh bench.sh");
    let base = t.head();
    t.write("break_from", "0\n");
    hypothesis(&t);
    let out = t.ratchet().arg("experiment: bigger BQ").output().unwrap();
    assert_given_back(&t, &base, &out, "both crash with exit code 4");
    std::fs::remove_file(t.path().join("break_from")).unwrap();
    assert_next_id_is_1(&t);

    // Broken after the first run: the candidate crashes, the incumbent run again crashes alike.
    let t = repo("sh bench.sh");
    let base = t.head();
    t.write("break_from", "1\n");
    hypothesis(&t);
    let out = t.ratchet().arg("experiment: bigger BQ").output().unwrap();
    assert_given_back(&t, &base, &out, "both crash with exit code 4");
    assert!(String::from_utf8_lossy(&out.stderr).contains("device busy"));
}

/// A tmpfs of `size` mounted at a fresh directory (root only); unmounted on drop.
struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
    fn mount(size: &str) -> Option<Tmpfs> {
        let d = tempfile::tempdir().unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(d.path())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(Tmpfs(d))
    }
    fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(self.0.path()).status();
    }
}

#[test]
fn a_full_disk_is_the_machine_not_the_hypothesis() {
    let Some(full) = Tmpfs::mount("1m") else {
        eprintln!("note: skipping the real-ENOSPC test: cannot mount a tmpfs here (needs root)");
        return;
    };
    let t = repo("sh bench.sh");
    let base = t.head();
    t.write("full_dir", &full.path().display().to_string());
    hypothesis(&t);
    let out = t.ratchet().arg("experiment: bigger BQ").output().unwrap();
    assert_given_back(&t, &base, &out, "No space left on device");
    assert!(String::from_utf8_lossy(&out.stderr).contains("free disk space"));
    std::fs::remove_file(t.path().join("full_dir")).unwrap();
    assert_next_id_is_1(&t);
}

#[test]
fn the_preflight_refuses_to_start_on_a_nearly_full_disk() {
    let Some(small) = Tmpfs::mount("8m") else {
        eprintln!("note: skipping the free-space preflight test: cannot mount a tmpfs here (needs root)");
        return;
    };
    let cfg = ratchet::config::Config::parse(&CONFIG.replace("{cmd}", "sh bench.sh")).unwrap();
    let e = ratchet::bench::infra::preflight(&cfg, small.path(), small.path(), small.path()).unwrap_err();
    assert_eq!(e.exit_code(), 6);
    assert!(e.to_string().contains("MiB free") && e.to_string().contains("free disk space"), "{e}");
    let big = tempfile::tempdir().unwrap();
    if ratchet::bench::infra::free_bytes(big.path()).is_some_and(|b| b >= ratchet::bench::infra::MIN_FREE_BYTES) {
        ratchet::bench::infra::preflight(&cfg, big.path(), big.path(), big.path()).unwrap();
    }
}
