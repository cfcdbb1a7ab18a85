#!/usr/bin/env bash
# The one-command demo: ratchet on the FlashAttention example, in a scratch git repo.
#
# Builds ratchet, finds a Python that can import jax (or makes ./.venv with jax[cpu] once
# and reuses it), copies the example (ratchet.toml, experiments/, examples/flash_attention/,
# laid out as in this repo) into a fresh git repo, checks that the baseline benchmark runs,
# then runs `ratchet sweep` over the experiments/*.toml hypotheses (in name order, each kept
# or reverted on top of the ones before), prints the results table and draws the charts
# (staircase, roofline, HTML report). It runs on CPU; the whole demo takes a few minutes.
#
# Environment:
#   RATCHET_DEMO_DIR     where the scratch repo goes (default: target/demo/flash_attention;
#                        it is deleted and made afresh on every run)
#   RATCHET_DEMO_PYTHON  a Python with jax to use instead of searching
#   RATCHET_BIN          a ratchet binary to use instead of building one
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
EXAMPLE="$ROOT/examples/flash_attention"
DEMO="${RATCHET_DEMO_DIR:-$ROOT/target/demo/flash_attention}"
START=$SECONDS

say() { printf '\n==> %s\n' "$*"; }
die() { printf 'demo.sh: error: %s\n' "$*" >&2; exit 1; }

# --- 1. ratchet -------------------------------------------------------------------------
if [[ -n "${RATCHET_BIN:-}" ]]; then
    RATCHET="$RATCHET_BIN"
    say "using ratchet at $RATCHET"
else
    say "building ratchet (cargo build --release)"
    command -v cargo >/dev/null || die "cargo not found: install Rust from https://rustup.rs"
    cargo build --release --manifest-path "$ROOT/Cargo.toml"
    RATCHET="$ROOT/target/release/ratchet"
fi
[[ -x "$RATCHET" ]] || die "no ratchet binary at $RATCHET"

# --- 2. a Python with jax ---------------------------------------------------------------
usable() {
    "$1" -c 'import jax' >/dev/null 2>&1
}

PY=""
if [[ -n "${RATCHET_DEMO_PYTHON:-}" ]]; then
    usable "$RATCHET_DEMO_PYTHON" || die "RATCHET_DEMO_PYTHON=$RATCHET_DEMO_PYTHON cannot import jax"
    PY="$RATCHET_DEMO_PYTHON"
elif command -v python3 >/dev/null && usable python3; then
    PY="$(command -v python3)"
elif [[ -x "$ROOT/.venv/bin/python3" ]] && usable "$ROOT/.venv/bin/python3"; then
    PY="$ROOT/.venv/bin/python3"
else
    command -v python3 >/dev/null || die "python3 not found: install Python 3.10 or newer"
    say "no Python with jax found: creating $ROOT/.venv with jax[cpu] (once; later runs reuse it)"
    python3 -m venv "$ROOT/.venv" \
        || die "python3 -m venv failed (on Debian/Ubuntu: apt-get install python3-venv)"
    "$ROOT/.venv/bin/python3" -m pip install --quiet --upgrade pip
    "$ROOT/.venv/bin/python3" -m pip install "jax[cpu]"
    usable "$ROOT/.venv/bin/python3" || die "jax still does not import in $ROOT/.venv"
    PY="$ROOT/.venv/bin/python3"
fi
if [[ "$PY" == "$ROOT/.venv/bin/python3" ]]; then
    # The benchmark command is `python3 prepare.py`: make that name the venv's python.
    export PATH="$ROOT/.venv/bin:$PATH"
fi
say "python: $PY (jax $("$PY" -c 'import jax; print(jax.__version__)'), backend $("$PY" -c 'import jax; print(jax.default_backend())'))"

# --- 3. the scratch repo ----------------------------------------------------------------
say "making a fresh git repo from the example in $DEMO"
rm -rf "$DEMO"
mkdir -p "$DEMO/examples"
cp "$ROOT/ratchet.toml" "$DEMO/"
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
    git commit -q -m "FlashAttention example: baseline (BQ=32, BKV=32)"
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
say "ratchet sweep: every experiments/*.toml in name order ($((SECONDS - START)) s so far)"
(cd "$DEMO" && "$RATCHET" sweep) || die "ratchet sweep failed (exit $?)"

# --- 6. results -------------------------------------------------------------------------
say "results"
(cd "$DEMO" && "$RATCHET" results)
say "charts and the HTML report"
(cd "$DEMO" && "$RATCHET" plot --html results/report.html)
say "done in $((SECONDS - START)) s; the scratch repo is $DEMO (git log, ratchet results there)"
