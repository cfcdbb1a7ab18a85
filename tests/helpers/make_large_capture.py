#!/usr/bin/env python3
"""Writes a large jax CPU capture (>= 1 M events) for benches/trace_parse.rs.

    python3 tests/helpers/make_large_capture.py [OUT_DIR] [ITERATIONS]

OUT_DIR defaults to target/large-capture (not committed: ~100 MB). Each iteration runs a
jitted kernel whose while loop executes a handful of HLO ops per trip, one
TraceAnnotation("kernel_step_i") per iteration, as the benchmark protocol does.
"""
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax
import jax.numpy as jnp

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join("target", "large-capture")
iters = int(sys.argv[2]) if len(sys.argv) > 2 else 2500


@jax.jit
def kernel(q, k):
    # Each trip depends on the last, so XLA cannot hoist the body out of the loop.
    def body(i, x):
        s = jnp.dot(x, k)
        p = jnp.exp(s - s.max(axis=1, keepdims=True))
        return p / p.sum(axis=1, keepdims=True)
    return jax.lax.fori_loop(0, 24, body, q)


q = jnp.ones((32, 16), jnp.float32)
k = jnp.ones((16, 16), jnp.float32)
kernel(q, k).block_until_ready()
with jax.profiler.trace(out):
    for i in range(iters):
        with jax.profiler.TraceAnnotation(f"kernel_step_{i}"):
            kernel(q, k).block_until_ready()
print(out)
