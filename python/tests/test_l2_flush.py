"""`flush_l2=True`: on GPU a buffer larger than L2 is written before every timed and profiled
call (as triton.testing.do_bench does), never inside a timing; on CPU and TPU it is ignored
with a note. The GPU path's plumbing is checked here on CPU with the backend reported as gpu."""

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


def run_measure(backend, flush_l2, warmup=2, iters=3, profile_iters=0):
    """measure() with the flush recorded in order with the kernel's calls; returns (events,
    stderr). Only the flush's buffer write is replaced: choosing it is the real code."""
    events = []
    real_call = rb._call

    def call(compiled, args):
        events.append("call")
        return real_call(compiled, args)

    class Flush:
        def __call__(self):
            events.append("flush")

    with tempfile.TemporaryDirectory() as d:
        s = rb.Settings(out_dir=d, warmup=warmup, iters=iters, profile_iters=profile_iters,
                        under_ratchet=True)
        err = io.StringIO()
        with redirect_stderr(err), mock.patch.object(rb, "enable_compilation_cache"), \
                mock.patch.object(rb.jax, "default_backend", return_value=backend), \
                mock.patch.object(rb, "_call", call), mock.patch.object(rb, "_L2Flush", Flush):
            rb.measure(jax.jit(lambda x: x + 1.0), (jnp.ones(8),), flops=8, bytes=64,
                       settings=s, flush_l2=flush_l2)
        return events, err.getvalue()


class L2Flush(unittest.TestCase):
    def test_on_gpu_every_call_is_preceded_by_a_flush(self):
        # Warmup, timed and profiled calls alike (the profiled ones make ratchet's figure).
        events, _ = run_measure("gpu", True, warmup=2, iters=3, profile_iters=2)
        self.assertEqual(events, ["flush", "call"] * 7)

    def test_off_by_default_on_gpu(self):
        events, err = run_measure("gpu", False)
        self.assertNotIn("flush", events)
        self.assertEqual(err.count("flush_l2"), 0)

    def test_ignored_with_a_note_on_cpu_and_tpu(self):
        for backend in ("cpu", "tpu"):
            events, err = run_measure(backend, True)
            self.assertNotIn("flush", events)
            self.assertIn(f"flush_l2 applies to GPUs only; ignored on {backend}", err)

    def test_the_flush_writes_its_whole_buffer_each_time(self):
        f = rb._L2Flush(nbytes=1 << 16)
        self.assertEqual(f._buf.nbytes, 1 << 16)
        f()
        f()
        self.assertEqual(f.calls, 2)
        self.assertTrue(bool(jnp.all(f._buf == 2)))
        # Its module in a capture is named for what it is, apart from the kernel's.
        self.assertIn("ratchet_l2_flush", f._write.lower(f._buf).as_text())

    def test_default_buffer_outsizes_gpu_l2(self):
        # H100/H200 have 50 MB of L2, B200 126 MB; triton's do_bench writes 256 MB.
        self.assertEqual(rb.L2_FLUSH_BYTES, 256 * 1024 * 1024)


if __name__ == "__main__":
    unittest.main()
