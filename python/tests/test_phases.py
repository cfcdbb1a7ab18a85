"""The phase record of a run (`phases_s`, `kernel_calls`): every phase present in process
order, none negative, together no longer than the process's own wall; timed from ratchet's
spawn stamp when there is one."""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
sys.path.insert(0, PYTHON_DIR)

import ratchet_bench as rb  # noqa: E402

SCRIPT = textwrap.dedent(
    """
    import jax, jax.numpy as jnp
    import ratchet_bench

    @jax.jit
    def tiny_kernel(x):
        return jnp.tanh(x) * 2.0

    x = jnp.ones((8, 8), jnp.float32)
    ratchet_bench.run(tiny_kernel, (x,), flops=128, bytes=512,
                      check=lambda out: ratchet_bench.compare(out, jnp.tanh(x) * 2.0, 1e-5))
    """
)

# What every run of SCRIPT records (no --deep, so no snapshots).
EXPECTED = ["start_to_import", "imports", "setup", "backend_init", "compile", "hlo_dump",
            "warmup", "measured", "profiled", "profiler_overhead", "check", "result_write"]


def run_script(tmp, spawn_stamp):
    out = os.path.join(tmp, "out")
    os.makedirs(out, exist_ok=True)
    script = os.path.join(tmp, "bench.py")
    with open(script, "w") as f:
        f.write(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RATCHET_", "JAX_COMPILATION"))}
    env.update({"PYTHONPATH": PYTHON_DIR, "RATCHET_OUT": out,
                "RATCHET_STATE_DIR": os.path.join(tmp, "state"), "RATCHET_WARMUP": "2",
                "RATCHET_ITERS": "3", "RATCHET_PROFILE_ITERS": "2"})
    start = time.monotonic_ns()
    if spawn_stamp:
        env["RATCHET_SPAWN_NS"] = str(start)
    proc = subprocess.run([sys.executable, script], cwd=tmp, env=env, capture_output=True,
                          text=True, timeout=300)
    wall_s = (time.monotonic_ns() - start) / 1e9
    if proc.returncode != 0:
        raise AssertionError(proc.stderr)
    with open(os.path.join(out, rb.RESULT_FILE), encoding="utf-8") as f:
        return json.load(f), wall_s


class PhaseRecord(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.result, cls.wall_s = run_script(cls.tmp.name, spawn_stamp=True)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_every_phase_is_recorded_in_process_order(self):
        self.assertEqual(list(self.result["phases_s"]), EXPECTED)
        self.assertEqual([p for p in rb.PHASES if p in EXPECTED], EXPECTED)

    def test_no_phase_is_negative_and_together_they_fit_in_the_wall(self):
        phases = self.result["phases_s"]
        for name, s in phases.items():
            self.assertGreaterEqual(s, 0.0, name)
        self.assertLessEqual(sum(phases.values()), self.wall_s)

    def test_kernel_calls_count_warmup_measured_and_profiled(self):
        self.assertEqual(self.result["kernel_calls"], 2 + 3 + 2)

    def test_without_a_spawn_stamp_the_start_is_left_out(self):
        with tempfile.TemporaryDirectory() as tmp:
            result, _ = run_script(tmp, spawn_stamp=False)
        self.assertEqual(list(result["phases_s"]), EXPECTED[1:])


class SpawnStamp(unittest.TestCase):
    def test_unusable_stamps_are_ignored(self):
        for raw in ("", "x", "0", "-5", str(10**30)):
            self.assertIsNone(rb.spawn_ns({"RATCHET_SPAWN_NS": raw}), raw)
        self.assertIsNone(rb.spawn_ns({}))

    def test_a_stamp_before_the_import_is_taken(self):
        self.assertEqual(rb.spawn_ns({"RATCHET_SPAWN_NS": "1"}), 1)


if __name__ == "__main__":
    unittest.main()
