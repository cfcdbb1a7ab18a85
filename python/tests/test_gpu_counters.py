"""The example's GPU traffic model against an H200's hardware counters.

tests/fixtures/example-gpu/ncu-seq16384-bq128-bkv64-w4-s2.csv is Nsight Compute's CSV for three
launches of the example's Triton form at the source article's size (seq 16384, head_dim 128,
bf16, one head) with the starting GPU tiling, written by scripts/gpu-check/run.sh on
2026-11-26 (docs/gpu.md). It checks what the roofline and the diagnosis assume on a GPU: that
the K/V re-reads of the Q blocks are L2 hits, not HBM traffic, and that the tiling the
diagnosis calls spilling runs at the register cap. ncu-spills-seq16384.csv counts, for one
launch of each tiling of scripts/gpu-check/spills.py (same day, same H200), the local-memory
bytes that spilled registers cost.
"""

import csv
import importlib.util
import os
import statistics
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
COUNTERS = os.path.join(REPO, "tests", "fixtures", "example-gpu", "ncu-seq16384-bq128-bkv64-w4-s2.csv")
SPILLS = os.path.join(REPO, "tests", "fixtures", "example-gpu", "ncu-spills-seq16384.csv")
SPILLS_SCRIPT = os.path.join(REPO, "scripts", "gpu-check", "spills.py")
KERNEL = os.path.join(REPO, "examples", "flash_attention", "kernel.py")

# The f32 values of the score tile and the accumulator a GPU thread can hold before the
# diagnosis names spilling (src/diagnose: GPU_TILE_REGISTERS), and the per-thread cap of
# NVIDIA's architectures since Kepler (CUDA C++ Programming Guide, "Compute Capabilities").
GPU_TILE_REGISTERS = 128
REGISTERS_PER_THREAD_CAP = 255


def launches(path):
    """Metric name -> one value per profiled launch, as numbers."""
    by_launch = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            value = float(row["Metric Value"].replace(",", ""))
            by_launch.setdefault(row["ID"], {})[row["Metric Name"]] = value
    metrics = {}
    for launch in by_launch.values():
        for name, value in launch.items():
            metrics.setdefault(name, []).append(value)
    return metrics


class HardwareCountersTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        spec = importlib.util.spec_from_file_location("fa_kernel_counters", KERNEL)
        cls.k = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(cls.k)
        cls.m = launches(COUNTERS)
        cls.meta = cls.k.get_tiling_meta(1, 16384, 128, bq=128, bkv=64, variant="triton")
        cls.meta["variant"] = "triton"

    def test_three_launches_of_the_kernel_were_counted(self):
        self.assertEqual(len(self.m["dram__bytes_read.sum"]), 3)
        self.assertEqual(self.m["launch__grid_size"], [self.meta["heads"] * self.meta["num_q_blocks"]] * 3)

    def test_hbm_reads_match_the_model_that_counts_each_input_once(self):
        tile = self.meta["heads"] * self.meta["seq"] * self.meta["head_dim"] * 2
        # The model's traffic less the output's write (which stays in L2 during the kernel:
        # dram__bytes_write is under 2 KB) is what must come from HBM.
        model_reads = self.k.estimate_actual_memory_traffic(self.meta, 2) - tile
        measured = statistics.median(self.m["dram__bytes_read.sum"])
        self.assertLess(abs(measured / model_reads - 1), 0.01, (measured, model_reads))
        self.assertLess(max(self.m["dram__bytes_write.sum"]), 0.001 * tile)

    def test_counters_rule_out_the_tpu_re_read_model(self):
        # The TPU's model (every Q block copies K and V from HBM again) would put 85x the
        # measured bytes on the bus at this size.
        tpu = dict(self.meta, variant="mosaic")
        tile = tpu["heads"] * tpu["seq"] * tpu["head_dim"] * 2
        tpu_reads = self.k.estimate_actual_memory_traffic(tpu, 2) - tile
        measured = statistics.median(self.m["dram__bytes_read.sum"])
        self.assertLess(measured * 80, tpu_reads)

    def test_the_tiling_called_spilling_runs_at_the_register_cap(self):
        warps = self.m["launch__block_size"][0] / 32
        per_thread = (self.meta["BQ"] * self.meta["BKV"] + self.meta["BQ"] * self.meta["head_dim"]) / (32 * warps)
        self.assertGreater(per_thread, GPU_TILE_REGISTERS)
        self.assertEqual(set(self.m["launch__registers_per_thread"]), {REGISTERS_PER_THREAD_CAP})


class SpillCountersTest(unittest.TestCase):
    """Spill bytes per tiling against the diagnosis's per-thread estimate."""

    def test_spills_appear_exactly_where_the_estimate_passes_the_threshold(self):
        spec = importlib.util.spec_from_file_location("gpu_check_spills", SPILLS_SCRIPT)
        script = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(script)
        m = launches(SPILLS)
        local = [ld + st for ld, st in zip(m["l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum"],
                                           m["l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum"])]
        self.assertEqual(len(local), len(script.TILINGS))
        for (bq, bkv, warps, stages), spilled, threads in zip(script.TILINGS, local, m["launch__block_size"]):
            self.assertEqual(threads, 32 * warps)
            per_thread = (bq * bkv + bq * 128) / (32 * warps)
            # Past the threshold the spills are hundreds of MB a call; at or under it, none.
            self.assertEqual(spilled > 0, per_thread > GPU_TILE_REGISTERS, (bq, bkv, warps, stages, spilled))
        self.assertGreater(max(local), 100e6)


if __name__ == "__main__":
    unittest.main()
