//! The Slurm engine against a real Slurm: one job array per batch, each task with its
//! own (fake) GPU, polled to the end, a cancel that stops the worker's processes, and jobs Slurm
//! will not start (held, their node drained) polled as stuck with Slurm's reason. The cluster
//! is scripts/slurm-localhost.sh's one node; where no Slurm answers these tests say so and skip.
//! The error paths run everywhere, with stand-in Slurm commands.

use crate::support;
use support::{trial_spec as trial, write_script};

use ratchet::config::Config;
use ratchet::scale::engine::{Engine, JobState, TrialSpec};
use ratchet::scale::slurm::{SlurmEngine, SlurmOptions};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn engine(work: &Path) -> SlurmEngine {
    let mut o = SlurmOptions::new(work);
    o.command_timeout = Duration::from_secs(30);
    SlurmEngine::new(o)
}

#[test]
fn an_array_runs_each_trial_on_its_own_gpu() {
    let Some(_turn) = support::slurm::cluster_turn() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The worker records what Slurm gave it, then waits until every task has started: the
    // tasks hold their GPUs at the same time, so distinct devices are Slurm's doing.
    let barrier = d.join("started");
    std::fs::create_dir_all(&barrier).unwrap();
    let worker = d.join("worker.sh");
    write_script(
        &worker,
        &format!(
            r#"#!/bin/sh
out="$1"; n="$2"
touch {barrier}/"$SLURM_ARRAY_TASK_ID"
i=0
while [ "$(ls {barrier} | wc -l)" -lt "$n" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
echo "worker stdout for $RATCHET_TRIAL_ID"
echo "worker stderr for $RATCHET_TRIAL_ID" >&2
printf '%s\n' "cvd=$CUDA_VISIBLE_DEVICES" "job=$SLURM_ARRAY_JOB_ID" "task=$SLURM_ARRAY_TASK_ID" "trial=$RATCHET_TRIAL_ID" "together=$(ls {barrier} | wc -l)" > "$out/result.tmp"
mv "$out/result.tmp" "$out/result.txt"
"#,
            barrier = barrier.display()
        ),
    );
    let n = 3;
    let trials: Vec<TrialSpec> = (0..n).map(|i| trial(d, &format!("e{i}"))).collect();
    let argv: Vec<Vec<String>> =
        trials.iter().map(|t| vec![worker.to_string_lossy().into(), t.out_dir.to_string_lossy().into(), n.to_string()]).collect();
    let mut e = engine(&d.join("work"));
    assert_eq!(e.name(), "slurm");
    let jobs = e.submit(&trials, &argv).unwrap();
    assert_eq!(jobs.len(), n);
    // Named before sbatch answers: the array's job name and the task's index.
    let name = jobs[0].engine_id.strip_suffix("[0]").unwrap().to_string();
    for (i, j) in jobs.iter().enumerate() {
        assert_eq!(j.engine_id, format!("{name}[{i}]"), "one array, task i for trial i");
        assert_eq!(j.trial, trials[i].id);
    }
    let done = support::poll_until_done(&mut e, &jobs, Duration::from_secs(90));
    let array = std::fs::read_to_string(trials[0].out_dir.join("result.txt")).unwrap();
    let array = array.lines().find_map(|l| l.strip_prefix("job=")).unwrap().to_string();
    let mut gpus = vec![];
    for (i, ((state, seen), t)) in done.iter().zip(&trials).enumerate() {
        assert_eq!(*state, JobState::Finished, "trial {i}: went through {seen:?}");
        let result = std::fs::read_to_string(t.out_dir.join("result.txt")).unwrap();
        let field = |k: &str| result.lines().find_map(|l| l.strip_prefix(&format!("{k}="))).unwrap().to_string();
        assert_eq!(field("job"), array);
        assert_eq!(field("task"), i.to_string());
        assert_eq!(field("trial"), t.id);
        assert_eq!(field("together"), n.to_string(), "the tasks ran at the same time");
        let cvd = field("cvd");
        assert!(!cvd.is_empty() && !cvd.contains(','), "task {i} got CUDA_VISIBLE_DEVICES={cvd:?}, not one GPU");
        gpus.push(cvd);
        // Slurm's own output files land in the run directory.
        let out = std::fs::read_to_string(t.out_dir.join("slurm.out")).unwrap();
        assert_eq!(out.trim(), format!("worker stdout for {}", t.id));
        let err = std::fs::read_to_string(t.out_dir.join("slurm.err")).unwrap();
        assert!(err.contains(&format!("worker stderr for {}", t.id)), "{err}");
    }
    let distinct: std::collections::BTreeSet<&String> = gpus.iter().collect();
    assert_eq!(distinct.len(), n, "each task its own GPU: {gpus:?}");
}

#[test]
fn cancel_stops_the_workers_processes() {
    let Some(_turn) = support::slurm::cluster_turn() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let worker = d.join("worker.sh");
    // A worker with a child of its own, each recording its pid.
    write_script(
        &worker,
        "#!/bin/sh\nsleep 300 &\necho $! > \"$1/child.pid\"\necho $$ > \"$1/worker.pid\"\nwait\necho survived > \"$1/result.txt\"\n",
    );
    let t = trial(d, "long");
    let mut e = engine(&d.join("work"));
    let jobs = e.submit(std::slice::from_ref(&t), &[vec![worker.to_string_lossy().into(), t.out_dir.to_string_lossy().into()]]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !(t.out_dir.join("worker.pid").exists() && t.out_dir.join("child.pid").exists()) {
        assert!(Instant::now() < deadline, "the worker never started: {:?}", e.poll(&jobs[0]));
        std::thread::sleep(Duration::from_millis(100));
    }
    // A poll answers from the latest listing, taken beside it: Running once one has landed.
    assert_eq!(support::settled(&mut e, &jobs[0], Duration::from_secs(60)).unwrap(), JobState::Running);
    let read = |f: &str| std::fs::read_to_string(t.out_dir.join(f)).unwrap().trim().parse::<i32>().unwrap();
    let pids = [read("worker.pid"), read("child.pid")];
    assert_eq!(support::alive_pids(&pids), pids.to_vec());
    e.cancel(&jobs[0]).unwrap();
    // cancel returns once Slurm has the task ended; the kernel may take a moment to finish the kill.
    support::eventually(|| support::alive_pids(&pids).is_empty());
    assert_eq!(support::alive_pids(&pids), Vec::<i32>::new(), "the worker and its child are gone");
    assert!(!t.out_dir.join("result.txt").exists());
    match support::settled(&mut e, &jobs[0], Duration::from_secs(60)).unwrap() {
        JobState::Failed(why) => assert!(why.contains("CANCELLED"), "{why}"),
        other => panic!("a cancelled task polls as {other:?}"),
    }
    // Cancelling again (the task is gone) is not an error.
    e.cancel(&jobs[0]).unwrap();
}

/// Resumes the drained node however the test ends, and waits until Slurm has it back in
/// service (`idle`, not `idle*` or draining): the next test on the cluster needs it.
struct Resume(String);

impl Drop for Resume {
    fn drop(&mut self) {
        let _ = std::process::Command::new("scontrol").args(["update", &format!("NodeName={}", self.0), "State=RESUME"]).status();
        support::eventually(|| {
            let out = std::process::Command::new("sinfo").args(["-h", "-n", &self.0, "-o", "%T"]).output();
            out.is_ok_and(|o| matches!(String::from_utf8_lossy(&o.stdout).trim(), "idle" | "mixed" | "allocated"))
        });
    }
}

#[test]
fn a_held_job_and_one_on_a_drained_node_poll_as_stuck_with_slurms_reason() {
    let Some(_turn) = support::slurm::cluster_turn() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let worker = d.join("worker.sh");
    write_script(&worker, "#!/bin/sh\necho done > \"$1/result.txt\"\n");
    let stuck = |e: &mut SlurmEngine, t: &TrialSpec| {
        let jobs = e.submit(std::slice::from_ref(t), &[vec![worker.to_string_lossy().into(), t.out_dir.to_string_lossy().into()]]).unwrap();
        // Slurm sets a pending job's reason at its next scheduling pass: wait for it.
        let mut state = None;
        assert!(support::eventually(|| {
            state = Some(e.poll(&jobs[0]).unwrap());
            matches!(state, Some(JobState::Stuck(_)))
        }));
        e.cancel(&jobs[0]).unwrap();
        match state {
            Some(JobState::Stuck(why)) => why,
            other => panic!("{other:?}"),
        }
    };
    // Held by its user (sbatch --hold).
    let mut o = SlurmOptions::new(d.join("work"));
    o.command_timeout = Duration::from_secs(30);
    o.sbatch_args = vec!["--hold".into()];
    let why = stuck(&mut SlurmEngine::new(o), &trial(d, "held"));
    assert_eq!(why, "slurm: PENDING (JobHeldUser)");
    // Its only node drained.
    let node = String::from_utf8(std::process::Command::new("sinfo").args(["-h", "-o", "%N"]).output().unwrap().stdout).unwrap();
    let node = node.trim().to_string();
    assert!(std::process::Command::new("scontrol")
        .args(["update", &format!("NodeName={node}"), "State=DRAIN", "Reason=ratchet-test"])
        .status()
        .unwrap()
        .success());
    let _resume = Resume(node);
    let why = stuck(&mut engine(&d.join("work")), &trial(d, "drained"));
    // Slurm names it "ReqNodeNotAvail, UnavailableNodes:<node>" for a job asking for a GPU,
    // "Nodes required for job are DOWN, DRAINED ..." for one asking for none.
    assert!(why.starts_with("slurm: PENDING (") && (why.contains("ReqNodeNotAvail") || why.contains("DRAINED")), "{why}");
}

#[test]
fn exclusive_tasks_never_share_the_node() {
    let Some(_turn) = support::slurm::cluster_turn() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lock = d.join("lock");
    let worker = d.join("worker.sh");
    // mkdir is atomic: a second task inside the node while the first holds it leaves a mark.
    write_script(
        &worker,
        &format!("#!/bin/sh\nmkdir {lock} 2>/dev/null || touch \"$1/overlap\"\nsleep 0.5\nrmdir {lock} 2>/dev/null\necho done > \"$1/result.txt\"\n", lock = lock.display()),
    );
    let cfg = Config::parse("[benchmark]\ncommand = \"python3 b.py\"\n[score]\nmetric = \"latency\"\n[engine]\nkind = \"slurm\"\nexclusive = true\ncommand_timeout_s = 30\n").unwrap();
    let mut e = ratchet::scale::engine_from_config(&cfg.engine, d, &d.join("work")).unwrap().unwrap();
    let trials: Vec<TrialSpec> = (0..2).map(|i| trial(d, &format!("x{i}"))).collect();
    let argv: Vec<Vec<String>> = trials.iter().map(|t| vec![worker.to_string_lossy().into(), t.out_dir.to_string_lossy().into()]).collect();
    let jobs = e.submit(&trials, &argv).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while jobs.iter().any(|j| matches!(e.poll(j).unwrap(), JobState::Queued | JobState::Running)) {
        assert!(Instant::now() < deadline, "exclusive tasks did not finish");
        std::thread::sleep(Duration::from_millis(200));
    }
    for t in &trials {
        assert!(t.out_dir.join("result.txt").exists(), "{} ran", t.id);
        assert!(!t.out_dir.join("overlap").exists(), "{} shared the node", t.id);
    }
}

#[test]
fn sbatch_refusing_names_the_command_and_its_message() {
    let Some(_turn) = support::slurm::cluster_turn() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut o = SlurmOptions::new(dir.path().join("work"));
    o.partition = Some("no-such-partition".into());
    let mut e = SlurmEngine::new(o);
    let t = trial(dir.path(), "x");
    // sbatch runs beside the caller: its refusal is the first poll's error after it answered,
    // a setting to fix (the sweep stops at once).
    let jobs = e.submit(&[t], &[vec!["true".into()]]).unwrap();
    let err = support::settled(&mut e, &jobs[0], Duration::from_secs(600)).unwrap_err();
    assert_eq!(err.kind, ratchet::error::Kind::Config);
    assert!(err.message.contains("`sbatch ") && err.message.contains("--partition=no-such-partition"), "{}", err.message);
    assert!(err.message.to_lowercase().contains("invalid partition"), "{}", err.message);
}

/// Stand-in Slurm commands, for the error paths on machines without Slurm.
fn fake_bin(dir: &Path, sbatch: &str, squeue: &str) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    write_script(&bin.join("sbatch"), &format!("#!/bin/sh\n{sbatch}\n"));
    write_script(&bin.join("squeue"), &format!("#!/bin/sh\n{squeue}\n"));
    write_script(&bin.join("scontrol"), "#!/bin/sh\necho 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1\n");
    bin
}

#[test]
fn what_sbatch_and_squeue_say_reaches_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let t = trial(d, "x");
    let w = vec![vec!["true".to_string()]];
    let with = |bin: PathBuf| {
        let mut o = SlurmOptions::new(d.join("work"));
        o.bin_dir = Some(bin);
        o.command_timeout = Duration::from_secs(5);
        SlurmEngine::new(o)
    };
    // What sbatch said is the first poll's error once it has answered.
    let submit_error = |e: &mut SlurmEngine| {
        let jobs = e.submit(std::slice::from_ref(&t), &w).unwrap();
        support::settled(e, &jobs[0], Duration::from_secs(600)).unwrap_err()
    };
    let mut e = with(fake_bin(&d.join("a"), "echo 'sbatch: error: Batch job submission failed: Invalid account' >&2; exit 1", "exit 0"));
    let err = submit_error(&mut e);
    assert!(err.message.contains("`sbatch --parsable --array=0-0"), "{}", err.message);
    assert!(err.message.contains("Invalid account") && err.message.contains("exit code 1"), "{}", err.message);

    let mut e = with(fake_bin(&d.join("b"), "echo 'Submitted batch job 12'", "exit 0"));
    let err = submit_error(&mut e);
    assert!(err.message.contains("not a job id"), "{}", err.message);

    // A job that squeue and scontrol no longer know finished long ago (purged after MinJobAge).
    let mut e = with(fake_bin(&d.join("c"), "echo '41;cluster'", "echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1"));
    let jobs = e.submit(std::slice::from_ref(&t), &w).unwrap();
    assert_eq!(support::settled(&mut e, &jobs[0], Duration::from_secs(60)).unwrap(), JobState::Finished);

    let mut e = with(fake_bin(&d.join("d"), "echo 7", "echo 'squeue: error: Unable to contact slurm controller' >&2; exit 1"));
    let jobs = e.submit(std::slice::from_ref(&t), &w).unwrap();
    let err = support::settled(&mut e, &jobs[0], Duration::from_secs(60)).unwrap_err();
    assert!(err.message.contains("squeue -j 7") && err.message.contains("Unable to contact"), "{}", err.message);

    let mut o = SlurmOptions::new(d.join("work"));
    // A submit that waited for the sleep instead of killing it would not end with this error.
    o.bin_dir = Some(fake_bin(&d.join("e"), "sleep 3000", "exit 0"));
    o.command_timeout = Duration::from_secs(1);
    let err = submit_error(&mut SlurmEngine::new(o));
    assert!(err.message.contains("did not finish within 1 s"), "{}", err.message);

    let mut e = with(d.join("nowhere"));
    let err = submit_error(&mut e);
    assert!(err.message.contains("sbatch") && err.hint.as_deref().unwrap_or("").contains("slurm-client"), "{err}");
}

#[test]
fn the_engine_table_builds_a_slurm_engine() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config::parse(
        "[benchmark]\ncommand = \"python3 b.py\"\n[score]\nmetric = \"latency\"\n[engine]\nkind = \"slurm\"\ncapacity = 6\npartition = \"gpu\"\nsbatch_args = [\"--time=1:00:00\"]\n",
    )
    .unwrap();
    let e = ratchet::scale::engine_from_config(&cfg.engine, dir.path(), dir.path()).unwrap().unwrap();
    assert_eq!((e.name(), e.capacity()), ("slurm", 6));
    let local = Config::parse("[benchmark]\ncommand = \"python3 b.py\"\n[score]\nmetric = \"latency\"\n").unwrap();
    assert!(ratchet::scale::engine_from_config(&local.engine, dir.path(), dir.path()).unwrap().is_none());
}

#[test]
fn a_stop_runs_scancel_beside_the_caller_and_says_when_the_task_ended() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // scancel waits until `go` exists (a node slow to kill), then the task reads as cancelled.
    let (go, gone) = (d.join("go"), d.join("gone"));
    let bin = fake_bin(
        d,
        "echo 41",
        &format!("if [ -e {gone} ]; then echo '41_0|CANCELLED|None'; else echo '41_0|RUNNING|None'; fi", gone = gone.display()),
    );
    write_script(
        &bin.join("scancel"),
        &format!("#!/bin/sh\nwhile [ ! -e {go} ]; do sleep 0.02; done\ntouch {gone}\n", go = go.display(), gone = gone.display()),
    );
    let mut o = SlurmOptions::new(d.join("work"));
    o.bin_dir = Some(bin);
    o.command_timeout = Duration::from_secs(600);
    let mut e = SlurmEngine::new(o);
    let t = trial(d, "held");
    let jobs = e.submit(std::slice::from_ref(&t), &[vec!["true".to_string()]]).unwrap();
    e.stop(&jobs[0]).unwrap();
    assert!(!e.stopped(&jobs[0]).unwrap(), "the stop ended before scancel did");
    std::fs::write(&go, "").unwrap();
    assert!(support::eventually(|| e.stopped(&jobs[0]).unwrap()));
    // A listing taken while the task ran no longer answers for it.
    match support::settled(&mut e, &jobs[0], Duration::from_secs(600)).unwrap() {
        JobState::Failed(why) => assert!(why.contains("CANCELLED"), "{why}"),
        other => panic!("a stopped task polls as {other:?}"),
    }
}

#[test]
fn sbatch_runs_beside_the_caller_and_a_new_engine_finds_the_array_by_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // sbatch waits until `go` exists (a slurmctld slow to answer); squeue lists task 41_0 running.
    let go = d.join("go");
    let bin = fake_bin(d, &format!("while [ ! -e {} ]; do sleep 0.02; done\necho 41", go.display()), "echo '41_0|RUNNING|None'");
    let engine = || {
        let mut o = SlurmOptions::new(d.join("work"));
        o.bin_dir = Some(bin.clone());
        o.command_timeout = Duration::from_secs(600);
        SlurmEngine::new(o)
    };
    let mut e = engine();
    let t = trial(d, "slow");
    let jobs = e.submit(std::slice::from_ref(&t), &[vec!["true".to_string()]]).unwrap();
    assert!(jobs[0].engine_id.ends_with(&format!("-{}[0]", t.id)), "{}", jobs[0].engine_id);
    assert_eq!(e.poll(&jobs[0]).unwrap(), JobState::Queued, "a poll while sbatch has not answered");
    std::fs::write(&go, "").unwrap();
    assert_eq!(support::settled(&mut e, &jobs[0], Duration::from_secs(600)).unwrap(), JobState::Running);
    // A restarted controller's engine has only the journaled name: it looks the array up.
    let mut again = engine();
    assert_eq!(support::settled(&mut again, &jobs[0], Duration::from_secs(600)).unwrap(), JobState::Running);
    let found = again.find(&t).unwrap().unwrap();
    assert_eq!(found, jobs[0]);
}
