//! `ratchet sweep` through an external `[engine]`: a real sweep on the one-node Slurm
//! of scripts/slurm-localhost.sh (each trial a job with its own fake GPU; a SIGKILLed controller
//! leaves jobs that `ratchet recover` cancels through Slurm; the resumed sweep records the rest
//! once), and the same through shell hooks that run the worker in the background on this host,
//! which runs anywhere. (Re-attaching after a crash and lost jobs: tests/scale/reattach.rs,
//! tests/scale/lost_trials.rs.) Where no Slurm answers, the Slurm tests say so and skip.

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use support::queue::{assert_one_gpu_each, check_trunk, repo, trial_results, QUEUE};
use support::TestRepo;

/// This repository's jobs that Slurm still lists as pending or running (their batch script is
/// under the repository's .ratchet/slurm).
fn our_jobs(t: &TestRepo) -> Vec<String> {
    let out = Command::new("squeue").args(["-h", "-r", "-o", "%i|%T|%o"]).output().unwrap();
    assert!(out.status.success(), "squeue: {}", String::from_utf8_lossy(&out.stderr));
    let root = t.path().canonicalize().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(&*root.to_string_lossy()) || l.contains(&*t.path().to_string_lossy()))
        .map(str::to_string)
        .collect()
}

/// `ratchet sweep` started in the background with `FAKE_SLEEP_S` (the benchmark's sleep per run).
fn spawn_sweep(t: &TestRepo, sleep_s: &str) -> std::process::Child {
    t.spawn(&["sweep"], &[("FAKE_SLEEP_S", sleep_s)])
}

/// SIGKILL `child` once `n` workers are measuring.
fn kill_when_measuring(t: &TestRepo, mut child: std::process::Child, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(45);
    while t.live_workers().len() < n {
        assert!(Instant::now() < deadline, "the workers never started");
        assert!(child.try_wait().unwrap().is_none(), "the sweep ended before its workers started");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    unsafe {
        libc::kill(child.id() as i32, libc::SIGKILL);
    }
    child.wait().unwrap();
}

const SLURM: &str = "[engine]\nkind = \"slurm\"\ncapacity = 2\ncommand_timeout_s = 30\n";

#[test]
fn a_sweep_through_slurm_runs_each_trial_as_a_job_with_its_own_gpu() {
    let Some(_turn) = support::slurm::cluster_turn() else { return };
    let t = repo(SLURM);
    let base = t.head();
    let started = Instant::now();
    // The controller's environment reaches the workers through sbatch (--export=ALL, its default).
    let out = t.ratchet().arg("sweep").env("FAKE_SLEEP_S", "0.05").env("FAKE_META", r#"{"via": "sbatch"}"#).output().unwrap();
    let wall = started.elapsed();
    let text = crate::support::flat(&format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)));
    assert!(out.status.success(), "{text}");
    eprintln!("slurm sweep of {} hypotheses: {:.1} s wall", QUEUE.len(), wall.as_secs_f64());
    check_trunk(&t, &base);
    // Each trial ran as a Slurm job: its output files are in its run directory, and it measured
    // on the GPU Slurm bound it to (CUDA_VISIBLE_DEVICES from --gres=gpu:1), on no local slot.
    let results = trial_results(&t);
    assert_eq!(results.len(), QUEUE.len(), "{results:?}");
    assert_one_gpu_each(&results);
    for r in &results {
        let dir = t.path().join(".ratchet/trials").join(r["id"].as_str().unwrap());
        assert!(dir.join("slurm.out").exists() && dir.join("slurm.err").exists(), "{}", dir.display());
    }
    for row in t.rows() {
        assert!(row["note"].contains(", CUDA_VISIBLE_DEVICES="), "the device is recorded: {row:?}");
    }
    let runs = t.runs();
    assert!(!runs.is_empty() && runs.iter().all(|r| r["meta"]["via"] == "sbatch"), "{:?}", runs.first());
    assert_eq!(our_jobs(&t), Vec::<String>::new(), "no job left in Slurm");
    // Nothing runs twice.
    t.ratchet().arg("sweep").assert().success().stdout(predicates::str::contains("3 already done"));
    assert_eq!(t.rows().len(), QUEUE.len());
}

#[test]
fn a_killed_slurm_sweep_is_cancelled_by_recover_and_resumed_once() {
    let Some(_turn) = support::slurm::cluster_turn() else { return };
    let t = repo(SLURM);
    let base = t.head();
    kill_when_measuring(&t, spawn_sweep(&t, "1"), 2);
    let left = our_jobs(&t);
    assert_eq!(left.len(), 2, "the jobs outlive a SIGKILLed controller: {left:?}");
    let out = t.ratchet().arg("recover").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("cancelled the jobs a stopped parallel sweep left"), "{text}");
    assert_eq!(our_jobs(&t), Vec::<String>::new(), "recover cancels them in Slurm");
    // Through scancel, not only by killing the worker on this host (its worker.pid).
    for job in &left {
        let id = job.split('|').next().unwrap();
        let out = Command::new("scontrol").args(["show", "job", id]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("JobState=CANCELLED"), "job {id}: {text}");
    }
    assert_eq!(t.live_workers(), Vec::<i32>::new());
    assert_eq!(t.head(), base);
    t.ratchet().arg("sweep").assert().success();
    check_trunk(&t, &base);
    assert_eq!(our_jobs(&t), Vec::<String>::new());
}

#[test]
fn sigint_cancels_every_slurm_job() {
    let Some(_turn) = support::slurm::cluster_turn() else { return };
    let t = repo(SLURM);
    let base = t.head();
    let mut child = spawn_sweep(&t, "1");
    t.wait_for_workers(2, 45);
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    assert_eq!(child.wait().unwrap().code(), Some(130), "exits as interrupted");
    assert_eq!(our_jobs(&t), Vec::<String>::new(), "Ctrl-C cancels the jobs");
    assert_eq!(t.live_workers(), Vec::<i32>::new());
    assert_eq!(t.head(), base);
    assert!(t.rows().is_empty(), "{:?}", t.rows());
}

/// A repo whose [engine] is the test hooks (`support::hooks`), kept in `rig` with their state directory.
fn hook_repo(rig: &Path) -> TestRepo {
    let state = rig.join("state");
    std::fs::create_dir_all(&state).unwrap();
    let hook = |name: &str, body: &str| {
        let p = rig.join(name);
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        format!("sh {} {}", p.display(), state.display())
    };
    let engine = format!(
        "[engine]\nkind = \"hook\"\ncapacity = 2\nsubmit = {:?}\npoll = {:?}\ncancel = {:?}\nhook_timeout_s = 10\npoll_interval_s = 0.2\n",
        hook("submit.sh", support::hooks::SUBMIT),
        hook("poll.sh", support::hooks::POLL),
        hook("cancel.sh", support::hooks::CANCEL)
    );
    repo(&engine)
}

#[test]
fn a_sweep_through_hooks_records_each_hypothesis_once() {
    let rig = tempfile::tempdir().unwrap();
    let t = hook_repo(rig.path());
    let base = t.head();
    t.ratchet().arg("sweep").assert().success();
    check_trunk(&t, &base);
    for row in t.rows() {
        assert!(row["note"].contains("[host "), "where it ran is recorded: {row:?}");
    }
    assert_eq!(trial_results(&t).len(), QUEUE.len());
    assert!(!rig.path().join("state/cancelled").exists(), "nothing was cancelled");
    t.ratchet().arg("sweep").assert().success().stdout(predicates::str::contains("3 already done"));
}

#[test]
fn a_killed_hook_sweep_is_cancelled_through_the_hook_and_resumed_once() {
    let rig = tempfile::tempdir().unwrap();
    let t = hook_repo(rig.path());
    let base = t.head();
    kill_when_measuring(&t, spawn_sweep(&t, "1"), 2);
    assert_eq!(t.live_workers().len(), 2, "the workers outlive a SIGKILLed controller");
    let out = t.ratchet().arg("recover").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("cancelled the jobs a stopped parallel sweep left"), "{text}");
    // Both jobs went through the cancel hook (not only through their worker.pid).
    let cancelled = std::fs::read_to_string(rig.path().join("state/cancelled")).unwrap();
    assert_eq!(cancelled.lines().filter(|l| l.starts_with("local-")).count(), 2, "{cancelled}");
    assert_eq!(t.live_workers(), Vec::<i32>::new());
    t.ratchet().arg("sweep").assert().success();
    check_trunk(&t, &base);
}
