# The project's one Python environment, sourced by scripts/demo.sh and scripts/test.sh (and so by CI)
# (`source scripts/python-env.sh`; also from an interactive bash).
#
# Picks, in this order:
#   1. $RATCHET_PYTHON, when set (it must import jax);
#   2. the `python3` on PATH, when it imports jax;
#   3. the project's own .venv/, made once with jax[cpu] and everything the tests use
#      (RATCHET_PY_PACKAGES below) and reused afterwards; a .venv left half-installed (no
#      .venv/.ratchet-complete) is completed.
# It then puts the chosen interpreter first on PATH, so every `python3` the demo, the tests and
# the benchmarks they start is that interpreter, and sets RATCHET_PY to its path.
# It needs python3 (3.10 or newer) on PATH and, the first time only, network access to PyPI.

# What the tests and the example import: JAX (CPU build) for the example benchmark and the
# end-to-end tests; protobuf for the trace helpers; absl-py for jax's Mosaic GPU lowering test;
# setuptools and wheel for the test that pip-installs the ratchet_bench package.
RATCHET_PY_PACKAGES=("jax[cpu]" protobuf absl-py setuptools wheel)

ratchet_python_env() {
    local root venv stamp py
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    venv="$root/.venv"
    stamp="$venv/.ratchet-complete"
    _rpe_say() { printf '==> %s\n' "$*" >&2; }
    _rpe_die() { printf 'python-env.sh: error: %s\n' "$*" >&2; return 1; }
    _rpe_jax() { "$1" -c 'import jax' >/dev/null 2>&1; }

    if [[ -n "${RATCHET_PYTHON:-}" ]]; then
        py="$(command -v "$RATCHET_PYTHON" 2>/dev/null)" || py=""
        [[ -n "$py" ]] && _rpe_jax "$py" || { _rpe_die "RATCHET_PYTHON=$RATCHET_PYTHON cannot import jax: unset it, or install jax into it"; return 1; }
    elif command -v python3 >/dev/null 2>&1 && _rpe_jax python3; then
        py="$(command -v python3)"
    else
        py="$venv/bin/python3"
        if [[ ! -f "$stamp" ]] || ! _rpe_jax "$py"; then
            command -v python3 >/dev/null 2>&1 || { _rpe_die "python3 not found: install Python 3.10 or newer"; return 1; }
            python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
                || { _rpe_die "$(python3 --version 2>&1) is too old for jax: install Python 3.10 or newer"; return 1; }
            if [[ ! -x "$py" ]]; then
                _rpe_say "no python3 with jax on PATH: creating $venv (once; later runs reuse it)"
                python3 -m venv "$venv" \
                    || { _rpe_die "python3 -m venv $venv failed (on Debian/Ubuntu: apt-get install python3-venv), then run this again"; return 1; }
            fi
            _rpe_say "installing ${RATCHET_PY_PACKAGES[*]} into $venv (a minute or two, once)"
            "$py" -m pip install --quiet --disable-pip-version-check "${RATCHET_PY_PACKAGES[@]}" \
                || { _rpe_die "pip could not install ${RATCHET_PY_PACKAGES[*]} into $venv (it needs PyPI, or a pip configured for a mirror); fix that and run this again, or point RATCHET_PYTHON at a Python with jax"; return 1; }
            _rpe_jax "$py" || { _rpe_die "jax still does not import in $venv: delete $venv and run this again"; return 1; }
            : > "$stamp"
        fi
    fi

    # Every `python3` (and `python`) started from here on is this interpreter: a venv's bin
    # directory already holds both names; for any other interpreter a small bin directory under
    # target/ gets two links to it.
    local bin
    bin="$(dirname "$py")"
    if [[ "$py" != "$(command -v python3 2>/dev/null)" ]]; then
        if [[ ! -e "$bin/pyvenv.cfg" && ! -e "$bin/../pyvenv.cfg" ]] || [[ ! -x "$bin/python3" ]]; then
            bin="$root/target/python-env/bin"
            mkdir -p "$bin"
            ln -sf "$py" "$bin/python3"
            ln -sf "$py" "$bin/python"
        fi
        export PATH="$bin:$PATH"
    fi
    export RATCHET_PY="$py"
    hash -r 2>/dev/null || true
    unset -f _rpe_say _rpe_die _rpe_jax
}

ratchet_python_env
