#!/usr/bin/env python3
"""One launch of the example's Triton form per tiling, for Nsight Compute to count what the
diagnosis's spill finding guesses: registers a thread and local-memory (spill) bytes.

    ncu --kernel-name regex:flash --metrics ... python3 scripts/gpu-check/spills.py [--seq 16384]

Each tiling is compiled and called once on the same inputs, in the order printed, so ncu's
launch IDs map onto the tilings by position. The per-thread estimate printed beside each is
the diagnosis's: (BQ x BKV + BQ x head_dim) f32 values over 32 x warps threads.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples", "flash_attention"))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import kernel  # noqa: E402

# (BQ, BKV, warps, stages): the start, each move of experiments/gpu/, and the best tiling.
TILINGS = [(128, 64, 4, 2), (128, 64, 8, 2), (128, 64, 8, 3), (128, 128, 8, 3), (64, 64, 4, 2)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=16384)
    ap.add_argument("--head-dim", type=int, default=128)
    a = ap.parse_args()
    key = jax.random.PRNGKey(0)
    q, k, v = (jax.random.normal(kk, (1, a.seq, a.head_dim), jnp.bfloat16) for kk in jax.random.split(key, 3))
    for launch, (bq, bkv, warps, stages) in enumerate(TILINGS):
        per_thread = (bq * bkv + bq * a.head_dim) / (32 * warps)
        out = kernel.flash_attention(q, k, v, bq=bq, bkv=bkv, variant="triton", num_warps=warps, num_stages=stages)
        out.block_until_ready()
        print(f"launch {launch}: bq {bq} bkv {bkv} warps {warps} stages {stages}: {per_thread:.0f} f32 values a thread", flush=True)


if __name__ == "__main__":
    main()
