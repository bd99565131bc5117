"""Rung 2 (``kq``) adds over rung 1 (consumer_qk.py): the transpose for decode, S^T = K Q^T.

``score_layout="kq"`` (layouts.py): rung 1 transposed, KV tokens as the ``mma.sync`` M and query
rows as N:

    S^T = K Q^T                      K: (block_n, head_dim) tile, Q: (rows, head_dim), rows 8 or 16
    P^T = exp2(S^T scale_log2 - m)   m: each query column's running max
    O^T = O^T * correction + V^T P^T  O^T: (head_dim, rows), V^T: (head_dim, block_n)

What it adds: in decode a KV head serves ``group * seqlen_q`` query rows, 1 to 8 at one token;
as rung 1's M (16) most of each mma is padding. Here a warp owns ``rows_per_warp`` = 8 or 16
rows, ``q_blocks`` = 1 or 2 mma N blocks of 8: for 8 rows or fewer half the mmas and registers.

Lane ``l``: ``g = l >> 2``, ``q = l & 3``. Registers (``cuda.local.array``, unrolled):
- ``qf``: Q's B fragments, loaded once (``ldmatrix.x4`` over 8 rows x 64 bytes; e4m3: unpacked
  to fp16 once, not per tile);
- ``scores[(tb * q_blocks + qb) * 4 + r]``: S^T of 16-token block tb and query block qb:
  tokens ``16 tb + g`` (r = 0, 1) and ``+ 8`` (r = 2, 3), query columns ``8 qb + 2q + (r & 1)``;
- ``acc[(db * q_blocks + qb) * 4 + r]``: O^T of 16-dim block db, same columns, dims
  bf16 ``16 db + g`` (r = 0, 1) and ``+ 8`` (r = 2, 3); e4m3 ``16 db + 2g`` and ``+ 1``.

S^T: A = K (``ldmatrix.x4`` of 16 tokens x 32 bytes, rung 1's Q load), B = Q. e4m3 runs as two
fp16 m16n8k16 with the slot map of ``tma_kernels.ptx.mma.mma_e4m3_m16n8k32_via_f16`` (the same
map on both operands, so the contraction is unchanged). Softmax per query column: each lane
reduces its tokens, then the lanes of equal q (shuffles xor 4, 8, 16).

P V as O^T = V^T P^T. B = P^T: a C fragment of S^T packed to 16 bits is one 8 x 8 matrix per
token half; ``movmatrix.trans`` gives the B layout (e4m3 rounds P to e4m3 first, as FA3 does,
then unpacks). A = V^T: bf16 ``ldmatrix.x4.trans`` of 16 tokens x 16 dims; e4m3
``ldmatrix.x4.trans`` on byte pairs over 32 tokens x 16 dims (rung 1's V load), ``prmt`` gathering
the even dim (0x6420) and the odd dim (0x7531), so A rows g = dim 2g and g + 8 = dim 2g + 1: one
ldmatrix feeds two fp16 mmas (tokens 0-15, 16-31), each over all 16 dims of the block.

The steps are kq_steps.py's and consumer_steps.py's (the columns' prologue) and the ring wait
kernel_steps.py's, which the later rungs call too, with their warps sharing a tile.
Checked on the CPU by the warp emulation in tests/cpu/paged_kv/test_paged_kv_fragments_kq.py.
"""
import types

from numba import cuda, float32, int32, uint32
from tma_kernels.ptx import mbarrier_arrive, mbarrier_wait_parity

from .consumer_qk import ZERO, make_q_loader
from .kernel_steps import make_ring_wait
from .consumer_steps import make_start_columns
from .kq_steps import Q_ROWS_PER_BLOCK, ROW_BLOCK, column_sum, make_kq_tiles


def make_consumer(variant):
    """The kq consumer's device functions for ``variant``: ``.consume(...)`` has the
    signature of rung 1's; the others are its steps, for the CPU warp emulation."""
    block_n, stages, kv_tile_bytes = variant.block_n, variant.stages, variant.kv_tile_bytes
    rows = variant.rows_per_warp
    q_blocks = rows // Q_ROWS_PER_BLOCK
    columns = 2 * q_blocks                    # query columns a lane holds
    dim_blocks = variant.head_dim // 16
    acc_regs = dim_blocks * q_blocks * 4
    load_q, ring_wait = make_q_loader(variant), make_ring_wait(stages)
    start_columns = make_start_columns(variant, columns)
    steps = make_kq_tiles(variant, q_blocks, block_n // ROW_BLOCK, dim_blocks)
    q_regs, score_regs, p_regs = steps.q_regs, steps.score_regs, steps.p_regs
    load_q_fragments, scores_tile, mask_tile = steps.load_q_fragments, steps.scores_tile, steps.mask_tile
    softmax_column, p_fragments, pv_tile, store_column = (steps.softmax_column, steps.p_fragments,
                                                          steps.pv_tile, steps.store_column)

    @cuda.jit(device=True, inline=True)
    def consume(q_smem, k_smem, v_smem, full_k, full_v, empty, q_address, out, lse, warp, lane,
                m_start, rows_valid, group, batch, kv_head, seqlen_q, q_heads, kv_len, n_begin,
                tiles, scale_log2, out_row_base):
        load_q(q_smem, q_address, warp, lane, m_start, rows_valid, group, batch, kv_head, seqlen_q, q_heads)
        qf = cuda.local.array(q_regs, uint32)
        load_q_fragments(qf, q_smem, warp * rows, lane)
        scores = cuda.local.array(score_regs, float32)
        pf = cuda.local.array(p_regs, uint32)
        acc = cuda.local.array(acc_regs, float32)
        for i in range(acc_regs):
            acc[i] = ZERO
        group_lane = lane >> 2
        first_row = m_start + warp * rows + 2 * (lane & 3)
        limits = cuda.local.array(columns, int32)
        m_run = cuda.local.array(columns, float32)
        l_run = cuda.local.array(columns, float32)
        corrections = cuda.local.array(columns, float32)
        smallest_limit = start_columns(limits, m_run, l_run, first_row, group, kv_len, seqlen_q)
        for k in range(tiles):
            stage, phase, barrier = ring_wait(full_k, k)
            k_tile = k_smem + uint32(stage * kv_tile_bytes)
            v_tile = v_smem + uint32(stage * kv_tile_bytes)
            scores_tile(scores, qf, uint32(0), k_tile, lane)
            first_key = (n_begin + k) * block_n
            if first_key + block_n > smallest_limit:
                mask_tile(scores, first_key, group_lane, limits)
            for c in range(columns):
                m_run[c], l_run[c], corrections[c] = softmax_column(scores, c, m_run[c], l_run[c], scale_log2)
            for i in range(acc_regs):
                acc[i] *= corrections[2 * ((i >> 2) % q_blocks) + (i & 1)]
            p_fragments(pf, scores)
            mbarrier_wait_parity(full_v + barrier, phase)
            pv_tile(acc, pf, uint32(0), v_tile, 0, lane)
            mbarrier_arrive(empty + barrier)
        for c in range(columns):
            store_column(out, lse, acc, c, m_run[c], column_sum(l_run[c]),
                         first_row + 8 * (c >> 1) + (c & 1), rows_valid, group, out_row_base,
                         group_lane, q_heads, kv_head, 0, True)

    return types.SimpleNamespace(**vars(steps), load_q=load_q, column_sum=column_sum, consume=consume)
