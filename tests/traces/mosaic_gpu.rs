//! The example's kernel in its Mosaic GPU form (Pallas `plgpu`,
//! tests/helpers/flash_attention_mosaic_gpu.py), lowered for cuda on a CPU host by
//! tests/helpers/lower_kernel_bodies.py (BQ=BKV=64, seq=512, head_dim=64, bf16) and decoded by
//! `ratchet_bench.kernel_bodies` from its `mosaic_gpu_v2` custom call: the committed fixture
//! tests/fixtures/kernel_bodies/mosaic_gpu_bq64_bkv64.mlir.

use ratchet::trace::kernel_body::parse_kernel_bodies;
use std::path::PathBuf;

fn fixture(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kernel_bodies").join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn mosaic_gpu_kernel_of_the_example_has_the_articles_op_counts() {
    let ks = parse_kernel_bodies(&fixture("mosaic_gpu_bq64_bkv64.mlir")).unwrap();
    assert_eq!(ks.len(), 1);
    let k = &ks[0];
    assert_eq!((k.dialect.as_str(), k.name.as_str()), ("mosaic_gpu", "flash_attention"));
    // Section 5.3's counts, per source op: 2 matmuls (QK^T, PV as wgmma), 2 exps, 2 reductions
    // (row max, row sum), no synchronous copy.
    assert_eq!((k.matmul, k.exp, k.reduce, k.copy), (2, 2, 2, 0));
    // Lowered per register fragment: each matmul is 4 wgmma.mma_async instructions (K = 64 in
    // steps of 16), the (64, 64) score exp is 16 math.exp on vector<2xf32> and the (64,) rescale
    // exp 2 more; each row reduction is 2 butterfly-shuffle steps on 2 row fragments.
    let text = fixture("mosaic_gpu_bq64_bkv64.mlir");
    assert_eq!(text.lines().filter(|l| l.contains("llvm.inline_asm") && l.contains("wgmma.mma_async")).count(), 8);
    assert_eq!(k.opcodes["math.exp"], 18);
    // TMA: q, k and v into shared memory (3 loads), o back (1 store); waited on by an mbarrier
    // wait and a bulk-group wait.
    assert_eq!((k.dma, k.dma_wait), (4, 2));
    assert_eq!(k.opcodes["nvvm.cp.async.bulk.tensor.shared.cluster.global"], 3);
    assert_eq!(k.opcodes["nvvm.cp.async.bulk.tensor.global.shared.cta"], 1);
    // The KV loop runs inside the kernel (one scf.for); the launch grid is the 8 Q blocks of the
    // one head (512 / 64), in CUDA's x dimension.
    assert_eq!(k.loops, 1);
    assert_eq!(k.grid, vec![8, 1, 1]);
    assert_eq!(k.grid_steps(), Some(8));
    // Mosaic GPU's custom call carries no cost_estimate (it is TPU's custom_call_config).
    assert_eq!(k.cost_flops, None);
    assert_eq!(k.summary(), "matmul 2  exp 2  reduce 2  dma 4  copy 0  load 6  store 54  loops 1  (2623 ops)  grid 8x1x1 = 8 steps");
}

#[test]
fn without_source_locations_every_unrolled_op_counts() {
    // The same body with its locations stripped (as a body written without debug info): the
    // per-fragment ops are all that is left to count, which is why ratchet_bench keeps them.
    let text: String =
        fixture("mosaic_gpu_bq64_bkv64.mlir").lines().map(|l| l.rfind(" loc(").map_or(l, |at| &l[..at])).collect::<Vec<_>>().join("\n");
    let k = &parse_kernel_bodies(&text).unwrap()[0];
    assert_eq!((k.matmul, k.exp, k.reduce, k.dma), (8, 18, 8, 4));
}

#[test]
fn the_diagnosis_reads_the_mosaic_gpu_body_as_the_articles_counts() {
    use ratchet::diagnose::{self, Inputs, Level};
    let ks = parse_kernel_bodies(&fixture("mosaic_gpu_bq64_bkv64.mlir")).unwrap();
    // The attention kernel's tunables (the op-count rule is for a kernel with BQ/BKV), and its
    // grid: 8 Q blocks of one head; the KV loop is inside the kernel.
    let meta = serde_json::json!({"BQ": 64, "BKV": 64, "grid_steps": 8});
    let f = diagnose::diagnose(&Inputs { kernel_ops: &ks, meta: Some(&meta), backend: Some("gpu"), ..Default::default() });
    let counts: Vec<_> = f.iter().filter(|x| x.rule == "op-counts").collect();
    assert_eq!(counts.len(), 1, "{f:?}");
    assert_eq!(counts[0].level, Level::Good, "{f:?}");
    assert!(counts[0].what.contains("2 matmul, 2 exp, 2 reduce in the mosaic_gpu kernel body"), "{f:?}");
    // No copy alarm, and the cost_estimate rule (TPU's custom_call_config) does not apply.
    assert!(f.iter().all(|x| x.rule != "cost-estimate"), "{f:?}");
    assert!(f.iter().all(|x| !(x.rule.contains("cop") && x.level != Level::Good)), "{f:?}");
}
