//! The kernel-body op counts agree between ratchet (src/trace/kernel_body.rs, for inspect, show
//! and results) and `ratchet_bench` (python/ratchet_bench.py, for prepare.py's printed HLO
//! stats): both read every committed kernel-body fixture and a body made of every op name the
//! Python side knows, and must give the same matmul, exp, reduce, dma and copy counts. Runs
//! `python3` with jax (the helper imports it); RATCHET_SKIP_JAX_E2E=1 skips it explicitly.

use std::path::Path;
use std::process::Command;

/// Prints {"texts": {key: body text}, "counts": {key: [per-kernel counts]}} for the fixtures
/// named on the command line and a synthetic body of every op name the helper classifies.
const SCRIPT: &str = r#"
import json, sys, ratchet_bench as rb
names = sorted(rb._BODY_MATMUL | rb._BODY_EXP | rb._BODY_REDUCE | rb._BODY_DMA | rb._BODY_NOT_COPY)
names += ["memref.copy", "tpu.local_copy", "nvvm.cp.async.bulk.tensor.shared.cluster.global",
          "nvvm.cp.async.bulk.commit.group", "arith.addf"]
texts = {"synthetic": "// ratchet-kernel dialect=mosaic name=synthetic target=x\n"
         + "".join(f'%{i} = "stable_mosaic.{n}"(%a) : () -> ()\n' for i, n in enumerate(names))}
for path in sys.argv[1:]:
    with open(path, encoding="utf-8") as f:
        texts[path] = f.read()
print(json.dumps({"texts": texts, "counts": {k: rb.kernel_body_counts(v) for k, v in texts.items()}}))
"#;

#[test]
fn ratchet_and_the_python_helper_count_kernel_bodies_alike() {
    if std::env::var_os("RATCHET_SKIP_JAX_E2E").is_some() {
        eprintln!("RATCHET_SKIP_JAX_E2E is set: skipping the Python side of the kernel-body counts");
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut fixtures: Vec<_> = std::fs::read_dir(root.join("tests/fixtures/kernel_bodies"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "mlir"))
        .collect();
    fixtures.sort();
    assert!(fixtures.len() >= 5, "{fixtures:?}");
    let out = Command::new("python3")
        .arg("-c")
        .arg(SCRIPT)
        .args(&fixtures)
        .env("PYTHONPATH", root.join("python"))
        .output()
        .expect("python3 with jax on PATH (or RATCHET_SKIP_JAX_E2E=1)");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut compared = 0;
    for (key, text) in v["texts"].as_object().unwrap() {
        let rust = ratchet::trace::kernel_body::parse_kernel_bodies(text.as_str().unwrap()).unwrap();
        let python = v["counts"][key].as_array().unwrap();
        assert_eq!(rust.len(), python.len(), "{key}");
        for (r, p) in rust.iter().zip(python) {
            let py = |k: &str| p[k].as_u64().unwrap() as usize;
            assert_eq!(
                (r.matmul, r.exp, r.reduce, r.dma, r.copy),
                (py("matmul"), py("exp"), py("reduce"), py("dma"), py("copy")),
                "{key}: ratchet's counts, then the helper's"
            );
            assert_eq!((r.name.as_str(), r.dialect.as_str()), (p["name"].as_str().unwrap(), p["dialect"].as_str().unwrap()));
            compared += 1;
        }
    }
    assert_eq!(compared, fixtures.len() + 1);
    // The synthetic body holds each class (not all zero, so the comparison says something).
    let syn = &v["counts"]["synthetic"][0];
    assert!(["matmul", "exp", "reduce", "dma", "copy"].iter().all(|k| syn[k].as_u64().unwrap() > 0), "{syn}");
}
