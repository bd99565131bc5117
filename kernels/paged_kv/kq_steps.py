"""The steps of an S^T = K Q^T consumer warp (rung 2, consumer_kq.py, which describes their
fragments), over a share of a K/V tile: the later rungs' warps share a tile and call the same
steps over their tokens of S^T and their dims of O^T. Each factory returns a few device functions;
make_kq_tiles all of them. Checked on the CPU by tests/cpu/paged_kv/test_paged_kv_fragments_kq.py.
"""
import math
import types

from numba import cuda, float32, uint32
from tma_kernels.ptx.convert import (
    cvt_bf16x2_f32,
    cvt_e4m3x2_f32,
    cvt_f16x2_e4m3x2_high,
    cvt_f16x2_e4m3x2_low,
    ex2_approx,
    prmt,
)
from tma_kernels.ptx.ldmatrix import ldmatrix_x4, ldmatrix_x4_trans, movmatrix_trans
from tma_kernels.ptx.mma import mma_bf16_m16n8k16, mma_f16_m16n8k16

from .consumer_qk import EVEN_BYTES, FULL_MASK, NEG_INF, ODD_BYTES, ONE, SCORE_FLOOR, ZERO
from .geometry import (
    E4M3,
    MMA_K_BYTES,
    TILE_ALIGN_BYTES,
    VariantError,
    a_lane_row_col,
    q_b_lane_row_col,
    tile_offset,
    v_e4m3_lane_row_col,
    vt_bf16_lane_row_col,
)

Q_ROWS_PER_BLOCK = 8        # mma N
ROW_BLOCK = 16              # tokens per mma M block


@cuda.jit(device=True, inline=True)
def select(flag, a, b):
    """``a`` where ``flag``, else ``b`` (a lane's own choice: the CPU emulation runs it as np.where)."""
    return a if flag else b


@cuda.jit(device=True, inline=True)
def column_sum(l_part):
    """The softmax denominator of a column: the partial sums of the lanes of equal q."""
    l_sum = l_part + cuda.shfl_xor_sync(FULL_MASK, l_part, 4)
    l_sum += cuda.shfl_xor_sync(FULL_MASK, l_sum, 8)
    return l_sum + cuda.shfl_xor_sync(FULL_MASK, l_sum, 16)


def make_kq_scores(variant, q_blocks, token_blocks):
    """``scores_tile`` of a warp holding ``q_blocks`` mma N blocks of 8 query columns, computing S^T
    over ``token_blocks`` blocks of 16 tokens of a K tile (the caller points ``k_tile`` at the first),
    reading Q's fragment register i as ``qf[q_lane + i]``; with make_kq_q_fragments'
    ``load_q_fragments`` and make_kq_mask's ``mask_tile``. Also the register counts ``q_regs`` and
    ``score_regs``."""
    head_bytes = variant.head_bytes
    block_n = variant.block_n
    row_bytes = variant.row_bytes
    mask = variant.swizzle_mask
    fp8 = variant.dtype == E4M3
    k_steps = head_bytes // MMA_K_BYTES
    q_regs_per_step = 4 if fp8 else 2         # e4m3: four fp16 pairs, bf16: b0, b1
    q_regs = q_blocks * k_steps * q_regs_per_step
    score_regs = token_blocks * q_blocks * 4
    # A token block's ldmatrix address is block 0's plus a constant (ptxas folds it into the
    # instruction): true while 16 rows span whole swizzle atoms (the pattern reads bits 7..9)
    if ROW_BLOCK * row_bytes % TILE_ALIGN_BYTES:
        raise VariantError(f"{variant.name}: {ROW_BLOCK} rows of {row_bytes} bytes are not whole "
                           f"{TILE_ALIGN_BYTES}-byte swizzle atoms")

    @cuda.jit(device=True, inline=True)
    def scores_tile(scores, qf, q_lane, k_tile, lane):
        """scores = K_tile Q_warp^T (fp32): token_blocks x 16 tokens x 8 q_blocks query columns."""
        for i in range(score_regs):
            scores[i] = ZERO
        a_row, a_col = a_lane_row_col(lane)
        for kk in range(k_steps):
            # the lane's swizzled offset in token block 0; block tb is 16 tb rows further on
            k_step = k_tile + uint32(tile_offset(a_row, kk * MMA_K_BYTES + a_col, block_n, row_bytes, mask))
            for tb in range(token_blocks):
                a = ldmatrix_x4(k_step + uint32(tb * ROW_BLOCK * row_bytes))
                if fp8:
                    x0 = cvt_f16x2_e4m3x2_low(a[0])
                    x1 = cvt_f16x2_e4m3x2_low(a[1])
                    y0 = cvt_f16x2_e4m3x2_high(a[0])
                    y1 = cvt_f16x2_e4m3x2_high(a[1])
                    x2 = cvt_f16x2_e4m3x2_low(a[2])
                    x3 = cvt_f16x2_e4m3x2_low(a[3])
                    y2 = cvt_f16x2_e4m3x2_high(a[2])
                    y3 = cvt_f16x2_e4m3x2_high(a[3])
                for qb in range(q_blocks):
                    j = (tb * q_blocks + qb) * 4
                    i = q_lane + uint32((qb * k_steps + kk) * q_regs_per_step)
                    if fp8:
                        d = mma_f16_m16n8k16(x0, x1, y0, y1, qf[i], qf[i + uint32(1)],
                                             scores[j], scores[j + 1], scores[j + 2], scores[j + 3])
                        d = mma_f16_m16n8k16(x2, x3, y2, y3, qf[i + uint32(2)],
                                             qf[i + uint32(3)], d[0], d[1], d[2], d[3])
                    else:
                        d = mma_bf16_m16n8k16(a[0], a[1], a[2], a[3], qf[i], qf[i + uint32(1)],
                                              scores[j], scores[j + 1], scores[j + 2], scores[j + 3])
                    scores[j], scores[j + 1], scores[j + 2], scores[j + 3] = d[0], d[1], d[2], d[3]

    return types.SimpleNamespace(q_regs=q_regs, score_regs=score_regs, scores_tile=scores_tile,
                                 load_q_fragments=make_kq_q_fragments(variant, q_blocks),
                                 mask_tile=make_kq_mask(q_blocks, token_blocks))


def make_kq_q_fragments(variant, q_blocks):
    """``load_q_fragments``: a warp's Q B fragments (``q_blocks`` mma N blocks), every k-step."""
    block_m = variant.group_m
    row_bytes = variant.row_bytes
    mask = variant.swizzle_mask
    fp8 = variant.dtype == E4M3
    k_steps = variant.head_bytes // MMA_K_BYTES
    q_regs_per_step = 4 if fp8 else 2         # e4m3: four fp16 pairs, bf16: b0, b1

    @cuda.jit(device=True, inline=True)
    def load_q_fragments(qf, q_smem, first_row, lane):
        """qf = the B fragments of Q tile rows first_row .. + 8 q_blocks, every k-step
        (e4m3: unpacked to fp16)."""
        r, c = q_b_lane_row_col(lane)
        for qb in range(q_blocks):
            for pair in range(k_steps // 2):
                x = ldmatrix_x4(q_smem + uint32(tile_offset(first_row + qb * 8 + r, pair * 64 + c,
                                                            block_m, row_bytes, mask)))
                for h in range(2):
                    i = (qb * k_steps + 2 * pair + h) * q_regs_per_step
                    if fp8:
                        qf[i] = cvt_f16x2_e4m3x2_low(x[2 * h])
                        qf[i + 1] = cvt_f16x2_e4m3x2_high(x[2 * h])
                        qf[i + 2] = cvt_f16x2_e4m3x2_low(x[2 * h + 1])
                        qf[i + 3] = cvt_f16x2_e4m3x2_high(x[2 * h + 1])
                    else:
                        qf[i] = x[2 * h]
                        qf[i + 1] = x[2 * h + 1]

    return load_q_fragments


def make_kq_mask(q_blocks, token_blocks):
    """``mask_tile``: a warp's S^T registers masked past each query column's key limit."""

    @cuda.jit(device=True, inline=True)
    def mask_tile(scores, first_key, group_lane, limits):
        """-inf for keys at or past each column's limit (sequence end, or causal diagonal)."""
        for tb in range(token_blocks):
            for r in range(4):
                key = first_key + tb * ROW_BLOCK + group_lane + 8 * (r >> 1)
                for qb in range(q_blocks):
                    if key >= limits[2 * qb + (r & 1)]:
                        scores[(tb * q_blocks + qb) * 4 + r] = NEG_INF

    return mask_tile


def make_kq_softmax(variant, q_blocks, token_blocks, lazy_rescale_log2=None):
    """``column_max``, ``softmax_finish`` and ``p_fragments`` over the warp's S^T registers (the
    softmax per query column, and P^T's B fragments). With ``lazy_rescale_log2`` (rung 4),
    softmax_finish keeps a column's running max until the tile's exceeds it by more than that
    (log2 units), as FlashAttention-4 does: the correction is then exactly 1 and P at most
    2 ** lazy_rescale_log2."""
    lazy = lazy_rescale_log2 is not None
    lazy_log2 = float32(lazy_rescale_log2 if lazy else 0.0)
    p_regs = token_blocks * q_blocks * 2      # P^T's B fragments, packed to 16 bits

    @cuda.jit(device=True, inline=True)
    def column_max(scores, column):
        """The largest raw score of one of the lane's query columns (column = 2 qb + e) over
        the warp's tokens: the lane's own, then the lanes of equal q (shuffles xor 4, 8, 16)."""
        qb = column >> 1
        e = column & 1
        mx = NEG_INF
        for tb in range(token_blocks):
            j = (tb * q_blocks + qb) * 4 + e
            mx = max(mx, max(scores[j], scores[j + 2]))
        mx = max(mx, cuda.shfl_xor_sync(FULL_MASK, mx, 4))
        mx = max(mx, cuda.shfl_xor_sync(FULL_MASK, mx, 8))
        return max(mx, cuda.shfl_xor_sync(FULL_MASK, mx, 16))

    @cuda.jit(device=True, inline=True)
    def softmax_finish(scores, column, mx, m_old, l_old, scale_log2):
        """Online softmax of one column given its tile maximum ``mx``: scores -> P in place;
        returns (m_new, l_new partial to this lane, correction of the old O)."""
        qb = column >> 1
        e = column & 1
        m_new = max(m_old, mx * scale_log2)
        if lazy:        # beyond the threshold (or the first max: m_old = -inf), else the old max
            m_new = select(m_new - m_old > lazy_log2, m_new, m_old)
        m_use = max(m_new, SCORE_FLOOR)
        correction = ex2_approx(m_old - m_use)
        col_sum = ZERO
        for tb in range(token_blocks):
            for h in range(2):
                j = (tb * q_blocks + qb) * 4 + 2 * h + e
                p = ex2_approx(scores[j] * scale_log2 - m_use)
                scores[j] = p
                col_sum += p
        return m_new, l_old * correction + col_sum, correction

    @cuda.jit(device=True, inline=True)
    def softmax_column(scores, column, m_old, l_old, scale_log2):
        """Online softmax of one of the lane's query columns over the warp's whole tile (rung 2)."""
        return softmax_finish(scores, column, column_max(scores, column), m_old, l_old, scale_log2)

    return types.SimpleNamespace(p_regs=p_regs, column_max=column_max, softmax_finish=softmax_finish,
                                 softmax_column=softmax_column, p_fragments=make_kq_p_fragments(variant, p_regs))


def make_kq_p_fragments(variant, p_regs):
    """``p_fragments``: the warp's P (in its S^T registers) as P^T's ``p_regs`` B fragments."""
    fp8 = variant.dtype == E4M3

    @cuda.jit(device=True, inline=True)
    def p_fragments(pf, scores):
        """pf[2 (tb * q_blocks + qb) + h] = b0 (h = 0), b1 (h = 1) of P^T for token block tb
        and query block qb, from S^T's C fragment: each 8 x 8 half packed to 16 bits
        (e4m3: rounded to e4m3, then unpacked) and transposed with movmatrix."""
        for i in range(p_regs):
            if fp8:
                packed = cvt_f16x2_e4m3x2_low(cvt_e4m3x2_f32(scores[2 * i + 1], scores[2 * i]))
            else:
                packed = cvt_bf16x2_f32(scores[2 * i + 1], scores[2 * i])
            pf[i] = movmatrix_trans(packed)

    return p_fragments


def make_kq_pv(variant, q_blocks, dim_blocks, p_stride=1):
    """``pv_tile``: O^T += V^T P^T over ``dim_blocks`` blocks of 16 head dims from ``first_db``
    on, over all ``block_n`` tokens of a V tile, reading P^T's register i as ``pf[p_lane + i *
    p_stride]``: registers (rung 2: lane offset 0, stride 1) or a lane-minor copy in shared memory
    (rung 3: stride 32)."""
    block_n = variant.block_n
    row_bytes = variant.row_bytes
    mask = variant.swizzle_mask
    pv_token_blocks = block_n // ROW_BLOCK

    @cuda.jit(device=True, inline=True)
    def pv_tile_bf16(acc, pf, p_lane, v_tile, first_db, lane):
        v_row, v_col = vt_bf16_lane_row_col(lane)
        for db in range(dim_blocks):
            v_dims = v_tile + uint32(tile_offset(v_row, (first_db + db) * 32 + v_col, block_n, row_bytes, mask))
            for tb in range(pv_token_blocks):
                a = ldmatrix_x4_trans(v_dims + uint32(tb * ROW_BLOCK * row_bytes))
                for qb in range(q_blocks):
                    j = p_lane + uint32(2 * (tb * q_blocks + qb) * p_stride)
                    i = (db * q_blocks + qb) * 4
                    d = mma_bf16_m16n8k16(a[0], a[1], a[2], a[3], pf[j], pf[j + uint32(p_stride)],
                                          acc[i], acc[i + 1], acc[i + 2], acc[i + 3])
                    acc[i], acc[i + 1], acc[i + 2], acc[i + 3] = d[0], d[1], d[2], d[3]

    @cuda.jit(device=True, inline=True)
    def pv_tile_e4m3(acc, pf, p_lane, v_tile, first_db, lane):
        v_row, v_col = v_e4m3_lane_row_col(lane)
        for db in range(dim_blocks):
            v_dims = v_tile + uint32(tile_offset(v_row, (first_db + db) * 16 + v_col, block_n, row_bytes, mask))
            for t in range(pv_token_blocks // 2):
                x = ldmatrix_x4_trans(v_dims + uint32(t * 2 * ROW_BLOCK * row_bytes))
                for h in range(2):
                    even = prmt(x[2 * h], x[2 * h + 1], EVEN_BYTES)
                    odd = prmt(x[2 * h], x[2 * h + 1], ODD_BYTES)
                    a0 = cvt_f16x2_e4m3x2_low(even)
                    a1 = cvt_f16x2_e4m3x2_low(odd)
                    a2 = cvt_f16x2_e4m3x2_high(even)
                    a3 = cvt_f16x2_e4m3x2_high(odd)
                    tb = 2 * t + h
                    for qb in range(q_blocks):
                        j = p_lane + uint32(2 * (tb * q_blocks + qb) * p_stride)
                        i = (db * q_blocks + qb) * 4
                        d = mma_f16_m16n8k16(a0, a1, a2, a3, pf[j], pf[j + uint32(p_stride)],
                                             acc[i], acc[i + 1], acc[i + 2], acc[i + 3])
                        acc[i], acc[i + 1], acc[i + 2], acc[i + 3] = d[0], d[1], d[2], d[3]

    return pv_tile_e4m3 if variant.dtype == E4M3 else pv_tile_bf16


def make_kq_store(variant, q_blocks, dim_blocks, store_acc=None):
    """``store_acc_column`` and ``store_column``: a lane's query column normalised and written;
    ``store_acc`` replaces store_acc_column where O^T's registers hold other dims (rung 4's,
    pv_wgmma.py)."""
    head_dim = variant.head_dim
    fp8 = variant.dtype == E4M3

    @cuda.jit(device=True, inline=True)
    def store_acc_column(out, out_base, acc, column, inverse, group_lane, first_db):
        """out[out_base + dim] = acc * inverse for the lane's dims of one of its columns: of
        the warp's dim block db (head dims from 16 (first_db + db)), bf16 ``+ g`` (acc r = 0, 1)
        and ``+ g + 8`` (r = 2, 3); e4m3 (rows gathered as even / odd dims) ``+ 2g`` and ``+ 2g + 1``."""
        qb = column >> 1
        e = column & 1
        first = 2 * group_lane if fp8 else group_lane
        second = first + (1 if fp8 else 8)
        for db in range(dim_blocks):
            i = (db * q_blocks + qb) * 4 + e
            out[out_base + (first_db + db) * 16 + first] = acc[i] * inverse
            out[out_base + (first_db + db) * 16 + second] = acc[i + 2] * inverse

    if store_acc is not None:
        store_acc_column = store_acc           # noqa: F811 (the dims of rung 4's registers)

    @cuda.jit(device=True, inline=True)
    def store_column(out, lse, acc, column, m_run, l_sum, row, rows_valid, group, out_row_base,
                     group_lane, q_heads, kv_head, first_db, write_lse):
        """Normalise and write one of the lane's query columns, dim blocks from ``first_db``
        (and, if ``write_lse``, its log2-sum-exp) if the row is real. ``l_sum`` is the
        column's whole softmax denominator. Output row (token, head) is row
        ``out_row_base + token * q_heads + head`` of ``lse`` and of ``out`` viewed as
        (rows, head_dim)."""
        if row >= rows_valid:
            return
        token = row // group
        head = kv_head * group + (row - token * group)
        out_row = out_row_base + token * q_heads + head
        inverse = ONE / l_sum if l_sum > ZERO else ZERO
        store_acc_column(out, out_row * head_dim, acc, column, inverse, group_lane, first_db)
        if write_lse and group_lane == 0:
            lse[out_row] = m_run + float32(math.log2(l_sum)) if l_sum > ZERO else NEG_INF

    return types.SimpleNamespace(store_acc_column=store_acc_column, store_column=store_column)


def make_kq_tiles(variant, q_blocks, token_blocks, dim_blocks, p_stride=1, store_acc=None,
                  lazy_rescale_log2=None):
    """Every step above, for a warp of ``q_blocks`` query blocks over ``token_blocks`` of a K
    tile and ``dim_blocks`` of a V tile (rung 2: one warp does all of a tile; the later rungs:
    the warps share it), with the register-array lengths ``q_regs`` (Q's fragments),
    ``score_regs`` (the warp's S^T, then P) and ``p_regs`` (its P^T fragments)."""
    scores = make_kq_scores(variant, q_blocks, token_blocks)
    softmax = make_kq_softmax(variant, q_blocks, token_blocks, lazy_rescale_log2)
    store = make_kq_store(variant, q_blocks, dim_blocks, store_acc)
    return types.SimpleNamespace(**vars(scores), **vars(softmax), **vars(store),
                                 pv_tile=make_kq_pv(variant, q_blocks, dim_blocks, p_stride))
