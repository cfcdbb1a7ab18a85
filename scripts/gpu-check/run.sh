#!/usr/bin/env bash
# The GPU check in one command, for a machine with one NVIDIA GPU and a python3 whose jax sees it
# (run from the repository root, with a release build of ratchet at hand):
#
#   RATCHET_BIN=target/release/ratchet OUT=some/dir scripts/gpu-check/run.sh
#
# 1. the machine: nvidia-smi, jax and its devices;
# 2. scripts/gpu-check/probe.py: the example's Triton form over a grid of tilings, checked against
#    an f32 reference and timed, beside jax.nn.dot_product_attention (cuDNN, XLA) at the source
#    article's size (seq 16384, head_dim 128, bf16);
# 3. a small capture of the example benchmark (seq 4096, 3 profiled calls) as a ratchet run
#    directory, read by `ratchet inspect` and by the independent decoder
#    tests/helpers/xplane_reference.py (what tests/fixtures/example-gpu/ is made from);
# 4. the benchmark at seq 16384 under Nsight Compute (ncu), for the kernel's device time and DRAM bytes
#    from the hardware counters, against what the trace and the cost model say, then
#    scripts/gpu-check/spills.py under it for each tiling's registers and spill bytes;
# 5. scripts/demo.sh as a whole: on a GPU it sweeps experiments/gpu/ with the chip's preset;
# 6. `ratchet calibrate` in the demo's repo.
# Each step has its own time limit, so one that hangs costs only its own share. Everything lands
# in OUT as gpu-check.tar.gz (logs, the demo's results and records) and fixture.tar.gz (the
# capture), re-packed after every step so that a cut-off call still returns what was done.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
OUT="${OUT:-$ROOT/target/gpu-check}"
BIN="$(realpath "${RATCHET_BIN:-$ROOT/target/release/ratchet}")"
W="${RATCHET_GPU_CHECK_DIR:-/tmp/ratchet-gpu-check}"
export PYTHONUNBUFFERED=1
rm -rf "$W"
mkdir -p "$W" "$OUT"
T0=$SECONDS
stage() { printf '\n== [%4d s] %s\n' "$((SECONDS - T0))" "$*" | tee -a "$W/summary.txt"; }
note() { printf '%s\n' "$*" | tee -a "$W/summary.txt"; }
pack() {
    # Traces of every run would not fit: keep the demo's results, records and git log, and the
    # capture's files whole.
    tar -czf "$OUT/gpu-check.tar.gz" -C "$W" --exclude='*.xplane.pb' --exclude='cache' --exclude='worktrees' \
        --exclude='.git' . 2>/dev/null
    [[ -d "$W/fixture" ]] && tar -czf "$OUT/fixture.tar.gz" -C "$W" fixture fixture-reference.txt fixture-inspect.txt 2>/dev/null
    cp "$W/summary.txt" "$OUT/summary.txt" 2>/dev/null
    return 0
}

stage "machine"
{
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
    command -v git python3
    python3 -c 'import jax, jaxlib; print("jax", jax.__version__, "jaxlib", jaxlib.__version__, jax.devices())'
    "$BIN" --version
} >"$W/machine.txt" 2>&1
cat "$W/machine.txt" | tee -a "$W/summary.txt"

stage "probe: the Triton form against JAX's attention (seq 16384, head_dim 128, bf16)"
timeout "${PROBE_S:-120}" python3 scripts/gpu-check/probe.py --out "$W" >"$W/probe.log" 2>&1
note "probe exit $?"
sed -n '/^variant /,$p' "$W/probe.log" | tee -a "$W/summary.txt"
pack

stage "capture: the example benchmark at seq 4096 as a run directory"
mkdir -p "$W/fixture"
FA_SEQ="${FIXTURE_SEQ:-4096}" RATCHET_OUT="$W/fixture" RATCHET_STATE_DIR="$W/state" RATCHET_WARMUP=3 RATCHET_ITERS=10 \
    RATCHET_PROFILE_ITERS=3 PYTHONPATH="$ROOT/python" \
    timeout "${CAPTURE_S:-45}" python3 examples/flash_attention/prepare.py >"$W/capture.log" 2>&1
note "capture exit $?"
tail -n 5 "$W/capture.log" | tee -a "$W/summary.txt"
find "$W/fixture" -type f -printf '%10s %P\n' | sort -k2 | tee -a "$W/summary.txt"
find "$W/fixture" -name '*.xplane.pb' -print0 | while IFS= read -r -d '' pb; do
    timeout 60 python3 tests/helpers/xplane_reference.py "$pb" >>"$W/fixture-reference.txt" 2>&1
done
timeout 60 "$BIN" inspect "$W/fixture" >"$W/fixture-inspect.txt" 2>&1
note "inspect exit $?"
timeout 60 "$BIN" inspect --json "$W/fixture" >"$W/fixture-inspect.json" 2>&1
cat "$W/fixture-inspect.txt" >>"$W/summary.txt"
pack

stage "ncu: the capture's kernel under Nsight Compute (device time and DRAM bytes, clocks as found)"
NCU="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)"
if [[ -n "$NCU" ]]; then
    # JAX takes 75% of the GPU's memory up front by default; ncu needs room to save and restore
    # the kernel's buffers between its replays.
    XLA_PYTHON_CLIENT_PREALLOCATE=false \
    FA_SEQ="${NCU_SEQ:-16384}" RATCHET_OUT="$W/ncu-run" RATCHET_STATE_DIR="$W/state" RATCHET_WARMUP=1 RATCHET_ITERS=3 \
        RATCHET_PROFILE_ITERS=0 PYTHONPATH="$ROOT/python" \
        timeout "${NCU_S:-60}" "$NCU" --clock-control none --kernel-name regex:flash --launch-count 3 --csv \
        --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,launch__grid_size,launch__block_size \
        python3 examples/flash_attention/prepare.py >"$W/ncu.csv" 2>"$W/ncu.log"
    note "ncu exit $?"
    grep -E 'flash|Metric Name' "$W/ncu.csv" | head -n 30 | tee -a "$W/summary.txt"
    # One launch per tiling: registers a thread and the local-memory (spill) bytes the
    # diagnosis's spill finding guesses at (python/tests/test_gpu_counters.py reads this CSV).
    XLA_PYTHON_CLIENT_PREALLOCATE=false timeout "${NCU_S:-60}" "$NCU" --clock-control none --kernel-name regex:flash --csv \
        --metrics gpu__time_duration.sum,launch__registers_per_thread,launch__block_size,launch__grid_size,l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum,dram__bytes_read.sum \
        python3 scripts/gpu-check/spills.py >"$W/ncu-spills.csv" 2>>"$W/ncu.log"
    note "ncu spills exit $?"
    grep -E '^launch ' "$W/ncu-spills.csv" | tee -a "$W/summary.txt"
else
    note "no ncu on this machine"
fi
pack

stage "demo: scripts/demo.sh on the GPU (experiments/gpu/)"
RATCHET_BIN="$BIN" RATCHET_DEMO_DIR="$W/demo" RATCHET_DEMO_MAX_WALL="${DEMO_WALL:-3m}" \
    timeout "${DEMO_S:-260}" ./scripts/demo.sh >"$W/demo.log" 2>&1
note "demo exit $?"
if [[ -d "$W/demo" ]]; then
    (cd "$W/demo" && git log --format='%h %s' && COLUMNS=80 "$BIN" results --color never) >"$W/demo-results.txt" 2>&1
    (cd "$W/demo" && "$BIN" results --format json) >"$W/demo-results.json" 2>&1
    # Every experiment's whole story (decision, metrics, runs, findings), for reading afterwards.
    for id in $(python3 -c 'import json, sys; [print(r["id"]) for r in json.load(open(sys.argv[1]))]' "$W/demo-results.json" 2>/dev/null); do
        (cd "$W/demo" && "$BIN" show "$id" --color never) >>"$W/demo-show.txt" 2>&1
    done
    cat "$W/demo-results.txt" >>"$W/summary.txt"
fi
pack

stage "calibrate: A/A pairs of the demo's HEAD"
if [[ -d "$W/demo" ]]; then
    # A run of the example takes 5-7 s on an H200 (jax's start and compile): give each pair 16 s,
    # so that a larger CALIBRATE_PAIRS is not cut off by a limit sized for the default.
    PAIRS="${CALIBRATE_PAIRS:-6}"
    (cd "$W/demo" && timeout "${CALIBRATE_S:-$((PAIRS * 16 + 20))}" "$BIN" calibrate --pairs "$PAIRS" --color never) >"$W/calibrate.txt" 2>&1
    note "calibrate exit $?"
    tail -n 15 "$W/calibrate.txt" | tee -a "$W/summary.txt"
fi
stage "done"
pack
