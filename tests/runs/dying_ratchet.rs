//! The processes of a benchmark run when ratchet itself dies: the run's supervisor notices its
//! parent's death at once and stops the whole run (group and daemons), instead of letting it go
//! on until the run's timeout.

use crate::support;

use support::TestRepo;

const CONFIG: &str = "[benchmark]\ncommand = \"sh bench.sh\"\ntimeout_s = 86400\nkill_grace_s = 0.5\nwarmup = 0\niters = 5\n\
profile_iters = 0\n[score]\nmetric = \"latency\"\n[decision]\nmethod = \"fixed\"\nmin_pairs = 2\nmax_pairs = 2\nconfirm = false\n";

/// Writes its own pid and a daemon's, then hangs far past any test's patience.
const BENCH: &str = r#"setsid sh -c 'echo $$ > "$RATCHET_REPO/daemon.pid.tmp"; mv "$RATCHET_REPO/daemon.pid.tmp" "$RATCHET_REPO/daemon.pid"; exec sleep 3000' </dev/null >/dev/null 2>&1 &
echo $$ > "$RATCHET_REPO/leader.pid.tmp"; mv "$RATCHET_REPO/leader.pid.tmp" "$RATCHET_REPO/leader.pid"
sleep 3000
"#;

fn alive(pid: i32) -> bool {
    ratchet::bench::executor::alive(pid)
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
    // The run's timeout (a day) is far past the hang guard: only ratchet's death can end it.
    assert!(
        support::eventually(|| !alive(leader) && !alive(daemon)),
        "the benchmark ({leader}) or its daemon ({daemon}) outlived the SIGKILLed ratchet"
    );
    // Nothing is left for recovery to kill, and it still puts the repo back.
    t.ratchet().arg("recover").assert().success();
    assert_eq!(t.rows()[0]["status"], "interrupted");
}
