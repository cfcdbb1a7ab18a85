"""`import ratchet_bench` has no side effects: it creates no directory and leaves JAX's global
configuration as it was; the compilation cache is turned on by `measure` / `run`."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)

# Imports jax, records the settings the helper used to change at import, imports the helper and
# prints both records and what the working directory holds afterwards.
PROBE = """
import json, os, jax
keys = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs",
        "jax_persistent_cache_min_entry_size_bytes")
before = {k: getattr(jax.config, k) for k in keys}
import ratchet_bench
after = {k: getattr(jax.config, k) for k in keys}
print(json.dumps({"before": before, "after": after, "cwd": sorted(os.listdir("."))}))
"""


class ImportSideEffects(unittest.TestCase):
    def probe(self, extra_env):
        with tempfile.TemporaryDirectory() as cwd:
            env = {k: v for k, v in os.environ.items()
                   if not k.startswith(("RATCHET_", "JAX_COMPILATION", "JAX_PERSISTENT"))}
            env["PYTHONPATH"] = PYTHON_DIR
            env.update(extra_env)
            proc = subprocess.run([sys.executable, "-c", PROBE], cwd=cwd, env=env,
                                  capture_output=True, text=True, timeout=120)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            return json.loads(proc.stdout.strip().splitlines()[-1])

    def test_import_in_an_empty_directory_creates_nothing_and_changes_no_setting(self):
        got = self.probe({})
        self.assertEqual(got["cwd"], [])
        self.assertEqual(got["after"], got["before"])

    def test_import_under_ratchet_leaves_the_state_directory_alone(self):
        with tempfile.TemporaryDirectory() as state:
            got = self.probe({"RATCHET_STATE_DIR": state})
            self.assertEqual(os.listdir(state), [])
        self.assertEqual(got["after"], got["before"])


if __name__ == "__main__":
    unittest.main()
