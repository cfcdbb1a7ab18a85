#!/usr/bin/env python3
"""Makes the small CPU captures in tests/fixtures/captures/, one per JAX layout.

Each is 9 profiled steps of three jitted programs: `pallas_add` (a Pallas kernel in interpret
mode), `small` (a matmul, tanh and sum, run on the XLA executor threads) and `tiny` (one add,
which jax 0.10 runs inline on the calling thread). The layouts differ by version:
0.4.30 and 0.6.2 write no op events at all; 0.4.38 writes op events without `run_id`; 0.7.2
and later carry `run_id`; 0.10.2 puts `tiny`'s ops on the caller's `python3` line.

Run it with the interpreter of the JAX version to capture (a venv per version, e.g.
`python3 -m venv /tmp/jax0.4.38 && /tmp/jax0.4.38/bin/pip install "jax[cpu]==0.4.38"`):

    /tmp/jax0.4.38/bin/python3 tests/helpers/make_version_captures.py tests/fixtures/captures

It writes `<out>/jax-<version>-cpu/steps.xplane.pb` and `steps.trace.json.gz`.
"""
import glob
import os
import shutil
import sys
import tempfile

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

STEPS = 9


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0 + y_ref[...]


@jax.jit
def pallas_add(x, y):
    return pl.pallas_call(add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=True)(x, y)


@jax.jit
def small(x):
    return jnp.tanh(x @ x.T).sum()


@jax.jit
def tiny(v):
    return v + 1.0


def main(out_root):
    x = jnp.ones((256, 256), jnp.float32)
    v = jnp.ones((8,), jnp.float32)
    calls = ((pallas_add, (x, x)), (small, (x,)), (tiny, (v,)))
    for f, args in calls:
        f(*args).block_until_ready()
    log = tempfile.mkdtemp()
    jax.profiler.start_trace(log)
    for i in range(STEPS):
        with jax.profiler.StepTraceAnnotation("kernel_step", step_num=i):
            for f, args in calls:
                f(*args).block_until_ready()
    jax.profiler.stop_trace()
    out = os.path.join(out_root, f"jax-{jax.__version__}-cpu")
    os.makedirs(out, exist_ok=True)
    for ext in ("xplane.pb", "trace.json.gz"):
        (src,) = glob.glob(os.path.join(log, "plugins", "profile", "*", f"*.{ext}"))
        shutil.copyfile(src, os.path.join(out, f"steps.{ext}"))
    shutil.rmtree(log)
    print(out)


if __name__ == "__main__":
    main(sys.argv[1])
