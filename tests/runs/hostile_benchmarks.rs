//! Hostile or broken benchmarks cannot hang, bloat or crash ratchet. Each test drives
//! the real binary against a throw-away repo whose benchmark is a small shell script that
//! misbehaves as `mode.txt` (the hypothesis's edit) says; memory bounds are enforced with
//! `ulimit -v`, so a regression fails the test instead of eating the machine.

use crate::support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::TestRepo;

const CONFIG: &str = "[benchmark]\ncommand = \"sh bench.sh\"\ntimeout_s = 20\nkill_grace_s = 0.5\nwarmup = 0\niters = 5\n\
profile_iters = 0\n[score]\nmetric = \"latency\"\n[decision]\nmethod = \"fixed\"\nmin_pairs = 2\nmax_pairs = 2\nconfirm = false\n";

/// The benchmark: reports a latency of 10 ms unless `mode.txt` asks for misbehaviour.
const BENCH: &str = r#"mode=$(cat mode.txt)
extra=""
lats="[10.0, 10.1, 9.9]"
case "$mode" in
  fifo_hlo) mkfifo "$RATCHET_OUT/k.hlo"; extra='"hlo": "k.hlo",' ;;
  zero_hlo) extra='"hlo": "/dev/zero",' ;;
  zero_link) ln -s /dev/zero "$RATCHET_OUT/k.hlo"; extra='"hlo": "k.hlo",' ;;
  fifo_trace) mkfifo "$RATCHET_OUT/t.xplane.pb"; extra='"trace": "t.xplane.pb",' ;;
  zero_trace) extra='"trace": "/dev/zero",' ;;
  fifo_result) mkfifo "$RATCHET_OUT/ratchet-result.json"; exit 0 ;;
  bomb) cp "$RATCHET_REPO/bomb.trace.json.gz" "$RATCHET_OUT/t.trace.json.gz"; extra='"trace": "t.trace.json.gz",' ;;
  flood) head -c 209715200 /dev/zero | tr '\0' 'x' ; head -c 104857600 /dev/zero >&2 ;;
  flood_legacy) echo "RESULT: latency=3ms"; head -c 104857600 /dev/zero | tr '\0' 'y'; echo; echo "RESULT: latency=10.0ms"; exit 0 ;;
  tiny) lats="[1e-320, 1e-320]" ;;
  huge) lats="[1e308, 1e308]" ;;
  score0) echo "RESULT: score=0 latency=10ms"; exit 0 ;;
  daemon) setsid sh -c 'echo $$ > "$RATCHET_REPO/daemon.pid"; exec sleep 300' </dev/null >/dev/null 2>&1 &
          sleep 0.2 ;;
esac
printf '{"version": 1, "flops": 1e9, %s "latencies_ms": %s}' "$extra" "$lats" > "$RATCHET_OUT/ratchet-result.json"
"#;

fn repo(config: &str) -> TestRepo {
    let t = TestRepo::with_config(config);
    t.write("bench.sh", BENCH);
    t.write("mode.txt", "ok\n");
    t.write(".gitignore", "bomb.trace.json.gz\ndaemon.pid\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-qm", "the benchmark"]);
    t
}

/// `ratchet ARGS...` in `dir` under `ulimit -v vmem_kib` and a wall-clock limit (killed past
/// it); returns (exit code, stdout + stderr).
fn run_limited(dir: &Path, args: &[&str], vmem_kib: u64, limit: Duration) -> (i32, String) {
    let home = tempfile::tempdir().unwrap();
    let bin = assert_cmd::cargo::cargo_bin("ratchet");
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {vmem_kib}; exec \"$@\""))
        .arg("sh")
        .arg(&bin)
        .args(args)
        .current_dir(dir)
        .env("HOME", home.path())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (mut so, mut se) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut so, &mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut se, &mut s);
        s
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("ratchet {args:?} ran past {limit:?} (hung)");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = format!("{}{}", t_out.join().unwrap(), t_err.join().unwrap());
    (status.code().unwrap_or(-1), text)
}

fn ratchet_limited(t: &TestRepo, message: &str, vmem_kib: u64, limit: Duration) -> (i32, String) {
    run_limited(t.path(), &[message], vmem_kib, limit)
}

/// 1 GiB: ratchet's own footprint with its threads is far below, a read without a bound far above.
const VMEM: u64 = 1 << 20;

#[test]
fn reported_paths_that_are_fifos_or_devices_never_hang_or_bloat_ratchet() {
    for (mode, field) in
        [("fifo_hlo", None), ("zero_hlo", None), ("zero_link", None), ("fifo_trace", Some("trace")), ("zero_trace", Some("trace"))]
    {
        let t = repo(CONFIG);
        t.write("mode.txt", &format!("{mode}\n"));
        // A read that blocked on the FIFO or ran through /dev/zero would never end: the guard
        // stops that case, no deadline tells fast from slow.
        let (code, out) = ratchet_limited(&t, &format!("experiment: {mode}"), VMEM, support::HANG_GUARD);
        assert_eq!(code, 0, "{mode}: {out}");
        let rows = t.rows();
        assert_eq!(rows.len(), 1, "{mode}");
        // The run is measured by its host timings; the hostile file is simply not read.
        let runs = t.runs();
        let cand = runs.iter().find(|r| r["side"] == "candidate").unwrap();
        assert_eq!(cand["status"], "ok", "{mode}: {cand}");
        assert!(cand.get("hlo_stats").is_none(), "{mode}");
        if field == Some("trace") {
            let why = cand["trace_error"].as_str().unwrap_or_default();
            assert!(why.contains("not a regular file") || why.contains("outside"), "{mode}: {why}");
        }
    }
}

#[test]
fn a_result_file_that_is_a_fifo_is_invalid_not_a_hang() {
    let t = repo(CONFIG);
    t.write("mode.txt", "fifo_result\n");
    let (code, out) = ratchet_limited(&t, "experiment: fifo result", VMEM, support::HANG_GUARD);
    assert_eq!(code, 0, "{out}");
    let r = &t.rows()[0];
    assert_eq!(r["status"], "invalid");
    assert!(r["note"].contains("not a regular file"), "{}", r["note"]);
}

#[test]
fn a_gzip_bomb_trace_is_an_error_naming_the_limit_within_bounded_memory() {
    let t = repo(CONFIG);
    // 300 MiB of JSON whitespace compress to ~300 KB: over the 256 MiB limit for a JSON trace.
    let bomb = t.path().join("bomb.trace.json.gz");
    let py = format!(
        "import gzip\nf = gzip.open({:?}, 'wb', compresslevel=1)\nb = b' ' * (1 << 20)\nf.write(b'{{\"traceEvents\": [')\nfor _ in range(300): f.write(b)\nf.close()\n",
        bomb.display().to_string()
    );
    assert!(Command::new("python3").arg("-c").arg(&py).status().unwrap().success());
    assert!(std::fs::metadata(&bomb).unwrap().len() < 2 << 20);
    // `ratchet inspect` on the file itself...
    let (code, err) = run_limited(t.path(), &["inspect", bomb.to_str().unwrap()], VMEM, support::HANG_GUARD);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("more than 256 MiB"), "{err}");
    // ...and as a run's trace: the trace is refused with the reason (the host timings stand).
    t.write("mode.txt", "bomb\n");
    let (code, out) = ratchet_limited(&t, "experiment: bomb", VMEM, support::HANG_GUARD);
    assert_eq!(code, 0, "{out}");
    let cand = t.runs().into_iter().find(|r| r["side"] == "candidate").unwrap();
    let why = cand["trace_error"].as_str().unwrap_or_default();
    assert!(why.contains("more than 256 MiB"), "{cand}");
}

#[test]
fn a_flood_of_output_is_streamed_into_capped_logs() {
    let t = repo(CONFIG);
    t.write("mode.txt", "flood\n");
    // 200 MiB on stdout and 100 MiB on stderr per run, under a 1 GiB limit.
    let (code, out) = ratchet_limited(&t, "experiment: flood", VMEM, Duration::from_secs(120));
    assert_eq!(code, 0, "{out}");
    assert_eq!(t.rows()[0]["status"], "revert", "{out}");
    for run in t.runs() {
        let dir = Path::new(run["out_dir"].as_str().unwrap());
        for log in ["stdout.log", "stderr.log"] {
            let len = std::fs::metadata(dir.join(log)).unwrap().len();
            assert!(len <= (2 << 20) + 1024, "{log} of {} is {len} bytes", dir.display());
        }
    }
    // The summary lines of a legacy benchmark are read from the stream, whatever the log drops.
    let t = repo(CONFIG);
    t.write("mode.txt", "flood_legacy\n");
    let (code, out) = ratchet_limited(&t, "experiment: legacy flood", VMEM, Duration::from_secs(120));
    assert_eq!(code, 0, "{out}");
    let cand = t.runs().into_iter().find(|r| r["side"] == "candidate").unwrap();
    assert_eq!(cand["latency_ms"], 10.0, "the last RESULT line wins: {cand}");
}

#[test]
fn a_daemonised_benchmark_process_does_not_survive_its_run() {
    let t = repo(CONFIG);
    t.write("mode.txt", "daemon\n");
    t.ratchet().arg("experiment: daemon").assert().success();
    let pid: i32 = t.read("daemon.pid").trim().parse().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert!(!ratchet::bench::executor::alive(pid), "the setsid'd daemon {pid} survived");
}

#[test]
fn extreme_values_make_the_run_invalid_with_the_reason_never_a_panic() {
    let score_cfg = CONFIG.replace("metric = \"latency\"", "metric = \"score\"\n[hardware]\npreset = \"tpu-v5e\"");
    for (mode, cfg, needle) in [("tiny", CONFIG, "1e-320"), ("huge", CONFIG, "1e308"), ("score0", score_cfg.as_str(), "score")] {
        let t = repo(cfg);
        t.write("mode.txt", &format!("{mode}\n"));
        let out = t.ratchet().arg(format!("experiment: {mode}")).output().unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(0), "{mode}: {text}");
        let r = &t.rows()[0];
        assert_eq!(r["status"], "invalid", "{mode}: {text}");
        assert!(r["note"].contains(needle), "{mode}: {}", r["note"]);
    }
}

#[test]
fn a_sweep_with_extreme_values_records_them_and_restarts_cleanly() {
    let t = repo(CONFIG);
    t.write("experiments/a.toml", "message = \"denormal\"\n[[edit]]\nfile = \"mode.txt\"\nfind = \"ok\"\nreplace = \"tiny\"\n");
    t.write("experiments/b.toml", "message = \"overflow\"\n[[edit]]\nfile = \"mode.txt\"\nfind = \"ok\"\nreplace = \"huge\"\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-qm", "a queue of hostile hypotheses"]);
    t.ratchet().arg("sweep").assert().success();
    let rows = t.rows();
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|r| r["status"] == "invalid"), "{rows:?}");
    // Started again, it finds nothing left to do instead of crashing on the same hypothesis.
    t.ratchet().arg("sweep").assert().success();
    assert_eq!(t.rows().len(), 2);
}

#[test]
fn out_of_range_config_values_are_load_errors_before_anything_is_committed() {
    for (key, value, range) in [("timeout_s", "1e20", "604800"), ("max_pairs", "4000000000", "10000")] {
        let cfg = if key == "max_pairs" {
            CONFIG.replace("max_pairs = 2", &format!("max_pairs = {value}"))
        } else {
            CONFIG.replace("timeout_s = 20", &format!("timeout_s = {value}"))
        };
        let t = repo(&cfg);
        let base = t.head();
        t.write("mode.txt", "other\n");
        let out = t.ratchet().arg("experiment: x").output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{err}");
        let line = cfg.lines().position(|l| l.starts_with(key)).unwrap() + 1;
        assert!(err.contains(&format!("line {line}")) && err.contains(key) && err.contains(range), "{err}");
        assert_eq!(t.head(), base);
        assert_eq!(t.read("mode.txt"), "other\n");
    }
    let t = repo(CONFIG);
    t.write("mode.txt", "other\n");
    let out = t.ratchet().args(["experiment: x", "--pairs", "4000000000"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("10000"));
}
