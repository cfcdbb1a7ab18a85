//! A benchmark that escapes every marker (`setsid`, `env -i`, a double fork:
//! a grandchild in a session of its own, without the run's token, orphaned) is still killed at
//! the end of its run, on a timeout, on Ctrl-C and by recovery; and a run only ever kills what
//! came from itself, so runs in parallel threads of one process leave each other alone.

use crate::support;

use ratchet::bench::executor::{alive, Executor, Exit, ProcessExecutor, RunSpec};
use std::path::Path;
use std::time::{Duration, Instant};
use support::TestRepo;

/// Starts the escapee and waits until it has written its pid to `$PIDF`: a sleeping grandchild
/// in a new session, with an empty environment, whose parent exited (so it is an orphan).
const ESCAPE: &str = r#"setsid env -i sh -c '(sleep 300 </dev/null >/dev/null 2>&1 & echo $! > "$0.tmp"; mv "$0.tmp" "$0")' "$PIDF" </dev/null >/dev/null 2>&1 &
while [ ! -s "$PIDF" ]; do sleep 0.02; done
"#;

/// Whether `pid` left the run's containment the way the test means it to: another session, no
/// token in its environment.
fn assert_escaped(pid: i32) {
    let stat = ratchet::bench::executor::proc_stat(pid).expect("the escapee runs");
    let sid = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    assert!(!String::from_utf8_lossy(&env).contains("RATCHET_RUN_TOKEN"), "the escapee kept the token");
    assert_eq!(stat.pgrp, pid_session_leader(&sid), "the escapee is in a group of its own session");
}

fn pid_session_leader(stat: &str) -> i32 {
    // Field 6 (session) of /proc/PID/stat, proc(5).
    stat.rsplit_once(')').unwrap().1.split_whitespace().nth(3).unwrap().parse().unwrap()
}

fn spec(cmd: &str, dir: &Path, pidf: &Path, timeout: Duration) -> RunSpec {
    RunSpec {
        command: cmd.into(),
        dir: dir.to_path_buf(),
        env: vec![("PIDF".into(), pidf.display().to_string())],
        log_dir: dir.join(format!("logs-{}", pidf.file_name().unwrap().to_string_lossy())),
        timeout,
        grace: Duration::from_millis(300),
        pgid_file: None,
        cancel: ratchet::signals::Cancel::new(),
        preload: false,
    }
}

fn gone(pid: i32) -> bool {
    // The kill is done when the run returns; the kernel tears the process down in its own time.
    support::eventually(|| !alive(pid))
}

#[test]
fn an_escaped_grandchild_dies_with_its_run_its_timeout_and_its_cancel() {
    let d = tempfile::tempdir().unwrap();
    // Checked while the run still goes on: the escapee really escaped every old marker.
    let check = format!("{ESCAPE}cat \"$PIDF\" > \"$PIDF.seen\"; sleep 0.2");
    let pidf = d.path().join("after-exit.pid");
    let out = ProcessExecutor.run(&spec(&format!("{ESCAPE}exit 0"), d.path(), &pidf, Duration::from_secs(30))).unwrap();
    assert_eq!(out.exit, Exit::Code(0));
    let pid = support::read_pid(&pidf);
    assert!(gone(pid), "the escapee {pid} survived its run's end");

    let pidf = d.path().join("timeout.pid");
    let out = ProcessExecutor.run(&spec(&format!("{check}; sleep 300"), d.path(), &pidf, Duration::from_millis(1500))).unwrap();
    assert_eq!(out.exit, Exit::Timeout);
    let pid = support::read_pid(&pidf);
    assert!(gone(pid), "the escapee {pid} survived the timeout");

    let pidf = d.path().join("cancel.pid");
    let s = spec(&format!("{ESCAPE}sleep 300"), d.path(), &pidf, Duration::from_secs(60));
    let cancel = s.cancel.clone();
    let watcher = {
        let pidf = pidf.clone();
        std::thread::spawn(move || {
            let pid = support::read_pid(&pidf);
            assert_escaped(pid);
            cancel.cancel();
            pid
        })
    };
    let out = ProcessExecutor.run(&s).unwrap();
    assert_eq!(out.exit, Exit::Interrupted);
    let pid = watcher.join().unwrap();
    assert!(gone(pid), "the escapee {pid} survived the cancel");
}

#[test]
fn concurrent_runs_in_one_process_kill_only_their_own_processes() {
    let d = tempfile::tempdir().unwrap();
    let (pa, pb) = (d.path().join("a.pid"), d.path().join("b.pid"));
    let a_done = d.path().join("a.done");
    let verdict = d.path().join("b.verdict");
    // B starts its escapee, waits until A has finished (and cleaned up), then reports whether
    // its own escapee is still alive.
    let b_cmd = format!(
        "{ESCAPE}while [ ! -e '{}' ]; do sleep 0.02; done; if kill -0 $(cat \"$PIDF\"); then echo alive; else echo killed; fi > '{}'",
        a_done.display(),
        verdict.display()
    );
    let b = {
        let s = spec(&b_cmd, d.path(), &pb, Duration::from_secs(60));
        std::thread::spawn(move || ProcessExecutor.run(&s).unwrap())
    };
    // A escapes too, and ends while B's escapee runs.
    let b_pid = support::read_pid(&pb);
    let out = ProcessExecutor.run(&spec(&format!("{ESCAPE}exit 0"), d.path(), &pa, Duration::from_secs(60))).unwrap();
    assert_eq!(out.exit, Exit::Code(0));
    let a_pid = support::read_pid(&pa);
    assert!(gone(a_pid), "run A's escapee {a_pid} survived run A");
    assert!(alive(b_pid), "run A's clean-up killed run B's process {b_pid}");
    std::fs::write(&a_done, "").unwrap();
    let out = b.join().unwrap();
    assert_eq!(out.exit, Exit::Code(0));
    assert_eq!(std::fs::read_to_string(&verdict).unwrap().trim(), "alive", "run B's escapee was killed before run B ended");
    assert!(gone(b_pid), "run B's escapee {b_pid} survived run B");
}

const CONFIG: &str = "[benchmark]\ncommand = \"sh bench.sh\"\ntimeout_s = 60\nkill_grace_s = 0.5\nwarmup = 0\niters = 5\n\
profile_iters = 0\n[score]\nmetric = \"latency\"\n[decision]\nmethod = \"fixed\"\nmin_pairs = 2\nmax_pairs = 2\nconfirm = false\n";

/// `mode.txt` = `escape`: start the escapee (pid in escapee.pid), then hang.
fn bench() -> String {
    format!(
        "if [ \"$(cat mode.txt)\" = escape ]; then\nPIDF=\"$RATCHET_REPO/escapee.pid\"\n{ESCAPE}sleep 300\nfi\n\
         printf '{{\"version\": 1, \"latencies_ms\": [10.0, 10.1, 9.9]}}' > \"$RATCHET_OUT/ratchet-result.json\"\n"
    )
}

fn repo() -> TestRepo {
    let t = TestRepo::with_config(CONFIG);
    t.write("bench.sh", &bench());
    t.write("mode.txt", "ok\n");
    t.write(".gitignore", "*.pid\n*.pid.tmp\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-qm", "the benchmark"]);
    t.write("mode.txt", "escape\n");
    t
}

fn wait_limited(child: &mut std::process::Child, limit: Duration) -> Option<i32> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("ratchet ran past {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn ctrl_c_kills_an_escaped_grandchild() {
    let t = repo();
    let mut child = t.spawn(&["experiment: escape"], &[]);
    let pid = support::read_pid(&t.path().join("escapee.pid"));
    assert_escaped(pid);
    // SAFETY: signalling the ratchet this test started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    assert_eq!(wait_limited(&mut child, Duration::from_secs(30)), Some(130));
    assert!(gone(pid), "the escapee {pid} survived Ctrl-C");
    assert_eq!(t.rows()[0]["status"], "interrupted");
}

#[test]
fn an_escaped_grandchild_dies_with_a_dead_ratchet() {
    // SIGKILLed mid-run (run.pgid complete), and killed right after the spawn (run.pgid holds
    // the token alone): either way the run's supervisor sees its parent die and takes the run
    // and everything that escaped from it; recovery afterwards finds nothing left running.
    for fault in [None, Some("after-spawn")] {
        let t = repo();
        // The incumbent escapes too, so whichever side runs first starts the escapee.
        t.git(&["commit", "-qam", "the incumbent escapes too"]);
        t.write("kernel.py", "BQ = 1\n");
        let env: Vec<(&str, &str)> = fault.map(|f| ("RATCHET_FAULT", f)).into_iter().collect();
        let mut child = t.spawn(&["experiment: escape"], &env);
        let pidf = t.path().join("escapee.pid");
        if fault.is_none() {
            let _ = support::read_pid(&pidf);
            child.kill().unwrap();
        }
        wait_limited(&mut child, Duration::from_secs(30));
        // Killed right after the spawn, the supervisor may see its parent gone before the run
        // starts: then no escapee ever exists, which is the same promise kept earlier.
        std::thread::sleep(Duration::from_secs(2));
        if let Ok(text) = std::fs::read_to_string(&pidf) {
            let pid: i32 = text.trim().parse().unwrap();
            let deadline = Instant::now() + Duration::from_secs(10);
            while alive(pid) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            assert!(!alive(pid), "{fault:?}: the escapee {pid} outlived a dead ratchet");
        } else {
            assert!(fault.is_some(), "the escapee never started");
        }
        t.ratchet().arg("recover").assert().success();
    }
}
