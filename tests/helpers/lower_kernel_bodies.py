"""Lower the example's Pallas FlashAttention kernel for TPU (Mosaic) and GPU (Triton) on this
host, whatever it is (a CPU is enough: lowering needs no device), and write each kernel's body
as ratchet_bench writes it on real hardware (`kernel.body.mlir`).

    python3 tests/helpers/lower_kernel_bodies.py OUT_DIR [BQ BKV SEQ HEAD_DIM]

Writes OUT_DIR/mosaic_bq{BQ}_bkv{BKV}.mlir and OUT_DIR/triton_bq{BQ}_bkv{BKV}.mlir. The
committed fixtures under tests/fixtures/kernel_bodies/ come from this script (defaults:
BQ=BKV=128, seq=512, head_dim=64, bf16); tests/issue17_kernel_body.rs asserts their op counts and
python/tests/test_kernel_bodies.py re-lowers and checks the script still reproduces them.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "examples", "flash_attention"))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import kernel  # noqa: E402
import ratchet_bench  # noqa: E402

# platform jax lowers for, kernel variant of kernel.py, file prefix
TARGETS = (("tpu", "mosaic"), ("cuda", "triton"))


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
    return written


def main(argv):
    if len(argv) < 2:
        raise SystemExit(__doc__)
    bq, bkv, seq, head_dim = (int(x) for x in (argv[2:6] + ["128", "128", "512", "64"][len(argv[2:6]):]))
    for path in lower(bq, bkv, seq, head_dim, argv[1]):
        print(path)


if __name__ == "__main__":
    main(sys.argv)
