#!/bin/bash
# End-to-end spot check of the decision on the binary, model by model (lab/notes/decisions-history.md, "On
# the binary, model by model"): for each noise model of lab/spot-check/noise_bench.py, one
# throw-away git repo with one `ratchet calibrate` of 16 pairs, copied twice: N_NULL experiments
# of a do-nothing change in one copy and N_GAIN experiments each +3% faster than the incumbent of
# its time in the other (GAIN_PCT=10: +10%; N_NULL=0 skips the do-nothing cells). Before
# every experiment noise.json is put back to the calibration's, so each decision borrows the 15-df scale of one calibration, as `ratchet-lab simulate` does (a history
# that grew with the experiments would absorb a noise jump). Prints per model and change: kept %
# with its 95% Clopper-Pearson interval, mean runs per decision, how many 96% intervals (of
# decisions with 6 pairs or more, as the simulator counts them) cover the truth; beside them
# `ratchet-lab simulate`'s figures for the same model (SIM_TRIALS per cell, its table's seed).
# SPOT_METHOD=M: every repo (and the simulator) decides by that [decision] method (default
# robust-ratio, the product's; auto for the earlier rule, sequential for the tables of 2026-11-26).
# SPOT_CAL_PAIRS=N: calibrate with N pairs in place of 16 (61, `ratchet calibrate`'s default: a
# history that shows one mode on enough pairs for the ratio's one-mode level); the simulator's
# figures are then those of `simulate --history-pairs N`.
# SPOT_KEEP_CAL=1: a model whose calibrated repo is already in SPOT_OUT keeps it, so two builds
# compared on one model borrow the same calibration (one calibration steers every decision).
# Usage: [SPOT_OUT=DIR] [SPOT_REPORT=1] [SPOT_METHOD=M] [SPOT_CAL_PAIRS=N] [SPOT_KEEP_CAL=1] [LAB_BIN=PATH] lab/spot-check/models.sh [BINARY]
#        [N_NULL] [N_GAIN] [MODEL ...]
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BIN=$(realpath "${1:-$ROOT/target/release/ratchet}")
# The simulator's figures come from the lab binary (`cargo build --release -p ratchet-lab`).
LAB=$(realpath "${LAB_BIN:-$ROOT/target/release/ratchet-lab}")
N_NULL=${2:-20}
N_GAIN=${3:-20}
shift $(( $# < 3 ? $# : 3 ))
MODELS=${*:-cv1 warmup bimodal ar05 ar08 t3 jump15 jump3 jump10 t3jump3 boundary3 rising trend}
SIM_TRIALS=${SIM_TRIALS:-4000}
GAIN_PCT=${GAIN_PCT:-3}
OUT=${SPOT_OUT:-$(mktemp -d)}
mkdir -p "$OUT"
export FAKE_BENCH=$ROOT/tests/support/fake_bench.py

# One model's calibrated repo: MODEL, in $OUT/MODEL-cal.
calibrated() {
  local model=$1 dir=$OUT/$1-cal
  rm -rf "$dir"; mkdir -p "$dir"
  (
    cd "$dir"
    git init -q -b main; git config user.name T; git config user.email t@e.com
    cat > ratchet.toml <<TOML
[benchmark]
command = "python3 $HERE/noise_bench.py"
timeout_s = 20
kill_grace_s = 0.5
warmup = 0
iters = 3
profile_iters = 0
[hardware]
preset = "tpu-v5e"
[score]
metric = "latency"
[decision]
method = "${SPOT_METHOD:-robust-ratio}"
TOML
    echo "BQ = 1" > kernel.py; echo "BASE_MS=10" > base.env
    git add -A; git commit -qm baseline
    # Logs and saved state go under .git: a file in the work tree would be part of the next
    # hypothesis.
    SPOT_MODEL=$model SPOT_DIR=$dir SPOT_STATE=$dir/.git/ar-state SPOT_STAGE=calibrate \
      "$BIN" calibrate --pairs "${SPOT_CAL_PAIRS:-16}" > .git/calibrate.log 2>&1
    cp "$(find . -name noise.json -not -path './.git/*' | head -1)" .git/noise.calibrated
  )
}

# One cell: MODEL, CHANGE (null or gain), N experiments, in a copy of the model's calibrated
# repo (both cells of a model borrow from the same calibration).
cell() {
  local model=$1 change=$2 n=$3 dir=$OUT/$1-$2
  rm -rf "$dir"; cp -a "$OUT/$model-cal" "$dir"
  # The calibration's incumbent checkout is a git worktree of the original: the copy makes its own.
  rm -rf "$dir/.ratchet/worktrees" "$dir/.git/worktrees"
  (
    cd "$dir"
    export SPOT_MODEL=$model SPOT_DIR=$dir SPOT_STATE=$dir/.git/ar-state
    noise=$(find . -name noise.json -not -path './.git/*' | head -1)
    base=10
    for i in $(seq 1 "$n"); do
      cp .git/noise.calibrated "$noise"
      if [ "$change" = gain ]; then
        nb=$(python3 -c "print($base / (1 + $GAIN_PCT / 100))")
        echo "BASE_MS=$nb" > base.env
      else
        nb=$base
        printf 'BASE_MS=%s\n# experiment %s\n' "$base" "$i" > base.env
      fi
      "$BIN" "exp $i: $change" > /dev/null 2>&1 || true
      st=$(python3 -c "import csv; print(list(csv.DictReader(open('results/results.csv')))[-1]['status'])")
      if [ "$st" = "keep" ]; then base=$nb; fi
    done
  )
}

cd "$OUT"
# The simulator's figures for the same models, from one run of its full table (kept in $OUT,
# so several runs of this script on one SPOT_OUT, on other models, share it).
[ -s "$OUT/simulate.md" ] || "$LAB" simulate --defaults --method "${SPOT_METHOD:-robust-ratio}" --history-pairs "${SPOT_CAL_PAIRS:-16}" --trials "$SIM_TRIALS" --null-trials "$SIM_TRIALS" > "$OUT/simulate.md"
# SPOT_REPORT=1: no experiments, only the table from the records already in SPOT_OUT.
[ -n "$SPOT_REPORT" ] || for model in $MODELS; do
  [ -n "$SPOT_KEEP_CAL" ] && [ -d "$OUT/$model-cal" ] || calibrated "$model"
  [ "$N_NULL" -gt 0 ] && cell "$model" null "$N_NULL"
  [ "$N_GAIN" -gt 0 ] && cell "$model" gain "$N_GAIN"
  echo "$(date -u +%H:%M:%S) $model done" >&2
done
python3 - "$OUT" "$GAIN_PCT" $MODELS <<'PY'
import csv, math, os, sys
out, gain_pct, models = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
NAMES = {
    "cv1": "cv 1%", "cv3": "cv 3%", "warmup": "cv 1% + 10% warm-up ramp", "bimodal": "cv 1% bimodal 10% 5% slower",
    "ar05": "AR(1) 0.5, cv 1%", "ar08": "AR(1) 0.8, cv 1%", "t3": "t(3) tails, cv 1%",
    "jump15": "cv 1%, 1.5x history", "jump3": "cv 1%, 3x history", "jump10": "cv 1%, 10x history",
    "t3jump3": "t(3) tails, cv 1%, 3x history", "boundary3": "cv 1%, 3x history at the confirmation",
    "rising": "cv 1% rising to 3x history", "trend": "cv 1% + throttling trend 0.3%/run",
    "warmup4x": "cv 1% + 10% warm-up ramp, 4x history", "warmup6x": "cv 1% + 10% warm-up ramp, 6x history",
    "period7": "cv 1%, every 7th run 15% slower", "throttle7": "cv 1% + throttle 1/7",
    "rare": "cv 1%, 1% of runs 2-5x slower",
    "cand2x": "cv 1%, candidate 2x noisier", "cand3x": "cv 1%, candidate 3x noisier",
}

def binom_cdf(k, n, p):
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))

def bisect(f, lo=0.0, hi=1.0):
    # f increasing in p: the p where it crosses 0.
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
    return (lo + hi) / 2

def cp(k, n):
    # Clopper-Pearson 95%: P(X >= k; p_lo) = 0.025, P(X <= k; p_hi) = 0.025.
    lo = 0.0 if k == 0 else bisect(lambda p: (1 - binom_cdf(k - 1, n, p)) - 0.025)
    hi = 1.0 if k == n else bisect(lambda p: 0.025 - binom_cdf(k, n, p))
    return lo, hi

sim = {}
section = None
for line in open(f"{out}/simulate.md"):
    if line.startswith("### "):
        section = "history" if "With history" in line else "first"
    if section == "history" and line.startswith("| ") and not line.startswith("| scenario"):
        c = [x.strip() for x in line.strip().strip("|").split("|")]
        sim[(c[0], c[1])] = c

print("| model | change | kept (binary) | 95% CP | runs | 96% intervals covering | simulator: kept | simulator: runs | simulator: covering |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for m in models:
    for change, truth, gain in (("null", 0.0, "+0%"), ("gain", gain_pct, f"+{gain_pct:.0f}%")):
        if not os.path.exists(f"{out}/{m}-{change}/results/results.csv"):
            continue
        rows = list(csv.DictReader(open(f"{out}/{m}-{change}/results/results.csv")))
        n = len(rows)
        k = sum(r["status"] == "keep" for r in rows)
        runs = sum(int(r["runs"]) for r in rows) / n
        long = [r for r in rows if int(r["runs"]) >= 12 and r["ci_low_pct"]]
        cover = sum(float(r["ci_low_pct"]) <= truth <= float(r["ci_high_pct"]) for r in long)
        lo, hi = cp(k, n)
        s = sim.get((NAMES[m], gain))
        sk, sr, sc = (f"{s[3]} {s[4]}", s[7], s[9]) if s else ("-", "-", "-")
        print(f"| {NAMES[m]} | {gain} | {k}/{n} = {100 * k / n:.1f}% | [{100 * lo:.1f}, {100 * hi:.1f}] | {runs:.1f} | {cover}/{len(long)} | {sk} | {sr} | {sc} |")
PY
