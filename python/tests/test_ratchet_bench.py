"""Tests of ratchet_bench, the protocol helper ratchet puts on every benchmark's PYTHONPATH.

Run with `python3 -m unittest discover -s python/tests` from the repo root (no extra
packages beyond jax). Whole-protocol tests run a tiny jitted function in a subprocess,
the way ratchet runs a benchmark, and then read what it left in RATCHET_OUT.
"""

import atexit
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import types
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)

# measure() (and run()) enable the compilation cache under RATCHET_STATE_DIR: point it at a
# throw-away directory so the in-process tests leave nothing in the working directory.
_STATE = tempfile.mkdtemp(prefix="ratchet-bench-test-")
atexit.register(shutil.rmtree, _STATE, ignore_errors=True)
os.environ["RATCHET_STATE_DIR"] = _STATE
sys.path.insert(0, PYTHON_DIR)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import ratchet_bench as rb  # noqa: E402

ALLOWED_KEYS = {
    "version", "latencies_ms", "flops", "bytes", "min_bytes", "check", "trace", "hlo",
    "kernel", "backend", "device", "throttled", "meta", "snapshots", "kernel_body", "environment",
    "compiler_figures", "phases_s", "kernel_calls", "peak_memory_bytes",
}

BENCH_SCRIPT = textwrap.dedent(
    """
    import sys
    import jax, jax.numpy as jnp
    import numpy as np
    import ratchet_bench

    MODE = sys.argv[1]

    @jax.jit
    def tiny_kernel(x, y):
        return jnp.tanh(x @ y) * 2.0

    x = jnp.ones((32, 32), jnp.float32) * 0.01
    expected = jnp.tanh(x @ x) * 2.0
    if MODE == "wrong":
        expected = expected + 1.0
    if MODE == "raises":
        def tiny_kernel(x, y):
            raise RuntimeError("kernel exploded")
    ratchet_bench.run(
        tiny_kernel, (x, x),
        flops=2 * 32**3, bytes=3 * 32 * 32 * 4, min_bytes=3 * 32 * 32 * 4,
        check=lambda out: ratchet_bench.compare(out, expected, 1e-5),
        meta={"n": np.int64(32), "mode": MODE},
    )
    """
)


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def run_bench(mode, env_extra, cwd):
    """Run BENCH_SCRIPT as ratchet would: a fresh process with the RATCHET_* environment."""
    script = os.path.join(cwd, "bench.py")
    with open(script, "w") as f:
        f.write(BENCH_SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RATCHET_", "JAX_COMPILATION"))}
    env["PYTHONPATH"] = PYTHON_DIR
    env.update(env_extra)
    return subprocess.run(
        [sys.executable, script, mode], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=300,
    )


class ProtocolRunTest(unittest.TestCase):
    """One run under a ratchet-like environment, checked against protocol.md's schema."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.out = os.path.join(cls.tmp.name, "out")
        cls.state = os.path.join(cls.tmp.name, "state")
        os.makedirs(cls.out)
        cls.proc = run_bench(
            "ok",
            {
                "RATCHET_OUT": cls.out,
                "RATCHET_STATE_DIR": cls.state,
                "RATCHET_WARMUP": "1",
                "RATCHET_ITERS": "4",
                "RATCHET_PROFILE_ITERS": "2",
            },
            cls.tmp.name,
        )
        path = os.path.join(cls.out, "ratchet-result.json")
        cls.result = load_json(path) if os.path.exists(path) else None

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_exits_zero_and_prints_summary(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr)
        self.assertRegex(self.proc.stdout, r"(?m)^RESULT: .*latency=\d+\.\d+ms")
        self.assertRegex(self.proc.stdout, r"(?m)^REGIME: ")
        self.assertIn("HLO stats:", self.proc.stdout)

    def test_result_schema(self):
        r = self.result
        self.assertIsNotNone(r, self.proc.stderr)
        self.assertLessEqual(set(r), ALLOWED_KEYS)
        self.assertEqual(r["version"], 1)
        self.assertEqual(len(r["latencies_ms"]), 4)
        for x in r["latencies_ms"]:
            self.assertTrue(math.isfinite(x) and x > 0)
        self.assertEqual(r["flops"], 2 * 32**3)
        self.assertEqual(r["bytes"], 3 * 32 * 32 * 4)
        self.assertEqual(r["min_bytes"], 3 * 32 * 32 * 4)
        self.assertEqual(r["check"]["passed"], True)
        # What the run was measured with; no Pallas kernel, so no kernel body.
        self.assertEqual(r["environment"]["jax"], jax.__version__)
        self.assertEqual(r["environment"]["device_count"], len(jax.devices()))
        self.assertNotIn("kernel_body", r)
        self.assertEqual(r["check"]["tolerance"], 1e-5)
        self.assertLess(r["check"]["max_abs_err"], 1e-5)
        self.assertEqual(r["kernel"], "tiny_kernel")
        self.assertEqual(r["backend"], jax.default_backend())
        self.assertIsInstance(r["device"], str)
        self.assertEqual(r["meta"], {"n": 32, "mode": "ok"})

    def test_trace_and_hlo_written(self):
        r = self.result
        self.assertEqual(r["trace"], "profile")
        found = []
        for root, _, files in os.walk(os.path.join(self.out, r["trace"])):
            found += [f for f in files if f.endswith(".xplane.pb")]
        self.assertEqual(len(found), 1)
        with open(os.path.join(self.out, r["hlo"])) as f:
            hlo = f.read()
        self.assertIn("HloModule", hlo)
        self.assertIn("tanh", hlo)

    def test_no_temporary_file_left(self):
        self.assertEqual(
            sorted(os.listdir(self.out)), ["kernel.hlo.txt", "profile", "ratchet-result.json"]
        )

    def test_compilation_cache_under_state_dir(self):
        cache = os.path.join(self.state, "cache", "jax")
        entries = os.listdir(cache)
        self.assertTrue(any("tiny_kernel" in e for e in entries), entries)


class DeepRunTest(unittest.TestCase):
    """RATCHET_DEEP=1: snapshots under $RATCHET_OUT/snapshots/<n>/, listed in the result file."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.out = os.path.join(cls.tmp.name, "out")
        os.makedirs(cls.out)
        cls.proc = run_bench(
            "ok",
            {
                "RATCHET_OUT": cls.out,
                "RATCHET_STATE_DIR": os.path.join(cls.tmp.name, "state"),
                "RATCHET_WARMUP": "1",
                "RATCHET_ITERS": "3",
                "RATCHET_PROFILE_ITERS": "1",
                "RATCHET_DEEP": "1",
                "RATCHET_DEEP_SNAPSHOTS": "3",
                "RATCHET_DEEP_WINDOW": "2",
            },
            cls.tmp.name,
        )
        path = os.path.join(cls.out, "ratchet-result.json")
        cls.result = load_json(path) if os.path.exists(path) else None

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_snapshots_listed_and_written(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr)
        snaps = self.result["snapshots"]
        self.assertEqual([s["path"] for s in snaps], ["snapshots/0", "snapshots/1", "snapshots/2"])
        # Without xprof (or on CPU) every snapshot is a short trace window.
        self.assertTrue(all(s["source"] in ("trace", "continuous") for s in snaps))
        self.assertEqual([s["step"] for s in snaps], [0, 4, 8])
        times = [s["time_s"] for s in snaps]
        self.assertEqual(times, sorted(times))
        for s in snaps:
            self.assertLessEqual(set(s), {"path", "step", "time_s", "source"})
            found = [f for _, _, fs in os.walk(os.path.join(self.out, s["path"])) for f in fs
                     if f.endswith(".xplane.pb")]
            self.assertEqual(len(found), 1, s)

    def test_measured_figures_unchanged_by_deep(self):
        self.assertEqual(len(self.result["latencies_ms"]), 3)
        self.assertEqual(self.result["trace"], "profile")

    def test_no_deep_no_snapshots(self):
        s = rb.settings_from_env({"RATCHET_OUT": "/x"})
        self.assertFalse(s.deep)
        self.assertEqual((s.snapshots, s.window), (4, 2))
        s = rb.settings_from_env({"RATCHET_OUT": "/x", "RATCHET_DEEP": "1", "RATCHET_DEEP_SNAPSHOTS": "2"})
        self.assertTrue(s.deep)
        self.assertEqual(s.snapshots, 2)

    def test_falls_back_when_xprof_lacks_the_api(self):
        with mock.patch.dict(sys.modules, {"xprof": None}):
            self.assertIsNone(rb._continuous_api())

    def test_continuous_api_is_called_as_xprof_defines_it(self):
        # A stand-in for xprof.api.continuous_profiling_snapshot (xprof 2.24) whose snapshots
        # hold a capture, as on a TPU; it records how it was called.
        calls = []
        fake = types.ModuleType("xprof.api.continuous_profiling_snapshot")
        fake.start_continuous_profiling = lambda addr, options: calls.append(("start", addr, dict(options)))
        fake.stop_continuous_profiling = lambda addr: calls.append(("stop", addr))

        def get_snapshot(addr, logdir):
            calls.append(("snapshot", addr))
            with open(os.path.join(logdir, "host.xplane.pb"), "wb") as f:
                f.write(b"")

        fake.get_snapshot = get_snapshot
        api_pkg = types.ModuleType("xprof.api")
        api_pkg.continuous_profiling_snapshot = fake
        xprof_pkg = types.ModuleType("xprof")
        xprof_pkg.api = api_pkg
        modules = {"xprof": xprof_pkg, "xprof.api": api_pkg, "xprof.api.continuous_profiling_snapshot": fake}
        with tempfile.TemporaryDirectory() as d, mock.patch.dict(sys.modules, modules), \
                mock.patch.object(rb, "_profiler_server", return_value="localhost:9999"):
            settings = rb.settings_from_env({"RATCHET_OUT": d, "RATCHET_DEEP": "1", "RATCHET_DEEP_SNAPSHOTS": "2",
                                             "RATCHET_DEEP_WINDOW": "1"})
            f = jax.jit(lambda x: x * 2.0)
            compiled = f.lower(jnp.ones(4)).compile()
            snaps = rb.deep_snapshots(compiled, (jnp.ones(4),), settings, "cpu")
        self.assertEqual([s["source"] for s in snaps], ["continuous", "continuous"])
        self.assertEqual(calls, [("start", "localhost:9999", {}), ("snapshot", "localhost:9999"),
                                 ("snapshot", "localhost:9999"), ("stop", "localhost:9999")])


class FailureRunTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.tmp.name, "out")
        os.makedirs(self.out)
        self.env = {
            "RATCHET_OUT": self.out,
            "RATCHET_STATE_DIR": os.path.join(self.tmp.name, "state"),
            "RATCHET_WARMUP": "0",
            "RATCHET_ITERS": "2",
            "RATCHET_PROFILE_ITERS": "0",
        }

    def tearDown(self):
        self.tmp.cleanup()

    def test_wrong_output_is_recorded_as_failed_check(self):
        proc = run_bench("wrong", self.env, self.tmp.name)
        # A wrong kernel is a valid measurement of an invalid kernel: exit 0, passed false.
        self.assertEqual(proc.returncode, 0, proc.stderr)
        r = load_json(os.path.join(self.out, "ratchet-result.json"))
        self.assertIs(r["check"]["passed"], False)
        self.assertGreater(r["check"]["max_abs_err"], 0.5)
        self.assertNotIn("trace", r)  # RATCHET_PROFILE_ITERS=0
        self.assertIn("CHECK: FAILED", proc.stdout)
        self.assertIn("invalid", proc.stderr)

    def test_raising_kernel_exits_nonzero_without_result(self):
        proc = run_bench("raises", self.env, self.tmp.name)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("ratchet_bench: error:", proc.stderr)
        self.assertIn("kernel exploded", proc.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.out, "ratchet-result.json")))

    def test_bad_environment_exits_nonzero(self):
        self.env["RATCHET_ITERS"] = "0"
        proc = run_bench("ok", self.env, self.tmp.name)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("RATCHET_ITERS=0 must be at least 1", proc.stderr)


class PeakMemoryTest(unittest.TestCase):
    """The device's peak memory in use, as `memory_stats()` gives it (GPU, TPU), else none."""

    def device(self, stats):
        d = mock.Mock()
        d.memory_stats.return_value = stats
        return d

    def test_a_device_that_reports_memory(self):
        with mock.patch.object(rb.jax, "local_devices", return_value=[self.device({"peak_bytes_in_use": 3 << 30})]):
            self.assertEqual(rb.peak_memory_bytes(), 3 << 30)

    def test_a_device_that_does_not(self):
        for stats in (None, {}, {"peak_bytes_in_use": 0}):
            with mock.patch.object(rb.jax, "local_devices", return_value=[self.device(stats)]):
                self.assertIsNone(rb.peak_memory_bytes())
        broken = mock.Mock()
        broken.memory_stats.side_effect = RuntimeError("unimplemented")
        with mock.patch.object(rb.jax, "local_devices", return_value=[broken]):
            self.assertIsNone(rb.peak_memory_bytes())

    def test_the_cpu_run_records_none(self):
        if jax.default_backend() == "cpu":
            self.assertIsNone(rb.peak_memory_bytes())


class SettingsTest(unittest.TestCase):
    def test_defaults_by_hand(self):
        s = rb.settings_from_env({})
        self.assertEqual((s.warmup, s.iters, s.profile_iters), (5, 20, 10))
        self.assertEqual(s.out_dir, os.path.abspath("profile_data"))
        self.assertFalse(s.under_ratchet)

    def test_values_from_ratchet(self):
        s = rb.settings_from_env({
            "RATCHET_OUT": "/tmp/x", "RATCHET_WARMUP": "0", "RATCHET_ITERS": " 7 ",
            "RATCHET_PROFILE_ITERS": "0",
        })
        self.assertEqual((s.out_dir, s.warmup, s.iters, s.profile_iters), ("/tmp/x", 0, 7, 0))
        self.assertTrue(s.under_ratchet)

    def test_invalid_values(self):
        with self.assertRaisesRegex(rb.BenchError, "RATCHET_WARMUP='five' is not an integer"):
            rb.settings_from_env({"RATCHET_WARMUP": "five"})
        with self.assertRaisesRegex(rb.BenchError, "RATCHET_PROFILE_ITERS=-1"):
            rb.settings_from_env({"RATCHET_PROFILE_ITERS": "-1"})


class CompilationCacheTest(unittest.TestCase):
    def setUp(self):
        self.saved = jax.config.jax_compilation_cache_dir
        jax.config.update("jax_compilation_cache_dir", None)
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        jax.config.update("jax_compilation_cache_dir", self.saved)
        self.tmp.cleanup()

    def test_cache_under_state_dir_with_low_thresholds(self):
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
        got = rb.enable_compilation_cache({"RATCHET_STATE_DIR": self.tmp.name})
        want = os.path.join(self.tmp.name, "cache", "jax")
        self.assertEqual(got, want)
        self.assertTrue(os.path.isdir(want))
        self.assertEqual(jax.config.jax_compilation_cache_dir, want)
        self.assertEqual(jax.config.jax_persistent_cache_min_compile_time_secs, 0.0)
        self.assertEqual(jax.config.jax_persistent_cache_min_entry_size_bytes, -1)

    def test_cwd_dot_ratchet_without_ratchet(self):
        cwd = os.getcwd()
        os.chdir(self.tmp.name)
        try:
            got = rb.enable_compilation_cache({})
        finally:
            os.chdir(cwd)
        self.assertEqual(
            os.path.realpath(got), os.path.realpath(os.path.join(self.tmp.name, ".ratchet", "cache", "jax"))
        )

    def test_user_choice_kept(self):
        jax.config.update("jax_compilation_cache_dir", self.tmp.name)
        got = rb.enable_compilation_cache({"RATCHET_STATE_DIR": "/nonexistent"})
        self.assertEqual(got, self.tmp.name)
        self.assertEqual(jax.config.jax_compilation_cache_dir, self.tmp.name)


class WriteResultTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.tmp.name, "ratchet-result.json")

    def tearDown(self):
        self.tmp.cleanup()

    def test_replaces_whole_file(self):
        rb.write_result(self.tmp.name, {"version": 1, "latencies_ms": [1.0]})
        rb.write_result(self.tmp.name, {"version": 1, "latencies_ms": [2.0, 3.0]})
        self.assertEqual(load_json(self.path)["latencies_ms"], [2.0, 3.0])
        self.assertEqual(os.listdir(self.tmp.name), ["ratchet-result.json"])

    def test_failed_write_leaves_previous_file_intact(self):
        rb.write_result(self.tmp.name, {"version": 1, "latencies_ms": [1.0]})

        def broken_dump(obj, f, **kw):
            f.write('{"version": 1, "latenc')
            raise OSError("disk full")

        with mock.patch.object(rb.json, "dump", broken_dump):
            with self.assertRaises(OSError):
                rb.write_result(self.tmp.name, {"version": 1, "latencies_ms": [9.0]})
        self.assertEqual(load_json(self.path)["latencies_ms"], [1.0])
        self.assertEqual(os.listdir(self.tmp.name), ["ratchet-result.json"])

    def test_refuses_nan(self):
        with self.assertRaises(ValueError):
            rb.write_result(self.tmp.name, {"version": 1, "latencies_ms": [float("nan")]})
        self.assertEqual(os.listdir(self.tmp.name), [])


class CheckTest(unittest.TestCase):
    def test_compare(self):
        a = np.array([1.0, 2.0], np.float32)
        ok = rb.compare(a, a + 0.01, 0.02)
        self.assertTrue(ok["passed"])
        self.assertAlmostEqual(ok["max_abs_err"], 0.01, places=5)
        self.assertFalse(rb.compare(a, a + 0.1, 0.02)["passed"])

    def test_compare_nan_fails_without_nan_in_json(self):
        r = rb.compare(np.array([np.nan], np.float32), np.array([0.0], np.float32), 1.0)
        self.assertEqual(r, {"passed": False, "tolerance": 1.0})

    def test_normalise(self):
        self.assertEqual(rb._normalise_check(True), {"passed": True})
        self.assertEqual(rb._normalise_check(np.bool_(False)), {"passed": False})
        self.assertEqual(
            rb._normalise_check({"passed": 1, "max_abs_err": np.float32(0.5), "tolerance": None}),
            {"passed": True, "max_abs_err": 0.5},
        )
        with self.assertRaisesRegex(rb.BenchError, "unknown keys \\['err'\\]"):
            rb._normalise_check({"passed": True, "err": 1})
        with self.assertRaisesRegex(rb.BenchError, "return a bool or a dict"):
            rb._normalise_check(0.001)


class SummaryTest(unittest.TestCase):
    RESULT = {
        "version": 1, "latencies_ms": [2.0, 2.12, 3.0], "flops": 138.8e9, "bytes": 136e6,
        "min_bytes": 6e6, "device": "TPU v5 lite",
        "check": {"passed": True, "max_abs_err": 0.001, "tolerance": 0.02},
    }

    def test_article_figures_with_known_peaks(self):
        lines = rb.summary_lines(self.RESULT, env={})
        # The article's worked example: 138.8 GFLOP in 2.12 ms on a v5e (197 TFLOP/s, 819 GB/s).
        self.assertEqual(lines[0], "RESULT: score=15.7  latency=2.120ms  util=33.2%  tflops=65.47")
        # Right of the ridge with 67% of the time gap: the article's own word for it (a large
        # gap is a finding, not another regime).
        self.assertEqual(lines[1], "REGIME: COMPUTE-BOUND  BW=7.8%  intensity=1021 FLOPs/byte")

    def test_regime_word_is_ratchets(self):
        # Near the compute roof: 138.8 GFLOP at 0.8 ms on a v5e is 88% of peak.
        r = dict(self.RESULT, latencies_ms=[0.8, 0.8, 0.8])
        self.assertTrue(rb.summary_lines(r, env={})[1].startswith("REGIME: COMPUTE-BOUND"))
        self.assertEqual(rb.regime_word(True, 0.91), "LATENCY-BOUND")
        self.assertEqual(rb.regime_word(True, 0.90), "MEMORY-BOUND")
        self.assertEqual(rb.regime_word(False, 0.05), "COMPUTE-BOUND")

    def test_env_peaks_override_and_unknown_device(self):
        r = dict(self.RESULT, device="cpu")
        self.assertTrue(rb.summary_lines(r, env={})[1].startswith("REGIME: UNKNOWN  intensity=1021"))
        self.assertEqual(rb.peak_figures("cpu", {"RATCHET_PEAK_TFLOPS": "1", "RATCHET_HBM_GBPS": "50"}), (1.0, 50.0))
        self.assertIsNone(rb.peak_figures("cpu", {}))
        self.assertEqual(rb.peak_figures("NVIDIA H100 80GB HBM3", {}), (989.0, 3350.0))

    def test_hlo_stats(self):
        text = "%a = f32[2] dot(x, y)\n%b = f32[2] exponential(a)\n%c = f32[2] copy(b)\n%d = reduce(c)\n"
        st = rb.hlo_stats(text)
        self.assertEqual((st["dot"], st["exponential"], st["copy"], st["reduce"]), (1, 1, 1, 1))


if __name__ == "__main__":
    unittest.main()
