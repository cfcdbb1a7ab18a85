//! The example agent driver (examples/agent_driver.py) runs the loop end to end
//! through `--json` alone: on a throw-away repo whose benchmark's latency follows the kernel's
//! block size, and (when JAX is installed) on the real example kernel on CPU.

use crate::support;

use std::path::Path;
use support::TestRepo;

fn driver() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/agent_driver.py")
}

fn run_driver(t: &TestRepo, kernel: &str, extra: &[&str]) -> std::process::Output {
    let bin = assert_cmd::cargo::cargo_bin("ratchet");
    // The same clean environment (HOME, git configuration) as ratchet's own tests.
    let c = t.ratchet();
    std::process::Command::new("python3")
        .arg(driver())
        .args(["--repo", &t.path().display().to_string(), "--kernel", kernel, "--ratchet", &bin.display().to_string()])
        .args(extra)
        .envs(c.get_envs().filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))))
        .env_remove("FAKE_LATENCY_MS")
        .output()
        .unwrap()
}

#[test]
fn the_driver_keeps_a_better_block_size_and_logs_every_idea() {
    // The benchmark: the fake one, with a latency of 2560 / BQ ms read from kernel.py.
    let wrapper = format!(
        "import os, re, runpy, sys\n\
         bq = int(re.search(r'^BQ = (\\d+)$', open('kernel.py').read(), re.M).group(1))\n\
         os.environ['FAKE_LATENCY_MS'] = str(2560 / bq)\n\
         sys.argv = [{fake:?}]\n\
         runpy.run_path({fake:?}, run_name='__main__')\n",
        fake = support::fake_bench().display().to_string()
    );
    let t = TestRepo::with_config(&support::DEFAULT_CONFIG.replace("python3 {bench}", "python3 bench.py"));
    t.write("bench.py", &wrapper);
    t.write("fake.env", "# latency from kernel.py\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-qm", "a benchmark that follows BQ"]);
    let out = run_driver(&t, "kernel.py", &["--max-hypotheses", "3", "--pairs", "4"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let rows = t.rows();
    let messages: Vec<&str> = rows.iter().map(|r| r["message"].as_str()).collect();
    // Bigger blocks first (no diagnosis says compute-bound); each kept BQ is built upon.
    assert_eq!(messages, ["experiment: BQ 128 -> 256", "experiment: BQ 256 -> 512", "experiment: BQ 512 -> 1024"], "{rows:#?}");
    assert!(rows.iter().all(|r| r["status"] == "keep"), "{rows:?}");
    assert_eq!(t.read("kernel.py").lines().next(), Some("BQ = 1024"), "the kept sizes are in the tree");
    let log = t.read(".ratchet/agent-ideas.jsonl");
    assert_eq!(log.lines().count(), 3, "{log}");
    assert!(stdout.contains("\"agent\": \"done\""), "{stdout}");
    assert_eq!(t.git(&["status", "--porcelain", "--untracked-files=no"]), "");
    // BQ is at its bound: the next idea is BKV, which this benchmark ignores, so it is not kept
    // (an inconclusive one is retried once with twice the pairs, from its parked commit).
    let out = run_driver(&t, "kernel.py", &["--max-hypotheses", "1", "--pairs", "4"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let again = t.rows();
    assert!(again.len() > rows.len());
    for r in &again[rows.len()..] {
        assert_eq!(r["message"], "experiment: BKV 256 -> 512");
        assert_ne!(r["status"], "keep", "{r:?}");
    }
    assert_eq!(t.read("kernel.py"), "BQ = 1024\nBKV = 256\n", "the ignored change was reverted");
    assert_eq!(t.read(".ratchet/agent-ideas.jsonl").lines().count(), 4);
}

/// The driver on the real example kernel (Pallas FlashAttention, JAX on CPU in interpret mode),
/// with a small budget (3 pairs, no confirmation, 3 iterations) so that it takes about a minute.
#[test]
fn the_driver_runs_the_real_example_kernel_on_cpu() {
    if std::env::var_os("RATCHET_SKIP_JAX_E2E").is_some() {
        eprintln!("RATCHET_SKIP_JAX_E2E is set: skipping the agent driver on the real example");
        return;
    }
    let jax = std::process::Command::new("python3").args(["-c", "import jax"]).output().map(|o| o.status.success()).unwrap_or(false);
    assert!(jax, "python3 cannot import jax: install it (pip install 'jax[cpu]') or set RATCHET_SKIP_JAX_E2E=1");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let t = TestRepo::empty();
    t.write(
        "ratchet.toml",
        "[benchmark]\ncommand = \"python3 examples/flash_attention/prepare.py\"\ntimeout_s = 300\nwarmup = 1\niters = 3\nprofile_iters = 1\n\
         [hardware]\npreset = \"cpu\"\n[decision]\nmin_pairs = 3\nmax_pairs = 3\nconfirm = false\n",
    );
    support::copy_example(&root.join("examples/flash_attention"), &t.path().join("examples/flash_attention"));
    t.write(".gitignore", "__pycache__/\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-q", "-m", "FlashAttention example: baseline"]);
    let started = std::time::Instant::now();
    // On CPU the example's blocks are its CPU_* constants (BQ/BKV are the accelerator's).
    let out = run_driver(&t, "examples/flash_attention/kernel.py", &["--max-hypotheses", "1", "--params", "CPU_BQ,CPU_BKV"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    eprintln!("agent driver on the real example: {:.0} s\n{stdout}", started.elapsed().as_secs_f64());
    let rows = t.rows();
    // Twice the Q block: half the grid steps of the interpreter, clearly faster. On a loaded
    // machine 3 pairs may not settle it: then the driver retries once with more pairs.
    assert!(!rows.is_empty() && rows.len() <= 2, "{rows:?}");
    assert!(rows.iter().all(|r| r["message"] == "experiment: CPU_BQ 32 -> 64"), "{rows:?}");
    if rows.len() == 2 {
        assert!(["inconclusive", "unconfirmed"].contains(&rows[0]["status"].as_str()), "only an unsettled one is retried: {rows:?}");
    }
    let last = rows.last().unwrap();
    assert!(["keep", "inconclusive", "unconfirmed"].contains(&last["status"].as_str()), "{last:?}");
    assert!(last["speedup_pct"].parse::<f64>().unwrap() > 0.0, "bigger Q blocks are faster here: {last:?}");
    let bq = if last["status"] == "keep" { "\nCPU_BQ = 64\n" } else { "\nCPU_BQ = 32\n" };
    assert!(t.read("examples/flash_attention/kernel.py").contains(bq), "the tree holds the incumbent's {bq:?}");
    assert_eq!(t.read(".ratchet/agent-ideas.jsonl").lines().count(), 1);
}
