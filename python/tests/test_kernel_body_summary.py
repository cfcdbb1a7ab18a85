"""The summary's HLO stats show the Pallas kernel bodies' own op counts: on TPU and GPU the HLO
holds a Pallas kernel as one custom call (dot 0, exp 0, reduce 0), so the counts of the
decoded body (kernel.body.mlir) are printed beside the HLO's, the same counts ratchet's
inspect prints (tests/traces/kernel_body.rs and tests/traces/mosaic_gpu.rs pin the Rust side
to these numbers on the same fixtures)."""

import io
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BODIES = os.path.join(ROOT, "tests", "fixtures", "kernel_bodies")
sys.path.insert(0, os.path.join(ROOT, "python"))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import ratchet_bench as rb  # noqa: E402

# What a TPU dump of the example shows: the kernel is one custom call.
TPU_HLO = ("HloModule jit_flash_attention\n\nENTRY %main (q: bf16[1,512,64]) -> f32[1,512,64] {\n"
           "  %q = bf16[1,512,64]{2,1,0} parameter(0)\n"
           "  ROOT %c = f32[1,512,64]{2,1,0} custom-call(%q), custom_call_target=\"tpu_custom_call\"\n}\n")


def fixture(name):
    with open(os.path.join(BODIES, name), encoding="utf-8") as f:
        return f.read()


class KernelBodyCounts(unittest.TestCase):
    def test_counts_match_ratchets_on_every_dialect(self):
        want = {
            "mosaic_bq128_bkv128.mlir": ("mosaic", 2, 2, 2, 0, 0),
            "mosaic_bq512_bkv256.mlir": ("mosaic", 2, 2, 2, 0, 0),
            "triton_bq128_bkv128.mlir": ("triton", 2, 2, 2, 0, 0),
            "triton_bq512_bkv256.mlir": ("triton", 2, 2, 2, 0, 0),
            # Unrolled per register fragment, counted once per source location; 4 TMA copies.
            "mosaic_gpu_bq64_bkv64.mlir": ("mosaic_gpu", 2, 2, 2, 4, 0),
        }
        for name, (dialect, *counts) in want.items():
            (k,) = rb.kernel_body_counts(fixture(name))
            self.assertEqual(k["name"], "flash_attention", name)
            self.assertEqual((k["dialect"], [k[c] for c in rb.BODY_COUNTS]), (dialect, counts), name)

    def test_copies_dmas_and_waits_are_told_apart(self):
        text = ('// ratchet-kernel dialect=mosaic name=k target=tpu_custom_call\n'
                '"stable_mosaic.tpu.enqueue_dma"(%a, %b, %sem) : () -> ()\n'
                '"stable_mosaic.tpu.wait_dma2"(%sem, %a, %b) : () -> ()\n'
                '"stable_mosaic.memref.copy"(%a, %b) : () -> ()\n'
                '%x = ttg.async_copy_global_to_local %p, %buf : tensor<1xf32>\n'
                '%e = tt.extern_elementwise %1 {symbol = "__nv_expf"} : (tensor<1xf32>) -> tensor<1xf32>\n'
                '%l = tt.extern_elementwise %1 {symbol = "__nv_logf"} : (tensor<1xf32>) -> tensor<1xf32>\n')
        (k,) = rb.kernel_body_counts(text)
        self.assertEqual((k["dma"], k["copy"], k["exp"]), (2, 1, 1))

    def test_two_kernels_each_get_their_counts(self):
        text = fixture("mosaic_bq128_bkv128.mlir") + fixture("triton_bq128_bkv128.mlir")
        self.assertEqual([k["dialect"] for k in rb.kernel_body_counts(text)], ["mosaic", "triton"])


class SummaryShowsBodies(unittest.TestCase):
    RESULT = {"version": 1, "latencies_ms": [1.0], "device": "TPU v5 lite"}

    def test_hlo_stats_block_carries_the_body_counts(self):
        lines = rb.summary_lines(self.RESULT, TPU_HLO, env={},
                                 kernel_body_text=fixture("mosaic_bq128_bkv128.mlir"))
        block = lines[lines.index("HLO stats:"):]
        self.assertIn("    dot ops:         0", block)
        self.assertIn("    kernel body flash_attention (mosaic): matmul 2  exp 2  reduce 2  dma 0  copy 0",
                      block)

    def test_no_body_no_body_line(self):
        lines = rb.summary_lines(self.RESULT, TPU_HLO, env={})
        self.assertFalse(any("kernel body" in l for l in lines), lines)

    def test_run_prints_the_decoded_bodies_counts(self):
        # run() end to end on CPU, with the decoder handing back the TPU fixture's body (CPU
        # lowering has no Pallas custom call to decode).
        body = {"dialect": "triton", "target": "__gpu$xla.gpu.triton", "name": "flash_attention",
                "text": fixture("triton_bq128_bkv128.mlir").split("\n", 1)[1]}
        with tempfile.TemporaryDirectory() as d:
            env = {"RATCHET_OUT": os.path.join(d, "out"), "RATCHET_STATE_DIR": d,
                   "RATCHET_WARMUP": "0", "RATCHET_ITERS": "2", "RATCHET_PROFILE_ITERS": "0"}
            out = io.StringIO()
            with mock.patch.dict(os.environ, env), mock.patch.object(rb, "kernel_bodies", return_value=[body]), \
                    mock.patch.object(rb, "enable_compilation_cache"), redirect_stdout(out):
                result = rb.run(jax.jit(lambda x: x * 2.0), (jnp.ones(8),), flops=16, bytes=64)
        self.assertEqual(result["kernel_body"], rb.KERNEL_BODY_FILE)
        self.assertIn("    kernel body flash_attention (triton): matmul 2  exp 2  reduce 2  dma 0  copy 0",
                      out.getvalue().splitlines())


if __name__ == "__main__":
    unittest.main()
