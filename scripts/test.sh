#!/usr/bin/env bash
# The project's test command (the README's second set-up command, and what CI runs): the Python
# helper's tests, then every Rust test (unit, integration, fuzz, and the end-to-end test on the
# real JAX example), then one closing line with the totals. The Python (one with jax: python3 on
# PATH, else ./.venv made once) comes from scripts/python-env.sh, the same bootstrap as demo.sh's;
# it is first on PATH for every test, so each `python3` a test starts is that interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -n "${RATCHET_TEST_PYTHON:-}" ] && export RATCHET_PYTHON="$RATCHET_TEST_PYTHON"
source scripts/python-env.sh
PY="$RATCHET_PY"
echo "python: $PY"
log="$(mktemp)"
start=$(date +%s)
# The captures of ../shared/fixtures come from public repositories and are not copied here:
# without them, the tests that read them pass after a note (cargo hides notes of passing tests,
# so say it here too).
if [ ! -d ../shared/fixtures ]; then
  echo "note: ../shared/fixtures is absent: the tests on real captures skip their checks (CI has them)"
fi
trap 'rm -f "$log"' EXIT
echo "== python: ratchet_bench and example tests"
"$PY" -m unittest discover -s python/tests 2>&1 | tee -a "$log"
echo "== cargo test"
cargo test --tests 2>&1 | tee -a "$log"
# Totals over both runners: cargo's "test result: ok. N passed; M failed" lines and unittest's
# "Ran N tests" (a failure there has already stopped this script).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed/) p += $(i-1); if ($i ~ /^failed/) f += $(i-1) } }
     /^Ran [0-9]+ tests?/ { p += $2 }
     END { printf "TOTAL: %d passed, %d failed", p, f }' "$log"
echo " in $(( $(date +%s) - start )) s"
# Where the time goes: the slowest test binaries (the loop's cases run in-process on the mock
# executor in seconds; binary tests pay for real processes).
echo "slowest test binaries:"
grep -E '^     Running |^test result:' "$log" | awk '/Running/ { name = $2 } /^test result:/ { t = $NF; sub(/s$/, "", t); printf "%8.1f s  %s\n", t, name }' | sort -rn | awk 'NR <= 5'
