"""Fused FlashAttention forward pass in Pallas: the kernel that ratchet's example optimises.

Modelled on the kernel of the KernelForge series ("Deep-Dive into TPU Profiling", part 2):
exact attention without materialising the (seq, seq) score matrix, an online softmax, and
scratch buffers for the running max, running sum and output accumulator. The block sizes
are plain constants so that a hypothesis is a one-line edit: `BQ` / `BKV` on a TPU (defaults:
the article's memory-bound baseline, section 3.4), `GPU_BQ` / `GPU_BKV` / `GPU_WARPS` /
`GPU_STAGES` on a GPU, `CPU_BQ` / `CPU_BKV` on CPU, where the interpreter pays per grid step and
the problem is small.

One kernel source, three backends, picked from `jax.default_backend()`:
  * tpu: Mosaic, grid (heads, Q blocks, KV blocks), state in VMEM scratch (scratch_shapes).
  * cpu: the same kernel run by the Pallas interpreter (`interpret=True`). The interpreter
    executes the grid as a loop, so each grid step costs a fixed overhead; bigger blocks
    mean fewer steps, which is what makes block-size hypotheses visible on a laptop.
  * gpu: Pallas' Triton backend. Triton grid programs cannot carry state from one grid
    step to the next, so there the KV axis is a loop inside the kernel and the running
    state lives in registers (loop carries) instead of scratch buffers.

Inputs are (heads, seq, head_dim); seq must be a multiple of both block sizes.
"""

import functools
import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

# Query rows per block: each Q block re-reads all of K and V, so this sets the re-read factor.
# Accelerator default: the article's baseline (BQ=128, BKV=256 at seq=16384: 128 x 64 = 8192
# grid steps, memory-bound); its prescription is to grow BQ first, then BKV
# (experiments/accelerator/ holds that progression).
BQ = 128
# Key/value rows per inner step: the score tile is (BQ, BKV), f32 in vector registers.
BKV = 256
# GPU (Triton): the score tile (GPU_BQ, GPU_BKV) and the accumulator (GPU_BQ, head_dim) live in
# the registers of GPU_WARPS warps, and GPU_STAGES is how many K/V tiles Triton's software
# pipeline keeps in flight. The start is Triton's default of 4 warps for 128x64 tiles, which
# spills (experiments/gpu/ holds the progression: warps, stages, BKV, then a BQ probe).
GPU_BQ = 128
GPU_BKV = 64
GPU_WARPS = 4
GPU_STAGES = 2
# The smallest L2 of the GPUs ratchet knows (NVIDIA A100 40GB datasheet: 40 MB; H100 SXM: 50 MB).
# The Triton form's Q blocks all stream the same K and V, so while K and V fit in it, their
# re-reads are L2 hits, not HBM traffic: on an H200 the kernel ran at seq 16384 in 0.37 ms, where
# the re-reads from HBM alone would take 0.45 ms (scripts/gpu-check/probe.py, 2026-11-26).
GPU_L2_BYTES = 40 * 2**20
# CPU (the Pallas interpreter, seq=512): small blocks so that block-size hypotheses show
# (experiments/*.toml edit these).
CPU_BQ = 32
CPU_BKV = 32

# exp() runs on the exponent of each score, a few VPU ops per element (article: ~5 per score).
SOFTMAX_FLOPS_PER_SCORE = 5


def _stats_shape(bq, head_dim):
    """Shape of the running max / running sum scratch of one Q block."""
    # One value per query row, replicated across head_dim columns so that it lines up
    # with the accumulator: simple, but head_dim times the scratch the statistics need.
    return (bq, head_dim)


def _fa_kernel_grid(q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref, *, scale):
    """One (Q block, KV block) grid step; the KV axis is the innermost, sequential one."""
    kv = pl.program_id(2)

    @pl.when(kv == 0)
    def _init():
        m_ref[...] = jnp.full(m_ref.shape, -jnp.inf, jnp.float32)
        l_ref[...] = jnp.zeros(l_ref.shape, jnp.float32)
        acc_ref[...] = jnp.zeros(acc_ref.shape, jnp.float32)

    # Pre-scaling: scale the (BQ, D) query tile instead of the (BQ, BKV) score tile.
    q = (q_ref[...].astype(jnp.float32) * scale).astype(q_ref.dtype)
    k = k_ref[...]
    v = v_ref[...]
    # Precision: inputs stay in their own dtype for the matmuls, accumulation is in f32.
    s = jax.lax.dot_general(
        q, k, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32
    )

    m_prev = m_ref[:, :1]
    l_prev = l_ref[:, :1]
    m_new = jnp.maximum(m_prev, jnp.max(s, axis=-1, keepdims=True))
    alpha = jnp.exp(m_prev - m_new)
    p = jnp.exp(s - m_new)
    l_new = alpha * l_prev + jnp.sum(p, axis=-1, keepdims=True)
    pv = jnp.dot(p.astype(v.dtype), v, preferred_element_type=jnp.float32)
    acc_ref[...] = alpha * acc_ref[...] + pv
    m_ref[...] = jnp.broadcast_to(m_new, m_ref.shape)
    l_ref[...] = jnp.broadcast_to(l_new, l_ref.shape)

    @pl.when(kv == pl.num_programs(2) - 1)
    def _finish():
        o_ref[...] = (acc_ref[...] / l_ref[:, :1]).astype(o_ref.dtype)


def _fa_kernel_loop(q_ref, k_ref, v_ref, o_ref, *, scale, bq, bkv, num_kv_blocks):
    """One Q block with the KV loop inside: the GPU (Triton) form of the same algorithm."""
    head_dim = q_ref.shape[-1]
    q = (q_ref[...].astype(jnp.float32) * scale).astype(q_ref.dtype)

    def step(j, carry):
        acc, m_prev, l_prev = carry
        start = pl.multiple_of(j * bkv, bkv)
        k = k_ref[pl.ds(start, bkv), :]
        v = v_ref[pl.ds(start, bkv), :]
        s = jnp.dot(q, k.T, preferred_element_type=jnp.float32)
        m_new = jnp.maximum(m_prev, jnp.max(s, axis=-1))
        alpha = jnp.exp(m_prev - m_new)
        p = jnp.exp(s - m_new[:, None])
        l_new = alpha * l_prev + jnp.sum(p, axis=-1)
        pv = jnp.dot(p.astype(v.dtype), v, preferred_element_type=jnp.float32)
        return alpha[:, None] * acc + pv, m_new, l_new

    init = (
        jnp.zeros((bq, head_dim), jnp.float32),
        jnp.full((bq,), -jnp.inf, jnp.float32),
        jnp.zeros((bq,), jnp.float32),
    )
    acc, _, l = jax.lax.fori_loop(0, num_kv_blocks, step, init)
    o_ref[...] = (acc / l[:, None]).astype(o_ref.dtype)


def default_variant():
    """The kernel form for the backend JAX runs on: 'mosaic', 'triton' or 'interpret'."""
    return {"tpu": "mosaic", "gpu": "triton"}.get(jax.default_backend(), "interpret")


def default_blocks(variant=None):
    """(BQ, BKV) for a kernel form: the TPU constants for Mosaic, the GPU ones for Triton, the
    CPU ones for the interpreter."""
    variant = variant or default_variant()
    if variant == "mosaic":
        return (BQ, BKV)
    if variant == "triton":
        return (GPU_BQ, GPU_BKV)
    return (CPU_BQ, CPU_BKV)


def kv_rereads_cached(heads, seq_kv, head_dim, itemsize, variant):
    """Whether the K/V re-reads of one call are served by a cache rather than HBM: the Triton
    form's, while all of K and V fit in GPU_L2_BYTES. On a TPU every Q block's K/V tiles are
    copied from HBM into VMEM again, so there they are HBM traffic."""
    return variant == "triton" and 2 * heads * seq_kv * head_dim * itemsize <= GPU_L2_BYTES


def cost_estimate(heads, seq, seq_kv, head_dim, num_q_blocks, num_kv_blocks, itemsize, variant=None):
    """What XProf's roofline tool reads from a Pallas call (the HLO's custom call carries no
    FLOP count of its own): FLOPs as compute_flops() counts them, transcendentals (one exp per
    score and one rescale exp per row and KV block) and HBM bytes with the K/V re-reads that
    reach HBM, as estimate_actual_memory_traffic() counts them."""
    kv_reads = 1 if kv_rereads_cached(heads, seq_kv, head_dim, itemsize, variant) else num_q_blocks
    return pl.CostEstimate(
        flops=int(heads * (4 * seq * seq_kv * head_dim + SOFTMAX_FLOPS_PER_SCORE * seq * seq_kv)),
        transcendentals=int(heads * seq * (seq_kv + num_kv_blocks)),
        bytes_accessed=int(heads * head_dim * itemsize * (2 * seq + 2 * seq_kv * kv_reads)),
    )


@functools.partial(jax.jit, static_argnames=("bq", "bkv", "variant", "num_warps", "num_stages"))
def flash_attention(q, k, v, *, bq=None, bkv=None, variant=None, num_warps=None, num_stages=None):
    """softmax(q k^T / sqrt(d)) v for (heads, seq, head_dim) inputs, fused in one kernel.

    `variant` forces a kernel form ('mosaic', 'triton', 'interpret' for the grid kernel
    on the interpreter, 'interpret-loop' for the Triton form on the interpreter); the
    default follows the backend. Block sizes default to the module constants for that form;
    `num_warps` / `num_stages` (Triton only) to GPU_WARPS / GPU_STAGES.
    """
    variant = variant or default_variant()
    bq = default_blocks(variant)[0] if bq is None else bq
    bkv = default_blocks(variant)[1] if bkv is None else bkv
    heads, seq, head_dim = q.shape
    seq_kv = k.shape[1]
    if seq % bq or seq_kv % bkv:
        raise ValueError(
            f"seq ({seq}, {seq_kv}) must be a multiple of BQ ({bq}) and BKV ({bkv})"
        )
    scale = 1.0 / math.sqrt(head_dim)
    out_shape = jax.ShapeDtypeStruct(q.shape, q.dtype)
    cost = cost_estimate(heads, seq, seq_kv, head_dim, seq // bq, seq_kv // bkv, q.dtype.itemsize, variant)

    if variant in ("triton", "interpret-loop"):
        from jax.experimental.pallas import triton as pl_triton

        kernel = functools.partial(
            _fa_kernel_loop, scale=scale, bq=bq, bkv=bkv, num_kv_blocks=seq_kv // bkv
        )
        return pl.pallas_call(
            kernel,
            out_shape=out_shape,
            grid=(heads, seq // bq),
            in_specs=[
                pl.BlockSpec((None, bq, head_dim), lambda h, i: (h, i, 0)),
                pl.BlockSpec((None, seq_kv, head_dim), lambda h, i: (h, 0, 0)),
                pl.BlockSpec((None, seq_kv, head_dim), lambda h, i: (h, 0, 0)),
            ],
            out_specs=pl.BlockSpec((None, bq, head_dim), lambda h, i: (h, i, 0)),
            compiler_params=(
                pl_triton.CompilerParams(
                    num_warps=GPU_WARPS if num_warps is None else num_warps,
                    num_stages=GPU_STAGES if num_stages is None else num_stages,
                )
                if variant == "triton"
                else None
            ),
            interpret=variant == "interpret-loop",
            cost_estimate=cost,
            name="flash_attention",
        )(q, k, v)

    if variant not in ("mosaic", "interpret"):
        raise ValueError(f"unknown kernel variant {variant!r}")
    from jax.experimental.pallas import tpu as pltpu

    return pl.pallas_call(
        functools.partial(_fa_kernel_grid, scale=scale),
        out_shape=out_shape,
        grid=(heads, seq // bq, seq_kv // bkv),
        in_specs=[
            pl.BlockSpec((None, bq, head_dim), lambda h, i, j: (h, i, 0)),
            pl.BlockSpec((None, bkv, head_dim), lambda h, i, j: (h, j, 0)),
            pl.BlockSpec((None, bkv, head_dim), lambda h, i, j: (h, j, 0)),
        ],
        out_specs=pl.BlockSpec((None, bq, head_dim), lambda h, i, j: (h, i, 0)),
        scratch_shapes=[
            pltpu.VMEM(_stats_shape(bq, head_dim), jnp.float32),  # m: running max
            pltpu.VMEM(_stats_shape(bq, head_dim), jnp.float32),  # l: running sum
            pltpu.VMEM((bq, head_dim), jnp.float32),  # acc: unnormalised output
        ],
        compiler_params=(
            pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary"))
            if variant == "mosaic"
            else None
        ),
        interpret=variant == "interpret",
        cost_estimate=cost,
        name="flash_attention",
    )(q, k, v)


def reference_attention(q, k, v):
    """Plain jnp attention in f32: the ground truth every benchmark run is checked against."""
    q32, k32, v32 = (x.astype(jnp.float32) for x in (q, k, v))
    s = jnp.einsum("hqd,hkd->hqk", q32, k32) / math.sqrt(q.shape[-1])
    return jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(s, axis=-1), v32)


def get_tiling_meta(heads, seq, head_dim, *, bq=None, bkv=None, variant=None):
    """The tiling of one call: block sizes and how many blocks each axis is cut into."""
    bq = default_blocks(variant)[0] if bq is None else bq
    bkv = default_blocks(variant)[1] if bkv is None else bkv
    meta = {
        "BQ": bq,
        "BKV": bkv,
        "heads": heads,
        "seq": seq,
        "head_dim": head_dim,
        "num_q_blocks": seq // bq,
        "num_kv_blocks": seq // bkv,
        "grid_steps": heads * (seq // bq) * (seq // bkv),
    }
    if (variant or default_variant()) == "triton":
        meta.update(num_warps=GPU_WARPS, num_stages=GPU_STAGES)
    return meta


def compute_flops(heads, seq, head_dim):
    """Theoretical FLOPs of one call: two matmuls plus the softmax (the article's count)."""
    matmuls = 2 * (2 * seq * seq * head_dim)  # Q@K^T and P@V
    softmax = SOFTMAX_FLOPS_PER_SCORE * seq * seq
    return heads * (matmuls + softmax)


def estimate_actual_memory_traffic(meta, itemsize):
    """HBM bytes of one call with the tiling's re-reads: K and V are read once per Q block,
    except where a cache serves the re-reads (kv_rereads_cached: the Triton form while K and V
    fit in L2), and then once."""
    tile = meta["heads"] * meta["seq"] * meta["head_dim"] * itemsize
    q_bytes = tile
    cached = kv_rereads_cached(meta["heads"], meta["seq"], meta["head_dim"], itemsize, meta.get("variant"))
    kv_bytes = 2 * tile * (1 if cached else meta["num_q_blocks"])
    o_bytes = tile
    return q_bytes + kv_bytes + o_bytes


def minimum_memory_traffic(meta, itemsize):
    """HBM bytes with perfect reuse: Q, K, V read once, O written once."""
    return 4 * meta["heads"] * meta["seq"] * meta["head_dim"] * itemsize
