#!/usr/bin/env bash
# Regenerate results/: the reference run's review of the embedded example (the FlashAttention
# kernel in examples/flash_attention with the hypotheses in experiments/).
#
# Runs scripts/demo.sh (a fresh scratch repo, `ratchet sweep`, the results table and the charts),
# then copies its review here: table.txt (`ratchet results` at 80 columns),
# results.csv, the charts as SVG (staircase, roofline, runs, the latest looks), the HTML report
# and run.txt (when, where, with which ratchet and jax). Commit the new results/ with the change
# that moved its figures.
#
#   ./scripts/reference-run.sh               a full run (the demo: several minutes on CPU)
#   ./scripts/reference-run.sh --from-demo   copy the review of the last demo again, without
#                                            re-running it (after a change to the rendering)
#
# Environment: as scripts/demo.sh (RATCHET_BIN, RATCHET_PYTHON, RATCHET_DEMO_DIR).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEMO="${RATCHET_DEMO_DIR:-$ROOT/target/demo/flash_attention}"
OUT="$ROOT/results"
LOG="$(dirname "$DEMO")/reference-run.log"
# The commit the run measured, noted before the demo builds it (a later --from-demo reads it).
COMMIT_FILE="$(dirname "$DEMO")/reference-run.commit"

case "${1:-}" in
    "") mkdir -p "$(dirname "$DEMO")"
        dirty=""
        [[ -z "$(git -C "$ROOT" status --porcelain --untracked-files=no)" ]] || dirty=" plus uncommitted changes"
        echo "$(git -C "$ROOT" rev-parse --short HEAD)$dirty" > "$COMMIT_FILE"
        RATCHET_DEMO_DIR="$DEMO" "$ROOT/scripts/demo.sh" 2>&1 | tee "$LOG" ;;
    --from-demo) [[ -s "$DEMO/results/results.csv" ]] || { echo "reference-run.sh: no demo at $DEMO: run without --from-demo" >&2; exit 1; } ;;
    *) echo "usage: scripts/reference-run.sh [--from-demo]" >&2; exit 2 ;;
esac

RATCHET="${RATCHET_BIN:-$ROOT/target/release/ratchet}"
[[ -x "$RATCHET" ]] || { echo "reference-run.sh: no ratchet binary at $RATCHET" >&2; exit 1; }

rm -rf "$OUT"
mkdir -p "$OUT"
(cd "$DEMO" && COLUMNS=80 "$RATCHET" results) > "$OUT/table.txt"
cp "$DEMO/results/results.csv" "$OUT/"
cp "$DEMO"/results/plots/*.svg "$OUT/"
cp "$DEMO/results/report.html" "$OUT/"
{
    echo "reference run of the embedded example (scripts/reference-run.sh)"
    # When its last row was written (a --from-demo run renders the report again later).
    echo "demo finished: $(date -u -r "$DEMO/results/results.csv" '+%Y-%m-%d %H:%M UTC')"
    echo "ratchet: $("$RATCHET" --version), built from commit $(cat "$COMMIT_FILE" 2>/dev/null || echo unknown)"
    # The demo's own first lines name the Python, jax and backend it used (the interpreter by
    # its name: this file names no machine's paths).
    { grep -m1 "^==> python:" "$LOG" 2>/dev/null || true; } | sed -E "s/^==> //; s#^python: [^ ]*/#python: #"
    echo "host: $(uname -sm), $(nproc) CPUs"
    echo "experiments: $(ls "$ROOT"/experiments/*.toml | wc -l) hypotheses in experiments/, in name order"
    # The first experiment as the sweep printed it (stdout and stderr, as a log shows them): the
    # README's sample of what an experiment prints is this block (tests/review/reference_results.rs).
    echo
    echo "what the first experiment printed:"
    awk '/^experiment [0-9]+: /{on=1} on && /^$/{exit} on' "$LOG"
} > "$OUT/run.txt"
echo "wrote $OUT:"
ls -l "$OUT"
