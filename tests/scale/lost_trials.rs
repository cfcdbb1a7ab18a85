//! A lost trial (preempted, cancelled, out of memory, a node failure, its time limit, a worker
//! killed with -9) starts again, up to `[engine] retries` times; then its hypothesis is recorded
//! as lost with the reasons, and the rest of the sweep goes on.

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use support::queue::{names, repo, QUEUE};
use support::TestRepo;

/// Hooks that run the worker in the background (tests/support/hooks.rs), except that the Nth
/// submission, for each line N of `<rig>/state/lose`, starts nothing and polls as failed with
/// that line as the launcher's reason (the states the Slurm engine reports as lost).
fn lossy_hooks(rig: &Path, lose: &[&str], extra: &str) -> TestRepo {
    let state = rig.join("state");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(state.join("lose"), lose.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
    let write = |name: &str, body: &str| {
        let p = rig.join(name);
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    };
    write("real_submit.sh", support::hooks::SUBMIT);
    write("real_poll.sh", support::hooks::POLL);
    write("cancel.sh", support::hooks::CANCEL);
    let submit = write(
        "submit.sh",
        "state=\"$1\"\nn=$(cat \"$state/n\" 2>/dev/null || echo 0); n=$((n+1)); echo $n > \"$state/n\"\n\
         why=$(sed -n \"${n}p\" \"$state/lose\")\n\
         if [ -n \"$why\" ]; then cat >/dev/null; echo \"$why\" > \"$state/lost-$n\"; echo \"lost-$n\"; exit 0; fi\n\
         exec sh \"$(dirname \"$0\")/real_submit.sh\" \"$state\"\n",
    );
    let poll = write(
        "poll.sh",
        "state=\"$1\"\ncase \"$RATCHET_JOB\" in lost-*) echo \"failed: $(cat \"$state/$RATCHET_JOB\")\"; exit 0;; esac\n\
         exec sh \"$(dirname \"$0\")/real_poll.sh\" \"$state\"\n",
    );
    let cmd = |p: &Path| format!("sh {} {}", p.display(), state.display());
    let engine = format!(
        "[engine]\nkind = \"hook\"\ncapacity = 1\nsubmit = {:?}\npoll = {:?}\ncancel = {:?}\npoll_interval_s = 0.1\n{extra}",
        cmd(&submit),
        cmd(&poll),
        cmd(&rig.join("cancel.sh"))
    );
    repo(&engine)
}

#[test]
fn preempted_and_failed_jobs_start_again_and_the_sweep_goes_on() {
    let rig = tempfile::tempdir().unwrap();
    // The gain's first two jobs are lost (its time limit, then out of memory); the default two
    // retries let its third run, and it is kept.
    let t = lossy_hooks(rig.path(), &["slurm: TIMEOUT (TimeLimit)", "slurm: OUT_OF_MEMORY"], "");
    let base = t.head();
    let out = t.ratchet().arg("sweep").output().unwrap();
    let text = crate::support::flat(&format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)));
    assert!(out.status.success(), "{text}");
    assert!(text.contains("was lost (slurm: TIMEOUT (TimeLimit))") && text.contains("it starts again (1 of 2 retries)"), "{text}");
    assert_eq!(names(&t), QUEUE, "{:?}", t.rows());
    let rows = t.rows();
    assert_eq!(rows.iter().find(|r| r["hypothesis"].starts_with("01")).unwrap()["status"], "keep", "{rows:?}");
    t.check_kept_chain(&base);
    assert_eq!(t.git(&["for-each-ref", "refs/ratchet/trials/"]), "");
}

#[test]
fn a_trial_lost_past_its_retries_is_recorded_as_lost_with_the_reasons() {
    let rig = tempfile::tempdir().unwrap();
    let t = lossy_hooks(rig.path(), &["slurm: PREEMPTED", "slurm: NODE_FAIL"], "retries = 1\n");
    let base = t.head();
    let out = t.ratchet().arg("sweep").output().unwrap();
    let text = crate::support::flat(&format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)));
    assert!(out.status.success(), "one lost hypothesis does not end the sweep: {text}");
    assert_eq!(names(&t), QUEUE, "{:?}", t.rows());
    let rows = t.rows();
    let lost = rows.iter().find(|r| r["hypothesis"].starts_with("01")).unwrap();
    assert_eq!(lost["status"], "interrupted", "{lost:?}");
    assert!(lost["note"].contains("lost 2 times") && lost["note"].contains("retries = 1"), "{lost:?}");
    assert!(lost["note"].contains("PREEMPTED") && lost["note"].contains("NODE_FAIL"), "{lost:?}");
    assert_eq!(t.head(), base, "nothing else was a gain");
    // A lost row is not a decision: the next sweep (another night) runs it again, and keeps it.
    assert!(lost["note"].contains("the next sweep runs it again"), "{lost:?}");
    t.ratchet().arg("sweep").assert().success().stdout(predicates::str::contains("2 already done, 1 to run"));
    let rows = t.rows();
    assert_eq!(rows.iter().filter(|r| r["hypothesis"].starts_with("01") && r["status"] == "keep").count(), 1, "{rows:?}");
}

#[test]
fn a_local_worker_killed_with_sigkill_is_run_again() {
    let t = repo("");
    let base = t.head();
    let mut child = t.spawn(&["sweep", "--jobs", "2"], &[("FAKE_SLEEP_S", "0.2")]);
    t.wait_for_workers(2, 30);
    let victim = t.live_workers()[0];
    unsafe {
        libc::kill(victim, libc::SIGKILL);
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "a killed worker does not end the sweep: {status:?}");
    assert_eq!(names(&t), QUEUE, "{:?}", t.rows());
    // The kill lands early in a worker's life (worker.pid is its first write): under load, often
    // while it makes its slot's git directory. The workers' logs say why a trial was lost.
    assert!(t.rows().iter().all(|r| r["status"] != "interrupted"), "{:#?}\n{}", t.rows(), worker_logs(&t));
    t.check_kept_chain(&base);
    assert!(t.live_workers().is_empty());
}

/// Every trial's worker.log, for a failure message.
fn worker_logs(t: &TestRepo) -> String {
    let Ok(dirs) = std::fs::read_dir(t.path().join(".ratchet/trials")) else { return String::new() };
    dirs.flatten()
        .map(|d| format!("== {}\n{}", d.path().display(), std::fs::read_to_string(d.path().join("worker.log")).unwrap_or_default()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A worker killed with SIGKILL at each step of its trial, once: making its slot's git
/// directory, between its two checkouts, as a benchmark run starts, with its runs written but
/// not its result, and just after its result. Each time every hypothesis is decided (the trial
/// runs again on the same slot, which the killed worker left half made), and no process is left.
#[test]
fn a_local_worker_killed_at_any_step_of_its_trial_is_run_again() {
    for (point, lost) in [
        ("worker-mid-git-init", true),
        ("worker-after-incumbent-checkout", true),
        ("after-spawn", true),
        ("worker-before-result", true),
        // Its result was written: it is decided from it, not run again.
        ("worker-after-result", false),
    ] {
        let t = repo("");
        let base = t.head();
        let once = t.path().join(".ratchet-fault-once");
        let out = t.ratchet().args(["sweep", "--jobs", "2"]).env("RATCHET_FAULT", point).env("RATCHET_FAULT_ONCE", &once).output().unwrap();
        let text = crate::support::flat(&format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)));
        assert!(out.status.success(), "{point}: {text}\n{}", worker_logs(&t));
        assert!(once.exists(), "{point}: no worker reached the fault point");
        let killed = text.contains("was lost (its worker was killed by signal 9 (SIGKILL)");
        assert_eq!(killed, lost, "{point}: {text}");
        assert!(!text.contains("without a result"), "{point}: {text}");
        assert_eq!(names(&t), QUEUE, "{point}: {:?}", t.rows());
        assert!(t.rows().iter().all(|r| r["status"] != "interrupted"), "{point}: {:#?}\n{}", t.rows(), worker_logs(&t));
        assert_eq!(t.rows().iter().find(|r| r["hypothesis"].starts_with("01")).unwrap()["status"], "keep", "{point}");
        t.check_kept_chain(&base);
        assert!(t.live_workers().is_empty(), "{point}");
        assert_eq!(t.processes_in_tree(), Vec::<String>::new(), "{point}");
    }
}

/// What a worker killed inside libgit2 leaves in its slot: a git directory with `HEAD.lock` or
/// `config.lock` and no HEAD, or the one it was making aside. The next worker on the slot makes
/// it again instead of failing (every later trial on that slot used to fail on the lock, and
/// its hypotheses were recorded as lost).
#[test]
fn a_slot_git_directory_left_half_made_is_made_again() {
    let t = repo("");
    let base = t.head();
    let slots = t.path().join(".ratchet/slots");
    // Slot 1's git directory is whole, with the lock files of a fetch killed in it.
    std::fs::create_dir_all(slots.join("1")).unwrap();
    assert!(std::process::Command::new("git").args(["init", "-q", "--bare"]).arg(slots.join("1/git")).status().unwrap().success());
    for (slot, leftovers) in
        [("0", &["git/HEAD.lock", "git/config.lock"][..]), ("1", &["git.new/HEAD", "git/refs/heads/x.lock", "git/packed-refs.lock"][..])]
    {
        let work = slots.join(slot);
        for f in leftovers {
            let p = work.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, "").unwrap();
        }
        std::fs::write(work.join(".ratchet-worker-dir"), "").unwrap();
    }
    let out = t.ratchet().args(["sweep", "--jobs", "2"]).output().unwrap();
    let text = crate::support::flat(&format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)));
    assert!(out.status.success(), "{text}\n{}", worker_logs(&t));
    assert!(!text.contains("was lost"), "{text}\n{}", worker_logs(&t));
    assert_eq!(names(&t), QUEUE, "{:?}", t.rows());
    t.check_kept_chain(&base);
    for slot in ["0", "1"] {
        assert!(slots.join(slot).join("git/HEAD").is_file() && !slots.join(slot).join("git.new").exists(), "slot {slot}");
        for lock in ["git/HEAD.lock", "git/config.lock", "git/refs/heads/x.lock", "git/packed-refs.lock"] {
            assert!(!slots.join(slot).join(lock).exists(), "slot {slot}: {lock}");
        }
    }
}
