//! Op counts inside the example's Pallas kernel, read from kernel bodies lowered for
//! TPU (Mosaic) and GPU (Triton) on a CPU host by tests/helpers/lower_kernel_bodies.py (the
//! committed fixtures under tests/fixtures/kernel_bodies/ come from it).

use ratchet::trace::kernel_body::parse_kernel_bodies;
use std::path::PathBuf;

fn fixture(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kernel_bodies").join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn mosaic_kernel_of_the_example_has_the_articles_op_counts() {
    // BQ=BKV=128, seq=512, head_dim=64: grid (1 head, 4 Q blocks, 4 KV blocks).
    let ks = parse_kernel_bodies(&fixture("mosaic_bq128_bkv128.mlir")).unwrap();
    assert_eq!(ks.len(), 1);
    let k = &ks[0];
    assert_eq!((k.dialect.as_str(), k.name.as_str()), ("mosaic", "flash_attention"));
    // The article's expected counts (section 5.3): 2 dots (QK^T, PV), 2 exps, 2 reduces (max,
    // sum), no copy. The body issues no DMA itself: the pipeline moves q, k, v and o.
    assert_eq!((k.matmul, k.exp, k.reduce, k.copy, k.dma), (2, 2, 2, 0, 0));
    assert_eq!(k.pipelined_operands, Some(4));
    assert_eq!(k.grid, vec![1, 4, 4]);
    assert_eq!(k.grid_steps(), Some(16));
    // q, k, v, m, l, acc reads (and their re-reads), writes of m, l, acc and o.
    assert_eq!((k.load, k.store), (15, 7));
    assert_eq!(k.opcodes["tpu.matmul"], 2);
    assert_eq!(k.opcodes["vector.multi_reduction"], 2);
    // The pallas_call's cost_estimate (kernel.py's), from the custom call's config: 1 head,
    // seq=512, head_dim=64: 4 * 512^2 * 64 + 5 * 512^2 FLOPs; an exp per score and per row and
    // KV block; Q, O once and K, V once per Q block (4 blocks), bf16.
    assert_eq!(k.cost_flops, Some(4 * 512 * 512 * 64 + 5 * 512 * 512));
    assert_eq!(k.cost_transcendentals, Some(512 * (512 + 4)));
    assert_eq!(k.cost_bytes, Some(64 * 2 * (2 * 512 + 2 * 512 * 4)));
}

#[test]
fn triton_kernel_of_the_example_has_the_articles_op_counts() {
    let ks = parse_kernel_bodies(&fixture("triton_bq128_bkv128.mlir")).unwrap();
    let k = &ks[0];
    assert_eq!(k.dialect, "triton");
    // exp is a libdevice call (__nv_expf); reductions are tt.reduce (their tt.reduce.return
    // terminators are not counted).
    assert_eq!((k.matmul, k.exp, k.reduce, k.copy, k.dma), (2, 2, 2, 0, 0));
    // The KV loop runs inside the kernel: one scf.for. Loads: q once, k and v per KV step, and
    // o's old value (Pallas lowers `o_ref[...] = x` as a swap, whose read goes unused).
    assert_eq!((k.loops, k.load, k.store), (1, 4, 1));
    // Launch grid (1, 4, 1): 4 Q blocks; the KV blocks are loop iterations.
    assert_eq!(k.grid_steps(), Some(4));
}

#[test]
fn block_sizes_change_the_grid_not_the_op_counts() {
    // BQ=512, BKV=256, seq=1024, head_dim=128.
    let m = &parse_kernel_bodies(&fixture("mosaic_bq512_bkv256.mlir")).unwrap()[0];
    assert_eq!(m.grid, vec![1, 2, 4]);
    assert_eq!((m.matmul, m.exp, m.reduce), (2, 2, 2));
    let t = &parse_kernel_bodies(&fixture("triton_bq512_bkv256.mlir")).unwrap()[0];
    assert_eq!(t.grid_steps(), Some(2));
    assert_eq!((t.matmul, t.exp, t.reduce), (2, 2, 2));
}
