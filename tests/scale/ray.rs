//! The Ray engine against a real Ray cluster (the one-node head of scripts/ray-localhost.sh):
//! jobs named by trial, each with its own (logical) GPU, a cancel that stops the worker's
//! processes, a sweep through Ray, a job stopped from outside that runs again while the sweep
//! goes on, and a killed controller whose jobs the next sweep re-attaches to. Where no Ray job
//! server answers, these say so and skip; the configuration and error paths run everywhere.

use crate::support;

use ratchet::config::Config;
use ratchet::scale::engine::{Engine, JobHandle, JobState, TrialSpec};
use ratchet::scale::ray::{RayEngine, RayOptions};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::queue::{assert_one_gpu_each, check_trunk, repo, trial_results, QUEUE};
use support::TestRepo;
use support::{trial_spec as trial, write_script};

const ADDRESS: &str = "http://127.0.0.1:8265";

/// The `ray` command: RATCHET_RAY_BIN, scripts/ray-localhost.sh's virtual environment, or PATH.
fn ray_bin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("RATCHET_RAY_BIN") {
        return Some(PathBuf::from(p));
    }
    let venv = std::env::var_os("RATCHET_RAY_VENV")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/ratchet-ray/venv")))?;
    let p = venv.join("bin/ray");
    if p.exists() {
        return Some(p);
    }
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| Path::new(d).join("ray")).find(|p| p.exists())
}

/// Whether the job server answers `GET /api/version` (a plain HTTP request: no Python start).
fn job_server_answers() -> Result<(), String> {
    use std::io::{Read, Write};
    let addr: std::net::SocketAddr = "127.0.0.1:8265".parse().unwrap();
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).map_err(|e| format!("{ADDRESS}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /api/version HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").map_err(|e| e.to_string())?;
    let mut reply = String::new();
    let _ = s.read_to_string(&mut reply);
    if reply.starts_with("HTTP/1.1 200") || reply.starts_with("HTTP/1.0 200") {
        Ok(())
    } else {
        Err(format!("{ADDRESS}/api/version answered {:?}", reply.lines().next().unwrap_or("")))
    }
}

/// The cluster's two slots are one test's at a time.
static CLUSTER: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// This test's turn on the cluster and the `ray` command, or `None` after a visible note.
fn cluster_turn() -> Option<(std::sync::MutexGuard<'static, ()>, PathBuf)> {
    let why = match (ray_bin(), job_server_answers()) {
        (Some(bin), Ok(())) => return Some((CLUSTER.lock().unwrap_or_else(|e| e.into_inner()), bin)),
        (None, _) => "no `ray` command".to_string(),
        (_, Err(e)) => format!("no Ray job server: {e}"),
    };
    eprintln!("SKIPPED (no Ray here: {why}); scripts/ray-localhost.sh starts one");
    None
}

fn settled(e: &mut RayEngine, job: &JobHandle) -> ratchet::error::Result<JobState> {
    support::settled(e, job, Duration::from_secs(120))
}

fn engine(work: &Path, bin: &Path) -> RayEngine {
    let mut o = RayOptions::new(work);
    o.ray = bin.to_path_buf();
    o.command_timeout = Duration::from_secs(60);
    o.poll_interval = Duration::from_millis(500);
    RayEngine::new(o)
}

/// Ray's record of the job `id` (`ray list jobs --filter submission_id=ID`).
fn ray_job(bin: &Path, id: &str) -> Option<serde_json::Value> {
    let out = Command::new(bin)
        .args(["list", "jobs", "--address", ADDRESS, "--format", "json", "--detail", "--filter", &format!("submission_id={id}")])
        .output()
        .unwrap();
    assert!(out.status.success(), "ray list jobs: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let jobs: Vec<serde_json::Value> = serde_json::from_str(&text[text.find('[').unwrap()..]).unwrap();
    jobs.into_iter().next()
}

/// The jobs of the repository `t` (submission ids `ratchet-<hash of its .ratchet>-...`), as
/// (submission id, status).
fn our_jobs(bin: &Path, t: &TestRepo) -> Vec<(String, String)> {
    let prefix = RayEngine::new(RayOptions::new(t.path().join(".ratchet"))).submission_id("");
    // A loaded head can answer with log text alone: ask again, a few times.
    let mut last = String::new();
    for _ in 0..5 {
        let out = Command::new(bin)
            .args(["list", "jobs", "--address", ADDRESS, "--format", "json", "--detail", "--limit", "10000"])
            .output()
            .unwrap();
        last = crate::support::flat(&format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)));
        let text = String::from_utf8_lossy(&out.stdout);
        let Some(start) = text.find('[').filter(|_| out.status.success()) else {
            std::thread::sleep(Duration::from_secs(2));
            continue;
        };
        let jobs: Vec<serde_json::Value> = serde_json::from_str(&text[start..]).unwrap();
        let mut ours: Vec<(String, String)> = jobs
            .iter()
            .filter_map(|j| Some((j["submission_id"].as_str()?.to_string(), j["status"].as_str()?.to_string())))
            .filter(|(id, _)| id.starts_with(&prefix))
            .collect();
        ours.sort();
        return ours;
    }
    panic!("ray list jobs gave no JSON list in 5 tries; last: {last}");
}

#[test]
fn each_trial_is_a_ray_job_named_by_it_with_its_own_gpu() {
    let Some((_turn, bin)) = cluster_turn() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Each worker waits until both have started: they hold their GPUs at the same time, so
    // distinct devices are Ray's doing.
    let barrier = d.join("started");
    std::fs::create_dir_all(&barrier).unwrap();
    let worker = d.join("worker.sh");
    write_script(
        &worker,
        &format!(
            "#!/bin/sh\nout=\"$1\"\ntouch {b}/\"$RATCHET_TRIAL_ID\"\ni=0\nwhile [ \"$(ls {b} | wc -l)\" -lt 2 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\n\
             echo \"worker output for $RATCHET_TRIAL_ID\"\nprintf '%s\\n' \"cvd=$CUDA_VISIBLE_DEVICES\" \"trial=$RATCHET_TRIAL_ID\" \"meta=$RATCHET_RAY_TEST_VAR\" \"together=$(ls {b} | wc -l)\" > \"$out/result.txt\"\n",
            b = barrier.display()
        ),
    );
    let trials: Vec<TrialSpec> = (0..2).map(|i| trial(d, &format!("e{i}"))).collect();
    let argv: Vec<Vec<String>> = trials.iter().map(|t| vec![worker.to_string_lossy().into(), t.out_dir.to_string_lossy().into()]).collect();
    let mut e = engine(&d.join("work"), &bin);
    assert_eq!(e.name(), "ray");
    // The controller's environment reaches the worker (through the job script).
    std::env::set_var("RATCHET_RAY_TEST_VAR", "from the controller");
    let jobs = e.submit(&trials, &argv).unwrap();
    for (j, t) in jobs.iter().zip(&trials) {
        assert_eq!(j.engine_id, e.submission_id(&t.id), "the job is named by its trial");
        settled(&mut e, j).unwrap();
        let job = ray_job(&bin, &j.engine_id).expect("Ray knows the job by its name");
        assert_eq!(job["metadata"]["ratchet_candidate"], t.candidate);
    }
    let states = support::final_states(&mut e, &jobs, Duration::from_secs(120));
    let mut gpus = vec![];
    for (s, t) in states.iter().zip(&trials) {
        assert_eq!(*s, JobState::Finished, "{}", t.id);
        let result = std::fs::read_to_string(t.out_dir.join("result.txt")).unwrap();
        let field = |k: &str| result.lines().find_map(|l| l.strip_prefix(&format!("{k}="))).unwrap().to_string();
        assert_eq!(field("trial"), t.id);
        assert_eq!(field("meta"), "from the controller");
        assert_eq!(field("together"), "2", "both ran at the same time");
        let cvd = field("cvd");
        assert!(!cvd.is_empty() && !cvd.contains(','), "{} got CUDA_VISIBLE_DEVICES={cvd:?}, not one GPU", t.id);
        gpus.push(cvd);
        let log = std::fs::read_to_string(t.out_dir.join("worker.log")).unwrap();
        assert_eq!(log.trim(), format!("worker output for {}", t.id));
    }
    assert_ne!(gpus[0], gpus[1], "each job its own GPU");
    // Found by name, but only for the same candidate (a reused trial id is another trial): the
    // polls tell, without a lookup that could wait on Ray.
    let found = e.find(&trials[0]).unwrap().unwrap();
    assert_eq!(found.engine_id, jobs[0].engine_id);
    assert_eq!(settled(&mut e, &found).unwrap(), JobState::Finished);
    let other = TrialSpec { candidate: "c".repeat(40), ..trials[0].clone() };
    let found = e.find(&other).unwrap().unwrap();
    assert_eq!(
        settled(&mut e, &found).unwrap(),
        JobState::Failed("ray: the job of that name is an earlier sweep's, not this trial's".into())
    );
    // A later submission under a used trial id replaces the ended job of that name.
    std::fs::remove_dir_all(&trials[0].out_dir).unwrap();
    let again = e.submit(&trials[..1], &[vec!["sh".into(), "-c".into(), "echo again".into()]]).unwrap();
    assert_eq!(again[0].engine_id, jobs[0].engine_id);
    assert_eq!(support::final_states(&mut e, &again, Duration::from_secs(60)), vec![JobState::Finished]);
    assert_eq!(std::fs::read_to_string(trials[0].out_dir.join("worker.log")).unwrap(), "again\n");
}

#[test]
fn cancel_stops_the_ray_job_and_the_workers_processes() {
    let Some((_turn, bin)) = cluster_turn() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let worker = d.join("worker.sh");
    write_script(
        &worker,
        "#!/bin/sh\nsleep 300 &\necho $! > \"$1/child.pid\"\necho $$ > \"$1/worker.pid\"\nwait\necho survived > \"$1/result.txt\"\n",
    );
    let t = trial(d, "long");
    let mut e = engine(&d.join("work"), &bin);
    let jobs = e.submit(std::slice::from_ref(&t), &[vec![worker.to_string_lossy().into(), t.out_dir.to_string_lossy().into()]]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !(t.out_dir.join("worker.pid").exists() && t.out_dir.join("child.pid").exists()) {
        assert!(Instant::now() < deadline, "the worker never started: {:?}", e.poll(&jobs[0]));
        std::thread::sleep(Duration::from_millis(100));
    }
    let read = |f: &str| std::fs::read_to_string(t.out_dir.join(f)).unwrap().trim().parse::<i32>().unwrap();
    let pids = [read("worker.pid"), read("child.pid")];
    assert_eq!(support::alive_pids(&pids), pids.to_vec());
    e.cancel(&jobs[0]).unwrap();
    support::eventually(|| support::alive_pids(&pids).is_empty());
    assert_eq!(support::alive_pids(&pids), Vec::<i32>::new(), "the worker and its child are gone");
    assert!(!t.out_dir.join("result.txt").exists());
    assert_eq!(settled(&mut e, &jobs[0]).unwrap(), JobState::Failed("ray: STOPPED".into()));
    // Cancelling again, or a job Ray never had, is not an error.
    e.cancel(&jobs[0]).unwrap();
    e.cancel(&JobHandle { trial: "x".into(), engine_id: e.submission_id("never-submitted"), slot: None }).unwrap();
}

/// `[engine]` for a sweep through the local head: two trials in flight, one logical GPU each.
fn ray_engine_table(bin: &Path) -> String {
    format!(
        "[engine]\nkind = \"ray\"\ncapacity = 2\ncpus = 1\ngpus = 1\nray_bin = {:?}\npoll_interval_s = 1\ncommand_timeout_s = 60\n",
        bin.display()
    )
}

#[test]
fn a_sweep_through_ray_runs_each_trial_as_a_job_with_its_own_gpu() {
    let Some((_turn, bin)) = cluster_turn() else { return };
    let t = repo(&ray_engine_table(&bin));
    let base = t.head();
    let started = Instant::now();
    let out = t
        .ratchet()
        .arg("sweep")
        .env("FAKE_SLEEP_S", "0.05")
        .env("FAKE_META", r#"{"via": "ray"}"#)
        .timeout(Duration::from_secs(300))
        .output()
        .unwrap();
    let wall = started.elapsed();
    let text = crate::support::flat(&format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)));
    assert!(out.status.success(), "{text}");
    check_trunk(&t, &base);
    let results = trial_results(&t);
    // How busy the two slots were: the workers' wall time over the sweep's (a figure, printed).
    let busy: f64 = results.iter().filter_map(|r| r["wall_s"].as_f64()).sum::<f64>() / (2.0 * wall.as_secs_f64());
    eprintln!("ray sweep of {} hypotheses: {:.1} s wall, slots {:.0}% busy", QUEUE.len(), wall.as_secs_f64(), busy * 100.0);
    assert_eq!(results.len(), QUEUE.len(), "{results:?}");
    assert_one_gpu_each(&results);
    assert!(t.runs().iter().all(|r| r["meta"]["via"] == "ray"), "the controller's environment reached the benchmark");
    let jobs = our_jobs(&bin, &t);
    assert_eq!(jobs.len(), QUEUE.len(), "one job per trial: {jobs:?}");
    assert!(jobs.iter().all(|(_, s)| s == "SUCCEEDED"), "{jobs:?}");
    t.ratchet().arg("sweep").assert().success().stdout(predicates::str::contains("3 already done"));
}

/// The first job of the repository `t` that Ray reports RUNNING, within `secs`.
fn a_running_job(bin: &Path, t: &TestRepo, secs: u64) -> String {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some((id, _)) = our_jobs(bin, t).into_iter().find(|(_, s)| s == "RUNNING") {
            return id;
        }
        assert!(Instant::now() < deadline, "no job of the sweep ran within {secs} s");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_ray_job_stopped_from_outside_runs_again_and_the_sweep_goes_on() {
    let Some((_turn, bin)) = cluster_turn() else { return };
    let t = repo(&ray_engine_table(&bin));
    let base = t.head();
    let mut sweep = t.ratchet();
    sweep.arg("sweep").env("FAKE_SLEEP_S", "0.5").timeout(Duration::from_secs(400));
    let child = std::thread::spawn(move || sweep.output().unwrap());
    // Stopped once its worker measures (as a preemption or an operator would).
    let id = a_running_job(&bin, &t, 120);
    t.wait_for_workers(1, 60);
    let stop = Command::new(&bin).args(["job", "stop", "--address", ADDRESS, &id]).output().unwrap();
    assert!(stop.status.success(), "ray job stop: {}", String::from_utf8_lossy(&stop.stderr));
    let out = child.join().unwrap();
    let text = crate::support::flat(&format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)));
    assert!(out.status.success(), "{text}");
    let trial = id.rsplit('-').next().unwrap();
    assert!(text.contains(&format!("trial {trial} of")) && text.contains("was lost (ray: STOPPED"), "{text}");
    assert!(text.contains("it starts again (1 of 2 retries)"), "{text}");
    check_trunk(&t, &base);
    let jobs = our_jobs(&bin, &t);
    assert_eq!(jobs.iter().filter(|(_, s)| s == "STOPPED").count(), 1, "{jobs:?}");
    assert_eq!(jobs.iter().filter(|(_, s)| s == "SUCCEEDED").count(), QUEUE.len(), "{jobs:?}");
}

/// Stop every Ray process on this host (`ray stop --force`: the head, its job server, the
/// jobs' supervisors and their workers), then start the head again as scripts/ray-localhost.sh
/// does, with the same settings. Returns how long the head was down.
fn restart_head(bin: &Path) -> Duration {
    let down = Instant::now();
    let stop = Command::new(bin).args(["stop", "--force"]).output().unwrap();
    assert!(stop.status.success(), "ray stop: {}", String::from_utf8_lossy(&stop.stderr));
    let venv = bin.parent().and_then(Path::parent).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/ray-localhost.sh");
    let start = Command::new("bash").arg(script).env("RATCHET_RAY_VENV", venv).output().unwrap();
    assert!(
        start.status.success(),
        "ray-localhost.sh: {}{}",
        String::from_utf8_lossy(&start.stdout),
        String::from_utf8_lossy(&start.stderr)
    );
    down.elapsed()
}

/// The head dies while both trials run, and comes back empty (Ray keeps no job table across a
/// head restart without an external store). The sweep rides out the failed polls within
/// `[engine] poll_grace_s`; the trials whose jobs vanished with the head start again as lost
/// trials, and every hypothesis gets exactly one row. No worker outlives its job, and no job of
/// the sweep is left queued or running.
#[test]
fn a_ray_head_that_dies_mid_sweep_loses_no_hypothesis_and_leaks_no_job() {
    let Some((_turn, bin)) = cluster_turn() else { return };
    let t = repo(&format!("{}poll_grace_s = 300\n", ray_engine_table(&bin)));
    let base = t.head();
    let mut sweep = t.ratchet();
    sweep.args(["sweep", "--jobs", "2"]).env("FAKE_SLEEP_S", "0.5").timeout(Duration::from_secs(500));
    let child = std::thread::spawn(move || sweep.output().unwrap());
    t.wait_for_workers(2, 120);
    let workers = t.live_workers();
    let down = restart_head(&bin);
    assert_eq!(support::alive_pids(&workers), Vec::<i32>::new(), "the workers died with the head");
    let out = child.join().unwrap();
    let text = crate::support::flat(&format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)));
    assert!(out.status.success(), "head down for {down:?}: {text}");
    assert!(text.contains("polling ray failed") && text.contains("ray answers again"), "{text}");
    assert!(
        text.contains("was lost (ray: the job is gone from the cluster") && text.contains("it starts again (1 of 2 retries)"),
        "{text}"
    );
    check_trunk(&t, &base);
    let jobs = our_jobs(&bin, &t);
    assert!(jobs.iter().all(|(_, s)| s == "SUCCEEDED"), "only the jobs submitted after the restart are known, all ended: {jobs:?}");
    assert_eq!(t.processes_in_tree(), Vec::<String>::new());
}

/// The head stays down past `[engine] poll_grace_s`: the sweep stops as on Ctrl-C, with no row
/// for a trial in flight and nothing of them journaled; once the head is back, the next sweep
/// runs every hypothesis, each with one row.
#[test]
fn a_ray_head_down_past_the_poll_grace_stops_the_sweep_and_the_next_one_resumes() {
    let Some((_turn, bin)) = cluster_turn() else { return };
    let t = repo(&format!("{}poll_grace_s = 3\n", ray_engine_table(&bin)));
    let base = t.head();
    let mut sweep = t.ratchet();
    sweep.args(["sweep", "--jobs", "2"]).env("FAKE_SLEEP_S", "0.5").timeout(Duration::from_secs(300));
    let child = std::thread::spawn(move || sweep.output().unwrap());
    t.wait_for_workers(2, 120);
    let stop = Command::new(&bin).args(["stop", "--force"]).output().unwrap();
    let out = child.join().unwrap();
    let text = crate::support::flat(&format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)));
    let restarted = restart_head(&bin);
    assert!(stop.status.success(), "ray stop: {}", String::from_utf8_lossy(&stop.stderr));
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("polls failed for") && text.contains("hint: no Ray job server answers at"), "{text}");
    assert!(t.rows().is_empty(), "no trial in flight was recorded: {:?}", t.rows());
    assert_eq!(t.processes_in_tree(), Vec::<String>::new());
    let out = t.ratchet().args(["sweep", "--jobs", "2"]).env("FAKE_SLEEP_S", "0.05").timeout(Duration::from_secs(300)).output().unwrap();
    let text = crate::support::flat(&format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)));
    assert!(out.status.success(), "head back after {restarted:?}: {text}");
    assert!(text.contains("0 already done, 3 to run"), "{text}");
    check_trunk(&t, &base);
    assert!(our_jobs(&bin, &t).iter().all(|(_, s)| s == "SUCCEEDED"), "{:?}", our_jobs(&bin, &t));
}

#[test]
fn a_killed_controller_leaves_ray_jobs_that_the_next_sweep_reattaches_to() {
    let Some((_turn, bin)) = cluster_turn() else { return };
    let t = repo(&ray_engine_table(&bin));
    let base = t.head();
    let mut child = t.spawn(&["sweep"], &[("FAKE_SLEEP_S", "0.5")]);
    t.wait_for_workers(2, 120);
    unsafe {
        libc::kill(child.id() as i32, libc::SIGKILL);
    }
    child.wait().unwrap();
    let left: Vec<String> = our_jobs(&bin, &t).into_iter().filter(|(_, s)| s == "RUNNING").map(|(id, _)| id).collect();
    assert_eq!(left.len(), 2, "the jobs outlive a SIGKILLed controller: {left:?}");
    let out = t.ratchet().arg("sweep").env("FAKE_SLEEP_S", "0.5").timeout(Duration::from_secs(400)).output().unwrap();
    let text = crate::support::flat(&format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)));
    assert!(out.status.success(), "{text}");
    assert!(text.contains("re-attached the jobs a stopped parallel sweep left queued or running on the ray engine"), "{text}");
    check_trunk(&t, &base);
    // Nothing was submitted twice: one job per hypothesis, the two left running among them.
    let jobs = our_jobs(&bin, &t);
    assert_eq!(jobs.len(), QUEUE.len(), "{jobs:?}");
    assert!(jobs.iter().all(|(_, s)| s == "SUCCEEDED"), "{jobs:?}");
    assert!(left.iter().all(|id| jobs.iter().any(|(j, _)| j == id)), "{left:?} {jobs:?}");
}

fn parse(engine: &str) -> ratchet::error::Result<Config> {
    Config::parse(&format!("[benchmark]\ncommand = \"python3 b.py\"\n[score]\nmetric = \"latency\"\n[engine]\nkind = \"ray\"\n{engine}"))
}

#[test]
fn the_engine_table_builds_a_ray_engine_and_names_bad_keys() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = parse("capacity = 6\naddress = \"http://head:8265\"\ncpus = 2\ngpus = 1\nsubmit_args = [\"--entrypoint-memory=1000000000\"]\nray_bin = \"/opt/ray/bin/ray\"\npoll_interval_s = 3\n").unwrap();
    let e = ratchet::scale::engine_from_config(&cfg.engine, dir.path(), dir.path()).unwrap().unwrap();
    assert_eq!((e.name(), e.capacity()), ("ray", 4 + 2));
    let bad = |engine: &str, want: &[&str]| {
        let err = parse(engine).unwrap_err();
        let msg = err.to_string();
        for w in want {
            assert!(msg.contains(w), "{engine:?}: {msg}");
        }
    };
    bad("partition = \"gpu\"\n", &["[engine] partition", "does not apply to kind = \"ray\"", "address, cpus, gpus"]);
    bad("address = \"head:8265\"\n", &["line 7", "[engine] address", "http://head:8265"]);
    bad("cpus = -1\n", &["[engine] cpus", "-1"]);
    bad("gpus = 0.5\n", &["line 7", "[engine] gpus", "whole number", "0.5"]);
    bad("submit_args = [\"--submission-id=x\"]\n", &["[engine] submit_args", "--submission-id is set by ratchet"]);
    bad("submit_args = [\"--entrypoint-num-gpus=2\"]\n", &["--entrypoint-num-gpus is set by ratchet"]);
    bad("submit_args = [\"python\"]\n", &["\"python\" is not an option"]);
    bad("ray_bin = \" \"\n", &["[engine] ray_bin", "is empty"]);
}

#[test]
fn what_ray_says_reaches_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let t = trial(d, "x");
    let w = vec![vec!["true".to_string()]];
    let with = |ray: PathBuf| {
        let mut o = RayOptions::new(d.join("work"));
        o.ray = ray;
        o.command_timeout = Duration::from_secs(5);
        o.poll_interval = Duration::from_millis(50);
        RayEngine::new(o)
    };
    // A submission is Ray's business on a thread of its own: what Ray said comes with the polls.
    let submitted = |ray: PathBuf| {
        let mut e = with(ray);
        let job = e.submit(std::slice::from_ref(&t), &w).unwrap().remove(0);
        settled(&mut e, &job)
    };
    // No `ray` command: a setting (the sweep stops at once), and the hint says how to get one.
    let err = submitted(d.join("nowhere/ray")).unwrap_err();
    assert_eq!(err.kind, ratchet::error::Kind::Config, "{err}");
    assert!(err.hint.as_deref().unwrap_or("").contains("scripts/ray-localhost.sh"), "{err}");
    // No job server: named as such, not as a settings problem (Ray's own words, Ray 2.x), and
    // asked again (the controller bears it for [engine] poll_grace_s).
    let down = d.join("down");
    write_script(&down, "#!/bin/sh\necho 'Traceback (most recent call last):' >&2\necho 'ConnectionError: Failed to connect to Ray at address: http://127.0.0.1:8265.' >&2\nexit 1\n");
    let mut e = with(down);
    let job = e.submit(std::slice::from_ref(&t), &w).unwrap().remove(0);
    let err = settled(&mut e, &job).unwrap_err();
    assert_eq!(err.kind, ratchet::error::Kind::Infrastructure, "{err}");
    assert!(err.message.contains("`ray job submit --address http://127.0.0.1:8265 --no-wait --submission-id=ratchet-"), "{}", err.message);
    assert!(err.message.contains("Failed to connect to Ray"), "{}", err.message);
    let hint = err.hint.unwrap_or_default();
    assert!(hint.contains("no Ray job server answers"), "{hint}");
    // A refused submission: the server's last word, a hint about the settings, and no retry.
    let refused = d.join("refused");
    write_script(&refused, "#!/bin/sh\necho 'RuntimeError: Request failed with status code 400: bad entrypoint_resources' >&2\nexit 1\n");
    let err = submitted(refused).unwrap_err();
    assert_eq!(err.kind, ratchet::error::Kind::Config, "{err}");
    assert!(err.message.contains("status code 400: bad entrypoint_resources"), "{}", err.message);
    assert!(err.hint.unwrap_or_default().contains("cpus, gpus"));
    // A listing that is not Ray's JSON.
    let garbled = d.join("garbled");
    write_script(&garbled, "#!/bin/sh\ncase \"$2\" in submit) exit 0;; esac\necho 'not json'\n");
    let err = submitted(garbled).unwrap_err();
    assert!(err.message.contains("printed no JSON list"), "{}", err.message);
}

/// One `ray list jobs` per poll interval answers every trial in flight, however often the
/// controller polls, and no poll waits for a `ray` command: a submission or a listing that
/// takes a second (a Python start on a loaded machine) leaves the polls answering at once.
#[test]
fn polls_are_batched_into_one_listing_per_interval_and_never_wait_for_ray() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let log = d.join("calls");
    let fake = d.join("ray");
    // Lists every job it was asked to submit as RUNNING; a submission waits until `go` exists
    // (as a loaded head keeps one waiting).
    let go = d.join("go");
    write_script(
        &fake,
        &format!(
            "#!/bin/sh\n[ \"$2\" = submit ] && while [ ! -e {go} ]; do sleep 0.02; done\necho \"$*\" >> {log}\ncase \"$1 $2\" in\n  'job submit') for a in \"$@\"; do case \"$a\" in --submission-id=*) echo \"${{a#--submission-id=}}\" >> {ids};; esac; done ;;\n  'list jobs') printf '['; sep=''; while read -r id; do printf '%s{{\"submission_id\": \"%s\", \"status\": \"RUNNING\"}}' \"$sep\" \"$id\"; sep=','; done < {ids}; echo ']' ;;\nesac\n",
            log = log.display(),
            ids = d.join("ids").display(),
            go = go.display()
        ),
    );
    let mut o = RayOptions::new(d.join("work"));
    o.ray = fake;
    o.poll_interval = Duration::from_millis(1500);
    let mut e = RayEngine::new(o);
    let trials: Vec<TrialSpec> = (0..3).map(|i| trial(d, &format!("t{i}"))).collect();
    let began = Instant::now();
    let jobs = e.submit(&trials, &vec![vec!["true".to_string()]; 3]).unwrap();
    // The three submissions wait on Ray; submit and the polls do not.
    for j in &jobs {
        assert_eq!(e.poll(j).unwrap(), JobState::Queued);
    }
    std::fs::write(&go, "").unwrap();
    let mut polls = 0;
    let mut answers = std::collections::BTreeSet::new();
    while began.elapsed() < Duration::from_millis(2500) || !answers.contains("Running") {
        for j in &jobs {
            let s = e.poll(j).unwrap();
            answers.insert(format!("{s:?}"));
            polls += 1;
        }
        assert!(began.elapsed() < Duration::from_secs(120), "the jobs never read as running: {answers:?}");
        std::thread::sleep(Duration::from_millis(25));
    }
    let elapsed = began.elapsed().as_secs_f64();
    let calls = std::fs::read_to_string(&log).unwrap();
    let lists = calls.lines().filter(|l| l.starts_with("list jobs")).count();
    assert_eq!(calls.lines().filter(|l| l.starts_with("job submit")).count(), 3, "{calls}");
    assert_eq!(answers.iter().map(String::as_str).collect::<Vec<_>>(), ["Queued", "Running"], "queued until a listing shows them");
    // At most one listing started per interval, however many polls: the first, and one after
    // the submissions were taken that shows them.
    assert!(lists >= 2 && lists as f64 <= elapsed / 1.5 + 1.0, "{lists} listings in {elapsed:.1} s for {polls} polls: {calls}");
}

/// A sweep killed right after `ray job submit` returned, before the job's id reached the
/// journal: the job runs in Ray under its trial's name, and the journal has no handle for it.
fn killed_after_submit(bin: &Path) -> (TestRepo, String, String) {
    let t = repo(&ray_engine_table(bin));
    let base = t.head();
    let out = t.ratchet().arg("sweep").env("FAKE_SLEEP_S", "0.5").env("RATCHET_FAULT", "scale-after-submit").output().unwrap();
    assert!(!out.status.success(), "the fault point was not reached: {}", String::from_utf8_lossy(&out.stdout));
    let journal = std::fs::read_to_string(t.path().join(".ratchet/scale.json")).unwrap();
    assert!(journal.contains("\"handle\": null"), "{journal}");
    // Its `ray job submit` ran on a thread of the controller's: killed with it (its output pipe
    // gone), it may or may not have reached Ray. One that landed just before the kill is the
    // case under test, so once no submission is under way the test lands it by hand, through the
    // script the engine wrote and with the trial's candidate.
    let script = std::fs::read_dir(t.path().join(".ratchet/ray")).unwrap().flatten().map(|e| e.path()).next().unwrap();
    let id = script.file_stem().unwrap().to_string_lossy().into_owned();
    let submitting = || support::processes_naming(&id).iter().any(|p| p.contains("job submit"));
    let since = Instant::now();
    while submitting() && since.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(200));
    }
    if our_jobs(bin, &t).is_empty() {
        let j: serde_json::Value = serde_json::from_str(&journal).unwrap();
        let candidate = j["trials"][0]["spec"]["candidate"].as_str().unwrap().to_string();
        let out = Command::new(bin)
            .args(["job", "submit", "--address", ADDRESS, "--no-wait", &format!("--submission-id={id}")])
            .args(["--entrypoint-num-cpus=1", "--entrypoint-num-gpus=1"])
            .arg(format!("--metadata-json={}", serde_json::json!({ "ratchet_candidate": candidate })))
            .args(["--", "sh", &script.to_string_lossy()])
            .output()
            .unwrap();
        assert!(out.status.success(), "ray job submit: {}", String::from_utf8_lossy(&out.stderr));
    }
    let jobs = our_jobs(bin, &t);
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    (t, base, jobs[0].0.clone())
}

#[test]
fn a_ray_job_whose_id_was_never_journaled_is_found_by_name_and_reattached() {
    let Some((_turn, bin)) = cluster_turn() else { return };
    let (t, base, first) = killed_after_submit(&bin);
    let out = t.ratchet().arg("sweep").env("FAKE_SLEEP_S", "0.05").timeout(Duration::from_secs(300)).output().unwrap();
    let text = crate::support::flat(&format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)));
    assert!(out.status.success(), "{text}");
    assert!(text.contains("re-attached the jobs a stopped parallel sweep left queued or running on the ray engine"), "{text}");
    check_trunk(&t, &base);
    // The first job was found by its name and recorded; it was not submitted again.
    let jobs = our_jobs(&bin, &t);
    assert_eq!(jobs.len(), QUEUE.len(), "{jobs:?}");
    assert!(jobs.iter().all(|(_, s)| s == "SUCCEEDED"), "{jobs:?}");
    assert!(jobs.iter().any(|(id, _)| *id == first), "{first} {jobs:?}");
}

#[test]
fn recover_stops_by_name_a_ray_job_whose_id_was_never_journaled() {
    let Some((_turn, bin)) = cluster_turn() else { return };
    let (t, base, first) = killed_after_submit(&bin);
    let out = t.ratchet().arg("recover").output().unwrap();
    let text = crate::support::flat(&format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)));
    assert!(out.status.success(), "{text}");
    assert!(text.contains("cancelled the jobs a stopped parallel sweep left queued or running") && text.contains(&first), "{text}");
    assert_eq!(our_jobs(&bin, &t), vec![(first, "STOPPED".to_string())], "no job leaks");
    assert_eq!(t.live_workers(), Vec::<i32>::new());
    assert_eq!(t.head(), base);
}

#[test]
fn a_stop_runs_ray_job_stop_beside_the_caller_and_says_when_it_ended() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (go, log) = (d.join("go"), d.join("calls"));
    // Takes every submission at once; `job stop` waits until `go` exists (a loaded head), and
    // fails for a job named `bad`.
    let fake = d.join("ray");
    write_script(
        &fake,
        &format!(
            "#!/bin/sh\ncase \"$1 $2\" in\n  'job stop') while [ ! -e {go} ]; do sleep 0.02; done\n    for a in \"$@\"; do last=$a; done\n    case \"$last\" in *-bad) echo 'RuntimeError: the job server said no' >&2; exit 1;; esac\n    echo \"stop $last\" >> {log} ;;\n  'list jobs') echo '[]' ;;\nesac\n",
            go = go.display(),
            log = log.display()
        ),
    );
    let mut o = RayOptions::new(d.join("work"));
    o.ray = fake;
    o.command_timeout = Duration::from_secs(600);
    let mut e = RayEngine::new(o);
    let trials = [trial(d, "held"), trial(d, "bad")];
    let jobs = e.submit(&trials, &[vec!["true".to_string()], vec!["true".to_string()]]).unwrap();
    for j in &jobs {
        e.stop(j).unwrap();
    }
    assert!(!e.stopped(&jobs[0]).unwrap(), "the stop ended before `ray job stop` did");
    std::fs::write(&go, "").unwrap();
    assert!(support::eventually(|| e.stopped(&jobs[0]).unwrap()));
    assert_eq!(std::fs::read_to_string(&log).unwrap().trim(), format!("stop {}", jobs[0].engine_id));
    let err = support::stop_error(&mut e, &jobs[1]);
    assert!(err.message.contains("job stop") && err.message.contains("the job server said no"), "{}", err.message);
}
