"""The kernel ratchet optimises: a tiled matmul in JAX Pallas, written by `ratchet init` as a
starting point. Replace it with your own kernel; hypotheses edit this file, prepare.py measures it.
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

# The tile each grid step computes: the first knobs to try, one hypothesis at a time
# (edit, then `ratchet "experiment: BLOCK_M 128"`).
BLOCK_M = 64
BLOCK_N = 128


def _matmul_tile(x_ref, y_ref, o_ref):
    # One (BLOCK_M, BLOCK_N) tile of the output: a row block of x times a column block of y.
    o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)


@jax.jit
def matmul(x, y):
    m, k = x.shape
    n = y.shape[1]
    bm, bn = min(BLOCK_M, m), min(BLOCK_N, n)
    return pl.pallas_call(
        _matmul_tile,
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
        grid=(m // bm, n // bn),
        in_specs=[
            pl.BlockSpec((bm, k), lambda i, j: (i, 0)),
            pl.BlockSpec((k, bn), lambda i, j: (0, j)),
        ],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
        # Without an accelerator the kernel runs in the Pallas interpreter.
        interpret=jax.default_backend() == "cpu",
    )(x, y)


def reference(x, y):
    """A slow, obviously right version: what the kernel's output is checked against."""
    return jnp.dot(x.astype(jnp.float32), y.astype(jnp.float32))
