#!/usr/bin/env bash
# The one-command demo: ratchet on the FlashAttention example, in a scratch git repo.
#
# Builds ratchet, finds a Python that can import jax (scripts/python-env.sh: python3 on PATH,
# else ./.venv made once with jax[cpu] and reused), copies the example (ratchet.toml,
# experiments/, examples/flash_attention/, laid out as in this repo) into a fresh git repo,
# checks that the baseline benchmark runs,
# then runs `ratchet sweep` over the hypotheses for the backend jax runs on (in name order, each
# kept or reverted on top of the ones before), prints the results table and draws the charts
# (staircase, roofline, HTML report). On CPU (the usual case) that is experiments/*.toml, in the
# Pallas interpreter, and the whole demo takes a few minutes; on a GPU it is experiments/gpu/
# (the Triton form's tiles, warps and stages) and on a TPU experiments/accelerator/, with the
# chip's hardware preset (as `ratchet init` detects it) in place of the CPU one.
#
# Environment:
#   RATCHET_DEMO_DIR     where the scratch repo goes (default: target/demo/flash_attention;
#                        it is deleted and made afresh on every run)
#   RATCHET_PYTHON       a Python with jax to use instead of searching (scripts/python-env.sh;
#                        RATCHET_DEMO_PYTHON is the older name)
#   RATCHET_BIN          a ratchet binary to use instead of building one
#   RATCHET_DEMO_SET     the hypothesis set: cpu, gpu or tpu (default: jax's backend)
#   RATCHET_DEMO_MAX_WALL  passed to `ratchet sweep --max-wall` (e.g. 5m): no experiment starts
#                        that would end past it
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
EXAMPLE="$ROOT/examples/flash_attention"
DEMO="${RATCHET_DEMO_DIR:-$ROOT/target/demo/flash_attention}"
START=$SECONDS

say() { printf '\n==> %s\n' "$*"; }
die() { printf 'demo.sh: error: %s\n' "$*" >&2; exit 1; }

# --- 1. ratchet -------------------------------------------------------------------------
if [[ -n "${RATCHET_BIN:-}" ]]; then
    # Made absolute: the steps below run ratchet from inside the demo's repo.
    [[ -x "$RATCHET_BIN" ]] || die "RATCHET_BIN=$RATCHET_BIN is not an executable file"
    RATCHET="$(cd "$(dirname "$RATCHET_BIN")" && pwd)/$(basename "$RATCHET_BIN")"
    say "using ratchet at $RATCHET"
else
    say "building ratchet (cargo build --release)"
    command -v cargo >/dev/null || die "cargo not found: install Rust from https://rustup.rs"
    cargo build --release --manifest-path "$ROOT/Cargo.toml"
    RATCHET="$ROOT/target/release/ratchet"
fi
[[ -x "$RATCHET" ]] || die "no ratchet binary at $RATCHET"

# --- 2. a Python with jax ---------------------------------------------------------------
# The same bootstrap as scripts/test.sh: a python3 with jax on PATH, else ./.venv (made once).
# It puts that interpreter first on PATH, so the benchmark command `python3 prepare.py` runs it.
[[ -n "${RATCHET_DEMO_PYTHON:-}" ]] && export RATCHET_PYTHON="$RATCHET_DEMO_PYTHON"
source "$ROOT/scripts/python-env.sh" || die "no Python with jax (see the error above)"
PY="$RATCHET_PY"
BACKEND="$("$PY" -c 'import jax; print(jax.default_backend())')"
say "python: $PY (jax $("$PY" -c 'import jax; print(jax.__version__)'), backend $BACKEND)"
# The hypothesis set, and for an accelerator its hardware preset: ratchet.toml here is the CPU
# one, and `ratchet init` (in a throw-away directory) detects the chip as it would for a user.
SET_NAME="${RATCHET_DEMO_SET:-$BACKEND}"
PRESET=""
case "$SET_NAME" in
    cpu) SET=experiments ;;
    gpu) SET=experiments/gpu ;;
    tpu) SET=experiments/accelerator ;;
    *) die "RATCHET_DEMO_SET=$SET_NAME: use cpu, gpu or tpu" ;;
esac
if [[ "$SET_NAME" != cpu ]]; then
    probe_dir="$(mktemp -d)"
    "$RATCHET" init -q -C "$probe_dir" >/dev/null 2>&1 || true
    PRESET="$(sed -n 's/^preset = "\(.*\)"$/\1/p' "$probe_dir/ratchet.toml" 2>/dev/null | head -n 1)"
    rm -rf "$probe_dir"
    if [[ -z "$PRESET" || "$PRESET" == cpu ]]; then
        say "warning: no known $SET_NAME detected: keeping the CPU preset (util and BW% mean nothing here; latency does)"
        PRESET=""
    else
        say "$SET_NAME set ($SET), hardware preset $PRESET"
    fi
fi

# --- 3. the scratch repo ----------------------------------------------------------------
say "making a fresh git repo from the example in $DEMO"
rm -rf "$DEMO"
mkdir -p "$DEMO/examples"
cp "$ROOT/ratchet.toml" "$DEMO/"
if [[ -n "$PRESET" ]]; then
    sed -i "s/^preset = \"cpu\"$/preset = \"$PRESET\"/" "$DEMO/ratchet.toml"
    grep -q "^preset = \"$PRESET\"$" "$DEMO/ratchet.toml" || die "could not set the preset in $DEMO/ratchet.toml"
fi
cp -R "$ROOT/experiments" "$DEMO/"
cp -R "$EXAMPLE" "$DEMO/examples/"
rm -rf "$DEMO/examples/flash_attention/.ratchet" "$DEMO/examples/flash_attention/profile_data" "$DEMO/examples/flash_attention/__pycache__"
printf '__pycache__/\n/profile_data/\n' > "$DEMO/.gitignore"
(
    cd "$DEMO"
    git init -q
    git symbolic-ref HEAD refs/heads/main
    # A scratch repo must commit even where no git identity is configured.
    git config user.name "ratchet demo"
    git config user.email "demo@ratchet.invalid"
    git add -A
    git commit -q -m "FlashAttention example: baseline ($SET_NAME set)"
)

# --- 4. baseline check ------------------------------------------------------------------
say "baseline check: one benchmark run of the incumbent (python3 examples/flash_attention/prepare.py)"
BASE_OUT="$(dirname "$DEMO")/baseline-run"
rm -rf "$BASE_OUT"
mkdir -p "$BASE_OUT"
(
    cd "$DEMO"
    PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}" RATCHET_OUT="$BASE_OUT" \
        RATCHET_STATE_DIR="$DEMO/.ratchet" RATCHET_WARMUP=2 RATCHET_ITERS=10 RATCHET_PROFILE_ITERS=2 \
        "$PY" examples/flash_attention/prepare.py
) || die "the baseline benchmark failed: fix the environment before running experiments"
[[ -s "$BASE_OUT/ratchet-result.json" ]] || die "the baseline wrote no $BASE_OUT/ratchet-result.json"

# --- 5. the experiments ------------------------------------------------------------------
# Hypotheses are committed with the example, so the sweep starts on a clean tree. One that no
# longer applies (its find string is gone) becomes a `skipped` row; the sweep goes on.
say "ratchet sweep: every $SET/*.toml in name order ($((SECONDS - START)) s so far)"
SWEEP_ARGS=()
[[ "$SET" != experiments ]] && SWEEP_ARGS+=("$SET")
[[ -n "${RATCHET_DEMO_MAX_WALL:-}" ]] && SWEEP_ARGS+=(--max-wall "$RATCHET_DEMO_MAX_WALL")
(cd "$DEMO" && "$RATCHET" sweep "${SWEEP_ARGS[@]}") || die "ratchet sweep failed (exit $?)"

# --- 6. results -------------------------------------------------------------------------
say "results"
(cd "$DEMO" && "$RATCHET" results)
say "charts and the HTML report"
(cd "$DEMO" && "$RATCHET" plot --html results/report.html)
# Every keep and revert above, recomputed from results/runs.jsonl and decisions.jsonl alone.
say "ratchet replay: each decision again from its records"
(cd "$DEMO" && "$RATCHET" replay) || die "a recorded decision does not replay from its records (exit $?)"
say "done in $((SECONDS - START)) s; the scratch repo is $DEMO (git log, ratchet results there)"
