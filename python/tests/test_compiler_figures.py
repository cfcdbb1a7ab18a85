"""The helper takes the compiler's own figures: FLOPs and bytes the caller leaves out come from
a Pallas `cost_estimate` (when every kernel carries one) or XLA's `compiled.cost_analysis()`,
and figures the caller gives are checked against the compiler's (a warning past
COST_MISMATCH_RATIO, 2x). On CPU, cost_analysis works, so these run here."""

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

N = 32
X = jnp.ones((N, N), jnp.float32)


@jax.jit
def matmul_tanh(x, y):
    return jnp.tanh(x @ y)


def measure(**kw):
    """measure() in-process on CPU; returns (result, stderr)."""
    with tempfile.TemporaryDirectory() as d:
        s = rb.Settings(out_dir=d, warmup=0, iters=2, profile_iters=0, under_ratchet=True)
        err = io.StringIO()
        with redirect_stderr(err), mock.patch.object(rb, "enable_compilation_cache"):
            r = rb.measure(matmul_tanh, (X, X), settings=s, **kw)
        return r, err.getvalue()


class CompilerFigures(unittest.TestCase):
    def test_missing_figures_default_to_xlas_cost_analysis(self):
        ca = matmul_tanh.lower(X, X).compile().cost_analysis()
        r, err = measure()
        self.assertEqual(r["flops"], ca["flops"])
        self.assertEqual(r["bytes"], ca["bytes accessed"])
        # 2*N^3 for the matmul (tanh is a transcendental, not a FLOP).
        self.assertGreaterEqual(r["flops"], 2 * N**3)
        self.assertIn("flops and bytes from XLA's cost analysis", err)
        # The result file says which figures are the compiler's (ratchet's physics gate does not
        # hold a run to estimated bytes).
        self.assertEqual(r["compiler_figures"], {"flops": "XLA's cost analysis", "bytes": "XLA's cost analysis"})

    def test_a_given_figure_is_kept_and_only_the_missing_one_filled(self):
        r, err = measure(flops=2 * N**3)
        self.assertEqual(r["flops"], 2 * N**3)
        self.assertGreater(r["bytes"], 0)
        self.assertIn("bytes from XLA's cost analysis", err)
        self.assertNotIn("warning", err)
        self.assertEqual(r["compiler_figures"], {"bytes": "XLA's cost analysis"})

    def test_figures_off_by_more_than_the_ratio_are_warned_about(self):
        # bytes 10x under (a forgotten re-read), flops right.
        r, err = measure(flops=2 * N**3, bytes=3 * N * N * 4 / 10)
        self.assertEqual(r["bytes"], 3 * N * N * 4 / 10)  # the caller's figure stands
        self.assertNotIn("compiler_figures", r)
        self.assertIn("ratchet_bench: warning: bytes=", err)
        self.assertIn("XLA's cost analysis", err)
        self.assertNotIn("warning: flops=", err)

    def test_pallas_cost_estimate_is_preferred_over_xla(self):
        class Compiled:
            def as_text(self):
                return "HloModule m\n"

            def cost_analysis(self):
                return {"flops": 1.0, "bytes accessed": 1.0}

        bodies = [{"text": "x", "cost": {"flops": 100, "bytes_accessed": 40}},
                  {"text": "y", "cost": {"flops": 50, "bytes_accessed": 10, "transcendentals": 3}}]
        got = rb.compiler_figures(Compiled(), bodies)
        self.assertEqual((got["flops"], got["bytes"], got["source"]), (150.0, 50.0, "the Pallas cost_estimate"))
        # One kernel without an estimate: XLA's figure for the whole module instead.
        got = rb.compiler_figures(Compiled(), bodies + [{"text": "z"}])
        self.assertEqual((got["flops"], got["source"]), (1.0, "XLA's cost analysis"))

    def test_a_looping_module_is_a_lower_bound(self):
        # XLA counts a while body once: a compiler figure below the caller's says nothing then,
        # one above it still does.
        looped = {"flops": 10.0, "bytes": 1000.0, "source": "XLA's cost analysis",
                  "lower_bound": "XLA counts a loop's body once"}
        self.assertEqual(rb.cost_warnings({"flops": 1000.0, "bytes": 1000.0}, looped), [])
        self.assertEqual(len(rb.cost_warnings({"flops": 1000.0, "bytes": 100.0}, looped)), 1)
        straight = dict(looped, lower_bound=None)
        (w,) = rb.cost_warnings({"flops": 1000.0, "bytes": 1000.0}, straight)
        self.assertIn("flops=1000 given, but XLA's cost analysis says 10 (0.01x, past the 2x", w)
        # Within the ratio either way: quiet.
        self.assertEqual(rb.cost_warnings({"flops": 19.0, "bytes": 600.0}, straight), [])

    def test_loops_and_custom_calls_make_xlas_figures_a_lower_bound(self):
        def loop(x):
            return jax.lax.fori_loop(0, 8, lambda i, a: a @ a, x)

        got = rb.compiler_figures(jax.jit(loop).lower(X).compile())
        self.assertEqual(got["lower_bound"], "XLA counts a loop's body once")
        self.assertIsNone(rb.compiler_figures(matmul_tanh.lower(X, X).compile())["lower_bound"])

        class TpuPallas:  # a TPU module whose kernel is one custom call without cost_estimate
            def as_text(self):
                return "ENTRY %main {\n  ROOT %c = f32[8]{0} custom-call(%p), custom_call_target=\"tpu_custom_call\"\n}\n"

            def cost_analysis(self):
                return {"flops": 0.0, "bytes accessed": 64.0}

        got = rb.compiler_figures(TpuPallas(), [{"text": "body without a cost"}])
        self.assertEqual((got["flops"], got["bytes"]), (None, 64.0))
        self.assertEqual(got["lower_bound"], "XLA cannot count inside a custom call")
        # The caller's re-read-inclusive bytes far above the operands' size: no warning.
        self.assertEqual(rb.cost_warnings({"flops": 1e9, "bytes": 6400.0}, got), [])


if __name__ == "__main__":
    unittest.main()
