//! `ratchet sweep` and the morning review (`results` filters, `show`, `plot`, the HTML report)
//! on throw-away repos with the fake benchmark, which reports latencies without sleeping.

use crate::support;

use predicates::prelude::*;
use support::TestRepo;

/// A hypothesis that sets fake.env (the fake benchmark's behaviour) to `env`.
fn env_hypothesis(t: &TestRepo, name: &str, msg: &str, from: &str, to: &str, tags: &[&str]) {
    let tags = tags.iter().map(|t| format!("{t:?}")).collect::<Vec<_>>().join(", ");
    t.write(
        &format!("experiments/{name}"),
        &format!("message = {msg:?}\ntags = [{tags}]\n[[edit]]\nfile = \"fake.env\"\nfind = {from:?}\nreplace = {to:?}\n"),
    );
}

/// Four hypotheses: faster (kept), slower (reverted), crash, and faster again on top of the first.
fn queue(t: &TestRepo) {
    env_hypothesis(t, "01-faster.toml", "exp: 10 -> 5 ms", "FAKE_LATENCY_MS=10\n", "FAKE_LATENCY_MS=5\n", &["speed"]);
    env_hypothesis(t, "02-slower.toml", "exp: 5 -> 8 ms", "FAKE_LATENCY_MS=5\n", "FAKE_LATENCY_MS=8\n", &["speed", "bad"]);
    env_hypothesis(t, "03-crash.toml", "exp: crash", "FAKE_LATENCY_MS=5\n", "FAKE_LATENCY_MS=5\nFAKE_MODE=crash\n", &[]);
    env_hypothesis(t, "04-faster-again.toml", "exp: 5 -> 2.5 ms", "FAKE_LATENCY_MS=5\n", "FAKE_LATENCY_MS=2.5\n", &["speed"]);
    t.git(&["add", "experiments"]);
    t.git(&["commit", "-qm", "queue hypotheses"]);
}

#[test]
fn sweep_compounds_kept_gains_and_goes_on_past_failures() {
    let t = TestRepo::new();
    queue(&t);
    let base = t.head();
    let out = t.ratchet().arg("sweep").assert().success().get_output().stdout.clone();
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("sweep summary") && out.contains("2 kept, 1 reverted, 1 crash"), "{out}");
    let rows = t.rows();
    let st: Vec<&str> = rows.iter().map(|r| r["status"].as_str()).collect();
    assert_eq!(st, ["keep", "revert", "crash", "keep"]);
    // 04 was measured against 01's kept commit: gains compound.
    assert_eq!(rows[3]["incumbent"], rows[0]["commit"]);
    assert_eq!(
        t.git(&["log", "--format=%s", &format!("{base}..HEAD")]).lines().collect::<Vec<_>>(),
        ["exp: 5 -> 2.5 ms", "exp: 10 -> 5 ms"]
    );
    assert_eq!(t.read("fake.env"), "FAKE_LATENCY_MS=2.5\n");
    assert!(rows[0]["hypothesis"].starts_with("01-faster.toml@"));
    assert_eq!(rows[1]["tags"], "speed;bad");
    assert_eq!(t.git(&["status", "--porcelain"]), "");

    // Run again: everything is done, nothing is recorded twice.
    t.ratchet().arg("sweep").assert().success().stdout(predicate::str::contains("4 already done"));
    assert_eq!(t.rows().len(), 4);

    // The morning review: filters and sorting.
    let ids = |args: &[&str]| -> Vec<String> {
        let mut a = vec!["results", "--format", "csv"];
        a.extend_from_slice(args);
        let out = t.ratchet().args(&a).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let mut rdr = csv::Reader::from_reader(&out.stdout[..]);
        rdr.records().map(|r| r.unwrap()[0].to_string()).collect()
    };
    assert_eq!(ids(&["--kept"]), ["1", "4"]);
    assert_eq!(ids(&["--status", "revert,crash"]), ["2", "3"]);
    assert_eq!(ids(&["--tag", "bad"]), ["2"]);
    assert_eq!(ids(&["--since", "1h"]).len(), 4);
    assert_eq!(ids(&["--since", "2000-01-01T00:00:00Z", "--kept"]), ["1", "4"]);
    assert!(ids(&["--since", "2999-01-01T00:00:00Z"]).is_empty());
    let mut top = ids(&["--sort", "delta"])[..2].to_vec();
    top.sort();
    assert_eq!(top, ["1", "4"], "the two kept gains come first");
    assert_eq!(ids(&["--sort", "delta"])[2], "2", "then the loss; the crash (no delta) last");
    t.ratchet().args(["results", "--status", "bogus"]).assert().code(2).stderr(predicate::str::contains("skipped"));
    t.ratchet().args(["results"]).assert().success().stdout(
        predicate::str::contains("4 experiments, 2 kept")
            .and(predicate::str::contains("kept changes chained: "))
            .and(predicate::str::contains("benchmark runs")),
    );
    t.ratchet()
        .args(["results", "--kept"])
        .assert()
        .success()
        .stdout(predicate::str::contains("showing 2 of 4").and(predicate::str::contains("exp: 5 -> 8 ms").not()));
    let md = t.ratchet().args(["results", "--format", "md"]).output().unwrap();
    let md = String::from_utf8(md.stdout).unwrap();
    assert!(md.starts_with("| id | status | commit | message | tags | value | best | delta_pct |"), "{md}");
    let json = t.ratchet().args(["results", "--format", "json", "--tag", "speed"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 3);
    assert_eq!(v[0]["hypothesis"].as_str().unwrap().split('@').next(), Some("01-faster.toml"));

    // show: a reverted one, with how to get its diff back.
    t.ratchet().args(["show", "2"]).assert().success().stdout(
        predicate::str::contains("experiment 2: exp: 5 -> 8 ms")
            .and(predicate::str::contains("status      revert"))
            .and(predicate::str::contains("fake.env | 2 +-"))
            .and(predicate::str::contains("git show refs/ratchet/discarded/2"))
            .and(predicate::str::contains("CI ["))
            .and(predicate::str::contains("incumbent"))
            .and(predicate::str::contains("candidate  ok")),
    );
    t.ratchet().args(["show", "1"]).assert().success().stdout(predicate::str::contains(format!("git show {}", &rows[0]["commit"][..12])));
    t.ratchet().args(["show", "3"]).assert().success().stdout(predicate::str::contains("exited with code 3"));
    t.ratchet().args(["show", "99"]).assert().code(2).stderr(predicate::str::contains("no experiment 99"));

    // Pictures: PNG and SVG of the charts (staircase, roofline, runs), and a self-contained HTML report.
    t.ratchet().args(["plot", "--html", "report.html"]).assert().success();
    for name in ["staircase", "roofline"] {
        let png = std::fs::read(t.path().join(format!("results/plots/{name}.png"))).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{name}.png is a PNG");
        assert!(png.len() > 10_000, "{name}.png has content");
        let svg = t.read(&format!("results/plots/{name}.svg"));
        assert!(svg.contains("<svg") && svg.trim_end().ends_with("</svg>"), "{name}.svg");
    }
    let html = t.read("report.html");
    // Staircase, roofline, runs, and the latest experiment's test (its looks: the default rule's
    // likelihood ratio).
    assert!(html.starts_with("<!DOCTYPE html>") && html.matches("<svg").count() == 4 && html.contains("exp: 5 -&gt; 2.5 ms"));
    assert!(html.contains("the likelihood ratio&apos;s statistic"));
    for external in ["src=", "<script", "<link", "url("] {
        assert!(!html.contains(external), "the report must be self-contained, found {external}");
    }
    // Its links go to this page's sections or to the workspace's files, relative to the report.
    for link in html.split("href=\"").skip(1).map(|l| &l[..l.find('"').unwrap()]) {
        assert!(link.starts_with('#') || (!link.contains(':') && t.path().join(link).exists()), "{link}");
    }
}

#[test]
fn a_hypothesis_that_no_longer_applies_is_skipped_and_leaves_the_tree_alone() {
    let t = TestRepo::new();
    env_hypothesis(&t, "01-faster.toml", "exp: faster", "FAKE_LATENCY_MS=10\n", "FAKE_LATENCY_MS=5\n", &[]);
    // Written for the old value: after 01 is kept, its find is gone.
    t.write(
        "experiments/02-stale.toml",
        "message = \"exp: stale\"\n[[edit]]\nfile = \"kernel.py\"\nfind = \"BQ = 128\\n\"\nreplace = \"BQ = 64\\n\"\n\
         [[edit]]\nfile = \"fake.env\"\nfind = \"FAKE_LATENCY_MS=10\\n\"\nreplace = \"FAKE_LATENCY_MS=1\\n\"\n",
    );
    t.git(&["add", "experiments"]);
    t.git(&["commit", "-qm", "queue"]);
    t.ratchet().arg("sweep").assert().success().stdout(predicate::str::contains("SKIPPED"));
    let rows = t.rows();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1]["status"], "skipped");
    assert_eq!(rows[1]["runs"], "0");
    assert!(rows[1]["note"].contains("[[edit]] #2") && rows[1]["note"].contains("not found in fake.env"), "{}", rows[1]["note"]);
    // The first edit of 02 did apply on its own, but nothing of it may land.
    assert_eq!(t.read("kernel.py"), "BQ = 128\nBKV = 256\n");
    assert_eq!(t.git(&["status", "--porcelain"]), "");
    t.ratchet().args(["results", "--status", "skipped"]).assert().success().stdout(predicate::str::contains("skipped"));
}

#[test]
fn patch_hypotheses_apply_and_stale_patches_are_skipped() {
    let t = TestRepo::new();
    t.write(
        "experiments/faster.patch",
        "diff --git a/fake.env b/fake.env\n--- a/fake.env\n+++ b/fake.env\n@@ -1 +1 @@\n-FAKE_LATENCY_MS=10\n+FAKE_LATENCY_MS=5\n",
    );
    t.write("experiments/01-patch.toml", "message = \"exp: patched\"\npatch = \"faster.patch\"\npairs = 3\n");
    t.write("experiments/02-same-patch.toml", "message = \"exp: patched again\"\npatch = \"faster.patch\"\n");
    t.git(&["add", "experiments"]);
    t.git(&["commit", "-qm", "queue"]);
    t.ratchet().arg("sweep").assert().success();
    let rows = t.rows();
    assert_eq!(rows[0]["status"], "keep");
    assert!(rows[0]["runs"].parse::<u32>().unwrap() <= 2 * (3 + 4), "pairs = 3 in the file caps the pairs: {}", rows[0]["runs"]);
    assert_eq!(rows[1]["status"], "skipped");
    assert!(rows[1]["note"].contains("patch does not apply"), "{}", rows[1]["note"]);
    assert_eq!(t.git(&["status", "--porcelain"]), "");
}

#[test]
fn malformed_hypothesis_is_named_at_the_start_and_refused_while_the_others_run() {
    let t = TestRepo::new();
    t.write("experiments/00-typo.toml", "message = \"x\"\n[[edit]]\nfile = \"fake.env\"\nfind = \"a\"\nreplce = \"b\"\n");
    env_hypothesis(&t, "01-ok.toml", "exp: ok", "FAKE_LATENCY_MS=10\n", "FAKE_LATENCY_MS=5\n", &[]);
    t.git(&["add", "experiments"]);
    t.git(&["commit", "-qm", "queue"]);
    let out = t.ratchet().arg("sweep").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    // Named before the first experiment starts, with the fix.
    let typo = err.find("00-typo.toml").expect("the malformed file is named");
    assert!(err.contains("replce") && err.contains("experiments/README.md"), "{err}");
    assert!(err.find("exp: ok").is_none_or(|ok| typo < ok), "{err}");
    let rows = t.rows();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0]["status"], "refused");
    assert!(rows[0]["hypothesis"].starts_with("00-typo.toml@") && rows[0]["note"].contains("replce"), "{rows:?}");
    assert_eq!(rows[1]["status"], "keep", "the sweep went on: {rows:?}");
    // A second sweep does not record the same malformed file again.
    t.ratchet().arg("sweep").assert().success();
    assert_eq!(t.rows().len(), 2);
}

#[test]
fn dirty_tree_is_refused() {
    let t = TestRepo::new();
    env_hypothesis(&t, "01-ok.toml", "exp: ok", "FAKE_LATENCY_MS=10\n", "FAKE_LATENCY_MS=5\n", &[]);
    t.git(&["add", "experiments"]);
    t.git(&["commit", "-qm", "queue"]);
    t.write("kernel.py", "BQ = 1\n");
    t.ratchet().arg("sweep").assert().code(4).stderr(predicate::str::contains("kernel.py").and(predicate::str::contains("stash")));
    assert_eq!(t.read("kernel.py"), "BQ = 1\n");
}

#[test]
fn an_edit_made_while_a_sweep_measures_is_saved_and_never_committed_under_a_hypothesis() {
    let t = TestRepo::new();
    t.write("notes.md", "mine\n");
    env_hypothesis(&t, "01-slower.toml", "exp: slower", "FAKE_LATENCY_MS=10\n", "FAKE_LATENCY_MS=12\nFAKE_SLEEP_S=0.2\n", &[]);
    env_hypothesis(&t, "02-faster.toml", "exp: faster", "FAKE_LATENCY_MS=10\n", "FAKE_LATENCY_MS=5\n", &[]);
    t.git(&["add", "-A"]);
    t.git(&["commit", "-qm", "queue"]);
    let mut sweep = t.spawn(&["sweep"], &[]);
    support::wait_for(&t.path().join(".ratchet/experiments/1/runs"));
    // The person edits a tracked file while the first hypothesis is measured.
    t.write("notes.md", "mine, edited meanwhile\n");
    assert!(sweep.wait().unwrap().success());
    let rows = t.rows();
    assert_eq!(rows.iter().map(|r| r["status"].as_str()).collect::<Vec<_>>(), ["revert", "keep"], "{rows:?}");
    // The revert saved the edit with the parked hypothesis, where `git show` finds it.
    assert_eq!(t.git(&["show", "refs/ratchet/discarded/1:notes.md"]).trim(), "mine, edited meanwhile");
    // No hypothesis commit carries it: the kept one changes fake.env alone.
    assert_eq!(t.git(&["show", "--format=", "--name-only", "HEAD"]).trim(), "fake.env");
    assert_eq!(t.read("notes.md"), "mine\n");
    assert_eq!(t.git(&["status", "--porcelain"]), "");
}

#[test]
fn run_budget_stops_between_experiments_and_a_rerun_resumes() {
    let t = TestRepo::new();
    queue(&t);
    // An experiment may take up to (max_pairs 8 + confirm_pairs 4) x 2 = 24 runs, and twice that
    // with the rescue; the sweep only starts one that fits in what is left of the budget, so
    // 60 runs allow one or two.
    t.ratchet().args(["sweep", "--max-runs", "60"]).assert().success().stdout(predicate::str::contains("run budget"));
    let first = t.rows();
    assert!((1..4).contains(&first.len()), "{} experiments", first.len());
    let spent: u32 = first.iter().map(|r| r["runs"].parse::<u32>().unwrap()).sum();
    assert!(spent <= 60, "the budget is never exceeded: {spent} runs");
    t.ratchet().args(["sweep", "--max-wall", "1h"]).assert().success();
    let rows = t.rows();
    let keys: std::collections::HashSet<&str> = rows.iter().map(|r| r["hypothesis"].as_str()).collect();
    assert_eq!(rows.len(), 4);
    assert_eq!(keys.len(), 4, "no hypothesis recorded twice");
    assert_eq!(rows.iter().map(|r| r["id"].as_str()).collect::<Vec<_>>(), ["1", "2", "3", "4"]);
    t.ratchet().args(["sweep", "--max-wall", "soon"]).assert().code(2).stderr(predicate::str::contains("8h"));
}

#[test]
fn sweep_killed_mid_experiment_resumes_without_duplicates() {
    let t = TestRepo::new();
    queue(&t);
    // Slow runs so the kill lands inside an experiment.
    let bin = assert_cmd::cargo::cargo_bin("ratchet");
    let mut child = std::process::Command::new(bin)
        .arg("sweep")
        .current_dir(t.path())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("FAKE_SLEEP_S", "0.15")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait for the second experiment's third run, then SIGKILL: no cleanup code runs.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let n = t.runs().iter().filter(|r| r["experiment"] == "2").count();
        if n >= 3 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the sweep never reached experiment 2");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    unsafe {
        libc::kill(child.id() as i32, libc::SIGKILL);
    }
    child.wait().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(400)); // the orphaned benchmark run ends
    assert_eq!(t.rows().len(), 1);
    assert_ne!(t.git(&["log", "-1", "--format=%s"]).trim(), "exp: 10 -> 5 ms", "killed with 02 committed");

    // The journal rolls the killed experiment back and records it as interrupted; the sweep then
    // runs that hypothesis again, and the rest.
    t.ratchet().arg("sweep").assert().success().stderr(predicate::str::contains("experiment 2 (interrupted) rolled back"));
    let rows = t.rows();
    assert_eq!(rows.iter().map(|r| r["status"].as_str()).collect::<Vec<_>>(), ["keep", "interrupted", "revert", "crash", "keep"]);
    assert_eq!(rows[1]["hypothesis"], rows[2]["hypothesis"], "the interrupted hypothesis ran again");
    let finished: Vec<&str> = rows.iter().filter(|r| r["status"] != "interrupted").map(|r| r["hypothesis"].as_str()).collect();
    let unique: std::collections::HashSet<&&str> = finished.iter().collect();
    assert_eq!(unique.len(), finished.len(), "no hypothesis finished twice");
    let runs = t.runs();
    for (i, id) in ["1", "3", "5"].iter().enumerate() {
        let n = runs.iter().filter(|r| r["experiment"] == *id).count();
        let row = rows.iter().find(|r| r["id"] == *id).unwrap();
        assert_eq!(row["runs"], n.to_string(), "experiment {id} ({i}): its runs recorded once");
    }
    let killed = runs.iter().filter(|r| r["experiment"] == "2").count();
    assert_eq!(rows[1]["runs"], killed.to_string(), "the interrupted row counts the runs it made");
    assert_eq!(t.git(&["status", "--porcelain"]), "");
    assert!(t.git(&["show", "--stat", "refs/ratchet/discarded/2"]).contains("exp: 5 -> 8 ms"));
}

#[test]
fn sweep_killed_before_the_commit_undoes_the_edit() {
    let t = TestRepo::new();
    queue(&t);
    // What a kill between applying the edit and committing it leaves behind.
    let head = t.head();
    t.write("fake.env", "FAKE_LATENCY_MS=5\n");
    let file = "experiments/01-faster.toml";
    let hash = ratchet::sweep::hypothesis::Hypothesis::load(&t.path().join(file)).unwrap().key();
    let before = t.git(&["rev-parse", "HEAD:fake.env"]);
    let after = t.git(&["hash-object", "fake.env"]);
    t.write(
        ".ratchet/sweep.json",
        &format!(
            r#"{{"in_flight":{{"hypothesis":"{hash}","message":"exp: 10 -> 5 ms","branch":"main","incumbent":"{head}","id":1,"files":["fake.env"],
               "changes":[{{"path":"fake.env","before":"{}","after":"{}","mode":33188,"mode_before":33188}}]}}}}"#,
            before.trim(),
            after.trim()
        ),
    );
    // One experiment's worth of runs: (8 + 4) pairs at most, twice that with the rescue.
    t.ratchet().args(["sweep", "--max-runs", "48"]).assert().success().stderr(predicate::str::contains("undid"));
    let rows = t.rows();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["status"], "keep");
}
