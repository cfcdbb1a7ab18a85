//! Fault injection: SIGKILL ratchet at every step boundary of an experiment (and in the middle
//! of a benchmark), start it again, and check that nothing was lost: the repo is on a
//! consistent incumbent, the hypothesis is preserved (kept, parked under the discarded ref, or
//! still in the working tree), results.csv is valid with no torn or duplicate row, and no
//! benchmark process is left running.

use crate::support;

use std::time::Duration;
use support::TestRepo;

/// The fault points an experiment passes before its hypothesis is committed.
const BEFORE_COMMIT: [&str; 2] = ["mid-worktree", "before-commit"];

/// What the repo must look like after a kill at some point and a recovery.
fn check_consistent(t: &TestRepo, base: &str, change: &str, point: &str) {
    let rows = t.rows();
    let mut ids: Vec<&str> = rows.iter().map(|r| r["id"].as_str()).collect();
    ids.dedup();
    assert_eq!(ids.len(), rows.len(), "{point}: duplicate rows {rows:?}");
    let head = t.head();
    match rows.iter().find(|r| r["id"] == "1") {
        None => {
            // Killed before the hypothesis was committed (the incumbent checkout is made before
            // it): it is still in the working tree.
            assert!(BEFORE_COMMIT.contains(&point), "{point}: no row recorded");
            assert_eq!(head, base);
            assert_eq!(t.read("fake.env"), change, "{point}: the change stays in the working tree");
        }
        Some(r) if r["status"] == "keep" => {
            assert_eq!(head, r["commit"], "{point}: a kept hypothesis is the incumbent");
            assert_eq!(t.read("fake.env"), change);
            assert_eq!(t.git(&["status", "--porcelain"]), "", "{point}");
        }
        Some(r) => {
            assert_eq!(head, base, "{point}: a {} hypothesis is rolled back", r["status"]);
            assert_eq!(t.git(&["status", "--porcelain"]), "", "{point}");
            let parked = t.git(&["show", "refs/ratchet/discarded/1:fake.env"]);
            assert_eq!(parked, change, "{point}: the hypothesis is kept under the discarded ref");
            assert_eq!(r["commit"], t.git(&["rev-parse", "refs/ratchet/discarded/1"]).trim(), "{point}");
        }
    }
    assert!(!t.path().join(".ratchet/journal.json").exists(), "{point}: the journal is cleared");
    assert_eq!(t.git(&["branch", "--list", "ratchet-*"]), "", "{point}: no scratch branch is left behind");
    assert_eq!(t.git(&["diff", "--cached", "--name-only"]), "", "{point}: nothing is left staged");
    let tmp: Vec<_> = std::fs::read_dir(t.path().join("results"))
        .map(|d| d.flatten().filter(|e| e.file_name().to_string_lossy().contains(".tmp.")).collect())
        .unwrap_or_default();
    assert!(tmp.is_empty() || point == "mid-append", "{point}: stray temporary files {tmp:?}");
}

fn run_killed_at(point: &str, faster: bool) {
    let t = TestRepo::with_config(&support::DEFAULT_CONFIG.replace("pairs = 4", "pairs = 2"));
    let base = t.head();
    let change = if faster { "FAKE_LATENCY_MS=5\n" } else { "FAKE_LATENCY_MS=20\n" };
    t.write("fake.env", change);
    let out = t.ratchet().arg("experiment: killed").env("RATCHET_FAULT", point).output().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(9), "{point}: ratchet should have died at the fault point");
    // Starting again (`ratchet recover`, or the next experiment) recovers; status only reports.
    let st = t.ratchet().arg("recover").output().unwrap();
    assert!(st.status.success(), "{point}: {}", String::from_utf8_lossy(&st.stderr));
    check_consistent(&t, &base, change, point);
    // And the loop goes on: the next experiment gets the next id (a killed experiment's id is
    // never reused, even when it committed nothing).
    if BEFORE_COMMIT.contains(&point) {
        t.write("fake.env", "FAKE_LATENCY_MS=5\n# again\n");
    } else {
        t.write("kernel.py", "BQ = 64\n");
    }
    t.ratchet().arg("experiment: next").assert().success();
    let rows = t.rows();
    // An id is taken after the set-up's checks (the incumbent checkout among them), and a killed
    // experiment's id is never reused even when it committed nothing.
    let expected: Vec<String> = match point {
        "mid-worktree" => vec!["1".into()],
        "before-commit" => vec!["2".into()],
        _ => vec!["1".into(), "2".into()],
    };
    assert_eq!(rows.iter().map(|r| r["id"].clone()).collect::<Vec<_>>(), expected, "{point}");
}

#[test]
fn kill_at_every_step_boundary_then_recover() {
    let mut covered = 0;
    for point in ratchet::fault::POINTS {
        for faster in [true, false] {
            if ratchet::fault::REVERT_ONLY.contains(point) && faster {
                continue; // a keep never reverts
            }
            run_killed_at(point, faster);
            covered += 1;
        }
    }
    eprintln!("fault injection: {} step boundaries, {covered} kill scenarios recovered", ratchet::fault::POINTS.len());
    assert_eq!(covered, 2 * ratchet::fault::POINTS.len() - ratchet::fault::REVERT_ONLY.len());
}

#[test]
fn kill_mid_benchmark_takes_the_benchmark_along_and_recover_restores_the_tree() {
    let t = TestRepo::new();
    let base = t.head();
    let pid_file = t.hanging_candidate();
    let base2 = t.head();
    assert_ne!(base, base2);
    let change = t.read("fake.env");
    let mut child = t.spawn_ratchet("experiment: killed mid-benchmark");
    support::wait_for(&pid_file);
    std::thread::sleep(Duration::from_millis(100));
    child.kill().unwrap(); // SIGKILL: no handler runs
    child.wait().unwrap();
    let grandchild: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    // The run's supervisor sees its parent die and stops the run at once, before any recovery.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while ratchet::bench::executor::alive(grandchild) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!ratchet::bench::executor::alive(grandchild), "the benchmark outlived a SIGKILLed ratchet");
    t.ratchet().arg("recover").assert().success();
    check_consistent(&t, &base2, &change, "mid-benchmark");
    assert_eq!(t.rows()[0]["status"], "interrupted");
}

/// `ratchet ARGS` with writes capped at `max_bytes` a file (RLIMIT_FSIZE): the first write past
/// the cap kills it with SIGXFSZ, in the middle of writing that file, as a power cut would.
fn ratchet_killed_mid_write(t: &TestRepo, args: &[&str], max_bytes: u64) -> std::process::Output {
    use std::os::unix::process::CommandExt;
    let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("ratchet"));
    c.args(args).current_dir(t.path()).env("GIT_CONFIG_NOSYSTEM", "1").env_remove("FAKE_MODE").env_remove("FAKE_LATENCY_MS");
    // SAFETY: setrlimit is async-signal-safe; it runs in the child between fork and exec.
    unsafe {
        c.pre_exec(move || {
            let lim = libc::rlimit { rlim_cur: max_bytes, rlim_max: max_bytes };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    c.output().unwrap()
}

/// A repo whose incumbent checkout exists (one experiment done) and whose next hypothesis
/// rewrites a 3 MB tracked file; its rollback must write that file back.
fn repo_with_a_large_file_to_roll_back() -> (TestRepo, String) {
    let t = TestRepo::with_config(&support::DEFAULT_CONFIG.replace("pairs = 4", "pairs = 2"));
    t.write("data.bin", &"a".repeat(3 << 20));
    t.git(&["add", "data.bin"]);
    t.git(&["commit", "-q", "-m", "a large tracked file"]);
    t.write("fake.env", "FAKE_LATENCY_MS=20\n");
    t.ratchet().arg("experiment: slower, to make the incumbent checkout").assert().success();
    let base = t.head();
    t.write("data.bin", &"b".repeat(3 << 20));
    t.write("fake.env", "FAKE_LATENCY_MS=20\n");
    (t, base)
}

fn assert_rolled_back_whole(t: &TestRepo, base: &str, what: &str) {
    assert_eq!(t.head(), base, "{what}");
    let data = std::fs::read(t.path().join("data.bin")).unwrap();
    assert!(data.len() == 3 << 20 && data.iter().all(|&b| b == b'a'), "{what}: data.bin is torn ({} bytes)", data.len());
    assert_eq!(t.git(&["status", "--porcelain"]), "", "{what}: the tree is clean, nothing taken for a user's edit");
    let parked = t.git(&["show", "refs/ratchet/discarded/2:data.bin"]);
    assert!(parked.len() == 3 << 20 && parked.bytes().all(|b| b == b'b'), "{what}: the hypothesis is parked whole");
    let left: Vec<_> = std::fs::read_dir(t.path().join(".ratchet")).unwrap().flatten().map(|e| e.file_name()).collect();
    assert!(!left.iter().any(|n| n.to_string_lossy().starts_with("checkout.tmp.")), "{what}: scratch left: {left:?}");
}

#[test]
fn a_kill_in_the_middle_of_writing_a_rolled_back_file_leaves_it_whole() {
    let (t, base) = repo_with_a_large_file_to_roll_back();
    let out = ratchet_killed_mid_write(&t, &["experiment: slower, killed mid-rollback"], 1 << 20);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGXFSZ), "ratchet should have died writing data.bin back");
    let data = std::fs::read(t.path().join("data.bin")).unwrap();
    assert!(data.iter().all(|&b| b == b'b') || data.iter().all(|&b| b == b'a'), "a file is never half old, half new");
    assert_eq!(data.len(), 3 << 20, "a file is never cut short by a kill mid-rollback");
    let rec = t.ratchet().arg("recover").output().unwrap();
    assert!(rec.status.success(), "{}", String::from_utf8_lossy(&rec.stderr));
    assert!(!String::from_utf8_lossy(&rec.stdout).contains("edited since"), "{}", String::from_utf8_lossy(&rec.stdout));
    assert_rolled_back_whole(&t, &base, "after a kill mid-rollback");
    t.write("fake.env", "FAKE_LATENCY_MS=20\n# the next one\n");
    t.ratchet().arg("experiment: the loop goes on").assert().success();
}

#[test]
fn a_recovery_killed_in_the_middle_of_its_rollback_is_finished_by_the_next() {
    let (t, base) = repo_with_a_large_file_to_roll_back();
    let out = t.ratchet().arg("experiment: slower, killed before its rollback").env("RATCHET_FAULT", "mid-revert").output().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(9));
    let rec = ratchet_killed_mid_write(&t, &["recover"], 1 << 20);
    assert_eq!(rec.status.signal(), Some(libc::SIGXFSZ), "recover should have died writing data.bin back");
    assert_eq!(std::fs::read(t.path().join("data.bin")).unwrap().len(), 3 << 20, "never cut short");
    let rec = t.ratchet().arg("recover").output().unwrap();
    assert!(rec.status.success(), "{}", String::from_utf8_lossy(&rec.stderr));
    assert!(!String::from_utf8_lossy(&rec.stdout).contains("edited since"), "{}", String::from_utf8_lossy(&rec.stdout));
    assert_rolled_back_whole(&t, &base, "after a recovery killed mid-rollback");
}

#[test]
fn a_crlf_file_of_an_autocrlf_repo_comes_back_byte_for_byte_after_a_killed_sweep() {
    let t = TestRepo::new();
    t.git(&["config", "core.autocrlf", "true"]);
    let crlf = "A = 1\r\nB = 2\r\n";
    t.write("tiles.py", crlf);
    // The files of the repo as a checkout under autocrlf writes them: CRLF, LF in git.
    t.write("fake.env", "FAKE_LATENCY_MS=10\r\n");
    t.git(&["add", "tiles.py", "fake.env"]);
    t.git(&["commit", "-qm", "a CRLF file"]);
    t.write(
        "experiments/01.toml",
        "message = \"exp: B 3\"\n[[edit]]\nfile = \"tiles.py\"\nfind = \"B = 2\"\nreplace = \"B = 3\"\n\
         [[edit]]\nfile = \"fake.env\"\nfind = \"=10\"\nreplace = \"=20\"\n",
    );
    t.git(&["add", "-A"]);
    t.git(&["commit", "-qm", "queue"]);
    let base = t.head();
    let out = t.ratchet().arg("sweep").env("RATCHET_FAULT", "before-commit").output().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(9), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(t.read("tiles.py"), "A = 1\r\nB = 3\r\n", "the hypothesis is written as a checkout writes it (CRLF here)");
    let rec = t.ratchet().arg("recover").output().unwrap();
    assert!(rec.status.success(), "{}", String::from_utf8_lossy(&rec.stderr));
    assert_eq!(t.read("tiles.py"), crlf, "undone byte for byte: {}", String::from_utf8_lossy(&rec.stdout));
    assert_eq!(t.head(), base);
    assert_eq!(t.git(&["status", "--porcelain"]), "");
    // And a whole sweep, measured and reverted, leaves it as it was too.
    t.ratchet().arg("sweep").assert().success();
    assert_eq!(t.rows().last().unwrap()["status"], "revert", "{:?}", t.rows());
    assert_eq!(t.read("tiles.py"), crlf);
}
