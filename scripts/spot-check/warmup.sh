#!/bin/bash
# End-to-end spot check of a warm-up ramp on the binary (docs/decisions.md, "More power per
# run"): one `ratchet calibrate`, then N experiments in a row, each +3% faster than the current
# incumbent, on a benchmark whose runs are 10% slow at each experiment's start (decaying over 3
# runs) with CV 1% noise. Prints the keeps, the mean runs and how many intervals cover +3%.
# SPOT_BENCH names another benchmark script beside this one (bimodal.sh sets it).
# Usage: scripts/spot-check/warmup.sh [BINARY] [N] [DIR]
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BIN=$(realpath "${1:-$ROOT/target/release/ratchet}")
N=${2:-60}
DIR=${3:-$(mktemp -d)}
rm -rf "$DIR"; mkdir -p "$DIR"; cd "$DIR"
git init -q -b main; git config user.name T; git config user.email t@e.com
cat > ratchet.toml <<TOML
[benchmark]
command = "python3 $HERE/${SPOT_BENCH:-warmup_bench.py}"
timeout_s = 20
kill_grace_s = 0.5
warmup = 0
iters = 3
profile_iters = 0
[hardware]
preset = "tpu-v5e"
[score]
metric = "latency"
TOML
echo "BQ = 1" > kernel.py; echo "BASE_MS=10" > base.env
git add -A; git commit -qm baseline
export FAKE_BENCH=$ROOT/tests/support/fake_bench.py
# Logs go under .git: a file in the work tree would be part of the next hypothesis.
"$BIN" calibrate --pairs 16 > .git/calibrate.log 2>&1
base=10
for i in $(seq 1 "$N"); do
  nb=$(python3 -c "print($base / 1.03)")
  echo "BASE_MS=$nb" > base.env
  "$BIN" "exp $i: 3% faster" > /dev/null 2>&1 || true
  st=$(python3 -c "import csv; print(list(csv.DictReader(open('results/results.csv')))[-1]['status'])")
  if [ "$st" = "keep" ]; then base=$nb; else echo "BASE_MS=$base" > base.env; fi
done
python3 - <<PY
import csv
from collections import Counter
rows = list(csv.DictReader(open('results/results.csv')))
n = len(rows)
cover = sum(1 for r in rows if r['ci_low_pct'] and float(r['ci_low_pct']) <= 3.0 <= float(r['ci_high_pct']))
print('experiments', n, dict(Counter(r['status'] for r in rows)), 'mean runs %.1f' % (sum(int(r['runs']) for r in rows) / n), 'intervals covering +3%%: %d/%d' % (cover, n))
PY
