//! A three-hypothesis sweep queue on the fake benchmark (a gain 10 -> 5 ms, a do-nothing and a
//! loss to 20 ms), shared by the parallel-sweep tests.

use super::TestRepo;

/// fake.env lines are read in order and a later key wins: each hypothesis replaces its marker.
pub const ENV: &str = "FAKE_LATENCY_MS=10\n#a\n#b\n#c\n";
pub const QUEUE: [&str; 3] = ["01-faster.toml", "02-same.toml", "03-slower.toml"];

/// A sweep hypothesis `name` that replaces `from` with `to` in fake.env.
pub fn hypothesis(t: &TestRepo, name: &str, msg: &str, from: &str, to: &str) {
    t.write(
        &format!("experiments/{name}"),
        &format!("message = {msg:?}\n[[edit]]\nfile = \"fake.env\"\nfind = {from:?}\nreplace = {to:?}\n"),
    );
}

/// A repo whose ratchet.toml ends with `extra` (an `[engine]` table, say), with the queue
/// committed.
pub fn repo(extra: &str) -> TestRepo {
    let t = TestRepo::with_config(&format!("{}{extra}", super::DEFAULT_CONFIG));
    t.write("fake.env", ENV);
    hypothesis(&t, QUEUE[0], "exp: 10 -> 5 ms", "#a\n", "FAKE_LATENCY_MS=5\n");
    hypothesis(&t, QUEUE[1], "exp: 10 -> 10 ms", "#b\n", "FAKE_LATENCY_MS=10\n");
    hypothesis(&t, QUEUE[2], "exp: -> 20 ms", "#c\n", "FAKE_LATENCY_MS=20\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-qm", "queue"]);
    t
}

/// The hypothesis files of the recorded rows, sorted.
pub fn names(t: &TestRepo) -> Vec<String> {
    let mut v: Vec<String> = t.rows().iter().map(|r| r["hypothesis"].split('@').next().unwrap().to_string()).collect();
    v.sort();
    v
}

/// Each hypothesis recorded once; the gain is the only keep, the trunk is the base plus it,
/// decided against the head it merged onto; each row's runs are in runs.jsonl; nothing left in
/// the tree or under refs/ratchet/trials.
pub fn check_trunk(t: &TestRepo, base: &str) {
    let rows = t.rows();
    assert_eq!(names(t), QUEUE, "{rows:?}");
    let by = |n: &str| rows.iter().find(|r| r["hypothesis"].starts_with(n)).unwrap().clone();
    assert_eq!(by("01")["status"], "keep", "{rows:?}");
    assert_ne!(by("02")["status"], "keep", "{rows:?}");
    assert_ne!(by("03")["status"], "keep", "{rows:?}");
    t.check_kept_chain(base);
    assert_eq!(t.read("fake.env"), "FAKE_LATENCY_MS=10\nFAKE_LATENCY_MS=5\n#b\n#c\n");
    assert_eq!(t.git(&["status", "--porcelain"]), "");
    assert_eq!(t.git(&["for-each-ref", "refs/ratchet/trials/"]), "", "trial refs are cleaned up");
    let runs = t.runs();
    for r in &rows {
        let n = runs.iter().filter(|x| x["experiment"] == r["id"].as_str()).count();
        assert_eq!(n.to_string(), r["runs"], "{r:?}");
    }
}

/// The trials' results (trial.json) under .ratchet/trials.
pub fn trial_results(t: &TestRepo) -> Vec<serde_json::Value> {
    let Ok(dirs) = std::fs::read_dir(t.path().join(".ratchet/trials")) else { return vec![] };
    dirs.flatten()
        .filter_map(|d| std::fs::read_to_string(d.path().join("trial.json")).ok())
        .map(|s| serde_json::from_str(&s).unwrap())
        .collect()
}

/// Every trial measured on one GPU its engine bound (CUDA_VISIBLE_DEVICES), on no local slot.
pub fn assert_one_gpu_each(results: &[serde_json::Value]) {
    for r in results {
        let cvd = r["device_env"]["CUDA_VISIBLE_DEVICES"].as_str().unwrap_or_else(|| panic!("no CUDA_VISIBLE_DEVICES: {r}"));
        assert!(!cvd.is_empty() && !cvd.contains(','), "one GPU per trial: {r}");
        assert!(r["slot"].is_null(), "{r}");
    }
}
