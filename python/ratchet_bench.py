"""ratchet_bench: ratchet's benchmark protocol for JAX kernels, in one call.

ratchet puts this single file on the PYTHONPATH of every benchmark run, so a repo's
`prepare.py` needs only:

    import ratchet_bench
    ratchet_bench.run(fn, (q, k, v), flops=..., bytes=..., check=...)

`run` reads the RATCHET_* environment (docs/protocol.md), warms up, times each measured
iteration, captures a profile with one XProf step per iteration
(StepTraceAnnotation("kernel_step", step_num=i)), dumps the compiled HLO, checks correctness,
writes `ratchet-result.json` (version 1) atomically, and prints the KernelForge article's
RESULT / REGIME / HLO-stats summary for humans (with the Pallas kernel bodies' own op counts
where the HLO shows a kernel as one custom call). FLOPs and bytes the caller leaves out come
from the compiler (a Pallas `cost_estimate`, else `compiled.cost_analysis()`); figures the
caller gives are cross-checked against the compiler's. Run by hand (no RATCHET_OUT) it writes
the same artifacts to ./profile_data.

With RATCHET_DEEP=1 (`ratchet --deep`) it also takes continuous-profiling snapshots during
extra iterations after the measured ones: through XProf's continuous-profiling API where the
`xprof` package offers it and the snapshot holds a capture, else as short jax.profiler trace
windows (on CPU the snapshot API writes no files). Each lands in
$RATCHET_OUT/snapshots/<n>/ and is listed in the result file's `snapshots` field.

The result file also says where the process's seconds went (`phases_s`, from ratchet's spawn
stamp RATCHET_SPAWN_NS through imports, compile, the calls and the profiler) and how many
kernel calls it made (`kernel_calls`).

Importing the module has no side effects. `measure` (and so `run`) turns on JAX's persistent
compilation cache under the repo's `.ratchet/cache/jax` before it compiles the kernel, so that
the many fresh processes of one experiment pay the compile once. JAX opens the cache lazily, at
the first compile after a cache directory is set, so compiles before `run` (a reference
output) do not stop the kernel's compile from being cached.
"""

import time

# Before `import jax`: the phases of a run (`phases_s`) start from here. CLOCK_MONOTONIC, the
# clock ratchet stamps RATCHET_SPAWN_NS with, so the two subtract across processes.
_MODULE_START_NS = time.monotonic_ns()

import base64  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

_MODULE_END_NS = time.monotonic_ns()

__all__ = [
    "BenchError",
    "Settings",
    "compare",
    "compiler_figures",
    "cost_warnings",
    "deep_snapshots",
    "enable_compilation_cache",
    "hlo_stats",
    "kernel_body_counts",
    "measure",
    "peak_figures",
    "run",
    "settings_from_env",
    "summary_lines",
    "write_result",
]

RESULT_FILE = "ratchet-result.json"
HLO_FILE = "kernel.hlo.txt"
PROFILE_DIR = "profile"
SNAPSHOT_DIR = "snapshots"
DEFAULT_OUT = "profile_data"
DEFAULTS = {
    "RATCHET_WARMUP": 5,
    "RATCHET_ITERS": 20,
    "RATCHET_PROFILE_ITERS": 10,
    "RATCHET_DEEP_SNAPSHOTS": 4,
    "RATCHET_DEEP_WINDOW": 2,
}

# Dense bf16 peak TFLOP/s and HBM GB/s by (a substring of) jax's device_kind, for the
# human-readable roofline figures only; ratchet computes its own from its hardware preset.
# ONE table: src/hardware.rs's DEVICE_KINDS holds the same rows (a Rust test reads this file
# and fails when the two differ). Sources: Google Cloud TPU system architecture pages
# (v4, v5e, v5p, v6e, TPU7x Ironwood), NVIDIA H100/H200/A100 datasheets.
PEAKS = (
    ("TPU7x", 2307.0, 7380.0),
    ("TPU v7", 2307.0, 7380.0),
    ("TPU v6 lite", 918.0, 1640.0),
    ("TPU v5 lite", 197.0, 819.0),
    ("TPU v5p", 459.0, 2765.0),
    ("TPU v5", 459.0, 2765.0),
    ("TPU v4", 275.0, 1228.0),
    ("H200", 989.0, 4800.0),
    ("H100", 989.0, 3350.0),
    ("A100-SXM4-80GB", 312.0, 2039.0),
    ("A100", 312.0, 1555.0),
)

# The profiler depths RATCHET_TRACE_MODE may name: the article's tpu_trace_mode values
# (section 2.4). TRACE_COMPUTE shows compute and DMA rows; _AND_SYNC adds sync events.
TRACE_MODES = ("TRACE_ONLY_HOST", "TRACE_ONLY_XLA", "TRACE_COMPUTE", "TRACE_COMPUTE_AND_SYNC")
DEFAULT_TRACE_MODE = "TRACE_COMPUTE"
KERNEL_BODY_FILE = "kernel.body.mlir"

# The name of every profiled step. It is an XProf step (StepTraceAnnotation: a `step_num` stat
# and a root marker), so XProf's overview sees steps; ratchet's trace reader matches the name
# (`kernel_step`, or the older per-step `kernel_step_<i>`).
STEP_NAME = "kernel_step"

# Past this ratio (either way) between a figure the caller gives and the compiler's own, `run`
# warns: a factor of 2 is a dropped re-read or a doubled count, not rounding. Ours, not a
# seed's (docs/prepare.md).
COST_MISMATCH_RATIO = 2.0

# The buffer written between iterations to flush a GPU's L2 cache when `flush_l2=True`: as
# triton.testing.do_bench does (256 MB), larger than any current GPU's L2 (H100/H200 50 MB,
# B200 126 MB).
L2_FLUSH_BYTES = 256 * 1024 * 1024


class BenchError(Exception):
    """A benchmark that cannot produce a valid result; `run` exits non-zero with it."""


class Settings:
    """Where and how much to run, as read from the RATCHET_* environment."""

    def __init__(self, out_dir, warmup, iters, profile_iters, under_ratchet, deep=False,
                 snapshots=4, window=2, trace_mode=DEFAULT_TRACE_MODE):
        self.out_dir = out_dir
        self.warmup = warmup
        self.iters = iters
        self.profile_iters = profile_iters
        self.under_ratchet = under_ratchet
        # --deep: `snapshots` windows of `window` kernel calls each, after the measured ones.
        self.deep = deep
        self.snapshots = snapshots
        self.window = window
        # The TPU profiler depth (RATCHET_TRACE_MODE; ratchet's [trace] depth).
        self.trace_mode = trace_mode

    def __repr__(self):
        return (
            f"Settings(out_dir={self.out_dir!r}, warmup={self.warmup}, iters={self.iters}, "
            f"profile_iters={self.profile_iters}, under_ratchet={self.under_ratchet}, "
            f"deep={self.deep}, snapshots={self.snapshots}, window={self.window}, "
            f"trace_mode={self.trace_mode!r})"
        )


def _env_count(env, name, minimum):
    raw = env.get(name, "").strip()
    if not raw:
        return DEFAULTS[name]
    try:
        value = int(raw)
    except ValueError:
        raise BenchError(f"{name}={raw!r} is not an integer") from None
    if value < minimum:
        raise BenchError(f"{name}={value} must be at least {minimum}")
    return value


def _trace_mode(env):
    raw = env.get("RATCHET_TRACE_MODE", "").strip()
    if not raw:
        return DEFAULT_TRACE_MODE
    if raw.upper() not in TRACE_MODES:
        raise BenchError(f"RATCHET_TRACE_MODE={raw!r} is not one of {', '.join(TRACE_MODES)}")
    return raw.upper()


def settings_from_env(env=None):
    """Read RATCHET_OUT / _WARMUP / _ITERS / _PROFILE_ITERS / _TRACE_MODE, with the protocol's
    defaults."""
    env = os.environ if env is None else env
    out = env.get("RATCHET_OUT", "").strip()
    return Settings(
        out_dir=os.path.abspath(out or DEFAULT_OUT),
        warmup=_env_count(env, "RATCHET_WARMUP", 0),
        iters=_env_count(env, "RATCHET_ITERS", 1),
        profile_iters=_env_count(env, "RATCHET_PROFILE_ITERS", 0),
        under_ratchet=bool(out),
        deep=env.get("RATCHET_DEEP", "0").strip() == "1",
        snapshots=_env_count(env, "RATCHET_DEEP_SNAPSHOTS", 1),
        window=_env_count(env, "RATCHET_DEEP_WINDOW", 1),
        trace_mode=_trace_mode(env),
    )


def enable_compilation_cache(env=None):
    """Point JAX's persistent compilation cache at the repo's .ratchet/cache/jax.

    The directory is `$RATCHET_STATE_DIR/cache/jax` under ratchet, else `.ratchet/cache/jax`
    of the working directory. A cache directory the user already chose (the
    JAX_COMPILATION_CACHE_DIR environment or jax.config) is left alone. The size and
    compile-time thresholds are dropped so that even a fast compile is cached: a Pallas
    kernel in interpret mode compiles in well under JAX's default one-second threshold,
    yet is paid again by every fresh process. Returns the cache directory in use.
    """
    env = os.environ if env is None else env
    current = jax.config.jax_compilation_cache_dir
    if current:
        cache_dir = current
    else:
        state = env.get("RATCHET_STATE_DIR", "").strip() or os.path.join(os.getcwd(), ".ratchet")
        cache_dir = os.path.join(state, "cache", "jax")
        os.makedirs(cache_dir, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", cache_dir)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    return cache_dir


def compare(actual, expected, tolerance):
    """A check result for `run`: max |actual - expected| in f32 against an absolute tolerance.

    Non-finite outputs fail the check; their error is left out of the figures, since JSON
    has no NaN.
    """
    err = float(jnp.max(jnp.abs(jnp.asarray(actual, jnp.float32) - jnp.asarray(expected, jnp.float32))))
    result = {"passed": math.isfinite(err) and err <= tolerance, "tolerance": float(tolerance)}
    if math.isfinite(err):
        result["max_abs_err"] = err
    return result


def _normalise_check(value):
    """Accept what a check callable may return: a bool, or a dict with at least `passed`."""
    if isinstance(value, (bool, np.bool_)):
        return {"passed": bool(value)}
    if isinstance(value, dict) and "passed" in value:
        known = {"passed", "max_abs_err", "tolerance"}
        unknown = set(value) - known
        if unknown:
            raise BenchError(f"check result has unknown keys {sorted(unknown)}; use {sorted(known)}")
        out = {"passed": bool(value["passed"])}
        for key in ("max_abs_err", "tolerance"):
            if value.get(key) is not None and math.isfinite(float(value[key])):
                out[key] = float(value[key])
        return out
    raise BenchError(
        f"check returned {value!r}; return a bool or a dict like "
        "{'passed': True, 'max_abs_err': 1e-3, 'tolerance': 2e-2} (see ratchet_bench.compare)"
    )


def peak_figures(device_kind, env=None):
    """(peak TFLOP/s, HBM GB/s) for the roofline printout, or None where unknown.

    RATCHET_PEAK_TFLOPS and RATCHET_HBM_GBPS override the built-in table; both are needed.
    """
    env = os.environ if env is None else env
    tflops, gbps = env.get("RATCHET_PEAK_TFLOPS"), env.get("RATCHET_HBM_GBPS")
    if tflops and gbps:
        try:
            return float(tflops), float(gbps)
        except ValueError:
            raise BenchError(
                f"RATCHET_PEAK_TFLOPS={tflops!r} / RATCHET_HBM_GBPS={gbps!r} must be numbers"
            ) from None
    for key, peak_tflops, peak_gbps in PEAKS:
        if key.lower() in device_kind.lower():
            return peak_tflops, peak_gbps
    return None


def hlo_stats(hlo_text):
    """Counts of the HLO ops the article's protocol looks at (dot, exp, reduce, copy)."""

    def count(op):
        return len(re.findall(rf"\s{op}\(", hlo_text))

    return {
        "dot": count("dot"),
        "exponential": count("exponential"),
        "reduce": count("reduce"),
        "copy": count("copy"),
        "custom-call": count("custom-call"),
        "lines": hlo_text.count("\n") + 1,
    }


# Op classes inside a Pallas kernel body, as ratchet counts them (src/trace/kernel_body.rs
# `classify`; the Rust and Python tests pin both to the same counts on the same fixtures).
_BODY_MATMUL = {"tpu.matmul", "tt.dot", "tt.dot_scaled", "vector.contract", "ttng.warp_group_dot",
                "ttng.tc_gen5_mma", "mosaic_gpu.wgmma", "mosaic_gpu.tcgen05_mma", "nvgpu.warpgroup.mma"}
_BODY_EXP = {"math.exp", "math.exp2", "math.expm1", "tt.precise_exp"}
_BODY_REDUCE = {"vector.multi_reduction", "vector.reduction", "tt.reduce", "tpu.all_reduce",
                "nvvm.redux.sync"}
_BODY_DMA = {"tpu.enqueue_dma", "tpu.enqueue_indirect_dma", "ttg.async_copy_global_to_local",
             "ttng.async_tma_copy_global_to_local", "ttng.async_tma_copy_local_to_global",
             "tt.descriptor_load", "tt.experimental_descriptor_load", "mosaic_gpu.async_load",
             "mosaic_gpu.async_store", "nvgpu.tma.async.load"}
# Named only so that they are not counted as copies below (`*_copy` names).
_BODY_NOT_COPY = {"tpu.wait_dma", "tpu.wait_dma2", "tpu.wait_indirect_dma", "ttg.async_wait",
                  "ttng.wait_barrier", "ttng.async_tma_store_wait", "mosaic_gpu.wait",
                  "nvvm.mbarrier.try_wait.parity", "nvvm.mbarrier.try_wait",
                  "nvvm.cp.async.bulk.wait_group", "nvvm.cp.async.wait.group", "scf.for", "scf.while",
                  "vector.load", "tpu.load", "tpu.strided_load", "memref.load", "tt.load",
                  "ttg.local_load", "llvm.load", "vector.store", "tpu.vector_store", "tpu.store",
                  "tpu.strided_store", "memref.store", "tt.store", "ttg.local_store", "llvm.store"}
BODY_COUNTS = ("matmul", "exp", "reduce", "dma", "copy")


def _body_op_name(line):
    """The op name on one line of MLIR text (`"d.op"(...)`, `%r = d.op ...`), the
    `stable_mosaic.` / `stable_mosaic_gpu.` prefix dropped; None where the line holds no op."""
    rest = line.lstrip()
    if not rest or rest.startswith(("//", "^", "}", "#")):
        return None
    if rest.startswith("%"):
        if " = " not in rest:
            return None
        rest = rest.split(" = ", 1)[1].lstrip()
    if rest.startswith('"'):
        end = rest.find('"', 1)
        if end < 0:
            return None
        name = rest[1:end]
    else:
        name = re.match(r"[A-Za-z0-9._]*", rest).group(0)
    if "." not in name or not name[0].isalpha() or name.endswith("."):
        return None
    for prefix in ("stable_mosaic.", "stable_mosaic_gpu."):
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def _quoted_attr(line, key):
    m = re.search(re.escape(key) + r' = "([^"]*)"', line)
    return m.group(1) if m else None


def _body_class(op, line):
    if op == "llvm.inline_asm":
        asm = _quoted_attr(line, "asm_string") or ""
        if "wgmma.mma_async" in asm or "tcgen05.mma" in asm:
            return "matmul"
        return "exp" if "ex2.approx" in asm else None
    if op == "nvvm.shfl.sync":
        # A butterfly shuffle is a step of a cross-lane reduction (`idx` shuffles broadcast).
        return "reduce" if "shfl_kind bfly" in line else None
    if op.startswith("nvvm.cp.async.") and not op.endswith(".commit.group") and "wait" not in op:
        return "dma"  # Mosaic GPU's TMA and bulk copies
    if op in _BODY_MATMUL:
        return "matmul"
    if op in _BODY_EXP:
        return "exp"
    if op == "tt.extern_elementwise":
        return "exp" if "exp" in (_quoted_attr(line, "symbol") or "") else None
    if op in _BODY_REDUCE:
        return "reduce"
    if op in _BODY_DMA:
        return "dma"
    if op in _BODY_NOT_COPY:
        return None
    last = op.rsplit(".", 1)[-1]
    return "copy" if last == "copy" or last.endswith("_copy") else None


def kernel_body_counts(text):
    """The op counts of each Pallas kernel in a kernel-body file (`kernel.body.mlir`, as
    `write_kernel_bodies` writes it): a list of dicts with `name`, `dialect` and the counts of
    BODY_COUNTS, the same figures `ratchet inspect` prints. Matmuls, exponentials and
    reductions that carry a source location count once per location: Mosaic GPU unrolls one
    source op into one op per register fragment."""
    out = []
    for line in text.splitlines():
        if line.startswith("// ratchet-kernel"):
            fields = dict(kv.split("=", 1) for kv in line.split()[2:] if "=" in kv)
            out.append({"name": fields.get("name", "?"), "dialect": fields.get("dialect", "?"),
                        **{k: 0 for k in BODY_COUNTS}, "_seen": set()})
            continue
        if not out:
            continue
        op = _body_op_name(line)
        cls = op and _body_class(op, line)
        if not cls:
            continue
        at = line.rfind(" loc(")
        loc = line[at + 1:].rstrip() if at >= 0 else ""
        if cls in ("matmul", "exp", "reduce") and loc.endswith(")"):
            key = (cls, loc)
            if key in out[-1]["_seen"]:
                continue
            out[-1]["_seen"].add(key)
        out[-1][cls] += 1
    for k in out:
        del k["_seen"]
    return out


def compiler_figures(compiled, bodies=()):
    """The compiler's own FLOPs and bytes of one call, or None: a dict with `flops`, `bytes`
    (None where the compiler has no positive figure), `source` (words) and `lower_bound`.

    The Pallas kernels' `cost_estimate` (summed) when every decoded kernel carries one: it is
    what XProf's roofline reads for a custom call, whose insides XLA cannot count. Otherwise
    XLA's `compiled.cost_analysis()`. `lower_bound` says why XLA's figures may fall short (None
    when they should not): XLA counts a while loop's body once (on CPU a Pallas kernel in
    interpret mode is such a loop) and a custom call's insides not at all.
    """
    text = ""
    try:
        text = compiled.as_text() or ""
    except Exception:
        pass
    costs = [b.get("cost") for b in bodies if "text" in b]
    if costs and all(c and c.get("flops") and c.get("bytes_accessed") for c in costs):
        return {"flops": float(sum(c["flops"] for c in costs)),
                "bytes": float(sum(c["bytes_accessed"] for c in costs)),
                "source": "the Pallas cost_estimate", "lower_bound": None}
    lower_bound = None
    if re.search(r"\swhile\(", text):
        lower_bound = "XLA counts a loop's body once"
    elif re.search(r"\scustom-call\(", text):
        lower_bound = "XLA cannot count inside a custom call"
    try:
        ca = compiled.cost_analysis()
    except Exception:
        return None
    if isinstance(ca, (list, tuple)):  # older jax: one dict per computation
        ca = ca[0] if ca else None
    if not isinstance(ca, dict):
        return None

    def positive(key):
        v = ca.get(key)
        return float(v) if isinstance(v, (int, float)) and math.isfinite(v) and v > 0 else None

    flops, bytes_ = positive("flops"), positive("bytes accessed")
    if flops is None and bytes_ is None:
        return None
    return {"flops": flops, "bytes": bytes_, "source": "XLA's cost analysis", "lower_bound": lower_bound}


def cost_warnings(user, compiler, ratio=COST_MISMATCH_RATIO):
    """Warnings where a figure the caller gave (`user`: {"flops", "bytes"}) and the compiler's
    differ by more than `ratio` either way. Where the compiler's figures are a lower bound
    (`lower_bound`: loops, custom calls), only one above the caller's by more than `ratio`
    contradicts it."""
    if not compiler:
        return []
    out = []
    for key, what in (("flops", "FLOPs"), ("bytes", "bytes")):
        mine, theirs = user.get(key), compiler.get(key)
        if not mine or not theirs:
            continue
        if theirs > mine * ratio or (theirs * ratio < mine and not compiler.get("lower_bound")):
            out.append(f"{key}={mine:.4g} given, but {compiler['source']} says {theirs:.4g} "
                       f"({theirs / mine:.2f}x, past the {ratio:g}x this helper tolerates): "
                       f"check the {what} formula")
    return out


class _L2Flush:
    """Writes a buffer larger than the GPU's L2 cache (L2_FLUSH_BYTES) between iterations, as
    triton.testing.do_bench does, so a memory-bound kernel is timed reading from HBM rather
    than from a cache its previous call warmed. The write is waited on before the timer
    starts: it is never part of a timing."""

    def __init__(self, nbytes=L2_FLUSH_BYTES):
        self.calls = 0
        self._buf = jnp.zeros((nbytes // 4,), jnp.int32)

        # Named, so that its executions in a capture say what they are (jit_ratchet_l2_flush).
        def ratchet_l2_flush(b):
            return b + 1

        self._write = jax.jit(ratchet_l2_flush)

    def __call__(self):
        self._buf = jax.block_until_ready(self._write(self._buf))
        self.calls += 1


def _l2_flusher(flush_l2, backend):
    """The between-iterations flush `measure` calls: a real one for `flush_l2=True` on GPU,
    else one that does nothing (a note says so when it was asked for off a GPU: CPU and TPU
    caches are not what the option is about, and a portable prepare.py may ask on any backend)."""
    if flush_l2 and backend == "gpu":
        return _L2Flush()
    if flush_l2:
        print(f"ratchet_bench: note: flush_l2 applies to GPUs only; ignored on {backend}",
              file=sys.stderr)
    return lambda: None


def write_result(out_dir, result):
    """Write ratchet-result.json atomically: a reader sees the old file or the whole new one."""
    path = os.path.join(out_dir, RESULT_FILE)
    tmp = path + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2, allow_nan=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path


def _profile_options(backend, trace_mode=DEFAULT_TRACE_MODE):
    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0  # Python call events only bury the kernel
    # On CPU the kernel's HLO ops are host events, which need host level 2; on TPU and GPU
    # they come from the device tracer, and level 1 keeps just our step annotations.
    options.host_tracer_level = 2 if backend == "cpu" else 1
    if hasattr(options, "device_tracer_level"):
        options.device_tracer_level = 1
    if backend == "tpu":
        # The article (section 2.4): the default TRACE_ONLY_XLA hides compute and DMA rows;
        # TRACE_COMPUTE_AND_SYNC adds the sync events that show pipeline stalls.
        options.advanced_configuration = {"tpu_trace_mode": trace_mode}
    return options


def _continuous_api():
    """XProf's continuous-profiling snapshot module, or None where `xprof` is not installed.

    The API (xprof 2.24: `xprof.api.continuous_profiling_snapshot`, as the source article's
    section 2.6 uses it) talks to a profiler server: start_continuous_profiling(addr, options),
    get_snapshot(addr, logdir), stop_continuous_profiling(addr).
    """
    try:
        from xprof.api import continuous_profiling_snapshot as cps  # type: ignore
    except Exception:
        return None
    names = ("start_continuous_profiling", "get_snapshot", "stop_continuous_profiling")
    return cps if all(hasattr(cps, n) for n in names) else None


def _profiler_server():
    """Start jax's profiler server on a free local port and return its address."""
    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    jax.profiler.start_server(port)
    return f"localhost:{port}"


def _has_capture(path):
    for _, _, files in os.walk(path):
        if any(f.endswith((".xplane.pb", ".trace.json.gz")) for f in files):
            return True
    return False


def deep_snapshots(compiled, args, settings, backend):
    """Take `settings.snapshots` snapshots, each over `settings.window` kernel calls, with
    un-profiled calls between them; return the result file's `snapshots` list.

    The continuous-profiling API is tried first (it keeps a ring buffer and hands out the
    recent past); where it is missing or its snapshot holds no capture (CPU), each snapshot
    is a short jax.profiler trace window instead.
    """
    api = _continuous_api()
    snaps = []
    t0 = time.perf_counter()
    step = 0
    if api is not None:
        addr = None
        try:
            addr = _profiler_server()
            api.start_continuous_profiling(addr, {})
            for n in range(settings.snapshots):
                path = os.path.join(settings.out_dir, SNAPSHOT_DIR, str(n))
                os.makedirs(path, exist_ok=True)
                for _ in range(settings.window):
                    with jax.profiler.StepTraceAnnotation(STEP_NAME, step_num=step):
                        _call(compiled, args)
                    step += 1
                api.get_snapshot(addr, path)
                if not _has_capture(path):
                    raise BenchError("the continuous-profiling snapshot wrote no capture")
                snaps.append({"path": os.path.join(SNAPSHOT_DIR, str(n)), "step": step - settings.window,
                              "time_s": time.perf_counter() - t0, "source": "continuous"})
            api.stop_continuous_profiling(addr)
            return snaps
        except Exception:
            # On CPU the snapshot holds no capture: fall back to trace windows.
            try:
                if addr is not None:
                    api.stop_continuous_profiling(addr)
            except Exception:
                pass
            shutil.rmtree(os.path.join(settings.out_dir, SNAPSHOT_DIR), ignore_errors=True)
            snaps, step, t0 = [], 0, time.perf_counter()
    for n in range(settings.snapshots):
        rel = os.path.join(SNAPSHOT_DIR, str(n))
        start_step = step
        try:
            with jax.profiler.trace(os.path.join(settings.out_dir, rel),
                                    profiler_options=_profile_options(backend, settings.trace_mode)):
                for _ in range(settings.window):
                    with jax.profiler.StepTraceAnnotation(STEP_NAME, step_num=step):
                        _call(compiled, args)
                    step += 1
        except Exception as e:
            raise BenchError(f"deep snapshot {n} failed: {type(e).__name__}: {e}") from e
        snaps.append({"path": rel, "step": start_step, "time_s": time.perf_counter() - t0,
                      "source": "trace"})
        # Un-profiled calls between windows: the snapshots sample the run, not one stretch.
        for _ in range(settings.window):
            _call(compiled, args)
            step += 1
    return snaps


def _json_meta(meta):
    """meta with numpy scalars turned into plain numbers, so json.dump accepts it."""
    try:
        return json.loads(json.dumps(meta, default=lambda x: x.item() if hasattr(x, "item") else str(x)))
    except (TypeError, ValueError) as e:
        raise BenchError(f"meta is not JSON-serialisable: {e}") from None


def _positive_or_none(name, value):
    if value is None:
        return None
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise BenchError(f"{name}={value} must be a positive number")
    return value


def _compile(fn, args):
    """AOT-compile fn once: the executable serves the runs and its HLO text is the dump.
    Returns (lowered, compiled): the lowered module carries the Pallas kernels' bodies."""
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    try:
        lowered = jitted.lower(*args)
        return lowered, lowered.compile()
    except Exception as e:
        raise BenchError(f"compiling the kernel failed: {type(e).__name__}: {e}") from e


def _custom_calls(op):
    """Every stablehlo.custom_call under an MLIR operation, depth first."""
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                o = child.operation
                if o.name == "stablehlo.custom_call":
                    yield o
                yield from _custom_calls(o)


def _parse_bytecode(data, register, debug_info=False):
    """MLIR text of a serialized module (bytecode or text), with `register(ctx)`'s dialects
    known and any other dialect kept as generic ops. `debug_info` keeps each op's source
    location (`loc(#locN)`)."""
    from jaxlib.mlir import ir

    ctx = ir.Context()
    if register is not None:
        register(ctx)
    ctx.allow_unregistered_dialects = True
    with ctx:
        return ir.Module.parse(data).operation.get_asm(enable_debug_info=debug_info)


def _tpu_register():
    try:
        from jax._src.lib import tpu  # jaxlib's Mosaic TPU dialect bindings
        return tpu.register_dialect
    except Exception:
        return None


def _triton_register():
    try:
        from jaxlib.triton import dialect
        return dialect.register_dialect
    except Exception:
        return None


def _mosaic_gpu_register():
    """Mosaic GPU bodies use upstream dialects (gpu, nvvm, llvm) besides mosaic_gpu's own: its
    shared-memory space is a `gpu` attribute that an empty context cannot parse."""
    try:
        from jax._src.interpreters import mlir as jax_mlir
        from jax._src.lib import mosaic_gpu_dialect

        def register(ctx):
            ctx.append_dialect_registry(jax_mlir.upstream_dialects)
            ctx.load_all_available_dialects()
            mosaic_gpu_dialect.register_dialect(ctx)
        return register
    except Exception:
        return None


def _attr_str(attrs, name):
    try:
        return attrs[name].value
    except Exception:
        return None


def kernel_bodies(module):
    """The Pallas kernels inside a lowered StableHLO module, as MLIR text.

    On TPU a Pallas kernel is one `tpu_custom_call` whose backend_config JSON carries the
    Mosaic module (base64 MLIR bytecode, `custom_call_config.body`); on GPU it is one
    `__gpu$xla.gpu.triton` custom call whose `mhlo.backend_config.ir` is the Triton module's
    bytecode. Both are turned back into text here, where jaxlib's MLIR bindings exist, so
    that ratchet can count the ops the HLO cannot see. Returns a list of dicts with
    `dialect` ('mosaic' or 'triton'), `name`, `target` and `text`; kernels that cannot be
    decoded are listed with an `error` instead of `text`.
    """
    out = []
    for op in _custom_calls(module.operation):
        target = _attr_str(op.attributes, "call_target_name")
        try:
            if target == "tpu_custom_call":
                config = json.loads(_attr_str(op.attributes, "backend_config"))
                body = base64.b64decode(config["custom_call_config"]["body"])
                name = _attr_str(op.attributes, "kernel_name") or "mosaic_kernel"
                entry = {"dialect": "mosaic", "target": target, "name": name,
                         "text": _parse_bytecode(body, _tpu_register())}
                # The pallas_call's cost_estimate: what XProf's roofline tool reads.
                cost = config.get("custom_call_config", {}).get("cost_estimate") or config.get("cost_estimate")
                if isinstance(cost, dict):
                    entry["cost"] = {k: int(cost[k]) for k in ("flops", "transcendentals", "bytes_accessed")
                                     if isinstance(cost.get(k), (int, float))}
                out.append(entry)
            elif target and target.startswith("mosaic_gpu"):
                # Pallas' Mosaic GPU backend (`plgpu`): `mhlo.backend_config.module` is the
                # kernel's module as bytecode; its launch grid is inside (gpu.launch). It is
                # lowered to per-thread registers, so one array op becomes one op per register
                # fragment: the source locations kept here tell ratchet which belong together.
                cfg = op.attributes["mhlo.backend_config"]
                name = _attr_str(op.attributes, "kernel_name") or "mosaic_gpu_kernel"
                text = _parse_bytecode(cfg["module"].value_bytes, _mosaic_gpu_register(), debug_info=True)
                m = re.search(r"^module @([\w.$-]+)", text, re.M)  # the pallas_call's name
                if m and name == "mosaic_gpu_kernel":
                    name = m.group(1)
                out.append({"dialect": "mosaic_gpu", "target": target, "name": name, "text": text})
            elif target and "triton" in target:
                cfg = op.attributes["mhlo.backend_config"]
                name = _attr_str(cfg, "name") or "triton_kernel"
                grid = []
                for axis in ("grid_x", "grid_y", "grid_z"):
                    try:
                        grid.append(int(str(cfg[axis]).split(":")[0]))
                    except Exception:
                        pass
                text = _parse_bytecode(cfg["ir"].value_bytes, _triton_register())
                entry = {"dialect": "triton", "target": target, "name": name, "text": text}
                if grid:
                    entry["grid"] = grid
                out.append(entry)
        except Exception as e:  # a kernel we cannot read costs its op counts, not the run
            out.append({"dialect": "unknown", "target": target or "?", "name": "?",
                        "error": f"{type(e).__name__}: {e}"})
    return out


def write_kernel_bodies(path, bodies):
    """Write the decoded kernels to one text file, each after a `// ratchet-kernel` header
    line (the format ratchet's kernel-body reader splits on). Returns how many were written."""
    written = 0
    with open(path, "w", encoding="utf-8") as f:
        for b in bodies:
            if "text" not in b:
                continue
            extra = "".join(f" {k}={','.join(map(str, b[k]))}" for k in ("grid",) if k in b)
            extra += "".join(f" cost_{k}={v}" for k, v in sorted(b.get("cost", {}).items()))
            f.write(f"// ratchet-kernel dialect={b['dialect']} name={b['name']} "
                    f"target={b['target']}{extra}\n")
            f.write(b["text"])
            if not b["text"].endswith("\n"):
                f.write("\n")
            written += 1
    return written


def _dist_version(*names):
    from importlib import metadata

    for name in names:
        try:
            return metadata.version(name)
        except Exception:
            continue
    return None


def environment(env=None):
    """What a run was measured with: JAX / jaxlib / libtpu or CUDA plugin versions, the
    backend, device kind and count, the platform version and the XLA flags in effect.
    Only plain strings and numbers, so that two runs compare key by key."""
    env = os.environ if env is None else env
    import jaxlib

    devices = jax.devices()
    out = {
        "jax": jax.__version__,
        "jaxlib": getattr(jaxlib, "__version__", None) or _dist_version("jaxlib"),
        "python": "%d.%d.%d" % sys.version_info[:3],
        "backend": jax.default_backend(),
        "device_kind": devices[0].device_kind if devices else None,
        "device_count": len(devices),
    }
    try:
        out["platform_version"] = str(devices[0].client.platform_version)
    except Exception:
        pass
    libtpu = _dist_version("libtpu", "libtpu-nightly")
    if libtpu:
        out["libtpu"] = libtpu
    cuda = _dist_version("jax-cuda12-plugin", "jax-cuda13-plugin", "jax-cuda12-pjrt")
    if cuda:
        out["cuda_plugin"] = cuda
    for flag in ("XLA_FLAGS", "LIBTPU_INIT_ARGS"):
        if env.get(flag, "").strip():
            out[flag] = env[flag].strip()
    return {k: v for k, v in out.items() if v is not None}


# Kernel calls this process made (warmup, measured, profiled, snapshots): with the median
# call time, the kernel's share of the run's wall (`kernel_calls`).
_CALLS = 0


def _call(compiled, args):
    global _CALLS
    _CALLS += 1
    return jax.block_until_ready(compiled(*args))


# The phases of one run in the order they happen (the result file's `phases_s`, seconds):
# start_to_import from ratchet's spawn (RATCHET_SPAWN_NS) to this module's first line; imports,
# this module's own (jax, numpy); setup, the caller's code up to run() / measure(); then
# measure's steps. profiled is the profiled calls alone and profiler_overhead the rest of the
# profiler window (start, stop, serialising the trace). result_write ends just before the
# result file is written: the write, the summary and the interpreter's exit are in no phase.
PHASES = ("start_to_import", "imports", "setup", "backend_init", "compile", "hlo_dump", "warmup",
          "measured", "profiled", "profiler_overhead", "snapshots", "check", "result_write")


def spawn_ns(env=None):
    """ratchet's CLOCK_MONOTONIC stamp of this run's spawn (RATCHET_SPAWN_NS), or None."""
    env = os.environ if env is None else env
    try:
        ns = int(env.get("RATCHET_SPAWN_NS", "").strip())
    except ValueError:
        return None
    return ns if 0 < ns <= _MODULE_START_NS else None


class _Phases:
    """Wall-clock phase durations of one process, each lap from the end of the last."""

    def __init__(self, entry_ns, env=None):
        self.s = {}
        start = spawn_ns(env)
        if start is not None:
            self.s["start_to_import"] = (_MODULE_START_NS - start) / 1e9
        self.s["imports"] = (_MODULE_END_NS - _MODULE_START_NS) / 1e9
        # measure() called without run(), or a module imported late: never negative.
        self.s["setup"] = max(0, entry_ns - _MODULE_END_NS) / 1e9
        self.last = max(entry_ns, _MODULE_END_NS)

    def lap(self, name, now=None):
        now = time.monotonic_ns() if now is None else now
        self.s[name] = self.s.get(name, 0.0) + max(0, now - self.last) / 1e9
        self.last = now


def measure(fn, args, *, flops=None, bytes=None, min_bytes=None, check=None, kernel=None,
            meta=None, settings=None, flush_l2=False, _entry_ns=None):
    """Run the protocol and return the result dict written to ratchet-result.json.

    Raises BenchError on anything that leaves no valid measurement. A failing check is
    not an error: it is recorded as `passed: false`, and ratchet marks the run invalid.
    """
    phases = _Phases(time.monotonic_ns() if _entry_ns is None else _entry_ns)
    calls_before = _CALLS
    s = settings or settings_from_env()
    flops = _positive_or_none("flops", flops)
    bytes_ = _positive_or_none("bytes", bytes)
    min_bytes = _positive_or_none("min_bytes", min_bytes)
    os.makedirs(s.out_dir, exist_ok=True)
    backend = jax.default_backend()
    device = jax.devices()[0].device_kind
    # Here, not at import: importing the helper must not touch the disk or JAX's settings.
    enable_compilation_cache()
    flush = _l2_flusher(flush_l2, backend)
    phases.lap("backend_init")

    lowered, compiled = _compile(fn, args)
    phases.lap("compile")
    hlo_path = os.path.join(s.out_dir, HLO_FILE)
    with open(hlo_path, "w", encoding="utf-8") as f:
        f.write(compiled.as_text() or "")
    # The Pallas kernels' own bodies (TPU / GPU): the HLO shows each as one custom call.
    try:
        bodies = kernel_bodies(lowered.compiler_ir("stablehlo"))
    except Exception:
        bodies = []
    body_path = os.path.join(s.out_dir, KERNEL_BODY_FILE)
    has_body = bool(bodies) and write_kernel_bodies(body_path, bodies) > 0
    if not has_body and os.path.exists(body_path):
        os.remove(body_path)

    # The compiler's own figures: the default for what the caller left out, a cross-check of
    # what the caller gave.
    figures = compiler_figures(compiled, bodies)
    for warning in cost_warnings({"flops": flops, "bytes": bytes_}, figures):
        print(f"ratchet_bench: warning: {warning}", file=sys.stderr)
    taken = []
    if figures and (flops is None or bytes_ is None):
        taken = [k for k, v in (("flops", flops), ("bytes", bytes_)) if v is None and figures.get(k)]
        flops = flops if flops is not None else figures.get("flops")
        bytes_ = bytes_ if bytes_ is not None else figures.get("bytes")
        if taken:
            bound = f" (a lower bound: {figures['lower_bound']})" if figures.get("lower_bound") else ""
            print(f"ratchet_bench: {' and '.join(taken)} from {figures['source']}{bound}",
                  file=sys.stderr)
    phases.lap("hlo_dump")

    out = None
    try:
        for _ in range(s.warmup):
            flush()
            out = _call(compiled, args)
        phases.lap("warmup")
        latencies = []
        for _ in range(s.iters):
            flush()
            t0 = time.perf_counter()
            out = _call(compiled, args)
            latencies.append((time.perf_counter() - t0) * 1e3)
        phases.lap("measured")
    except Exception as e:
        raise BenchError(f"the kernel raised: {type(e).__name__}: {e}") from e

    trace = None
    if s.profile_iters:
        trace_dir = os.path.join(s.out_dir, PROFILE_DIR)
        profiled_ns = 0
        try:
            with jax.profiler.trace(trace_dir, profiler_options=_profile_options(backend, s.trace_mode)):
                for i in range(s.profile_iters):
                    flush()  # outside the step: the step holds the kernel alone
                    with jax.profiler.StepTraceAnnotation(STEP_NAME, step_num=i):
                        t0 = time.monotonic_ns()
                        _call(compiled, args)
                        profiled_ns += time.monotonic_ns() - t0
        except Exception as e:
            raise BenchError(f"profiling failed: {type(e).__name__}: {e}") from e
        trace = PROFILE_DIR
        # The window less its calls: the profiler's start, stop and trace serialisation.
        window_start = phases.last
        phases.lap("profiled", now=window_start + profiled_ns)
        phases.lap("profiler_overhead")

    snapshots = deep_snapshots(compiled, args, s, backend) if s.deep else None
    if s.deep:
        phases.lap("snapshots")

    check_result = None
    if check is not None:
        try:
            check_result = _normalise_check(check(out))
        except BenchError:
            raise
        except Exception as e:
            raise BenchError(f"the check raised: {type(e).__name__}: {e}") from e
        phases.lap("check")

    if not all(math.isfinite(x) and x > 0 for x in latencies):
        raise BenchError(f"timer returned unusable latencies: {latencies}")

    result = {"version": 1, "latencies_ms": latencies}
    for key, value in (("flops", flops), ("bytes", bytes_), ("min_bytes", min_bytes)):
        if value is not None:
            result[key] = value
    if taken:
        # Estimates, not the benchmark's claims: ratchet's physics gate does not hold a run to
        # the compiler's bytes (a kernel whose data stays in a cache beats them).
        result["compiler_figures"] = {k: figures["source"] for k in taken}
    if check_result is not None:
        result["check"] = check_result
    if trace is not None:
        result["trace"] = trace
    result["hlo"] = HLO_FILE
    if has_body:
        result["kernel_body"] = KERNEL_BODY_FILE
    kernel = kernel or getattr(fn, "__name__", None)
    if kernel:
        result["kernel"] = kernel
    result["backend"] = backend
    result["device"] = device
    if meta is not None:
        result["meta"] = _json_meta(meta)
    if snapshots is not None:
        result["snapshots"] = snapshots
    result["environment"] = environment()
    result["kernel_calls"] = _CALLS - calls_before
    peak = peak_memory_bytes()
    if peak is not None:
        result["peak_memory_bytes"] = peak
    phases.lap("result_write")
    result["phases_s"] = {k: phases.s[k] for k in PHASES if k in phases.s}
    write_result(s.out_dir, result)
    return result


def peak_memory_bytes():
    """The default device's peak memory in use so far (jax's `memory_stats()`, which GPU and
    TPU backends give and the CPU one does not), or None."""
    try:
        stats = jax.local_devices()[0].memory_stats()
    except Exception:
        return None
    peak = (stats or {}).get("peak_bytes_in_use")
    return int(peak) if isinstance(peak, (int, float)) and peak > 0 else None


# The share of the time the roofline leaves unexplained above which a kernel reaches less than
# a tenth of its roof (ratchet's metrics::LATENCY_BOUND_GAP, ours; the same rule decides the
# word everywhere, and the article's worked examples at 61% and 67% gap keep their side's word).
LATENCY_BOUND_GAP = 0.90


def regime_word(memory_bound, gap_share):
    """The regime word ratchet uses in every view: LATENCY-BOUND when more than 90% of the time
    is gap (both units nearly idle), else the roofline's side."""
    if gap_share > LATENCY_BOUND_GAP:
        return "LATENCY-BOUND"
    return "MEMORY-BOUND" if memory_bound else "COMPUTE-BOUND"


def summary_lines(result, hlo_text=None, env=None, kernel_body_text=None):
    """The article's human summary: RESULT, REGIME and HLO stats lines. On TPU and GPU the HLO
    shows a Pallas kernel as one custom call (no dot, no exp): the kernel bodies' own counts
    (`kernel_body_text`, the kernel.body.mlir file) follow the HLO's, one line per kernel."""
    latency_ms = statistics.median(result["latencies_ms"])
    flops, bytes_ = result.get("flops"), result.get("bytes")
    peaks = peak_figures(result.get("device", ""), env)
    result_fields = [f"latency={latency_ms:.3f}ms"]
    tflops = flops / (latency_ms * 1e-3) / 1e12 if flops else None
    if tflops is not None and peaks:
        util = tflops / peaks[0]
        # The article's fitness figure: util x 100 / latency.
        result_fields.insert(0, f"score={util * 100 / latency_ms:.1f}")
        result_fields.append(f"util={util * 100:.1f}%")
    if tflops is not None:
        result_fields.append(f"tflops={tflops:.4g}")
    lines = ["RESULT: " + "  ".join(result_fields)]

    if flops and bytes_:
        intensity = flops / bytes_
        if peaks:
            ridge = peaks[0] * 1e12 / (peaks[1] * 1e9)
            bw = bytes_ / (latency_ms * 1e-3) / (peaks[1] * 1e9)
            compute_ms = flops / (peaks[0] * 1e12) * 1e3
            memory_ms = bytes_ / (peaks[1] * 1e9) * 1e3
            gap_share = max(0.0, latency_ms - max(compute_ms, memory_ms)) / latency_ms
            regime = regime_word(intensity < ridge, gap_share)
            lines.append(f"REGIME: {regime}  BW={bw * 100:.1f}%  intensity={intensity:.0f} FLOPs/byte")
            lines.append(
                f"Roofline: compute-only={compute_ms:.3f}ms  memory-only={memory_ms:.3f}ms  "
                f"gap={latency_ms - max(compute_ms, memory_ms):.3f}ms  ridge={ridge:.0f} FLOPs/byte"
            )
        else:
            lines.append(
                f"REGIME: UNKNOWN  intensity={intensity:.0f} FLOPs/byte  "
                f"(no peak figures for {result.get('device')!r}: set RATCHET_PEAK_TFLOPS and RATCHET_HBM_GBPS)"
            )
    if result.get("min_bytes") and flops:
        lines.append(f"Intensity with perfect reuse: {flops / result['min_bytes']:.0f} FLOPs/byte")
    if hlo_text is not None:
        st = hlo_stats(hlo_text)
        lines.append("HLO stats:")
        for op in ("dot", "exponential", "reduce", "copy", "custom-call"):
            lines.append(f"    {op + ' ops:':<17}{st[op]}")
        lines.append(f"    {'total lines:':<17}{st['lines']}")
    if kernel_body_text:
        for k in kernel_body_counts(kernel_body_text):
            counts = "  ".join(f"{c} {k[c]}" for c in BODY_COUNTS)
            lines.append(f"    kernel body {k['name']} ({k['dialect']}): {counts}")
    check = result.get("check")
    if check is not None:
        err = check.get("max_abs_err")
        lines.append(
            f"CHECK: {'passed' if check['passed'] else 'FAILED'}"
            + (f"  max_abs_err={err:.3g}" if err is not None else "")
            + (f"  tolerance={check['tolerance']:.3g}" if "tolerance" in check else "")
        )
    return lines


def run(fn, args, *, flops=None, bytes=None, min_bytes=None, check=None, kernel=None, meta=None,
        flush_l2=False):
    """Benchmark `fn(*args)` under ratchet's protocol; print the summary; exit 1 on failure.

    fn:        a jitted callable (a plain function is jitted); compiled once, ahead of time.
    args:      tuple of its arguments.
    flops:     FLOPs of one call (compute_flops()); default: the compiler's (a Pallas
               cost_estimate, else compiled.cost_analysis()), which also checks a given one.
    bytes:     estimated HBM bytes of one call, re-reads included; default as for flops.
    min_bytes: HBM bytes with perfect reuse.
    check:     callable(output) -> bool or {'passed', 'max_abs_err', 'tolerance'}
               (ratchet_bench.compare builds the dict); a failure marks the run invalid.
    kernel:    regular expression naming the kernel's module in the trace
               (default: fn's __name__).
    meta:      JSON-serialisable dict stored with the run (block sizes, shapes).
    flush_l2:  on GPU, write a 256 MB buffer before every timed and profiled call, so each
               call reads from HBM, not from an L2 its previous call warmed (as
               triton.testing.do_bench does); ignored, with a note, on CPU and TPU.
    Returns the result dict.
    """
    entry_ns = time.monotonic_ns()
    try:
        settings = settings_from_env()
        result = measure(fn, args, flops=flops, bytes=bytes, min_bytes=min_bytes, check=check,
                         kernel=kernel, meta=meta, settings=settings, flush_l2=flush_l2,
                         _entry_ns=entry_ns)
        with open(os.path.join(settings.out_dir, HLO_FILE), encoding="utf-8") as f:
            hlo_text = f.read()
        body_text = None
        if result.get("kernel_body"):
            with open(os.path.join(settings.out_dir, result["kernel_body"]), encoding="utf-8") as f:
                body_text = f.read()
    except BenchError as e:
        # The underlying traceback (a Mosaic or Triton lowering error, say) is what the
        # kernel author needs; the one-line reason comes last so it is what they see.
        if e.__cause__ is not None:
            traceback.print_exception(e.__cause__, file=sys.stderr)
        sys.exit(f"ratchet_bench: error: {e}")
    for line in summary_lines(result, hlo_text, kernel_body_text=body_text):
        print(line)
    print(f"    {'Full HLO:':<17}{os.path.join(settings.out_dir, HLO_FILE)}")
    print(f"Result file: {os.path.join(settings.out_dir, RESULT_FILE)}")
    if not settings.under_ratchet and result.get("trace"):
        print(f"Trace: xprof --port=8791 {os.path.join(settings.out_dir, result['trace'])}"
              "  (XProf's viewer: pip install xprof)")
    if result.get("check", {}).get("passed") is False:
        print("ratchet_bench: the correctness check FAILED; ratchet will mark this run invalid",
              file=sys.stderr)
    sys.stdout.flush()
    return result

