//! Shared pieces of the integration tests: a throw-away git repo with a fake benchmark, and a
//! way to run the built `ratchet` binary in it with an empty git configuration.

#![allow(dead_code)]

pub mod demo;
pub mod hooks;
pub mod measure;
pub mod queue;
pub mod slurm;
pub mod xspace;

use assert_cmd::Command;
use std::path::{Path, PathBuf};

/// A capture under ../shared/fixtures: public captures, read where they are, never copied here.
pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures").join(rel)
}

/// A fixture of the project's own, under tests/fixtures.
pub fn own_fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(rel)
}

/// Returns early (skipping the test, with a visible note) when the shared fixtures are absent,
/// as in a clone of the project alone.
#[macro_export]
macro_rules! need_fixtures {
    () => {
        if !$crate::support::fixture("").is_dir() {
            eprintln!("SKIPPED: ../shared/fixtures is absent (a clone of the project alone); this test needs it");
            return;
        }
    };
}

/// Wait until `done()` holds: for what the kernel or another process does in its own time.
/// The hang guard only stops a test that would never end, so no test races the clock.
pub fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let guard = std::time::Instant::now() + HANG_GUARD;
    while !done() {
        if std::time::Instant::now() > guard {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    true
}

/// Wait until `path` exists (the hang guard only stops a test that would never end).
pub fn wait_for(path: &Path) {
    let deadline = std::time::Instant::now() + HANG_GUARD;
    while !path.exists() {
        assert!(std::time::Instant::now() < deadline, "{} never appeared", path.display());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Git reads the user's global configuration (hooks, signing): for in-process tests, point HOME
/// at an empty directory once for the whole test binary, before any repository is opened.
pub fn isolate_git() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let home = tempfile::tempdir().unwrap().keep();
        std::env::set_var("HOME", home);
        std::env::set_var("GIT_CONFIG_NOSYSTEM", "1");
        std::env::set_var("XDG_CONFIG_HOME", "/nonexistent");
    });
}

/// `git ARGS` in `dir` with no system configuration; its output, trimmed.
pub fn git_in(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git").args(args).current_dir(dir).env("GIT_CONFIG_NOSYSTEM", "1").output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A throw-away repository for in-process tests: git isolated, `files` (path, text) written and
/// committed as the baseline on `main`.
pub fn committed_repo(files: &[(&str, &str)]) -> tempfile::TempDir {
    isolate_git();
    let dir = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| git_in(dir.path(), args);
    git(&["init", "-q", "-b", "main"]);
    git(&["config", "user.name", "Test"]);
    git(&["config", "user.email", "test@example.com"]);
    for (rel, text) in files {
        let p = dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    git(&["add", "-A"]);
    git(&["commit", "-qm", "baseline"]);
    dir
}

/// The live processes among `pids` (a zombie has ended).
pub fn alive_pids(pids: &[i32]) -> Vec<i32> {
    pids.iter()
        .copied()
        .filter(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            !stat.is_empty() && !stat.contains(") Z")
        })
        .collect()
}

/// The command lines of the live processes whose command line holds `text`.
pub fn processes_naming(text: &str) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir("/proc") else { return vec![] };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| alive_pids(&[pid]) == [pid])
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/cmdline")).ok())
        .map(|c| c.replace('\0', " "))
        .filter(|c| c.contains(text))
        .collect()
}

/// An executable script at `path` (a fake worker or launcher for the engine tests).
pub fn write_script(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A trial `id` whose run directory is `dir/runs/<id>`, for the engine tests (its commits are
/// never checked out: the engines only start the worker they are given).
pub fn trial_spec(dir: &Path, id: &str) -> ratchet::scale::engine::TrialSpec {
    ratchet::scale::engine::TrialSpec {
        id: id.into(),
        repo: dir.join("repo"),
        incumbent: "a".repeat(40),
        candidate: "b".repeat(40),
        out_dir: dir.join("runs").join(id),
    }
}

/// Poll `jobs` until none is queued or running (within `limit`, else the test fails with the
/// states): each job's last state and every state it was seen in, in order, for the engine
/// tests.
pub fn poll_until_done(
    e: &mut dyn ratchet::scale::engine::Engine,
    jobs: &[ratchet::scale::engine::JobHandle],
    limit: std::time::Duration,
) -> Vec<(ratchet::scale::engine::JobState, Vec<ratchet::scale::engine::JobState>)> {
    use ratchet::scale::engine::JobState;
    let deadline = std::time::Instant::now() + limit;
    let mut seen: Vec<Vec<JobState>> = vec![vec![]; jobs.len()];
    loop {
        let states: Vec<JobState> = jobs.iter().map(|j| e.poll(j).unwrap()).collect();
        for (s, all) in states.iter().zip(seen.iter_mut()) {
            if all.last() != Some(s) {
                all.push(s.clone());
            }
        }
        if states.iter().all(|s| !matches!(s, JobState::Queued | JobState::Running)) {
            return states.into_iter().zip(seen).collect();
        }
        assert!(std::time::Instant::now() < deadline, "still not done after {limit:?}: {states:?}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// [`poll_until_done`]'s last states alone.
pub fn final_states(
    e: &mut dyn ratchet::scale::engine::Engine,
    jobs: &[ratchet::scale::engine::JobHandle],
    limit: std::time::Duration,
) -> Vec<ratchet::scale::engine::JobState> {
    poll_until_done(e, jobs, limit).into_iter().map(|(s, _)| s).collect()
}

/// Ask after a stop until it fails, and return its error (a stop that ends well is a panic).
pub fn stop_error(e: &mut dyn ratchet::scale::engine::Engine, job: &ratchet::scale::engine::JobHandle) -> ratchet::error::Error {
    let mut failed = None;
    eventually(|| match e.stopped(job) {
        Ok(done) => done,
        Err(err) => {
            failed = Some(err);
            true
        }
    });
    failed.expect("a stop that should fail read as ended")
}

/// Poll until the job reads as more than queued, or the poll fails: an engine whose commands
/// run on threads of their own answers `Queued` until they have answered (bounded by `limit`).
pub fn settled(
    e: &mut dyn ratchet::scale::engine::Engine,
    job: &ratchet::scale::engine::JobHandle,
    limit: std::time::Duration,
) -> ratchet::error::Result<ratchet::scale::engine::JobState> {
    let since = std::time::Instant::now();
    loop {
        match e.poll(job) {
            Ok(ratchet::scale::engine::JobState::Queued) if since.elapsed() < limit => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            other => return other,
        }
    }
}

pub fn fake_bench() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/fake_bench.py")
}

pub struct TestRepo {
    pub dir: tempfile::TempDir,
    home: tempfile::TempDir,
}

pub const DEFAULT_CONFIG: &str = "[benchmark]\ncommand = \"python3 {bench}\"\ntimeout_s = 20\nkill_grace_s = 0.5\n\
warmup = 0\niters = 5\nprofile_iters = 0\n[hardware]\npreset = \"tpu-v5e\"\n[decision]\nmin_pairs = 4\nmax_pairs = 8\nconfirm_pairs = 4\n";

/// `config` deciding by the earlier rule (`method = "auto"`), for the cases that count its looks,
/// its confirmation or its rescue.
pub fn earlier_rule(config: &str) -> String {
    assert!(config.contains("[decision]\n"), "a config with a [decision] table: {config}");
    config.replacen("[decision]\n", "[decision]\nmethod = \"auto\"\n", 1)
}

/// `text` with each run of whitespace as one space: what it says, however the terminal face
/// wrapped its lines to fit the width.
pub fn flat(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A predicate on output that says `words`, wherever the terminal face broke its lines.
pub fn says(words: impl Into<String>) -> impl predicates::Predicate<str> {
    let words = flat(&words.into());
    predicates::function::function(move |s: &str| flat(s).contains(&words))
}

/// The middle value, or the mean of the two middle ones: the tests' own median, to recompute
/// what ratchet prints without its code.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// How long a test lets one ratchet command run before calling it hung.
pub const HANG_GUARD: std::time::Duration = std::time::Duration::from_secs(900);

impl TestRepo {
    /// A repo on branch `main` with a committed ratchet.toml, kernel.py and fake.env.
    pub fn new() -> TestRepo {
        Self::with_config(DEFAULT_CONFIG)
    }

    /// An empty repo on branch `main` with an identity, no commits.
    pub fn empty() -> TestRepo {
        let t = TestRepo { dir: tempfile::tempdir().unwrap(), home: tempfile::tempdir().unwrap() };
        t.git(&["init", "-q", "-b", "main"]);
        t.git(&["config", "user.name", "Test"]);
        t.git(&["config", "user.email", "test@example.com"]);
        t
    }

    pub fn with_config(config: &str) -> TestRepo {
        let t = Self::empty();
        t.write("ratchet.toml", &config.replace("{bench}", &fake_bench().display().to_string()));
        t.write("kernel.py", "BQ = 128\nBKV = 256\n");
        t.write("fake.env", "FAKE_LATENCY_MS=10\n");
        t.git(&["add", "-A"]);
        t.git(&["commit", "-q", "-m", "baseline"]);
        t
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn write(&self, rel: &str, text: &str) {
        let p = self.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path().join(rel)).unwrap()
    }

    /// Run git in the repo and return its stdout; panics on failure.
    pub fn git(&self, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(self.path())
            .env("HOME", self.home.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    pub fn head(&self) -> String {
        self.git(&["rev-parse", "HEAD"]).trim().to_string()
    }

    /// The built binary, run in the repo with a clean environment for git.
    pub fn ratchet(&self) -> Command {
        let mut c = Command::cargo_bin("ratchet").unwrap();
        c.current_dir(self.path())
            .env("HOME", self.home.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env_remove("FAKE_MODE")
            .env_remove("FAKE_LATENCY_MS")
            .env_remove("COLUMNS")
            .env_remove("FAKE_HLO")
            // A guard against a hang, not a speed limit: on a loaded machine a debug-built
            // `simulate` alone took more than 120 s.
            .timeout(HANG_GUARD);
        c
    }

    /// Start `ratchet MESSAGE` in the background (for tests that signal or race it).
    pub fn spawn_ratchet(&self, message: &str) -> std::process::Child {
        self.spawn(&[message], &[])
    }

    /// Start `ratchet ARGS` in the background with `env` on top of a clean git environment, its
    /// output dropped.
    pub fn spawn(&self, args: &[&str], env: &[(&str, &str)]) -> std::process::Child {
        std::process::Command::new(assert_cmd::cargo::cargo_bin("ratchet"))
            .args(args)
            .current_dir(self.path())
            .env("HOME", self.home.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env_remove("FAKE_MODE")
            .env_remove("FAKE_LATENCY_MS")
            .envs(env.iter().copied())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    }

    /// Pids of the parallel-sweep workers that recorded a worker.pid and still run (the same
    /// start time, not a zombie).
    pub fn live_workers(&self) -> Vec<i32> {
        let mut live = vec![];
        let Ok(dirs) = std::fs::read_dir(self.path().join(".ratchet/trials")) else { return live };
        for d in dirs.flatten() {
            let Ok(text) = std::fs::read_to_string(d.path().join("worker.pid")) else { continue };
            let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else { continue };
            let pid = v["pid"].as_i64().unwrap() as i32;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let Some((_, rest)) = stat.rsplit_once(')') else { continue };
            let f: Vec<&str> = rest.split_whitespace().collect();
            if f.len() > 19 && f[0] != "Z" && f[19].parse::<u64>().ok() == v["start"].as_u64() {
                live.push(pid);
            }
        }
        live
    }

    /// Processes still running in the repository's tree (a worker, its benchmark, a checkout's
    /// shell), as `pid: command line`: none may outlive a sweep.
    pub fn processes_in_tree(&self) -> Vec<String> {
        let root = self.path().canonicalize().unwrap();
        let Ok(rd) = std::fs::read_dir("/proc") else { return vec![] };
        rd.flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|&pid| alive_pids(&[pid]) == [pid])
            .filter(|pid| std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd.starts_with(&root)))
            .map(|pid| format!("{pid}: {}", std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default().replace('\0', " ")))
            .collect()
    }

    /// Wait (up to `secs`) until `n` workers are measuring.
    pub fn wait_for_workers(&self, n: usize, secs: u64) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        while self.live_workers().len() < n {
            assert!(std::time::Instant::now() < deadline, "the workers never started");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// The kept rows are exactly the commits on the branch since `base`, in order, each decided
    /// against the head it merged onto.
    pub fn check_kept_chain(&self, base: &str) {
        let rows = self.rows();
        let kept: Vec<&str> = rows.iter().filter(|r| r["status"] == "keep").map(|r| r["commit"].as_str()).collect();
        let log = self.git(&["log", "--format=%H", "--reverse", &format!("{base}..HEAD")]);
        assert_eq!(log.lines().collect::<Vec<_>>(), kept, "{rows:?}");
        let mut head = base.to_string();
        for r in rows.iter().filter(|r| r["status"] == "keep") {
            assert_eq!(r["incumbent"], head, "{rows:?}");
            head = r["commit"].clone();
        }
    }

    /// Make the candidate's benchmark hang after starting a grandchild whose pid it writes to
    /// `child.pid` (ignored by git); returns that file's path.
    pub fn hanging_candidate(&self) -> PathBuf {
        let pid_file = self.path().join("child.pid");
        self.write(".gitignore", "child.pid\n");
        self.git(&["add", ".gitignore"]);
        self.git(&["commit", "-qm", "ignore the pid file"]);
        self.write("fake.env", &format!("FAKE_MODE=hang\nFAKE_SPAWN_CHILD=1\nFAKE_PID_FILE={}\n", pid_file.display()));
        pid_file
    }

    /// results/results.csv as (header -> value) maps.
    pub fn rows(&self) -> Vec<std::collections::HashMap<String, String>> {
        let p = self.path().join("results/results.csv");
        if !p.exists() {
            return vec![];
        }
        let mut rdr = csv::Reader::from_path(p).unwrap();
        let headers = rdr.headers().unwrap().clone();
        rdr.records().map(|r| headers.iter().zip(r.unwrap().iter()).map(|(h, v)| (h.to_string(), v.to_string())).collect()).collect()
    }

    /// The runs in results/runs.jsonl, as the store reads them: a last line without its newline
    /// (being written while a test polls, or torn by a kill) is not a line yet.
    pub fn runs(&self) -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(self.path().join("results/runs.jsonl")).unwrap_or_default();
        let whole = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
        whole.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }
}

/// Copy an example directory (the real kernel's files) into a test repo, without Python caches,
/// ratchet's state or profiler output.
pub fn copy_example(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == "__pycache__" || name == ".ratchet" || name == "profile_data" {
            continue;
        }
        let (src, dst) = (entry.path(), to.join(&name));
        if entry.file_type().unwrap().is_dir() {
            copy_example(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// The pid a benchmark wrote into `p`, once the file has one (up to 30 s for the file, 10 s more
/// for its content).
pub fn read_pid(p: &Path) -> i32 {
    wait_for(p);
    let deadline = std::time::Instant::now() + HANG_GUARD;
    loop {
        if let Ok(pid) = std::fs::read_to_string(p).unwrap_or_default().trim().parse() {
            return pid;
        }
        assert!(std::time::Instant::now() < deadline, "{} stays empty", p.display());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
