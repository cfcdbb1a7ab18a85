//! `ratchet worker`: measures a candidate against an incumbent from commit ids into a
//! run directory, trial.json last, and changes nothing in the repository it reads.

use crate::support;

use support::TestRepo;

/// A repo with a faster candidate commit on a side branch; returns (incumbent, candidate).
fn two_commits(t: &TestRepo, candidate_env: &str) -> (String, String) {
    let inc = t.head();
    t.git(&["checkout", "-qb", "side"]);
    t.write("fake.env", candidate_env);
    t.git(&["commit", "-qam", "candidate"]);
    let cand = t.head();
    t.git(&["checkout", "-q", "main"]);
    (inc, cand)
}

fn trial(out: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("trial.json")).unwrap()).unwrap()
}

#[test]
fn worker_measures_into_its_run_directory_and_touches_nothing() {
    let t = TestRepo::new();
    let (inc, cand) = two_commits(&t, "FAKE_LATENCY_MS=5\n");
    let out = tempfile::tempdir().unwrap();
    let refs_before = t.git(&["for-each-ref"]);
    let status_before = t.git(&["status", "--porcelain", "--ignored"]);
    t.ratchet()
        .args(["worker", "--repo"])
        .arg(t.path())
        .args(["--incumbent", &inc, "--candidate", &cand, "--out"])
        .arg(out.path().join("t1"))
        .assert()
        .success();
    let dir = out.path().join("t1");
    let v = trial(&dir);
    assert_eq!(v["schema"], 1);
    assert_eq!(v["end"]["kind"], "decided");
    assert_eq!(v["incumbent"], inc.as_str());
    assert_eq!(v["candidate"], cand.as_str());
    let main = v["main"].as_array().unwrap();
    assert!(main.len() >= 4, "{v}");
    // 10 ms -> 5 ms: every pair's log-ratio says about +69% speed-up.
    assert!(main.iter().all(|x| (x.as_f64().unwrap() - 2f64.ln()).abs() < 0.1), "{v}");
    let runs = std::fs::read_to_string(dir.join("runs.jsonl")).unwrap();
    assert_eq!(runs.lines().count() as u64, v["runs"].as_u64().unwrap());
    assert!(dir.join("traces.json").exists() && dir.join("runs").is_dir() && dir.join("worker.pid").exists());
    // Decides nothing: no row, no ref, no branch move, no file in the repository.
    assert!(!t.path().join("results/results.csv").exists());
    assert_eq!(t.git(&["for-each-ref"]), refs_before);
    assert_eq!(t.git(&["status", "--porcelain", "--ignored"]), status_before);
    assert_eq!(t.head(), inc);
    assert!(!t.path().join(".ratchet").exists(), "the worker wrote into the repository's state dir");
    // The throw-away checkouts are gone; a second trial into the same directory is refused.
    assert!(!dir.join("work/candidate").exists());
    t.ratchet()
        .args(["worker", "--repo"])
        .arg(t.path())
        .args(["--incumbent", &inc, "--candidate", &cand, "--out"])
        .arg(&dir)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("already holds a finished trial"));
}

#[test]
fn worker_reads_a_bundle_and_records_a_crash_and_its_slot() {
    let t = TestRepo::new();
    let (inc, cand) = two_commits(&t, "FAKE_MODE=crash\n");
    let bundle = t.path().join("../repo.bundle");
    t.git(&["bundle", "create", "-q", bundle.to_str().unwrap(), "--all"]);
    let out = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    t.ratchet()
        .args(["worker", "--repo"])
        .arg(&bundle)
        .args(["--incumbent", &inc, "--candidate", &cand, "--out"])
        .arg(out.path())
        .env("RATCHET_WORKER_DIR", work.path())
        .env("RATCHET_SLOT", "3")
        .env("CUDA_VISIBLE_DEVICES", "3")
        .assert()
        .success();
    let v = trial(out.path());
    assert_eq!(v["end"]["kind"], "candidate", "{v}");
    assert_eq!(v["end"]["status"], "crash");
    assert_eq!(v["slot"], 3);
    assert_eq!(v["device_env"]["CUDA_VISIBLE_DEVICES"], "3");
    // The per-slot work directory is reused: its checkouts stay for the next trial.
    assert!(work.path().join("candidate/fake.env").exists());
    let _ = std::fs::remove_file(bundle);
}

#[test]
fn worker_refuses_bad_arguments_clearly() {
    let t = TestRepo::new();
    let out = tempfile::tempdir().unwrap();
    let head = t.head();
    t.ratchet()
        .args(["worker", "--repo"])
        .arg(t.path())
        .args(["--incumbent", "abc", "--candidate", &head, "--out"])
        .arg(out.path())
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--incumbent \"abc\": give the full 40-hex-digit commit id"));
    let missing = "0123456789012345678901234567890123456789";
    t.ratchet()
        .args(["worker", "--repo"])
        .arg(t.path())
        .args(["--incumbent", &head, "--candidate", missing, "--out"])
        .arg(out.path())
        .assert()
        .failure()
        .stderr(predicates::str::contains("candidate commit 0123456789012345678901234567890123456789 is not in"));
    // The log-sums' spread is read beside a borrowed scale, never alone; a malformed one is named.
    for (args, says) in [
        (vec!["--sums-scale", "0.01,20"], "--sums-scale is read beside a borrowed scale: give --noise-scale too"),
        (vec!["--noise-scale", "0.01,20", "--sums-scale", "0.01"], "--sums-scale: \"0.01\" is not a noise scale"),
    ] {
        t.ratchet()
            .args(["worker", "--repo"])
            .arg(t.path())
            .args(["--incumbent", &head, "--candidate", &head, "--out"])
            .arg(out.path())
            .args(&args)
            .assert()
            .code(2)
            .stderr(predicates::str::contains(says));
    }
    assert!(!out.path().join("trial.json").exists());
}

/// A run that ends by the very signal that stops its worker is the stop's doing. Ray's `job
/// stop` and a service manager signal the whole process tree, the benchmark with its worker, so
/// the run can end before the worker has seen its own stop. The trial then ends `interrupted`
/// (the controller starts it again as a lost trial), never as the candidate's crash (a row
/// blaming the hypothesis) or the incumbent's failure (which stops the sweep).
#[test]
fn a_run_killed_by_the_signal_that_stops_its_worker_is_an_interruption_not_a_crash() {
    use ratchet::bench::mock::{MockExecutor, Step};
    use ratchet::bench::Side;
    use ratchet::events::{Discard, Effects};
    use ratchet::scale::trial::TrialEnd;
    use ratchet::scale::worker::{self, WorkerOptions};
    use ratchet::signals::Cancel;
    for side in [Side::Candidate, Side::Incumbent] {
        let t = TestRepo::new();
        let (inc, cand) = two_commits(&t, "FAKE_LATENCY_MS=5\n");
        let out = tempfile::tempdir().unwrap();
        let cancel = Cancel::new();
        let stop = cancel.clone();
        let mut exec = MockExecutor::new(move |c| {
            if c.side == side && c.n == 1 {
                stop.cancel();
                Step::Signal(libc::SIGTERM)
            } else {
                Step::Latency(10.0)
            }
        });
        let o = WorkerOptions {
            repo: t.path().to_path_buf(),
            incumbent: inc,
            candidate: cand,
            out: out.path().join("t1"),
            id: Some("t1".into()),
            config: None,
            pairs: None,
            noise_scale: None,
            sums_scale: None,
            recheck: false,
            deep: false,
            work: None,
        };
        let r = worker::run(&o, &mut exec, &mut Effects::new(&mut Discard, cancel)).unwrap();
        assert_eq!(r.end, TrialEnd::Interrupted, "{side:?}");
        assert_eq!(trial(&out.path().join("t1"))["end"]["kind"], "interrupted", "{side:?}");
    }
}

#[test]
fn worker_refuses_an_out_directory_among_the_repositorys_tracked_files() {
    let t = TestRepo::new();
    let (inc, cand) = two_commits(&t, "FAKE_LATENCY_MS=5\n");
    t.write("experiments/01.toml", "message = \"exp\"\n");
    t.write(".gitignore", "trials/\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-qm", "a queued hypothesis"]);
    for (out, says) in [("experiments", "which git tracks"), (".", "which git tracks"), ("experiments/t1", "git does not ignore it")] {
        t.ratchet()
            .args(["worker", "--repo"])
            .arg(t.path())
            .args(["--incumbent", &inc, "--candidate", &cand, "--out", out])
            .assert()
            .code(2)
            .stderr(predicates::str::contains(says));
    }
    assert_eq!(t.git(&["status", "--porcelain"]), "", "nothing written into the work tree");
    // A directory git ignores is fine.
    t.ratchet()
        .args(["worker", "--repo"])
        .arg(t.path())
        .args(["--incumbent", &inc, "--candidate", &cand, "--out", "trials/t1"])
        .assert()
        .success();
}
