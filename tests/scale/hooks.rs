//! The hook engine with real shell-script hooks that run the worker in the background
//! on this host: the protocol (trial JSON on stdin, RATCHET_* variables, one token line, one
//! state line), cancel and fetch, and every way a hook can misbehave. Also the `[engine]` table's
//! validation, which names the key and what is allowed.

use crate::support;

use ratchet::config::Config;
use ratchet::scale::engine::{Engine, JobHandle, JobState, TrialSpec};
use ratchet::scale::hook::{HookEngine, HookOptions};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::hooks;

/// How long a test waits for a hook's answer.
const T: Duration = Duration::from_secs(30);

struct Rig {
    dir: tempfile::TempDir,
}

impl Rig {
    fn new() -> Rig {
        let rig = Rig { dir: tempfile::tempdir().unwrap() };
        std::fs::create_dir_all(rig.state()).unwrap();
        for (name, body) in [
            ("submit.sh", hooks::SUBMIT),
            ("poll.sh", hooks::POLL),
            ("cancel.sh", hooks::CANCEL),
            ("fetch.sh", hooks::FETCH),
            ("find.sh", hooks::FIND),
        ] {
            rig.script(name, body);
        }
        rig
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
    fn state(&self) -> PathBuf {
        self.path().join("state")
    }
    fn script(&self, name: &str, body: &str) -> PathBuf {
        let p = self.path().join(name);
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }
    /// `sh SCRIPT STATE`, as a config would name it.
    fn hook(&self, name: &str) -> String {
        format!("sh {} {}", self.path().join(name).display(), self.state().display())
    }
    fn options(&self) -> HookOptions {
        HookOptions {
            capacity: 4,
            submit: self.hook("submit.sh"),
            batch: false,
            poll: self.hook("poll.sh"),
            cancel: self.hook("cancel.sh"),
            fetch: Some(self.hook("fetch.sh")),
            find: Some(self.hook("find.sh")),
            work_dir: self.path().join(".ratchet"),
            timeout: Duration::from_secs(10),
            // Polled at every ask: these tests watch the hooks themselves, not the rate limit.
            poll_interval: Duration::ZERO,
            dir: self.path().to_path_buf(),
            device_kind: None,
        }
    }
    fn trial(&self, id: &str) -> TrialSpec {
        TrialSpec {
            id: id.into(),
            repo: self.path().join("repo"),
            incumbent: "1".repeat(40),
            candidate: "2".repeat(40),
            out_dir: self.path().join("runs").join(id),
        }
    }
}

fn alive(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    !stat.is_empty() && !stat.contains(") Z")
}

fn wait_dead(pids: &[i32]) -> Vec<i32> {
    support::eventually(|| pids.iter().all(|&p| !alive(p)));
    pids.iter().copied().filter(|&p| alive(p)).collect()
}

#[test]
fn trials_go_through_submit_and_poll_to_their_results() {
    let rig = Rig::new();
    // Through the config, as the controller builds it.
    let toml = format!(
        "[benchmark]\ncommand = \"python3 b.py\"\n[score]\nmetric = \"latency\"\n[engine]\nkind = \"hook\"\ncapacity = 3\n\
         submit = {:?}\npoll = {:?}\ncancel = {:?}\nhook_timeout_s = 10\npoll_interval_s = 0\n",
        rig.hook("submit.sh"),
        rig.hook("poll.sh"),
        rig.hook("cancel.sh")
    );
    let cfg = Config::parse(&toml).unwrap();
    let mut e = ratchet::scale::engine_from_config(&cfg.engine, rig.path(), rig.path()).unwrap().unwrap();
    assert_eq!((e.name(), e.capacity()), ("hook", 3));
    // The "worker" writes its arguments, one per line, into the run directory: arguments with
    // spaces, quotes and `$` must arrive as they were.
    let trials: Vec<TrialSpec> = (0..3).map(|i| rig.trial(&format!("e{i}"))).collect();
    let argv: Vec<Vec<String>> = trials
        .iter()
        .map(|t| {
            let out = t.out_dir.join("result.txt").to_string_lossy().into_owned();
            vec!["sh".into(), "-c".into(), "printf '%s\\n' \"$@\" > \"$0\"; sleep 0.3".into(), out, "two words".into(), "it's $HOME".into()]
        })
        .collect();
    let jobs = e.submit(&trials, &argv).unwrap();
    assert_eq!(jobs.len(), 3);
    // Each handle is the job's name, known before the submit hook answers (it runs beside the
    // caller); the hooks are given the token it printed.
    for (j, t) in jobs.iter().zip(&trials) {
        assert_eq!(j.trial, t.id);
        assert!(j.engine_id.ends_with(&format!("-{}[0]", t.id)), "{}", j.engine_id);
    }
    // Polls answer at once (the hook runs on a thread of the engine's): queued, then running.
    assert!(jobs.iter().any(|j| support::settled(e.as_mut(), j, T).unwrap() == JobState::Running), "a 0.3 s worker runs after submit");
    assert_eq!(support::final_states(e.as_mut(), &jobs, Duration::from_secs(30)), vec![JobState::Finished; 3]);
    for (t, argv) in trials.iter().zip(&argv) {
        let got = std::fs::read_to_string(t.out_dir.join("result.txt")).unwrap();
        assert_eq!(got, "two words\nit's $HOME\n");
        // The trial as JSON on stdin: every field of the spec, and the worker's argv.
        let json: serde_json::Value = serde_json::from_slice(&std::fs::read(t.out_dir.join("submitted.json")).unwrap()).unwrap();
        assert_eq!(json["id"], t.id.as_str());
        assert_eq!(json["incumbent"], t.incumbent.as_str());
        assert_eq!(json["candidate"], t.candidate.as_str());
        assert_eq!(json["out_dir"], t.out_dir.to_string_lossy().as_ref());
        assert_eq!(json["repo"], t.repo.to_string_lossy().as_ref());
        assert_eq!(json["worker"], serde_json::json!(argv));
    }
    // No fetch hook configured: fetch is a no-op.
    e.fetch(&jobs[0], &trials[0]).unwrap();
}

#[test]
fn cancel_stops_the_worker_and_its_children() {
    let rig = Rig::new();
    let mut e = HookEngine::new(rig.options());
    let t = rig.trial("long");
    let pids = t.out_dir.join("pids");
    let argv = vec!["sh".into(), "-c".into(), "sleep 300 & echo $$ $! > \"$0\"; wait".into(), pids.to_string_lossy().into_owned()];
    let jobs = e.submit(std::slice::from_ref(&t), &[argv]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read_to_string(&pids).map(|s| s.split_whitespace().count() < 2).unwrap_or(true) {
        assert!(Instant::now() < deadline, "the worker never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let pids: Vec<i32> = std::fs::read_to_string(&pids).unwrap().split_whitespace().map(|p| p.parse().unwrap()).collect();
    assert!(pids.iter().all(|&p| alive(p)));
    assert_eq!(support::settled(&mut e, &jobs[0], T).unwrap(), JobState::Running);
    e.cancel(&jobs[0]).unwrap();
    assert_eq!(wait_dead(&pids), Vec::<i32>::new());
    match support::settled(&mut e, &jobs[0], T).unwrap() {
        JobState::Failed(why) => assert!(why.contains("died without an exit status"), "{why}"),
        other => panic!("a cancelled job polls as {other:?}"),
    }
}

#[test]
fn fetch_brings_the_run_directory_back() {
    let rig = Rig::new();
    let mut e = HookEngine::new(rig.options());
    let t = rig.trial("far");
    let remote = rig.state().join("remote").join("far");
    std::fs::create_dir_all(&remote).unwrap();
    let argv = vec!["sh".into(), "-c".into(), "echo '{\"ok\":true}' > \"$0/trial.json\"".into(), remote.to_string_lossy().into_owned()];
    let jobs = e.submit(std::slice::from_ref(&t), &[argv]).unwrap();
    assert_eq!(support::final_states(&mut e, &jobs, Duration::from_secs(30)), vec![JobState::Finished]);
    assert!(!t.out_dir.join("trial.json").exists());
    e.fetch(&jobs[0], &t).unwrap();
    assert_eq!(std::fs::read_to_string(t.out_dir.join("trial.json")).unwrap(), "{\"ok\":true}\n");
}

fn with_submit(rig: &Rig, body: &str) -> HookEngine {
    rig.script("bad_submit.sh", body);
    HookEngine::new(HookOptions { submit: rig.hook("bad_submit.sh"), ..rig.options() })
}

/// Submit `trials` and return why the `i`-th polls as failed: a submit hook that failed is its
/// trials' loss, with the hook's message (the submission runs beside the caller).
fn refused(e: &mut HookEngine, trials: &[TrialSpec], worker: &[Vec<String>], i: usize) -> String {
    let jobs = e.submit(trials, worker).unwrap();
    match support::settled(e, &jobs[i], T).unwrap() {
        JobState::Failed(why) => why,
        other => panic!("a refused submission polls as {other:?}"),
    }
}

#[test]
fn a_misbehaving_submit_hook_is_a_clear_error() {
    let rig = Rig::new();
    let t = rig.trial("x");
    let w = vec![vec!["true".to_string()]];
    let t = std::slice::from_ref(&t);
    let why = refused(&mut with_submit(&rig, "#!/bin/sh\necho one\necho two\n"), t, &w, 0);
    assert!(why.contains("submit hook for trial x printed 2 lines") && why.contains("exactly one"), "{why}");
    assert!(why.contains(">&2"), "{why}");
    let why = refused(&mut with_submit(&rig, "#!/bin/sh\necho 'only on stderr' >&2\n"), t, &w, 0);
    assert!(why.contains("printed 0 lines"), "{why}");
    let why = refused(&mut with_submit(&rig, "#!/bin/sh\necho 'quota exceeded' >&2\nexit 3\n"), t, &w, 0);
    assert!(why.contains("the submit hook") && why.contains("bad_submit.sh"), "{why}");
    assert!(why.contains("exit code 3") && why.contains("quota exceeded"), "{why}");
    let why = refused(&mut with_submit(&rig, "#!/bin/sh\nprintf 'tab\\there\\n'\n"), t, &w, 0);
    assert!(why.contains("control characters"), "{why}");
}

#[test]
fn a_hanging_hook_is_killed_with_its_children_at_the_limit() {
    let rig = Rig::new();
    let child = rig.path().join("child.pid");
    rig.script("hang.sh", &format!("#!/bin/sh\nsleep 300 &\necho $! > {}\nwait\n", child.display()));
    let mut e = HookEngine::new(HookOptions { poll: rig.hook("hang.sh"), timeout: Duration::from_millis(500), ..rig.options() });
    let job = JobHandle { trial: "x".into(), engine_id: "local-1".into(), slot: None };
    let err = support::settled(&mut e, &job, T).unwrap_err();
    assert!(err.message.contains("the poll hook") && err.message.contains("did not finish within"), "{}", err.message);
    let pid: i32 = std::fs::read_to_string(&child).unwrap().trim().parse().unwrap();
    assert_eq!(wait_dead(&[pid]), Vec::<i32>::new(), "the hook's child went with it");
}

#[test]
fn a_poll_line_outside_the_protocol_is_an_error() {
    let rig = Rig::new();
    rig.script("odd.sh", "#!/bin/sh\necho done\n");
    let mut e = HookEngine::new(HookOptions { poll: rig.hook("odd.sh"), ..rig.options() });
    let job = JobHandle { trial: "x".into(), engine_id: "t".into(), slot: None };
    let err = support::settled(&mut e, &job, T).unwrap_err();
    assert!(err.message.contains("printed \"done\"") && err.message.contains("queued, running, finished"), "{}", err.message);
    rig.script("why.sh", "#!/bin/sh\necho 'failed: preempted by the spot market'\n");
    let mut e = HookEngine::new(HookOptions { poll: rig.hook("why.sh"), ..rig.options() });
    assert_eq!(support::settled(&mut e, &job, T).unwrap(), JobState::Failed("preempted by the spot market".into()));
    // Poll and cancel get the token and the trial id, nothing else (a restarted controller has
    // only its journal's handle).
    rig.script(
        "env.sh",
        "#!/bin/sh\n[ \"$RATCHET_JOB\" = t ] && [ \"$RATCHET_TRIAL_ID\" = x ] && [ -z \"$RATCHET_OUT_DIR\" ] && echo running\n",
    );
    let mut e = HookEngine::new(HookOptions { poll: rig.hook("env.sh"), ..rig.options() });
    assert_eq!(support::settled(&mut e, &job, T).unwrap(), JobState::Running);
}

#[test]
fn a_failed_submit_cancels_the_trials_already_submitted() {
    let rig = Rig::new();
    // Submits the first trial for real (and returns once its worker runs), refuses the second.
    let real = rig.hook("submit.sh");
    let mut e = with_submit(&rig, &format!("#!/bin/sh\n[ \"$RATCHET_TRIAL_ID\" = second ] && {{ echo 'no capacity' >&2; exit 1; }}\nout=$({real}) || exit 1\nwhile [ ! -s \"$RATCHET_OUT_DIR/pid\" ]; do sleep 0.05; done\necho \"$out\"\n"));
    let (a, b) = (rig.trial("first"), rig.trial("second"));
    let pidfile = a.out_dir.join("pid");
    let long = |p: &Path| vec!["sh".into(), "-c".into(), "echo $$ > \"$0\"; exec sleep 300".into(), p.to_string_lossy().into_owned()];
    let why = refused(&mut e, &[a.clone(), b], &[long(&pidfile), long(Path::new("/dev/null"))], 1);
    assert!(why.contains("trial second") && why.contains("no capacity"), "{why}");
    let cancelled = std::fs::read_to_string(rig.state().join("cancelled")).unwrap();
    assert_eq!(cancelled.lines().count(), 1, "{cancelled}");
    assert!(cancelled.starts_with("local-"));
    let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
    assert_eq!(wait_dead(&[pid]), Vec::<i32>::new(), "the first trial's worker was stopped");
}

/// The batch form: every trial of the batch on stdin as a JSON array; each worker started in
/// its own session, one token line per trial (what a Kubernetes Indexed Job's hook does with
/// `jobname:index`).
const SUBMIT_BATCH: &str = r#"
import json, os, subprocess, sys
state = sys.argv[1]
trials = json.load(sys.stdin)
assert len(trials) == int(os.environ["RATCHET_TRIAL_COUNT"])
for t in trials:
    log = open(os.path.join(t["out_dir"], "worker.log"), "w")
    wrapped = 'eval "$0"; echo $? > "$1/exit"'
    shell = " ".join("'" + a.replace("'", "'\\''") + "'" for a in t["worker"])
    p = subprocess.Popen(["sh", "-c", wrapped, shell, t["out_dir"]], stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    open(os.path.join(state, str(p.pid)), "w").write(t["out_dir"] + "\n")
    print("local-%d" % p.pid)
"#;

#[test]
fn a_batch_goes_to_submit_batch_in_one_call() {
    let rig = Rig::new();
    std::fs::write(rig.path().join("submit_batch.py"), SUBMIT_BATCH).unwrap();
    let calls = rig.path().join("calls");
    let submit =
        format!("echo x >> {} && python3 {} {}", calls.display(), rig.path().join("submit_batch.py").display(), rig.state().display());
    // Through the config: submit_batch instead of submit.
    let toml = format!(
        "{BASE}[engine]\nkind = \"hook\"\nsubmit_batch = {submit:?}\npoll = {:?}\ncancel = {:?}\npoll_interval_s = 0\n",
        rig.hook("poll.sh"),
        rig.hook("cancel.sh")
    );
    let cfg = Config::parse(&toml).unwrap();
    let mut e = ratchet::scale::engine_from_config(&cfg.engine, rig.path(), rig.path()).unwrap().unwrap();
    let trials: Vec<TrialSpec> = (0..3).map(|i| rig.trial(&format!("b{i}"))).collect();
    let argv: Vec<Vec<String>> = trials
        .iter()
        .map(|t| {
            vec![
                "sh".into(),
                "-c".into(),
                "echo \"$1\" > \"$0\"".into(),
                t.out_dir.join("r.txt").to_string_lossy().into(),
                format!("{} it's", t.id),
            ]
        })
        .collect();
    let jobs = e.submit(&trials, &argv).unwrap();
    assert_eq!(support::final_states(e.as_mut(), &jobs, Duration::from_secs(30)), vec![JobState::Finished; 3]);
    assert_eq!(std::fs::read_to_string(&calls).unwrap().lines().count(), 1, "one call for the batch");
    for t in &trials {
        assert_eq!(std::fs::read_to_string(t.out_dir.join("r.txt")).unwrap(), format!("{} it's\n", t.id));
    }
    // A batch hook that answers for fewer trials than it was given.
    rig.script("short.sh", "#!/bin/sh\ncat >/dev/null\necho only-one\n");
    let mut e = HookEngine::new(HookOptions { submit: rig.hook("short.sh"), batch: true, ..rig.options() });
    let why = refused(&mut e, &trials, &argv, 2);
    assert!(why.contains("submit_batch hook for 3 trials printed 1 token lines"), "{why}");
}

const BASE: &str = "[benchmark]\ncommand = \"python3 b.py\"\n[score]\nmetric = \"latency\"\n";

fn config_error(engine: &str) -> String {
    let err = Config::parse(&format!("{BASE}[engine]\n{engine}")).unwrap_err();
    err.message
}

#[test]
fn the_engine_table_is_validated_strictly() {
    // Each: the table, and what the error must say (the key, the line, what is allowed).
    let cases: &[(&str, &[&str])] = &[
        ("kind = \"k8s\"\n", &["unknown variant `k8s`", "local", "slurm", "hook", "line 6"]),
        ("kind = \"slurm\"\nnodes = 2\n", &["unknown field `nodes`", "partition", "line 7"]),
        ("kind = \"slurm\"\nsubmit = \"x\"\n", &["line 7", "[engine] submit", "does not apply to kind = \"slurm\"", "partition, gres"]),
        ("kind = \"hook\"\nsubmit = \"a\"\npoll = \"b\"\ncancel = \"c\"\npartition = \"p\"\n", &["[engine] partition", "kind = \"hook\""]),
        ("capacity = 4\n", &["[engine] capacity", "kind = \"local\"", "--jobs"]),
        ("kind = \"hook\"\nsubmit = \"a\"\ncancel = \"c\"\n", &["[engine] poll: is required", "submit or submit_batch, poll and cancel"]),
        ("kind = \"hook\"\npoll = \"b\"\ncancel = \"c\"\n", &["[engine] submit: is required"]),
        (
            "kind = \"hook\"\nsubmit = \"a\"\nsubmit_batch = \"a\"\npoll = \"b\"\ncancel = \"c\"\n",
            &["line 8", "[engine] submit_batch: cannot be combined with submit"],
        ),
        ("kind = \"hook\"\nsubmit = \" \"\npoll = \"b\"\ncancel = \"c\"\n", &["line 7", "[engine] submit: is empty"]),
        ("kind = \"slurm\"\ncapacity = 0\n", &["line 7", "[engine] capacity: must be between 1 and 10000"]),
        ("kind = \"slurm\"\ncommand_timeout_s = -1\n", &["[engine] command_timeout_s: must be in (0, 3600]"]),
        ("kind = \"slurm\"\ngres = \"gpu 1\"\n", &["[engine] gres", "\"gpu:1\""]),
        ("kind = \"slurm\"\ngres = \"gpu:1\"\nexclusive = true\n", &["[engine] gres: cannot be combined with exclusive"]),
        ("kind = \"slurm\"\nsbatch_args = [\"--array=0-3\"]\n", &["[engine] sbatch_args: --array is set by ratchet"]),
        ("kind = \"slurm\"\nsbatch_args = [\"gpu\"]\n", &["[engine] sbatch_args: \"gpu\" is not an option"]),
        ("kind = \"slurm\"\npartition = \"a b\"\n", &["[engine] partition: must be a partition name"]),
        ("kind = \"slurm\"\nexclusive = \"yes\"\n", &["line 7", "invalid type"]),
        ("kind = \"slurm\"\ndevice_kind = \" \"\n", &["line 7", "[engine] device_kind: must name a kind of device"]),
        ("device_kind = \"h100\"\n", &["[engine] device_kind", "kind = \"local\""]),
    ];
    for (table, wants) in cases {
        let msg = config_error(table);
        for w in *wants {
            assert!(msg.contains(w), "for {table:?} the error {msg:?} lacks {w:?}");
        }
    }
    // And what is allowed parses.
    for ok in [
        "kind = \"local\"\n",
        "kind = \"slurm\"\n",
        "kind = \"slurm\"\nexclusive = true\npartition = \"gpu\"\ncapacity = 8\nsbatch_args = [\"--time=2:00:00\", \"--account=lab\"]\n",
        "kind = \"slurm\"\ngres = \"\"\n",
        "kind = \"slurm\"\ngres = \"gpu:a100:1,shard:2\"\ncommand_timeout_s = 120\n",
        "kind = \"hook\"\nsubmit = \"a\"\npoll = \"b\"\ncancel = \"c\"\nfetch = \"d\"\nhook_timeout_s = 30\n",
        "kind = \"hook\"\nsubmit_batch = \"a\"\npoll = \"b\"\ncancel = \"c\"\n",
    ] {
        Config::parse(&format!("{BASE}[engine]\n{ok}")).unwrap_or_else(|e| panic!("{ok:?}: {e}"));
    }
}

#[test]
fn a_job_whose_token_was_never_journaled_is_found_by_its_name_and_cancelled() {
    let rig = Rig::new();
    let trial = rig.trial("t1");
    let argv = vec!["sh".to_string(), "-c".into(), "sleep 30".into()];
    // One controller submits; the token its submit hook printed is kept beside the handle.
    let handle = HookEngine::new(rig.options()).submit(std::slice::from_ref(&trial), &[argv]).unwrap()[0].clone();
    let kept = rig.path().join(".ratchet/hook").join(format!("{}.token", handle.engine_id));
    let token = std::fs::read_to_string(&kept).unwrap();
    let pid: i32 = token.trim_start_matches("local-").parse().unwrap();
    assert!(alive(pid));
    // A controller that died before the hook answered has neither: the next one finds the
    // job through the find hook by the name the trial gives it, and can cancel it.
    std::fs::remove_file(&kept).unwrap();
    let mut next = HookEngine::new(rig.options());
    let found = next.find(&trial).unwrap().expect("a handle by name");
    assert_eq!(found, handle);
    assert_eq!(support::settled(&mut next, &found, T).unwrap(), JobState::Running);
    next.cancel(&found).unwrap();
    assert_eq!(wait_dead(&[pid]), Vec::<i32>::new(), "the found job was cancelled");
    // Another trial's name finds nothing, with or without a find hook: its run directory says
    // whether it ran.
    let other = next.find(&rig.trial("t2")).unwrap().unwrap();
    assert_eq!(support::settled(&mut next, &other, T).unwrap(), JobState::Finished);
    let mut blind = HookEngine::new(HookOptions { find: None, ..rig.options() });
    let h = blind.find(&rig.trial("t3")).unwrap().unwrap();
    assert_eq!(support::settled(&mut blind, &h, T).unwrap(), JobState::Finished);
    // The name is the one Slurm and Ray give a trial's job for the same work directory.
    let names = std::fs::read_dir(rig.state()).unwrap().filter_map(|e| e.ok()?.file_name().into_string().ok());
    let expected = format!("name-{}", ratchet::scale::engine::job_name(&rig.path().join(".ratchet"), "t1"));
    assert!(names.into_iter().any(|n| n == expected), "{expected}");
}

#[test]
fn a_stop_runs_the_cancel_hook_beside_the_caller_and_says_when_it_ended() {
    let rig = Rig::new();
    // The cancel hook waits until `go` exists (a scheduler slow to kill), then records its job.
    let go = rig.path().join("go");
    let log = rig.path().join("cancelled");
    rig.script(
        "slow-cancel.sh",
        &format!("while [ ! -e {} ]; do sleep 0.02; done\necho \"$RATCHET_JOB\" >> {}\n", go.display(), log.display()),
    );
    let mut e = HookEngine::new(HookOptions { cancel: rig.hook("slow-cancel.sh"), timeout: Duration::from_secs(600), ..rig.options() });
    let t = rig.trial("held");
    let jobs = e.submit(std::slice::from_ref(&t), &[vec!["true".into()]]).unwrap();
    e.stop(&jobs[0]).unwrap();
    assert!(!e.stopped(&jobs[0]).unwrap(), "the stop ended before its hook could");
    assert!(!log.exists());
    std::fs::write(&go, "").unwrap();
    assert!(support::eventually(|| e.stopped(&jobs[0]).unwrap()));
    // The hook is given the job's token, which the submit hook printed.
    assert!(std::fs::read_to_string(&log).unwrap().trim().starts_with("local-"));
    // A cancel hook that fails is the stop's error.
    rig.script("bad-cancel.sh", "echo 'no such job' >&2; exit 3\n");
    let mut e = HookEngine::new(HookOptions { cancel: rig.hook("bad-cancel.sh"), ..rig.options() });
    let jobs = e.submit(std::slice::from_ref(&rig.trial("bad")), &[vec!["true".into()]]).unwrap();
    e.stop(&jobs[0]).unwrap();
    let err = support::stop_error(&mut e, &jobs[0]);
    assert!(err.message.contains("cancel hook") && err.message.contains("no such job"), "{}", err.message);
}

#[test]
fn the_submit_hook_runs_beside_the_caller() {
    let rig = Rig::new();
    // The submit hook waits until `go` exists (a launcher's API slow to answer), then submits.
    let go = rig.path().join("go");
    let slow =
        rig.script("slow-submit.sh", &format!("while [ ! -e {} ]; do sleep 0.02; done\nexec {}\n", go.display(), rig.hook("submit.sh")));
    let mut e =
        HookEngine::new(HookOptions { submit: format!("sh {}", slow.display()), timeout: Duration::from_secs(600), ..rig.options() });
    let t = rig.trial("slow");
    let jobs = e.submit(std::slice::from_ref(&t), &[vec!["sleep".into(), "0.3".into()]]).unwrap();
    assert_eq!(e.poll(&jobs[0]).unwrap(), JobState::Queued, "a poll while the submit hook has not answered");
    std::fs::write(&go, "").unwrap();
    assert_eq!(support::final_states(&mut e, &jobs, Duration::from_secs(600)), vec![JobState::Finished]);
}
