"""Rung 1 of the consumer ladder (layouts.py), ``qk``, the base: a warp's 16 query rows as the mma.sync M.

``score_layout="qk"``: one consumer warp's rows over the CTA's KV tiles, all with ``mma.sync`` on
fragments ``ldmatrix`` loads (the prefill consumer):

    S = Q K^T                     Q: (16, head_dim) rows of the warp, K: (block_n, head_dim) tile
    P = exp2(S scale_log2 - m)    m: each row's running max, over the tiles so far
    O = O * exp2(m_old - m) + P V  O: (16, head_dim), V: (block_n, head_dim) tile

Query rows are the mma's M (16 a warp); K's tokens are N. Fragment layouts: tma_kernels.ptx.mma.
Lane ``l`` holds rows ``g = l >> 2`` and ``g + 8`` and, of each 8-wide block of S or O columns,
columns ``2 (l & 3)`` and ``+ 1``. Registers (``cuda.local.array``, unrolled so they stay in
registers): ``scores[block_n / 2]`` (S, then P, of the tile: 4 per 8-token block) and
``acc[head_dim / 2]`` (O: 4 per 8-dim block).

Softmax in the log2 domain: ``scale_log2 = softmax_scale * log2(e)``; the running max ``m`` is
kept scaled, ``p = 2**(s * scale_log2 - m)`` by ``ex2.approx``; a row with every key masked so far
keeps ``m = -inf`` and uses SCORE_FLOOR in its place, so no ``inf - inf`` appears. Row sums stay
per-thread partial sums until the end.

P V, bf16: the S accumulator of two 8-token blocks *is* the A fragment of one k = 16 mma once
packed to bf16x2 (FlashAttention-2's register reuse); V's B fragments come from ``ldmatrix.trans``.

P V, e4m3: ``mma.m16n8k32`` wants 4 consecutive-k bytes a register, but a lane holds P at tokens
``2q, 2q+1, 8+2q, 9+2q, ..`` (q = l & 3). As K is contracted, any permutation of it applied to
both operands gives the same sum: P's bytes are packed in the order the lane holds them (mma k =
4q + e <-> token ``2q + (e & 1) + 8 (e >> 1)``, + 16 for a2, a3) and V's fragment is built for the
same tokens from ``ldmatrix.x4.trans`` on *byte pairs*: matrix i gives a lane tokens ``8i + 2q,
8i + 2q + 1`` of dims ``2g, 2g + 1``, and two ``prmt`` pick the even dim (0x6420) and the odd dim
(0x7531) of tokens 2q, 2q+1, 8+2q, 9+2q. Each ldmatrix feeds two mmas (the even and the odd dims of
a 16-dim block), so a lane's output columns of that block are ``16c + 4q + 0..3`` (even, odd, even,
odd), and V takes no pass through shared memory of its own.

make_q_loader, make_row_limit and the constants are every rung's; the ring wait is kernel_steps.py's.
"""
import math
import types

import numpy as np
from numba import cuda, float32, uint32
from tma_kernels.ptx import (
    ld_global_v4_u32,
    mbarrier_arrive,
    mbarrier_wait_parity,
    st_shared_v4_u32,
)
from tma_kernels.ptx.convert import cvt_bf16x2_f32, cvt_e4m3x2_f32, ex2_approx, prmt
from tma_kernels.ptx.ldmatrix import ldmatrix_x4, ldmatrix_x4_trans
from tma_kernels.ptx.mma import mma_bf16_m16n8k16, mma_e4m3_m16n8k32_via_f16

from .kernel_steps import make_ring_wait
from .geometry import (
    E4M3,
    MMA_K_BYTES,
    PIECE_BYTES,
    ROWS_PER_WARP,
    a_lane_row_col,
    k_lane_row_col,
    tile_offset,
    v_bf16_lane_row_col,
    v_e4m3_lane_row_col,
)

ZERO = np.float32(0.0)
ONE = np.float32(1.0)
NEG_INF = np.float32(-np.inf)
SCORE_FLOOR = np.float32(-1e30)   # stands in for a -inf running max: exp2(-inf - floor) = 0
FULL_MASK = 0xFFFFFFFF
EVEN_BYTES = 0x6420                # prmt: bytes 0, 2 of a and of b
ODD_BYTES = 0x7531                 # prmt: bytes 1, 3 of a and of b


@cuda.jit(device=True, inline=True)
def pack_e4m3(x0, x1, x2, x3):
    """Four float32 -> one uint32 of e4m3 bytes x0 (bits 0..7) .. x3 (bits 24..31)."""
    return cvt_e4m3x2_f32(x1, x0) | (cvt_e4m3x2_f32(x3, x2) << uint32(16))


def make_row_limit(causal):
    """``row_limit(row, group, kv_len, seqlen_q)``: keys [0, limit) that packed query row
    ``row`` may attend to (causal: bottom-right aligned, as kernel.py describes)."""
    @cuda.jit(device=True, inline=True)
    def row_limit(row, group, kv_len, seqlen_q):
        if causal:
            return min(kv_len, kv_len - seqlen_q + row // group + 1)
        return kv_len

    return row_limit


def make_q_loader(variant):
    """``load_q(...)``: a consumer warp's ``variant.rows_per_warp`` Q rows (packed GQA: row r
    is query token r // group of query head kv_head * group + r % group) into the swizzled
    Q tile; zeros past the end."""
    head_bytes = variant.head_bytes
    block_m = variant.group_m
    row_bytes = variant.row_bytes
    mask = variant.swizzle_mask
    rows = variant.rows_per_warp
    pieces_per_row = head_bytes // PIECE_BYTES
    q_pieces = rows * pieces_per_row
    log2_pieces_per_row = pieces_per_row.bit_length() - 1

    @cuda.jit(device=True, inline=True)
    def load_q(q_smem, q_address, warp, lane, m_start, rows_valid, group, batch, kv_head,
               seqlen_q, q_heads):
        for piece in range(lane, q_pieces, 32):
            tile_row = warp * rows + (piece >> log2_pieces_per_row)
            byte_col = (piece & (pieces_per_row - 1)) * PIECE_BYTES
            row = m_start + tile_row
            w0 = w1 = w2 = w3 = uint32(0)
            if row < rows_valid:
                token = row // group
                head = kv_head * group + (row - token * group)
                offset = ((batch * seqlen_q + token) * q_heads + head) * head_bytes + byte_col
                w = ld_global_v4_u32(q_address + np.uint64(offset))
                w0, w1, w2, w3 = w[0], w[1], w[2], w[3]
            st_shared_v4_u32(q_smem + uint32(tile_offset(tile_row, byte_col, block_m, row_bytes, mask)),
                             w0, w1, w2, w3)
        cuda.syncwarp()

    return load_q


def make_qk_scores(variant):
    """``scores_tile`` of a consumer warp: S = Q K^T of its 16 rows over a K tile; with
    make_qk_softmax's ``mask_tile`` and ``softmax_row``."""
    head_bytes = variant.head_bytes
    block_n = variant.block_n
    block_m = variant.block_m
    row_bytes = variant.row_bytes
    mask = variant.swizzle_mask
    fp8 = variant.dtype == E4M3
    k_steps = head_bytes // MMA_K_BYTES
    score_regs = block_n // 2
    token_pairs = block_n // 16            # 16-token groups: one K ldmatrix.x4 each

    @cuda.jit(device=True, inline=True)
    def scores_tile(scores, q_smem, k_tile, warp, lane):
        """scores = Q_warp K_tile^T (fp32), 16 rows x block_n tokens."""
        for i in range(score_regs):
            scores[i] = ZERO
        a_row, a_col = a_lane_row_col(lane)
        k_row, k_col = k_lane_row_col(lane)
        for kk in range(k_steps):
            a = ldmatrix_x4(q_smem + uint32(tile_offset(warp * ROWS_PER_WARP + a_row,
                                                        kk * MMA_K_BYTES + a_col, block_m, row_bytes, mask)))
            for tp in range(token_pairs):
                b = ldmatrix_x4(k_tile + uint32(tile_offset(tp * 16 + k_row, kk * MMA_K_BYTES + k_col,
                                                            block_n, row_bytes, mask)))
                j = tp * 8
                if fp8:
                    d = mma_e4m3_m16n8k32_via_f16(a[0], a[1], a[2], a[3], b[0], b[1],
                                                  scores[j], scores[j + 1], scores[j + 2], scores[j + 3])
                    e = mma_e4m3_m16n8k32_via_f16(a[0], a[1], a[2], a[3], b[2], b[3],
                                                  scores[j + 4], scores[j + 5], scores[j + 6], scores[j + 7])
                else:
                    d = mma_bf16_m16n8k16(a[0], a[1], a[2], a[3], b[0], b[1],
                                          scores[j], scores[j + 1], scores[j + 2], scores[j + 3])
                    e = mma_bf16_m16n8k16(a[0], a[1], a[2], a[3], b[2], b[3],
                                          scores[j + 4], scores[j + 5], scores[j + 6], scores[j + 7])
                scores[j], scores[j + 1], scores[j + 2], scores[j + 3] = d[0], d[1], d[2], d[3]
                scores[j + 4], scores[j + 5], scores[j + 6], scores[j + 7] = e[0], e[1], e[2], e[3]

    return types.SimpleNamespace(scores_tile=scores_tile, **vars(make_qk_softmax(score_regs)))


def make_qk_softmax(score_regs):
    """``mask_tile`` (the causal / sequence-end mask) and ``softmax_row`` (the online softmax of one
    row) over a consumer warp's ``score_regs`` S registers."""

    @cuda.jit(device=True, inline=True)
    def mask_tile(scores, first_key, quad, limit0, limit1):
        """-inf for keys at or past each row's limit (sequence end, or causal diagonal)."""
        for nb in range(score_regs // 4):
            for e in range(2):
                key = first_key + nb * 8 + 2 * quad + e
                if key >= limit0:
                    scores[4 * nb + e] = NEG_INF
                if key >= limit1:
                    scores[4 * nb + 2 + e] = NEG_INF

    @cuda.jit(device=True, inline=True)
    def softmax_row(scores, half, m_old, l_old, scale_log2):
        """Online softmax of one of the lane's two rows (half 0: row g, 1: row g+8):
        scores -> P in place; returns (m_new, l_new, correction of the old O)."""
        mx = NEG_INF
        for nb in range(score_regs // 4):
            mx = max(mx, max(scores[4 * nb + 2 * half], scores[4 * nb + 2 * half + 1]))
        mx = max(mx, cuda.shfl_xor_sync(FULL_MASK, mx, 1))
        mx = max(mx, cuda.shfl_xor_sync(FULL_MASK, mx, 2))
        m_new = max(m_old, mx * scale_log2)
        m_use = max(m_new, SCORE_FLOOR)
        correction = ex2_approx(m_old - m_use)
        row_sum = ZERO
        for nb in range(score_regs // 4):
            for e in range(2):
                i = 4 * nb + 2 * half + e
                p = ex2_approx(scores[i] * scale_log2 - m_use)
                scores[i] = p
                row_sum += p
        return m_new, l_old * correction + row_sum, correction

    return types.SimpleNamespace(mask_tile=mask_tile, softmax_row=softmax_row)


def make_qk_pv(variant):
    """``pv_tile_bf16`` and ``pv_tile_e4m3``: O += P V of a consumer warp's rows over a V tile."""
    head_dim = variant.head_dim
    head_bytes = variant.head_bytes
    block_n = variant.block_n
    row_bytes = variant.row_bytes
    mask = variant.swizzle_mask
    dim_pairs = head_dim // 16             # 16-dim groups: one V ldmatrix.x4 each (bf16)

    @cuda.jit(device=True, inline=True)
    def pv_tile_bf16(acc, scores, v_tile, lane):
        v_row, v_col = v_bf16_lane_row_col(lane)
        for kt in range(block_n // 16):
            j0 = 8 * kt
            j1 = j0 + 4
            a0 = cvt_bf16x2_f32(scores[j0 + 1], scores[j0])
            a1 = cvt_bf16x2_f32(scores[j0 + 3], scores[j0 + 2])
            a2 = cvt_bf16x2_f32(scores[j1 + 1], scores[j1])
            a3 = cvt_bf16x2_f32(scores[j1 + 3], scores[j1 + 2])
            for dp in range(dim_pairs):
                b = ldmatrix_x4_trans(v_tile + uint32(tile_offset(kt * 16 + v_row, dp * 32 + v_col,
                                                                  block_n, row_bytes, mask)))
                i = dp * 8
                d = mma_bf16_m16n8k16(a0, a1, a2, a3, b[0], b[1], acc[i], acc[i + 1], acc[i + 2], acc[i + 3])
                e = mma_bf16_m16n8k16(a0, a1, a2, a3, b[2], b[3],
                                      acc[i + 4], acc[i + 5], acc[i + 6], acc[i + 7])
                acc[i], acc[i + 1], acc[i + 2], acc[i + 3] = d[0], d[1], d[2], d[3]
                acc[i + 4], acc[i + 5], acc[i + 6], acc[i + 7] = e[0], e[1], e[2], e[3]

    @cuda.jit(device=True, inline=True)
    def pv_tile_e4m3(acc, scores, v_tile, lane):
        v_row, v_col = v_e4m3_lane_row_col(lane)
        for kt in range(block_n // 32):
            j = 16 * kt
            a0 = pack_e4m3(scores[j], scores[j + 1], scores[j + 4], scores[j + 5])
            a1 = pack_e4m3(scores[j + 2], scores[j + 3], scores[j + 6], scores[j + 7])
            a2 = pack_e4m3(scores[j + 8], scores[j + 9], scores[j + 12], scores[j + 13])
            a3 = pack_e4m3(scores[j + 10], scores[j + 11], scores[j + 14], scores[j + 15])
            for c in range(head_bytes // 16):
                x = ldmatrix_x4_trans(v_tile + uint32(tile_offset(kt * 32 + v_row, c * 16 + v_col,
                                                                  block_n, row_bytes, mask)))
                even0 = prmt(x[0], x[1], EVEN_BYTES)
                even1 = prmt(x[2], x[3], EVEN_BYTES)
                odd0 = prmt(x[0], x[1], ODD_BYTES)
                odd1 = prmt(x[2], x[3], ODD_BYTES)
                i = c * 8
                d = mma_e4m3_m16n8k32_via_f16(a0, a1, a2, a3, even0, even1,
                                              acc[i], acc[i + 1], acc[i + 2], acc[i + 3])
                e = mma_e4m3_m16n8k32_via_f16(a0, a1, a2, a3, odd0, odd1,
                                              acc[i + 4], acc[i + 5], acc[i + 6], acc[i + 7])
                acc[i], acc[i + 1], acc[i + 2], acc[i + 3] = d[0], d[1], d[2], d[3]
                acc[i + 4], acc[i + 5], acc[i + 6], acc[i + 7] = e[0], e[1], e[2], e[3]

    return types.SimpleNamespace(pv_tile_bf16=pv_tile_bf16, pv_tile_e4m3=pv_tile_e4m3)


def make_qk_store(variant):
    """``store_row``: one of a lane's rows normalised and written, with its log2-sum-exp."""
    head_dim = variant.head_dim
    fp8 = variant.dtype == E4M3

    @cuda.jit(device=True, inline=True)
    def store_acc_row(out, out_base, acc, half, inverse, quad):
        """out[out_base + column] = acc * inverse for the lane's columns of one of its rows
        (bf16: 8j + 2q + 0..1; e4m3: 16c + 4q + 0..3, even/odd dims from two mmas)."""
        if fp8:
            for c in range(head_dim // 16):
                col = out_base + c * 16 + 4 * quad
                out[col] = acc[8 * c + 2 * half] * inverse
                out[col + 1] = acc[8 * c + 4 + 2 * half] * inverse
                out[col + 2] = acc[8 * c + 2 * half + 1] * inverse
                out[col + 3] = acc[8 * c + 4 + 2 * half + 1] * inverse
        else:
            for nb in range(head_dim // 8):
                col = out_base + nb * 8 + 2 * quad
                out[col] = acc[4 * nb + 2 * half] * inverse
                out[col + 1] = acc[4 * nb + 2 * half + 1] * inverse

    @cuda.jit(device=True, inline=True)
    def store_row(out, lse, acc, half, m_run, l_part, row, rows_valid, group, out_row_base,
                  quad, q_heads, kv_head):
        """Normalise and write one of the lane's rows (and its log2-sum-exp) if it is real.
        Output row (token, head) is row ``out_row_base + token * q_heads + head`` of ``lse``
        and of ``out`` viewed as (rows, head_dim)."""
        l_sum = l_part + cuda.shfl_xor_sync(FULL_MASK, l_part, 1)
        l_sum += cuda.shfl_xor_sync(FULL_MASK, l_sum, 2)
        if row >= rows_valid:
            return
        token = row // group
        head = kv_head * group + (row - token * group)
        out_row = out_row_base + token * q_heads + head
        inverse = ONE / l_sum if l_sum > ZERO else ZERO
        store_acc_row(out, out_row * head_dim, acc, half, inverse, quad)
        if quad == 0:
            lse[out_row] = (
                m_run + float32(math.log2(l_sum)) if l_sum > ZERO else NEG_INF)

    return types.SimpleNamespace(store_acc_row=store_acc_row, store_row=store_row)


def make_consumer(variant):
    """The consumer's device functions for ``variant``: ``.consume(...)`` runs one consumer
    warp's whole work tile (see ``kernel.py`` for the call); the others are its steps,
    exposed for the CPU warp emulation in tests/cpu/paged_kv/test_paged_kv_fragments_qk.py."""
    block_n, stages, kv_tile_bytes = variant.block_n, variant.stages, variant.kv_tile_bytes
    fp8 = variant.dtype == E4M3
    score_regs, acc_regs = block_n // 2, variant.head_dim // 2
    load_q, row_limit, ring_wait = make_q_loader(variant), make_row_limit(variant.causal), make_ring_wait(stages)
    scores, pv, store = make_qk_scores(variant), make_qk_pv(variant), make_qk_store(variant)
    scores_tile, mask_tile, softmax_row = scores.scores_tile, scores.mask_tile, scores.softmax_row
    pv_tile_bf16, pv_tile_e4m3 = pv.pv_tile_bf16, pv.pv_tile_e4m3
    store_row = store.store_row

    @cuda.jit(device=True, inline=True)
    def consume(q_smem, k_smem, v_smem, full_k, full_v, empty, q_address, out, lse, warp, lane,
                m_start, rows_valid, group, batch, kv_head, seqlen_q, q_heads, kv_len, n_begin,
                tiles, scale_log2, out_row_base):
        load_q(q_smem, q_address, warp, lane, m_start, rows_valid, group, batch, kv_head, seqlen_q, q_heads)
        scores = cuda.local.array(score_regs, float32)
        acc = cuda.local.array(acc_regs, float32)
        for i in range(acc_regs):
            acc[i] = ZERO
        quad = lane & 3
        row0 = m_start + warp * ROWS_PER_WARP + (lane >> 2)
        row1 = row0 + 8
        limit0 = row_limit(row0, group, kv_len, seqlen_q)
        limit1 = row_limit(row1, group, kv_len, seqlen_q)
        m0 = m1 = NEG_INF
        l0 = l1 = ZERO
        for k in range(tiles):
            stage, phase, barrier = ring_wait(full_k, k)
            k_tile = k_smem + uint32(stage * kv_tile_bytes)
            v_tile = v_smem + uint32(stage * kv_tile_bytes)
            scores_tile(scores, q_smem, k_tile, warp, lane)
            first_key = (n_begin + k) * block_n
            if first_key + block_n > limit0:
                mask_tile(scores, first_key, quad, limit0, limit1)
            m0, l0, c0 = softmax_row(scores, 0, m0, l0, scale_log2)
            m1, l1, c1 = softmax_row(scores, 1, m1, l1, scale_log2)
            for i in range(acc_regs // 4):
                acc[4 * i] *= c0
                acc[4 * i + 1] *= c0
                acc[4 * i + 2] *= c1
                acc[4 * i + 3] *= c1
            mbarrier_wait_parity(full_v + barrier, phase)
            if fp8:
                pv_tile_e4m3(acc, scores, v_tile, lane)
            else:
                pv_tile_bf16(acc, scores, v_tile, lane)
            mbarrier_arrive(empty + barrier)
        store_row(out, lse, acc, 0, m0, l0, row0, rows_valid, group, out_row_base, quad, q_heads, kv_head)
        store_row(out, lse, acc, 1, m1, l1, row1, rows_valid, group, out_row_base, quad, q_heads, kv_head)

    return types.SimpleNamespace(load_q=load_q, **vars(scores), **vars(pv), **vars(store), consume=consume)
