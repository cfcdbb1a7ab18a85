"""Profiled iterations are XProf steps: each is a StepTraceAnnotation named `kernel_step` with
its `step_num`, so XProf's overview finds steps (a plain TraceAnnotation leaves it saying "No
step marker observed"), and ratchet's trace reader still matches the name
(tests/traces/step_markers.rs reads such a capture with ratchet itself)."""

import io
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stderr
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import ratchet_bench as rb  # noqa: E402


def capture_bytes(profile_iters):
    with tempfile.TemporaryDirectory() as d:
        s = rb.Settings(out_dir=d, warmup=0, iters=1, profile_iters=profile_iters, under_ratchet=True)
        with mock.patch.object(rb, "enable_compilation_cache"), redirect_stderr(io.StringIO()):
            rb.measure(jax.jit(lambda x: jnp.tanh(x) * 2.0), (jnp.ones(16),), settings=s)
        found = [os.path.join(r, f) for r, _, fs in os.walk(os.path.join(d, rb.PROFILE_DIR))
                 for f in fs if f.endswith(".xplane.pb")]
        assert len(found) == 1, found
        with open(found[0], "rb") as f:
            return f.read()


class StepMarkers(unittest.TestCase):
    def test_profiled_iterations_are_xprof_steps(self):
        data = capture_bytes(3)
        # The event name, then its stats: step_num (XProf's step id) and _r (a root event).
        self.assertIn(b"\x0bkernel_step", data)  # length-prefixed: the name is exactly kernel_step
        self.assertIn(b"step_num", data)
        self.assertIn(b"_r", data)
        self.assertNotIn(b"kernel_step_0", data)

    def test_step_annotation_is_jaxs_step_marker(self):
        calls = []
        real = jax.profiler.StepTraceAnnotation

        def spy(name, **kw):
            calls.append((name, kw))
            return real(name, **kw)

        with mock.patch.object(rb.jax.profiler, "StepTraceAnnotation", spy):
            capture_bytes(2)
        self.assertEqual(calls, [("kernel_step", {"step_num": 0}), ("kernel_step", {"step_num": 1})])


if __name__ == "__main__":
    unittest.main()
