//! ratchet reads the steps of a capture that today's `ratchet_bench` makes: each profiled
//! iteration is an XProf step (`StepTraceAnnotation("kernel_step", step_num=i)`), and ratchet's
//! trace reader must still find one host step and one kernel execution per iteration. Runs the
//! real helper with the real JAX (CPU); needs `python3` with jax, as tests/runs/real_example.rs does
//! (set RATCHET_SKIP_JAX_E2E=1 to skip it explicitly).

use std::path::Path;
use std::process::Command;

/// A jitted kernel measured with 3 profiled iterations into `out`.
const SCRIPT: &str = r#"
import sys, jax, jax.numpy as jnp, ratchet_bench as rb
s = rb.Settings(out_dir=sys.argv[1], warmup=1, iters=2, profile_iters=3, under_ratchet=True)
@jax.jit
def tiny_kernel(x):
    return jnp.tanh(x @ x) * 2.0
rb.measure(tiny_kernel, (jnp.ones((64, 64)),), flops=2 * 64**3, bytes=2 * 64 * 64 * 4, settings=s)
"#;

#[test]
fn a_capture_with_xprof_step_markers_gives_one_step_and_one_execution_per_iteration() {
    if std::env::var_os("RATCHET_SKIP_JAX_E2E").is_some() {
        eprintln!("RATCHET_SKIP_JAX_E2E is set: skipping the real-JAX step-marker test");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let py = Path::new(env!("CARGO_MANIFEST_DIR")).join("python");
    let run = Command::new("python3")
        .args(["-c", SCRIPT, out.to_str().unwrap()])
        .env("PYTHONPATH", &py)
        .env("RATCHET_STATE_DIR", tmp.path().join("state"))
        .current_dir(tmp.path())
        .output()
        .expect("python3 with jax on PATH (or RATCHET_SKIP_JAX_E2E=1)");
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));

    // The capture carries XProf's step stat, and no per-step names any more.
    let pb: Vec<_> = walk(&out.join("profile")).into_iter().filter(|p| p.to_string_lossy().ends_with(".xplane.pb")).collect();
    assert_eq!(pb.len(), 1, "{pb:?}");
    let bytes = std::fs::read(&pb[0]).unwrap();
    let has = |s: &[u8]| bytes.windows(s.len()).any(|w| w == s);
    assert!(has(b"step_num") && has(b"kernel_step") && !has(b"kernel_step_0"));

    // ratchet reads the run directory as it reads any benchmark's.
    let report = ratchet::trace::analyze(&out, &Default::default()).unwrap();
    assert_eq!(report.host_steps_us.len(), 3, "{:?}", report.host_steps_us);
    let k = report.kernel.as_ref().unwrap();
    assert!(k.name.contains("tiny_kernel"), "{}", k.name);
    assert_eq!(k.executions, 3);
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![];
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
