#!/bin/bash
# End-to-end spot check of a bimodal machine on the binary (docs/decisions.md, "More power per
# run"): warmup.sh's N experiments of +3% each, on a benchmark whose runs are 5% slower one time
# in ten, CV 1% noise otherwise, and no warm-up ramp.
# Usage: scripts/spot-check/bimodal.sh [BINARY] [N] [DIR]
SPOT_BENCH=bimodal_bench.py exec "$(dirname "$0")/warmup.sh" "$@"
