#!/usr/bin/env bash
# The lab's checks (lab/: the simulator, the floors, the probes), run on purpose and not by
# scripts/test.sh: they build the lab in release mode (its simulations are slow unoptimised),
# run its unit and binary tests, and build every probe. Extra arguments go to `cargo test`
# (e.g. `scripts/lab.sh floor` for the floor's tests alone).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
cargo test --release -p ratchet-lab "$@"
cargo build --release -p ratchet-lab --examples
echo "lab checks passed in $(( $(date +%s) - start )) s"
