#!/usr/bin/env bash
# The project's test command (the README's second set-up command, and what CI runs): the Python
# helper's tests, then every Rust test (unit, integration, fuzz, and the end-to-end test on the
# real JAX example), then one closing line with the totals.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${RATCHET_TEST_PYTHON:-python3}"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
echo "== python: ratchet_bench and example tests"
"$PY" -m unittest discover -s python/tests 2>&1 | tee -a "$log"
echo "== cargo test"
cargo test --tests 2>&1 | tee -a "$log"
# Totals over both runners: cargo's "test result: ok. N passed; M failed" lines and unittest's
# "Ran N tests" (a failure there has already stopped this script).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed/) p += $(i-1); if ($i ~ /^failed/) f += $(i-1) } }
     /^Ran [0-9]+ tests?/ { p += $2 }
     END { printf "TOTAL: %d passed, %d failed\n", p, f }' "$log"
