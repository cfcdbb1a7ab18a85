#!/usr/bin/env bash
# The project's test command (the README's second set-up command, and what CI runs): the Python
# helper's tests, then every Rust test (unit, integration, and the end-to-end test on the real
# JAX example when jax is importable).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${RATCHET_TEST_PYTHON:-python3}"
if [ -d python/tests ]; then
  echo "== python: ratchet_bench tests"
  "$PY" -m unittest discover -s python/tests
fi
echo "== cargo test"
cargo test --all-targets
