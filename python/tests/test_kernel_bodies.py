"""Ratchet_bench decodes the Pallas kernel bodies (Mosaic on TPU, Triton on GPU) that
the HLO shows only as one custom call. The example kernel is lowered for both platforms on this
host (lowering needs no device) and the decoded text must match the committed fixtures that
tests/traces/kernel_body.rs counts."""

import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "tests", "helpers", "lower_kernel_bodies.py")
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "kernel_bodies")


class KernelBodies(unittest.TestCase):
    def test_lowering_reproduces_the_committed_fixtures(self):
        with tempfile.TemporaryDirectory() as d:
            out = subprocess.run([sys.executable, SCRIPT, d], capture_output=True, text=True,
                                 timeout=300)
            self.assertEqual(out.returncode, 0, out.stderr[-2000:])
            for name in ("mosaic_bq128_bkv128.mlir", "triton_bq128_bkv128.mlir"):
                with open(os.path.join(d, name), encoding="utf-8") as f:
                    got = f.read()
                with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
                    want = f.read()
                self.assertEqual(got.splitlines()[0], want.splitlines()[0])
                # Same ops in the same order (a newer jax may renumber SSA values).
                self.assertEqual(len(got.splitlines()), len(want.splitlines()), name)
                self.assertIn("tpu.matmul" if name.startswith("mosaic") else "tt.dot", got)

    def test_mosaic_gpu_lowering_reproduces_the_committed_fixture(self):
        try:
            import absl  # noqa: F401  (jax's Mosaic GPU package imports it)
        except ImportError:
            self.skipTest("absl-py is not installed: jax's Mosaic GPU backend cannot be imported")
        with tempfile.TemporaryDirectory() as d:
            out = subprocess.run([sys.executable, SCRIPT, d], capture_output=True, text=True,
                                 timeout=300)
            self.assertEqual(out.returncode, 0, out.stderr[-2000:])
            name = "mosaic_gpu_bq64_bkv64.mlir"
            with open(os.path.join(d, name), encoding="utf-8") as f:
                got = f.read()
            with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
                want = f.read()
            self.assertEqual(got.splitlines()[0], want.splitlines()[0])
            self.assertEqual(len(got.splitlines()), len(want.splitlines()))
            self.assertIn("wgmma.mma_async", got)
            self.assertIn("nvvm.cp.async.bulk.tensor", got)

    def test_a_module_without_pallas_kernels_has_no_bodies(self):
        sys.path.insert(0, os.path.join(ROOT, "python"))
        import jax
        import jax.numpy as jnp
        import ratchet_bench

        lowered = jax.jit(lambda x: jnp.exp(x) @ x).lower(jnp.ones((8, 8)))
        self.assertEqual(ratchet_bench.kernel_bodies(lowered.compiler_ir("stablehlo")), [])

    def test_environment_records_versions_devices_and_flags(self):
        sys.path.insert(0, os.path.join(ROOT, "python"))
        import jax
        import ratchet_bench

        env = ratchet_bench.environment({"XLA_FLAGS": "--xla_dump_to=/tmp/x", "LIBTPU_INIT_ARGS": " "})
        self.assertEqual(env["jax"], jax.__version__)
        self.assertEqual(env["backend"], jax.default_backend())
        self.assertEqual(env["device_count"], len(jax.devices()))
        self.assertEqual(env["XLA_FLAGS"], "--xla_dump_to=/tmp/x")
        self.assertNotIn("LIBTPU_INIT_ARGS", env)  # blank: not in effect
        self.assertTrue(all(isinstance(v, (str, int)) for v in env.values()))



class TraceMode(unittest.TestCase):
    def test_trace_mode_is_read_and_checked(self):
        sys.path.insert(0, os.path.join(ROOT, "python"))
        import ratchet_bench as rb

        self.assertEqual(rb.settings_from_env({}).trace_mode, "TRACE_COMPUTE")
        s = rb.settings_from_env({"RATCHET_TRACE_MODE": "trace_compute_and_sync"})
        self.assertEqual(s.trace_mode, "TRACE_COMPUTE_AND_SYNC")
        with self.assertRaises(rb.BenchError) as e:
            rb.settings_from_env({"RATCHET_TRACE_MODE": "EVERYTHING"})
        self.assertIn("TRACE_COMPUTE_AND_SYNC", str(e.exception))
        opts = rb._profile_options("tpu", "TRACE_COMPUTE_AND_SYNC")
        self.assertEqual(opts.advanced_configuration, {"tpu_trace_mode": "TRACE_COMPUTE_AND_SYNC"})


if __name__ == "__main__":
    unittest.main()
