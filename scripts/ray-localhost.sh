#!/usr/bin/env bash
# A real one-node Ray cluster on this host, for tests/scale/ray.rs and for trying the Ray engine
# without a cluster: Ray from PyPI in a virtual environment of its own (not the project's .venv,
# not the system Python), then `ray start --head` limited to this machine's CPUs, with a small
# object store, its job server on 127.0.0.1 only and RATCHET_FAKE_GPUS (default 2) logical GPUs
# where the host has none. Idempotent: a second run finds the job server answering and returns.
#
# Ray's job API (`ray job submit`, what the engine uses) is served by the dashboard process, so
# the dashboard runs, bound to 127.0.0.1. Logical GPUs are Ray's own bookkeeping: with
# --num-gpus=N Ray gives each job that asks for one GPU its own id in CUDA_VISIBLE_DEVICES,
# whether or not a device is behind it (as the fake GPUs of scripts/slurm-localhost.sh).
set -euo pipefail

VENV="${RATCHET_RAY_VENV:-$HOME/.cache/ratchet-ray/venv}"
# The version the engine was written and tested against (`ray list jobs --format json`).
SPEC="${RATCHET_RAY_SPEC:-ray[default]==2.60.0}"
PORT="${RATCHET_RAY_DASHBOARD_PORT:-8265}"
GCS_PORT="${RATCHET_RAY_PORT:-6379}"
ADDRESS="http://127.0.0.1:$PORT"
t0=$(date +%s)

say() { echo "ray-localhost: $*"; }
die() { echo "ray-localhost: error: $*" >&2; exit 1; }

# 1. Ray, in its own virtual environment, only when absent.
if [ ! -x "$VENV/bin/ray" ]; then
  py="$(command -v python3 || true)"
  [ -n "$py" ] || die "no python3 to install Ray with"
  say "installing $SPEC into $VENV"
  mkdir -p "$(dirname "$VENV")"
  "$py" -m venv "$VENV" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
  "$VENV/bin/pip" install -q --disable-pip-version-check --no-cache-dir "$SPEC" >/tmp/ray-pip.log 2>&1 ||
    { rm -rf "$VENV"; die "pip install $SPEC failed; see /tmp/ray-pip.log"; }
  say "installed in $(( $(date +%s) - t0 )) s ($(du -sh "$VENV" | cut -f1))"
fi
ray="$VENV/bin/ray"

# Whether the job server answers (plain urllib: no Ray import, well under a second).
answers() {
  "$VENV/bin/python" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + '/api/version', timeout=3)" "$ADDRESS" 2>/dev/null
}

# 2. The head node, unless one already answers.
if ! answers; then
  cpus="$(nproc)"
  gpu_args=()
  if ! { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; }; then
    gpu_args=(--num-gpus="${RATCHET_FAKE_GPUS:-2}")
  fi
  say "starting a Ray head ($cpus CPUs${gpu_args:+, ${gpu_args[0]#--num-gpus=} logical GPUs})"
  RAY_USAGE_STATS_ENABLED=0 "$ray" start --head --port="$GCS_PORT" --num-cpus="$cpus" "${gpu_args[@]}" \
    --include-dashboard=true --dashboard-host=127.0.0.1 --dashboard-port="$PORT" \
    --object-store-memory=$((100 * 1024 * 1024)) --disable-usage-stats >/tmp/ray-start.log 2>&1 ||
    die "ray start failed; see /tmp/ray-start.log"
  for _ in $(seq 120); do answers && break; sleep 0.5; done
  answers || die "the job server at $ADDRESS does not answer 60 s after ray start; see /tmp/ray/session_latest/logs/dashboard.log"
fi
say "Ray $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("ray"))' 2>/dev/null) head, job server $ADDRESS; ray command $ray; ready in $(( $(date +%s) - t0 )) s"
