"""Benchmark of the FlashAttention example: the command ratchet runs for every sample.

Builds inputs, checks nothing by hand: ratchet_bench does warmup, timing, the profile, the
HLO dump and the result file; this file only says what to run and how to judge it. Sizes
follow the backend (the article's seq=16384, head_dim=128 single head on accelerators; a
small problem on CPU, where the kernel runs in the Pallas interpreter) and can be set with
FA_HEADS, FA_SEQ, FA_HEAD_DIM, FA_DTYPE and FA_TOL.
"""

import os
import sys

try:
    import ratchet_bench
except ImportError:
    # Run by hand from ratchet's own repo: use the module beside the sources.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(_here, "..", "..", "python"))
    try:
        import ratchet_bench
    except ImportError:
        sys.exit(
            "prepare.py: cannot import ratchet_bench; run it through ratchet, "
            "or add ratchet's python/ directory to PYTHONPATH"
        )

import jax
import jax.numpy as jnp

import kernel

# CPU sizes keep one process to a few seconds in the interpreter while leaving enough grid
# steps (256 at BQ=BKV=32) for block-size changes to show.
SIZES = {
    "cpu": {"heads": 1, "seq": 512, "head_dim": 64},
    "gpu": {"heads": 1, "seq": 16384, "head_dim": 128},
    "tpu": {"heads": 1, "seq": 16384, "head_dim": 128},
}


def _env_int(name, default):
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        sys.exit(f"prepare.py: {name}={raw!r} is not an integer")


def main():
    backend = jax.default_backend()
    sizes = SIZES.get(backend, SIZES["cpu"])
    heads = _env_int("FA_HEADS", sizes["heads"])
    seq = _env_int("FA_SEQ", sizes["seq"])
    head_dim = _env_int("FA_HEAD_DIM", sizes["head_dim"])
    dtype = jnp.dtype(os.environ.get("FA_DTYPE", "bfloat16"))
    # bf16 inputs and a bf16 P@V matmul cost about 1e-2 against an f32 reference.
    tol = float(os.environ.get("FA_TOL") or (2e-2 if dtype.itemsize <= 2 else 1e-3))

    kq, kk, kv = jax.random.split(jax.random.PRNGKey(0), 3)
    shape = (heads, seq, head_dim)
    q = jax.random.normal(kq, shape, dtype)
    k = jax.random.normal(kk, shape, dtype)
    v = jax.random.normal(kv, shape, dtype)
    expected = jax.jit(kernel.reference_attention)(q, k, v)

    variant = kernel.default_variant()
    meta = kernel.get_tiling_meta(heads, seq, head_dim, variant=variant)
    meta["dtype"] = dtype.name
    meta["variant"] = variant
    ratchet_bench.run(
        kernel.flash_attention,
        (q, k, v),
        flops=kernel.compute_flops(heads, seq, head_dim),
        bytes=kernel.estimate_actual_memory_traffic(meta, dtype.itemsize),
        min_bytes=kernel.minimum_memory_traffic(meta, dtype.itemsize),
        check=lambda out: ratchet_bench.compare(out, expected, tol),
        kernel="flash_attention",
        meta=meta,
    )


if __name__ == "__main__":
    main()
