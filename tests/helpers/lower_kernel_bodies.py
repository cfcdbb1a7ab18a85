"""Lower the example's Pallas FlashAttention kernel for TPU (Mosaic) and GPU (Triton) on this
host, whatever it is (a CPU is enough: lowering needs no device), and write each kernel's body
as ratchet_bench writes it on real hardware (`kernel.body.mlir`).

    python3 tests/helpers/lower_kernel_bodies.py OUT_DIR [BQ BKV SEQ HEAD_DIM]
    python3 tests/helpers/lower_kernel_bodies.py --run-dir OUT_DIR PLATFORM BQ BKV SEQ HEAD_DIM \
        LATENCY_MS DEVICE_KIND

The second form writes a ratchet run directory for `ratchet inspect`: the kernel body, the
lowered HLO (one custom call), and a ratchet-result.json whose flops / bytes / min_bytes / meta
come from the example's kernel.py, and whose latency is LATENCY_MS, an input given by the
caller (nothing is measured: there is no TPU or GPU here).

Writes OUT_DIR/mosaic_bq{BQ}_bkv{BKV}.mlir and OUT_DIR/triton_bq{BQ}_bkv{BKV}.mlir, and
OUT_DIR/mosaic_gpu_bq64_bkv64.mlir: the kernel's Mosaic GPU form (flash_attention_mosaic_gpu.py,
Pallas `plgpu`; its import needs `absl-py`), always at BQ=BKV=64. The
committed fixtures under tests/fixtures/kernel_bodies/ come from this script (defaults:
BQ=BKV=128, seq=512, head_dim=64, bf16); tests/traces/kernel_body.rs asserts their op counts and
python/tests/test_kernel_bodies.py re-lowers and checks the script still reproduces them.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "examples", "flash_attention"))
sys.path.insert(0, HERE)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import kernel  # noqa: E402
import ratchet_bench  # noqa: E402

# platform jax lowers for, kernel variant of kernel.py, file prefix
TARGETS = (("tpu", "mosaic"), ("cuda", "triton"))
# The Mosaic GPU form (tests/helpers/flash_attention_mosaic_gpu.py): wgmma needs BQ a multiple of
# 64, so it is lowered at its own block sizes.
MOSAIC_GPU_BLOCKS = (64, 64)


def lower(bq, bkv, seq, head_dim, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    spec = jax.ShapeDtypeStruct((1, seq, head_dim), jnp.bfloat16)
    written = []
    for platform, variant in TARGETS:
        fn = jax.jit(lambda q, k, v, variant=variant: kernel.flash_attention(
            q, k, v, bq=bq, bkv=bkv, variant=variant))
        lowered = fn.trace(spec, spec, spec).lower(lowering_platforms=(platform,))
        bodies = ratchet_bench.kernel_bodies(lowered.compiler_ir("stablehlo"))
        if not bodies or any("text" not in b for b in bodies):
            raise SystemExit(f"no readable kernel body for {platform}: {bodies}")
        path = os.path.join(out_dir, f"{variant}_bq{bq}_bkv{bkv}.mlir")
        ratchet_bench.write_kernel_bodies(path, bodies)
        written.append(path)
    written.append(lower_mosaic_gpu(*MOSAIC_GPU_BLOCKS, seq, head_dim, out_dir))
    return written


def lower_mosaic_gpu(bq, bkv, seq, head_dim, out_dir):
    """The kernel's Mosaic GPU form (Pallas `plgpu`), lowered for cuda on this host."""
    try:
        import flash_attention_mosaic_gpu
        from jax.experimental.pallas import mosaic_gpu  # noqa: F401
    except ImportError as e:  # jax's Mosaic GPU package imports absl
        raise SystemExit(f"Mosaic GPU lowering needs {e.name}: pip install absl-py") from e

    spec = jax.ShapeDtypeStruct((1, seq, head_dim), jnp.bfloat16)
    fn = jax.jit(lambda q, k, v: flash_attention_mosaic_gpu.flash_attention(q, k, v, bq=bq, bkv=bkv))
    lowered = fn.trace(spec, spec, spec).lower(lowering_platforms=("cuda",))
    bodies = ratchet_bench.kernel_bodies(lowered.compiler_ir("stablehlo"))
    if not bodies or any("text" not in b for b in bodies):
        raise SystemExit(f"no readable Mosaic GPU kernel body: {bodies}")
    path = os.path.join(out_dir, f"mosaic_gpu_bq{bq}_bkv{bkv}.mlir")
    ratchet_bench.write_kernel_bodies(path, bodies)
    return path


def run_dir(out_dir, platform, bq, bkv, seq, head_dim, latency_ms, device_kind):
    """A run directory for a kernel lowered for `platform` ('tpu' or 'cuda')."""
    import json

    os.makedirs(out_dir, exist_ok=True)
    variant = dict(TARGETS)[platform]
    spec = jax.ShapeDtypeStruct((1, seq, head_dim), jnp.bfloat16)
    fn = jax.jit(lambda q, k, v: kernel.flash_attention(q, k, v, bq=bq, bkv=bkv, variant=variant))
    lowered = fn.trace(spec, spec, spec).lower(lowering_platforms=(platform,))
    bodies = ratchet_bench.kernel_bodies(lowered.compiler_ir("stablehlo"))
    ratchet_bench.write_kernel_bodies(os.path.join(out_dir, ratchet_bench.KERNEL_BODY_FILE), bodies)
    with open(os.path.join(out_dir, ratchet_bench.HLO_FILE), "w", encoding="utf-8") as f:
        f.write(lowered.compiler_ir("hlo").as_hlo_text())
    meta = kernel.get_tiling_meta(1, seq, head_dim, bq=bq, bkv=bkv)
    meta.update(dtype="bfloat16", variant=variant)
    result = {
        "version": 1,
        "latencies_ms": [latency_ms],
        "flops": float(kernel.compute_flops(1, seq, head_dim)),
        "bytes": float(kernel.estimate_actual_memory_traffic(meta, 2)),
        "min_bytes": float(kernel.minimum_memory_traffic(meta, 2)),
        "hlo": ratchet_bench.HLO_FILE,
        "kernel_body": ratchet_bench.KERNEL_BODY_FILE,
        "kernel": "flash_attention",
        "backend": "gpu" if platform == "cuda" else platform,
        "device": device_kind,
        "meta": meta,
    }
    with open(os.path.join(out_dir, ratchet_bench.RESULT_FILE), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    return out_dir


def main(argv):
    if len(argv) > 1 and argv[1] == "--run-dir":
        out, platform, bq, bkv, seq, hd, lat, kind = argv[2:10]
        print(run_dir(out, platform, int(bq), int(bkv), int(seq), int(hd), float(lat), kind))
        return
    if len(argv) < 2:
        raise SystemExit(__doc__)
    bq, bkv, seq, head_dim = (int(x) for x in (argv[2:6] + ["128", "128", "512", "64"][len(argv[2:6]):]))
    for path in lower(bq, bkv, seq, head_dim, argv[1]):
        print(path)


if __name__ == "__main__":
    main(sys.argv)
