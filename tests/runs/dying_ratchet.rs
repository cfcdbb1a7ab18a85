//! The processes of a benchmark run when ratchet itself dies: the run's supervisor notices its
//! parent's death at once and stops the whole run (group and daemons), instead of letting it go
//! on until the run's timeout.

use crate::support;

use std::time::{Duration, Instant};
use support::TestRepo;

const CONFIG: &str = "[benchmark]\ncommand = \"sh bench.sh\"\ntimeout_s = 300\nkill_grace_s = 0.5\nwarmup = 0\niters = 5\n\
profile_iters = 0\n[score]\nmetric = \"latency\"\n[decision]\nmethod = \"fixed\"\nmin_pairs = 2\nmax_pairs = 2\nconfirm = false\n";

/// Writes its own pid and a daemon's, then hangs far past any test's patience.
const BENCH: &str = r#"setsid sh -c 'echo $$ > "$RATCHET_REPO/daemon.pid.tmp"; mv "$RATCHET_REPO/daemon.pid.tmp" "$RATCHET_REPO/daemon.pid"; exec sleep 300' </dev/null >/dev/null 2>&1 &
echo $$ > "$RATCHET_REPO/leader.pid.tmp"; mv "$RATCHET_REPO/leader.pid.tmp" "$RATCHET_REPO/leader.pid"
sleep 300
"#;

fn alive(pid: i32) -> bool {
    ratchet::bench::executor::alive(pid)
}

/// Wait up to `limit` for every pid in `pids` to be gone; returns how long it took, or None.
fn gone_within(pids: &[i32], limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if pids.iter().all(|&p| !alive(p)) {
            return Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn a_sigkilled_ratchet_takes_its_benchmark_run_with_it_at_once() {
    let t = TestRepo::with_config(CONFIG);
    t.write("bench.sh", BENCH);
    t.write(".gitignore", "*.pid\n*.pid.tmp\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-qm", "a benchmark that hangs"]);
    t.write("kernel.py", "BQ = 1\n");
    let mut child = t.spawn(&["experiment: x"], &[]);
    let leader = support::read_pid(&t.path().join("leader.pid"));
    let daemon = support::read_pid(&t.path().join("daemon.pid"));
    assert!(alive(leader) && alive(daemon));
    // SAFETY: SIGKILL to the ratchet this test started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGKILL);
    }
    let _ = child.wait();
    // The run's interrupt grace is at most 1 s; the timeout (300 s) must play no part.
    let took = gone_within(&[leader, daemon], Duration::from_secs(5));
    assert!(took.is_some(), "the benchmark ({leader}) or its daemon ({daemon}) outlived the SIGKILLed ratchet by 5 s");
    eprintln!("the run was gone {:?} after ratchet's death", took.unwrap());
    // Nothing is left for recovery to kill, and it still puts the repo back.
    t.ratchet().arg("recover").assert().success();
    assert_eq!(t.rows()[0]["status"], "interrupted");
}
