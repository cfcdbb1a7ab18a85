"""The example's FlashAttention kernel written for Pallas' Mosaic GPU backend (`plgpu`), so that
its lowered body (custom call `mosaic_gpu_v2`) can be read like the Mosaic TPU and Triton forms.

Same algorithm as examples/flash_attention/kernel.py's loop form (`_fa_kernel_loop`): one grid
step per (head, Q block), the KV axis a loop inside the kernel with the online-softmax state in
registers. Mosaic GPU specifics: the pallas_call's BlockSpecs become TMA copies into shared
memory (tiled and 128-byte swizzled, as wgmma reads its operands), both matmuls are `plgpu.wgmma`
into a warpgroup accumulator, and the kernel runs one warpgroup per block (Warpgroup semantics).
Lowering needs no GPU: without a device, jax's Mosaic GPU lowering targets sm_90 (Hopper), see
`_infer_arch` in jax/experimental/mosaic/gpu/core.py (jax 0.10.2).
"""

import math

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

import kernel  # the example's kernel.py, for its cost estimate


def flash_attention(q, k, v, *, bq=64, bkv=64):
    """softmax(q k^T / sqrt(d)) v for (heads, seq, head_dim) bf16 inputs, as a Mosaic GPU kernel.
    bq must be a multiple of 64 (a wgmma's M), bkv and head_dim multiples of 64 (one 128-byte
    swizzle of bf16)."""
    from jax.experimental.pallas import mosaic_gpu as plgpu

    heads, seq, head_dim = q.shape
    seq_kv = k.shape[1]
    if seq % bq or seq_kv % bkv:
        raise ValueError(f"seq ({seq}, {seq_kv}) must be a multiple of BQ ({bq}) and BKV ({bkv})")
    num_kv_blocks = seq_kv // bkv
    scale = 1.0 / math.sqrt(head_dim)
    swizzle = 128
    smem = (plgpu.TilingTransform((8, swizzle // q.dtype.itemsize)), plgpu.SwizzleTransform(swizzle))

    def body(q_ref, k_ref, v_ref, o_ref):
        def step(j, carry):
            acc, m_prev, l_prev = carry
            k_blk = k_ref.at[pl.ds(j * bkv, bkv)]
            v_blk = v_ref.at[pl.ds(j * bkv, bkv)]

            def qk(acc_ref):
                plgpu.wgmma(acc_ref, q_ref, plgpu.transpose_ref(k_blk, (1, 0)))
                return acc_ref[...]

            s = pl.run_scoped(qk, plgpu.ACC((bq, bkv), jnp.float32)) * scale
            m_new = jnp.maximum(m_prev, s.max(axis=1))
            alpha = jnp.exp(m_prev - m_new)
            p = jnp.exp(s - lax.broadcast_in_dim(m_new, s.shape, [0]))
            l_new = alpha * l_prev + p.sum(axis=1)
            acc = acc * lax.broadcast_in_dim(alpha, acc.shape, [0])

            def pv(acc_ref):
                plgpu.wgmma(acc_ref, p.astype(v_ref.dtype), v_blk)

            acc = pl.run_state(pv)(plgpu.ACC.init(acc))
            return acc, m_new, l_new

        init = (
            jnp.zeros((bq, head_dim), jnp.float32),
            jnp.full((bq,), -jnp.inf, jnp.float32),
            jnp.zeros((bq,), jnp.float32),
        )
        acc, _, l = lax.fori_loop(0, num_kv_blocks, step, init)
        o_ref[...] = (acc / lax.broadcast_in_dim(l, acc.shape, [0])).astype(o_ref.dtype)

    return pl.pallas_call(
        body,
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        grid=(heads, seq // bq),
        in_specs=[
            plgpu.BlockSpec((None, bq, head_dim), lambda h, i: (h, i, 0), transforms=smem),
            plgpu.BlockSpec((None, seq_kv, head_dim), lambda h, i: (h, 0, 0), transforms=smem),
            plgpu.BlockSpec((None, seq_kv, head_dim), lambda h, i: (h, 0, 0), transforms=smem),
        ],
        out_specs=plgpu.BlockSpec((None, bq, head_dim), lambda h, i: (h, i, 0)),
        compiler_params=plgpu.CompilerParams(lowering_semantics=plgpu.LoweringSemantics.Warpgroup),
        cost_estimate=kernel.cost_estimate(heads, seq, seq_kv, head_dim, seq // bq, num_kv_blocks,
                                           q.dtype.itemsize),
        name="flash_attention",
    )(q, k, v)
