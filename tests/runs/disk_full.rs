//! A benchmark that fails because the disk is full is the machine's fault, not the hypothesis's:
//! its message survives although its log cannot be written (ratchet keeps each stream's end in
//! memory), and the full file system is named. The experiment then records nothing and gives
//! the hypothesis back. The disks here are real, small tmpfs mounts (these tests need root;
//! without it they say so and stop).

use crate::support;

use std::path::{Path, PathBuf};
use support::TestRepo;

/// A tmpfs mounted for one test, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(at).unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("skipped: cannot mount a tmpfs at {} (these tests need root)", at.display());
        }
        ok.then(|| Tmpfs(at.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

const CONFIG: &str = "[benchmark]\ncommand = \"sh bench.sh\"\ntimeout_s = 60\nkill_grace_s = 0.5\nwarmup = 0\niters = 5\n\
profile_iters = 0\n[score]\nmetric = \"latency\"\n[decision]\nmethod = \"fixed\"\nmin_pairs = 2\nmax_pairs = 2\nconfirm = false\n";

/// The candidate's first run finds the disk filled by another job: its write fails with
/// ENOSPC, it says so on stderr (while the disk is still full) and exits 1; then the other job
/// frees its space. Every other run reports 10 ms.
const BENCH: &str = r#"if [ "$RATCHET_SIDE" = candidate ] && [ ! -e "$RATCHET_REPO/filled.mark" ]; then
  touch "$RATCHET_REPO/filled.mark"
  head -c 1000000000 /dev/zero > "$RATCHET_STATE_DIR/ballast" 2>/dev/null
  echo "OSError: [Errno 28] No space left on device: 'kernel_cache.bin'" >&2
  sleep 0.5
  rm -f "$RATCHET_STATE_DIR/ballast"
  exit 1
fi
printf '{"version": 1, "latencies_ms": [10.0, 10.1, 9.9]}' > "$RATCHET_OUT/ratchet-result.json"
"#;

#[test]
fn a_run_that_fails_on_a_full_disk_is_not_blamed_on_the_hypothesis() {
    let t = TestRepo::with_config(CONFIG);
    t.write("bench.sh", BENCH);
    t.write(".gitignore", "filled.mark\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-qm", "the benchmark"]);
    // The state directory (run logs, RATCHET_OUT) on a disk of its own, with room for the
    // pre-flight's minimum and little more.
    let Some(_disk) = Tmpfs::mount(&t.path().join(".ratchet"), "72m") else { return };
    let base = t.head();
    t.write("kernel.py", "BQ = 1\n");
    let out = t.ratchet().arg("experiment: smaller blocks").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(t.path().join("filled.mark").exists(), "the candidate never ran: {err}");
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("No space left on device"), "the benchmark's message or the full disk is named: {err}");
    let rows = t.rows();
    assert!(rows.iter().all(|r| r["status"] != "crash"), "the hypothesis was blamed for a full disk: {rows:?}");
    assert!(rows.is_empty(), "nothing is recorded for a machine fault: {rows:?}");
    assert_eq!(t.head(), base);
    assert_eq!(t.read("kernel.py"), "BQ = 1\n", "the hypothesis is back in the work tree");
}

/// The candidate's run fills the temporary directory's disk and fails with a message that does
/// not name the cause; the disk stays full.
const SILENT_BENCH: &str = r#"if [ "$RATCHET_SIDE" = candidate ]; then
  head -c 100000000 /dev/zero > "$TMPDIR/scratch" 2>/dev/null
  echo "error: could not write the compiled kernel" >&2
  exit 1
fi
printf '{"version": 1, "latencies_ms": [10.0, 10.1, 9.9]}' > "$RATCHET_OUT/ratchet-result.json"
"#;

#[test]
fn a_full_disk_is_named_even_when_the_benchmark_does_not_say_so() {
    let t = TestRepo::with_config(CONFIG);
    t.write("bench.sh", SILENT_BENCH);
    t.git(&["add", "-A"]);
    t.git(&["commit", "-qm", "the benchmark"]);
    let tmp = tempfile::tempdir().unwrap();
    let Some(_disk) = Tmpfs::mount(tmp.path(), "4m") else { return };
    t.write("kernel.py", "BQ = 1\n");
    let out = t.ratchet().arg("experiment: smaller blocks").env("TMPDIR", tmp.path()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(tmp.path().join("scratch").exists(), "the candidate never ran: {err}");
    assert!(!out.status.success(), "{err}");
    assert!(err.contains(&format!("the file system of {} has 0 KiB free", tmp.path().display())), "{err}");
    assert!(err.contains("could not write the compiled kernel"), "the benchmark's own message is kept: {err}");
    assert!(t.rows().is_empty(), "nothing is recorded for a machine fault: {:?}", t.rows());
    assert_eq!(t.read("kernel.py"), "BQ = 1\n", "the hypothesis is back in the work tree");
}
