//! A closed stdout, signals and a dying ratchet. Output to a closed pipe
//! is dropped and the experiment finishes and records; SIGHUP is SIGTERM; a run that finished
//! is always recorded; Ctrl-C during the final recording exits 130; no process a benchmark
//! started survives its run, Ctrl-C or recovery, and recovery kills only what it recorded.

use crate::support;

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::TestRepo;

/// `ratchet ARGS` in the repo with stdout (and stderr) pipes whose reading ends are closed
/// before it prints anything; returns its exit code.
fn with_closed_pipes(t: &TestRepo, args: &[&str], env: &[(&str, &str)]) -> i32 {
    let home = tempfile::tempdir().unwrap();
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("ratchet"))
        .args(args)
        .current_dir(t.path())
        .env("HOME", home.path())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    drop(child.stderr.take());
    wait_limited(&mut child, Duration::from_secs(120))
}

fn wait_limited(child: &mut std::process::Child, limit: Duration) -> i32 {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st.code().unwrap_or(-1);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("ratchet ran past {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn alive(pid: i32) -> bool {
    ratchet::bench::executor::alive(pid)
}

#[test]
fn a_closed_stdout_never_aborts_an_experiment_a_sweep_or_status() {
    let t = TestRepo::new();
    let base = t.head();
    t.write("fake.env", "FAKE_LATENCY_MS=20\n");
    assert_eq!(with_closed_pipes(&t, &["experiment: slower"], &[]), 0);
    assert_eq!(t.rows().len(), 1, "the experiment recorded its row");
    assert_eq!(t.rows()[0]["status"], "revert");
    assert_eq!(t.head(), base, "and rolled back, instead of dying on the unmeasured commit");
    assert_eq!(t.git(&["status", "--porcelain"]), "");
    assert_eq!(with_closed_pipes(&t, &["status"], &[]), 0);
    assert_eq!(with_closed_pipes(&t, &["results"], &[]), 0);

    t.write(
        "experiments/a.toml",
        "message = \"faster\"\n[[edit]]\nfile = \"fake.env\"\nfind = \"FAKE_LATENCY_MS=10\"\nreplace = \"FAKE_LATENCY_MS=5\"\n",
    );
    t.git(&["add", "-A"]);
    t.git(&["commit", "-qm", "a hypothesis queue"]);
    assert_eq!(with_closed_pipes(&t, &["sweep"], &[]), 0);
    let rows = t.rows();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1]["status"], "keep");
}

const CONFIG: &str = "[benchmark]\ncommand = \"sh bench.sh\"\ntimeout_s = 20\nkill_grace_s = 0.5\nwarmup = 0\niters = 5\n\
profile_iters = 0\n[score]\nmetric = \"latency\"\n[decision]\nmethod = \"fixed\"\nmin_pairs = 2\nmax_pairs = 2\nconfirm = false\n";

/// Reports 10 ms; `mode.txt` = `daemon` starts a setsid'd daemon (pid in daemon.pid) and then
/// hangs; `slow` takes 0.3 s.
const BENCH: &str = r#"case "$(cat mode.txt)" in
  daemon) setsid sh -c 'echo $$ > "$RATCHET_REPO/daemon.pid.tmp"; mv "$RATCHET_REPO/daemon.pid.tmp" "$RATCHET_REPO/daemon.pid"; exec sleep 300' </dev/null >/dev/null 2>&1 &
          echo $$ > "$RATCHET_REPO/leader.pid"; sleep 300 ;;
  slow) sleep 0.3 ;;
esac
printf '{"version": 1, "latencies_ms": [10.0, 10.1, 9.9]}' > "$RATCHET_OUT/ratchet-result.json"
"#;

fn repo(config: &str) -> TestRepo {
    let t = TestRepo::with_config(config);
    t.write("bench.sh", BENCH);
    t.write("mode.txt", "ok\n");
    t.write(".gitignore", "*.pid\n*.pid.tmp\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-qm", "the benchmark"]);
    t
}

fn signal(child: &std::process::Child, sig: i32) {
    // SAFETY: signalling the ratchet this test started.
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
}

#[test]
fn ctrl_c_sighup_and_timeouts_kill_daemonised_processes_too() {
    for (sig, name) in [(libc::SIGINT, "SIGINT"), (libc::SIGHUP, "SIGHUP")] {
        let t = repo(CONFIG);
        let base = t.head();
        t.write("mode.txt", "daemon\n");
        let mut child = t.spawn(&["experiment: daemon"], &[]);
        let pid = support::read_pid(&t.path().join("daemon.pid"));
        assert!(alive(pid));
        signal(&child, sig);
        assert_eq!(wait_limited(&mut child, Duration::from_secs(30)), 130, "{name}");
        std::thread::sleep(Duration::from_millis(100));
        assert!(!alive(pid), "the daemon {pid} survived {name}");
        assert_eq!(t.rows()[0]["status"], "interrupted", "{name}");
        assert_eq!(t.head(), base, "{name}: rolled back");
    }
    let t = repo(&CONFIG.replace("timeout_s = 20", "timeout_s = 1"));
    t.write("mode.txt", "daemon\n");
    t.ratchet().arg("experiment: daemon").assert().success();
    assert_eq!(t.rows()[0]["status"], "timeout");
    let pid = support::read_pid(&t.path().join("daemon.pid"));
    assert!(!alive(pid), "the daemon {pid} survived the timeout");
}

#[test]
fn a_ratchet_killed_right_after_spawning_a_run_leaves_nothing_running() {
    // Killed right after spawning the run, before run.pgid named its process group: the run's
    // supervisor either starts nothing (its parent is already gone) or stops the run, daemon
    // included, as soon as it hears of the death. (A run found by its token alone, for a
    // supervisor killed too, is the executor's unit test.)
    let t = repo(CONFIG);
    t.write("mode.txt", "daemon\n");
    t.git(&["commit", "-qam", "the incumbent daemonises too"]);
    t.write("kernel.py", "BQ = 1\n");
    let mut child = t.spawn(&["experiment: x"], &[("RATCHET_FAULT", "after-spawn")]);
    assert_eq!(wait_limited(&mut child, Duration::from_secs(30)), -1, "ratchet killed itself");
    std::thread::sleep(Duration::from_secs(3));
    let pid_in = |name: &str| std::fs::read_to_string(t.path().join(name)).ok().and_then(|s| s.trim().parse::<i32>().ok());
    for name in ["daemon.pid", "leader.pid"] {
        if let Some(pid) = pid_in(name) {
            assert!(!alive(pid), "{name} ({pid}) outlived the killed ratchet by 3 s");
        }
    }
    t.ratchet().arg("recover").assert().success();
    assert_eq!(t.rows()[0]["status"], "interrupted");
    assert_eq!(t.git(&["show", "refs/ratchet/discarded/1:kernel.py"]), "BQ = 1\n", "the hypothesis is parked, not lost");
}

#[test]
fn recovery_never_kills_a_process_that_reused_a_recorded_pid() {
    let t = repo(CONFIG);
    std::fs::create_dir_all(t.path().join(".ratchet")).unwrap();
    // An unrelated job, leader of its own group, whose pid a stale run.pgid happens to name.
    let mut job = Command::new("sleep").arg("30").process_group(0).spawn().unwrap();
    let pid = job.id() as i32;
    let start = ratchet::bench::executor::proc_stat(pid).unwrap().start;
    let stale = format!("{{\"pgid\": {pid}, \"start\": {}, \"token\": \"gone-1-2\"}}", start.saturating_sub(1000));
    std::fs::write(t.path().join(".ratchet/run.pgid"), stale).unwrap();
    t.ratchet().arg("recover").assert().success();
    assert!(alive(pid), "ratchet recover killed an unrelated job that reused the pid");
    let _ = job.kill();
    let _ = job.wait();
}

#[test]
fn a_finished_run_is_recorded_even_when_a_signal_follows_it() {
    let t = repo(CONFIG);
    let base = t.head();
    t.write("kernel.py", "BQ = 1\n");
    let out = t.ratchet().arg("experiment: x").env("RATCHET_SIGNAL_AT", "after-run").output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    let runs = t.runs();
    assert_eq!(runs.len(), 1, "the run that finished before the signal is in runs.jsonl");
    assert_eq!(runs[0]["status"], "ok");
    assert_eq!(t.rows()[0]["status"], "interrupted");
    assert_eq!(t.head(), base);
}

#[test]
fn ctrl_c_during_the_final_recording_still_records_and_exits_130() {
    let t = repo(CONFIG);
    t.write("kernel.py", "BQ = 1\n");
    let out = t.ratchet().arg("experiment: x").env("RATCHET_SIGNAL_AT", "before-append").output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    let rows = t.rows();
    assert_eq!(rows.len(), 1, "the decided experiment is recorded");
    assert_eq!(rows[0]["status"], "revert");
    assert_eq!(t.runs().len(), 4);
    assert!(String::from_utf8_lossy(&out.stderr).contains("decided and recorded"));
}

#[test]
fn recovery_finishes_a_row_cut_off_mid_write_and_removes_temporary_files() {
    let t = repo(CONFIG);
    t.write("kernel.py", "BQ = 1\n");
    t.ratchet().arg("experiment: first").assert().success();
    t.write("kernel.py", "BQ = 2\n");
    // Killed in the middle of writing its row to results.csv.
    let out = t.ratchet().arg("experiment: x").env("RATCHET_FAULT", "mid-append").output().unwrap();
    assert_eq!(out.status.code(), None, "killed by its own SIGKILL");
    let table = || std::fs::read_to_string(t.path().join("results/results.csv")).unwrap();
    assert!(!table().ends_with('\n') && table().lines().count() == 3, "the fault left a torn row: {:?}", table());
    // Readers leave the torn row out.
    let listed = t.ratchet().args(["results", "--format", "csv"]).output().unwrap();
    assert!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));
    assert_eq!(
        String::from_utf8_lossy(&listed.stdout).lines().count(),
        2,
        "the header and one row: {}",
        String::from_utf8_lossy(&listed.stdout)
    );
    let leftovers = |dir: &str| -> Vec<String> {
        std::fs::read_dir(t.path().join(dir))
            .map(|rd| rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| n.contains(".tmp")).collect())
            .unwrap_or_default()
    };
    // Temporary files of killed rewrites.
    std::fs::write(t.path().join(".ratchet/.state.json.tmp.4242"), "{").unwrap();
    std::fs::write(t.path().join("results/.results.csv.tmp.4242"), "id,").unwrap();
    t.ratchet().arg("recover").assert().success();
    assert!(leftovers("results").is_empty(), "{:?}", leftovers("results"));
    assert!(leftovers(".ratchet").is_empty(), "{:?}", leftovers(".ratchet"));
    assert_eq!(t.rows().len(), 2, "and the experiment was finished once");
    assert!(table().ends_with('\n'), "the torn row was cut off: {:?}", table());
}
