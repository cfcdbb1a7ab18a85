//! A parallel sweep started after its controller was killed re-attaches to the jobs the dead
//! controller left queued or running, on an external engine or on local slots: they are watched
//! to their end and recorded, not cancelled (on a busy cluster a cancelled job goes to the back
//! of the queue; a local worker's runs so far would be thrown away).

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
    // Runs slow enough that neither job can end before the kill: the default rule decides the
    // do-nothing change in 2 pairs (4 runs, 4 s here).
    let mut child = t.spawn(&["sweep"], &[("FAKE_SLEEP_S", "1.0")]);
    let deadline = Instant::now() + Duration::from_secs(45);
    // Both workers run, both handles are journaled, and both tokens are kept. A worker starts
    // before its submit hook returns the token, and the journal's handle is the job's name until
    // then: a kill in between leaves a job that this engine (no find hook) cannot find, which the
    // next sweep starts again. On a loaded machine that window is wide.
    let journaled = || {
        let text = std::fs::read_to_string(t.path().join(".ratchet/scale.json")).unwrap_or_default();
        let j: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        j["trials"].as_array().map_or(0, |ts| ts.iter().filter(|x| !x["handle"].is_null()).count())
    };
    let tokens = || tokens_under(&t.path().join(".ratchet"));
    while t.live_workers().len() < 2 || journaled() < 2 || tokens() < 2 {
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
    let text = crate::support::flat(&format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)));
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

/// The hook engine's kept tokens (`hook/<handle>.token`) anywhere under `dir`.
fn tokens_under(dir: &std::path::Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| e.path())
        .map(|p| if p.is_dir() { tokens_under(&p) } else { usize::from(p.extension().is_some_and(|x| x == "token")) })
        .sum()
}

#[test]
fn the_next_local_sweep_waits_on_the_workers_a_killed_controller_left_running() {
    let t = repo("");
    let base = t.head();
    // Runs of 0.6 s: each trial takes seconds, so both workers still run when the next sweep
    // starts.
    let mut child = t.spawn(&["sweep", "--jobs", "2"], &[("FAKE_SLEEP_S", "0.6")]);
    t.wait_for_workers(2, 45);
    unsafe {
        libc::kill(child.id() as i32, libc::SIGKILL);
    }
    child.wait().unwrap();
    let running = t.live_workers();
    assert_eq!(running.len(), 2, "the workers outlive a SIGKILLed controller");
    let out = t.ratchet().args(["sweep", "--jobs", "2"]).env("FAKE_SLEEP_S", "0.6").output().unwrap();
    let text = crate::support::flat(&format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)));
    assert!(out.status.success(), "{text}");
    assert!(text.contains("re-attached the jobs a stopped parallel sweep left queued or running on the local engine (t1, t2)"), "{text}");
    assert!(!text.contains("stopped the workers"), "{text}");
    assert_eq!(support::queue::names(&t), QUEUE, "{:?}", t.rows());
    t.check_kept_chain(&base);
    // The two workers the dead controller started ran to their end and are the ones recorded:
    // neither was stopped and run again.
    for id in ["t1", "t2"] {
        let result = std::fs::read_to_string(t.path().join(format!(".ratchet/trials/{id}/trial.json"))).unwrap();
        assert!(!result.contains("\"interrupted\""), "{id}: {result}");
    }
    let trials: std::collections::BTreeSet<String> = t.runs().iter().filter_map(|r| r["trial"].as_str().map(str::to_string)).collect();
    assert!(trials.contains("t1") && trials.contains("t2"), "{trials:?}");
    assert_eq!(t.live_workers(), Vec::<i32>::new());
}
