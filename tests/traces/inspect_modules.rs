//! `ratchet inspect` on captures with several equally-run modules: it looks, so it
//! shows every module (executions, median, mean, min, max, share of device time) and the op
//! breakdown, and the roofline for the named or only kernel; it says what op times are.
//! A decision (`analyze`) still refuses to guess: see tests/traces/shared_captures.rs.

use crate::support;

use support::fixture;

use assert_cmd::Command;

/// `ratchet inspect ARGS` in a throw-away directory (no ratchet repo, so no configured peaks).
fn inspect(args: &[&str]) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    Command::cargo_bin("ratchet").unwrap().current_dir(dir.path()).arg("inspect").args(args).output().unwrap()
}

fn text(o: &std::process::Output) -> String {
    assert!(o.status.success(), "inspect failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap()
}

const VLLM: &str = "tpu-v-vllm-json/rpa_step.trace.json.gz";
const CPU: &str = "jax-cpu-0.10.2/flash_attention_5iters.xplane.pb";

#[test]
fn equally_run_modules_are_all_shown_with_their_op_breakdowns() {
    need_fixtures!();
    let path = fixture(VLLM);
    let out = text(&inspect(&[path.to_str().unwrap()]));
    for name in
        ["jit_step_fun(5120112285394406626)", "jit_sample(9401537312596110889)", "jit_compute_logits_func", "jit__select_from_array_fn"]
    {
        assert!(out.contains(name), "missing {name} in\n{out}");
        assert!(out.contains(&format!("Top ops of {name}")), "no op breakdown of {name} in\n{out}");
    }
    for col in ["runs", "median us", "mean us", "min us", "max us", "share"] {
        assert!(out.contains(col), "missing column {col} in\n{out}");
    }
    // jit_step_fun is 99.5% of TPU:0's module time; both chips are listed under it.
    let step = out.lines().find(|l| l.trim_start().starts_with("jit_step_fun")).unwrap();
    assert!(step.contains("99.5%"), "{step}");
    assert!(out.contains("on /device:TPU:1"), "{out}");
    assert!(out.contains("RPA-bq_32-bkvp_64-p_64- (Pallas, in jit_step_fun"), "{out}");
    // No kernel was named and none is obvious: no roofline, and the reason is given.
    assert!(out.contains("Roofline: not computed"), "{out}");
    assert!(out.contains("no kernel chosen"), "{out}");

    let json: serde_json::Value = serde_json::from_slice(&inspect(&[path.to_str().unwrap(), "--json"]).stdout).unwrap();
    assert!(json["kernel"].is_null());
    assert_eq!(json["op_time"], "device_duration_ps stat (as XProf)");
    assert!(out.contains("Op times:  device_duration_ps stat (as XProf)"), "{out}");
    let modules = json["modules"].as_array().unwrap();
    assert_eq!(modules.iter().filter(|m| m["kind"] == "module").count(), 4);
    let shares: f64 = modules.iter().filter(|m| m["kind"] == "module").map(|m| m["share_of_device_time"].as_f64().unwrap()).sum();
    assert!((shares - 1.0).abs() < 1e-9, "{shares}");
    assert_eq!(json["ops_by_module"].as_array().unwrap().len(), 4);
}

#[test]
fn a_named_pallas_kernel_gets_the_roofline_and_its_op_time_source() {
    need_fixtures!();
    let path = fixture(VLLM);
    let args =
        [path.to_str().unwrap(), "--kernel", "RPA", "--flops", "1e9", "--bytes", "4e8", "--peak-tflops", "918", "--hbm-gbps", "1640"];
    let out = text(&inspect(&args));
    assert!(out.contains("Kernel:    RPA-bq_32-bkvp_64-p_64-  64 executions"), "{out}");
    assert!(out.contains("Op times:  device_duration_ps stat (as XProf)"), "{out}");
    assert!(out.contains("Bottleneck:          MEMORY-BOUND"), "{out}");
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let json: serde_json::Value = serde_json::from_slice(&inspect(&json_args).stdout).unwrap();
    assert_eq!(json["kernel"]["op_time"], "device_duration_ps stat (as XProf)");
    assert_eq!(json["kernel"]["device"], "/device:TPU:0");
    // Actual = the kernel's median call, 266.23 us (trace_json_reference.py).
    let ms = json["roofline"]["actual_ms"].as_f64().unwrap();
    assert!((ms - 0.266230492).abs() < 0.005 * 0.266, "{ms}");
}

#[test]
fn a_cpu_capture_with_two_equally_run_modules_is_inspected_not_refused() {
    need_fixtures!();
    let path = fixture(CPU);
    let out = text(&inspect(&[path.to_str().unwrap()]));
    assert!(out.contains("jit_flash_attention(12)") && out.contains("jit_tiled_matmul(36)"), "{out}");
    assert!(out.contains("Top ops of jit_flash_attention(12)"), "{out}");
    assert!(out.contains("Top ops of jit_tiled_matmul(36)"), "{out}");
    // Naming one gives its diagnosis; CPU op times are the events' own.
    let out = text(&inspect(&[path.to_str().unwrap(), "--kernel", "flash"]));
    assert!(out.contains("Kernel:    jit_flash_attention(12)  5 executions"), "{out}");
    assert!(out.contains("Op times:  event duration"), "{out}");
    // A pattern that matches nothing is still an error that lists what ran.
    let o = inspect(&[path.to_str().unwrap(), "--kernel", "nope"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("jit_tiled_matmul(36)"), "{err}");
}
