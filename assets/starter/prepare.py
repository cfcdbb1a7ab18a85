"""Benchmark of this repo's kernel: the command ratchet runs for every sample, one fresh process
each (ratchet's docs/prepare.md explains every argument). Written by `ratchet init` as a
starting point: it times kernel.matmul; point it at your own kernel and commit it. It is the
measuring stick: ratchet refuses a hypothesis that edits it, so change it in commits of its own.
"""

import sys

try:
    import ratchet_bench  # put on PYTHONPATH by ratchet for every run
except ImportError:
    sys.exit("prepare.py: cannot import ratchet_bench: run it through ratchet, or by hand as "
             "PYTHONPATH=$(ratchet pythonpath) python3 prepare.py")

import jax
import jax.numpy as jnp

import kernel

# One process is one sample: on CPU (the Pallas interpreter) keep a run to a few seconds; on an
# accelerator time a problem of the size you care about.
SIZE = 256 if jax.default_backend() == "cpu" else 4096


def main():
    # Fixed inputs (a seeded key), so both sides of every pair time the same work.
    kx, ky = jax.random.split(jax.random.PRNGKey(0))
    x = jax.random.normal(kx, (SIZE, SIZE), jnp.bfloat16)
    y = jax.random.normal(ky, (SIZE, SIZE), jnp.bfloat16)
    # Checked against the reference, not against the previous kernel, so an error that creeps
    # in over several keeps is still caught; a run whose check fails is never kept.
    expected = jax.jit(kernel.reference)(x, y)
    bm, bn = min(kernel.BLOCK_M, SIZE), min(kernel.BLOCK_N, SIZE)
    ratchet_bench.run(
        kernel.matmul,
        (x, y),
        flops=2 * SIZE**3,
        # HBM bytes one call moves: x is read once per column of tiles, y once per row of
        # tiles (bf16), the f32 output written once. Bigger tiles re-read less.
        bytes=(SIZE // bn) * SIZE * SIZE * 2 + (SIZE // bm) * SIZE * SIZE * 2 + SIZE * SIZE * 4,
        min_bytes=2 * SIZE * SIZE * 2 + SIZE * SIZE * 4,
        check=lambda out: ratchet_bench.compare(out, expected, 1e-2),
        kernel="matmul",
        meta={"size": SIZE, "BLOCK_M": kernel.BLOCK_M, "BLOCK_N": kernel.BLOCK_N},
    )


if __name__ == "__main__":
    main()
