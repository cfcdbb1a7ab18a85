//! Forked runs (`[benchmark] preload`): a `python SCRIPT.py` run is forked from a pre-imported
//! parent and still ends, reports, times out and is killed as a process run is; what cannot be
//! forked, or a parent that refuses, runs as a plain process.

use crate::support;

use ratchet::bench::executor::{alive, Executor, Exit, ProcessExecutor, RunSpec};
use std::path::Path;
use std::time::{Duration, Instant};
use support::TestRepo;

/// A state dir with the helper modules installed, as ratchet makes it before the first run.
fn state(root: &Path) -> std::path::PathBuf {
    let state = root.join(".ratchet");
    ratchet::pyhelper::install(&state).unwrap();
    state
}

fn spec(cmd: &str, dir: &Path, state: &Path, name: &str, timeout: Duration) -> RunSpec {
    RunSpec {
        command: cmd.into(),
        dir: dir.to_path_buf(),
        env: vec![("RATCHET_STATE_DIR".into(), state.display().to_string()), ("RATCHET_RUN".into(), name.into())],
        log_dir: dir.join(format!("logs-{name}")),
        timeout,
        grace: Duration::from_millis(300),
        pgid_file: None,
        cancel: ratchet::signals::Cancel::new(),
        preload: true,
    }
}

fn gone(pid: i32) -> bool {
    // The kill is done when the run returns; the kernel tears the process down in its own time.
    support::eventually(|| !alive(pid))
}

const REPORT: &str = "import os, sys\nprint('RESULT: run', os.environ['RATCHET_RUN'], 'parent', os.getppid())\n\
print('to stderr', file=sys.stderr)\nsys.exit(0 if os.environ['RATCHET_RUN'] == '1' else 3)\n";

#[test]
fn a_python_benchmark_runs_forked_from_one_parent_with_its_own_output_and_status() {
    let d = tempfile::tempdir().unwrap();
    let st = state(d.path());
    std::fs::write(d.path().join("bench.py"), REPORT).unwrap();
    let mut parents = vec![];
    for (run, code) in [("1", 0), ("2", 3)] {
        let out = ProcessExecutor.run(&spec("python3 bench.py", d.path(), &st, run, Duration::from_secs(120))).unwrap();
        assert!(out.forked, "run {run} was not forked");
        assert_eq!(out.exit, Exit::Code(code));
        let stdout = std::fs::read_to_string(&out.stdout_path).unwrap();
        assert_eq!(out.summary_lines.len(), 1, "{stdout}");
        let words: Vec<&str> = out.summary_lines[0].split_whitespace().collect();
        assert_eq!(words[..3], ["RESULT:", "run", run]);
        parents.push(words[4].to_string());
        assert_eq!(std::fs::read_to_string(&out.stderr_path).unwrap(), "to stderr\n");
        // The streams' pipes are gone from the log dir once the child holds them.
        assert!(!out.stdout_path.with_file_name(".stdout.fifo").exists());
    }
    assert_eq!(parents[0], parents[1], "the second run did not reuse the parent");
}

#[test]
fn a_forked_run_and_what_it_left_die_on_a_timeout_and_a_cancel() {
    let d = tempfile::tempdir().unwrap();
    let st = state(d.path());
    // A grandchild in a session of its own, its pid in $PIDF; then the run hangs.
    std::fs::write(
        d.path().join("hang.py"),
        "import os, subprocess, time\np = subprocess.Popen(['sleep', '300'], start_new_session=True)\n\
         open(os.environ['PIDF'] + '.tmp', 'w').write(str(p.pid))\nos.rename(os.environ['PIDF'] + '.tmp', os.environ['PIDF'])\n\
         time.sleep(300)\n",
    )
    .unwrap();
    for how in ["timeout", "cancel"] {
        let pidf = d.path().join(format!("{how}.pid"));
        let cmd = format!("PIDF={} python3 hang.py", pidf.display());
        let timeout = if how == "timeout" { Duration::from_millis(1500) } else { Duration::from_secs(120) };
        let s = spec(&cmd, d.path(), &st, how, timeout);
        let cancel = s.cancel.clone();
        let watcher = {
            let pidf = pidf.clone();
            std::thread::spawn(move || {
                let pid = support::read_pid(&pidf);
                if how == "cancel" {
                    cancel.cancel();
                }
                pid
            })
        };
        let out = ProcessExecutor.run(&s).unwrap();
        assert!(out.forked);
        assert_eq!(out.exit, if how == "timeout" { Exit::Timeout } else { Exit::Interrupted });
        let pid = watcher.join().unwrap();
        assert!(gone(pid), "{how}: the grandchild {pid} survived its run");
    }
    // The parent serves the next run.
    std::fs::write(d.path().join("bench.py"), REPORT).unwrap();
    let out = ProcessExecutor.run(&spec("python3 bench.py", d.path(), &st, "1", Duration::from_secs(120))).unwrap();
    assert!(out.forked && out.exit == Exit::Code(0), "{out:?}");
}

#[test]
fn what_cannot_be_forked_runs_as_a_plain_process() {
    let d = tempfile::tempdir().unwrap();
    let st = state(d.path());
    std::fs::write(d.path().join("bench.py"), REPORT).unwrap();
    // A shell is needed, preload is off, or the parent refuses (an import starts a thread).
    std::fs::write(
        d.path().join("spins.py"),
        "import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n",
    )
    .unwrap();
    std::fs::create_dir_all(st.join("cache")).unwrap();
    let refusing = tempfile::tempdir().unwrap();
    let refusing_state = state(refusing.path());
    std::fs::create_dir_all(refusing_state.join("cache")).unwrap();
    std::fs::write(refusing_state.join("cache/preload.json"), r#"{"modules": ["spins"]}"#).unwrap();
    let mut off = spec("python3 bench.py", d.path(), &st, "1", Duration::from_secs(120));
    off.preload = false;
    let mut refused = spec("python3 bench.py", d.path(), &refusing_state, "1", Duration::from_secs(120));
    refused.env.push(("PYTHONPATH".into(), d.path().display().to_string()));
    for (what, s) in [
        ("a shell command", spec("python3 bench.py && true", d.path(), &st, "1", Duration::from_secs(120))),
        ("preload off", off),
        ("a refusing parent", refused),
    ] {
        let out = ProcessExecutor.run(&s).unwrap();
        assert!(!out.forked, "{what} was forked");
        assert_eq!(out.exit, Exit::Code(0), "{what}");
        assert_eq!(out.summary_lines.len(), 1, "{what}");
    }
    let learnt = std::fs::read_to_string(refusing_state.join("cache/preload.json")).unwrap();
    assert!(learnt.contains(r#""refused": ["spins"]"#), "{learnt}");
}

const CONFIG: &str = "[benchmark]\ncommand = \"python3 bench.py\"\ntimeout_s = 60\nkill_grace_s = 0.5\nwarmup = 0\niters = 5\n\
profile_iters = 0\n[score]\nmetric = \"latency\"\n[decision]\nmethod = \"fixed\"\nmin_pairs = 2\nmax_pairs = 2\nconfirm = false\n";

/// With `hang.txt` in the checkout: start a grandchild in its own session (pid in
/// `$RATCHET_REPO/left.pid`) and hang; else report a result.
const BENCH: &str = r#"import json, os, subprocess, time
if os.path.exists('hang.txt'):
    p = subprocess.Popen(['sleep', '300'], start_new_session=True)
    f = os.path.join(os.environ['RATCHET_REPO'], 'left.pid')
    open(f + '.tmp', 'w').write(str(p.pid))
    os.rename(f + '.tmp', f)
    time.sleep(300)
json.dump({'version': 1, 'latencies_ms': [10.0, 10.1, 9.9]}, open(os.path.join(os.environ['RATCHET_OUT'], 'ratchet-result.json'), 'w'))
"#;
#[test]
fn a_forked_run_dies_with_a_dead_ratchet() {
    let t = TestRepo::with_config(CONFIG);
    t.write("bench.py", BENCH);
    t.write(".gitignore", "*.pid\n*.pid.tmp\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-qm", "the benchmark"]);
    t.write("hang.txt", "");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-qm", "the incumbent hangs too"]);
    t.write("kernel.py", "BQ = 1\n");
    let mut child = t.spawn(&["experiment: hang"], &[]);
    let pid = support::read_pid(&t.path().join("left.pid"));
    child.kill().unwrap();
    child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!alive(pid), "the forked run's grandchild {pid} outlived a dead ratchet");
    t.ratchet().arg("recover").assert().success();
}
