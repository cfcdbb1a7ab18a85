//! A parallel sweep started after its controller was killed re-attaches to the jobs the dead
//! controller left queued or running on an external engine: they are watched to their end and
//! recorded, not cancelled (on a busy cluster a cancelled job goes to the back of the queue).

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};
use support::queue::{repo, QUEUE};

#[test]
fn the_next_sweep_reattaches_to_a_killed_sweeps_jobs() {
    let rig = tempfile::tempdir().unwrap();
    let state = rig.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let hook = |name: &str, body: &str| {
        let p = rig.path().join(name);
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        format!("sh {} {}", p.display(), state.display())
    };
    let engine = format!(
        "[engine]\nkind = \"hook\"\ncapacity = 2\nsubmit = {:?}\npoll = {:?}\ncancel = {:?}\npoll_interval_s = 0.1\n",
        hook("submit.sh", support::hooks::SUBMIT),
        hook("poll.sh", support::hooks::POLL),
        hook("cancel.sh", support::hooks::CANCEL)
    );
    let t = repo(&engine);
    let base = t.head();
    let mut child = t.spawn(&["sweep"], &[("FAKE_SLEEP_S", "0.4")]);
    let deadline = Instant::now() + Duration::from_secs(45);
    while t.live_workers().len() < 2 {
        assert!(Instant::now() < deadline && child.try_wait().unwrap().is_none(), "the workers never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    unsafe {
        libc::kill(child.id() as i32, libc::SIGKILL);
    }
    child.wait().unwrap();
    let running = t.live_workers();
    assert_eq!(running.len(), 2, "the jobs outlive a SIGKILLed controller");
    let out = t.ratchet().arg("sweep").env("FAKE_SLEEP_S", "0.4").output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    assert!(text.contains("re-attached the jobs a stopped parallel sweep left"), "{text}");
    assert!(!state.join("cancelled").exists(), "nothing was cancelled: {:?}", std::fs::read_to_string(state.join("cancelled")));
    let mut names: Vec<String> = t.rows().iter().map(|r| r["hypothesis"].split('@').next().unwrap().to_string()).collect();
    names.sort();
    assert_eq!(names, QUEUE, "{:?}", t.rows());
    t.check_kept_chain(&base);
    // The two jobs the first controller started are the ones recorded: their trials' runs.
    let trials: std::collections::BTreeSet<String> = t.runs().iter().filter_map(|r| r["trial"].as_str().map(str::to_string)).collect();
    assert!(trials.contains("t1") && trials.contains("t2"), "{trials:?}");
    assert_eq!(t.live_workers(), Vec::<i32>::new());
}
