"""The decode consumer of the paged attention kernel: S^T = K Q^T, online softmax over
the tokens, O^T += V^T P^T, all with ``mma.sync`` (variant ``score_layout="kq"``).

Why a second consumer. In decode a KV head serves ``group * seqlen_q`` query rows: 1 to 8
for the sweep's shapes at one token. consumer.py puts the query rows in the mma's M
(16), so most of each mma is padding and the consumer, not the loads, limits decode
(paged_kv/profile.py). Here the KV tokens are M and the query rows N: a warp owns
``rows_per_warp`` = 8 or 16 rows, ``q_blocks`` = 1 or 2 mma N blocks of 8. For rows <= 8
that halves the mmas of Q K^T and of P V per token, and the S and O registers.

Lane ``l``: ``g = l >> 2``, ``q = l & 3``. Registers (``cuda.local.array``, unrolled):
- ``qf``: Q's B fragments, loaded once (``ldmatrix.x4`` over 8 rows x 64 bytes;
  e4m3: unpacked to fp16 once, not per tile);
- ``scores[(tb * q_blocks + qb) * 4 + r]``: S^T of 16-token block tb and query block qb:
  tokens ``16 tb + g`` (r = 0, 1) and ``+ 8`` (r = 2, 3), query columns ``8 qb + 2q + (r & 1)``;
- ``acc[(db * q_blocks + qb) * 4 + r]``: O^T of 16-dim block db, same columns, dims
  bf16 ``16 db + g`` (r = 0, 1) and ``+ 8`` (r = 2, 3); e4m3 ``16 db + 2g`` and ``+ 1``.

Q K^T: A = K (``ldmatrix.x4`` of 16 tokens x 32 bytes, the layout consumer.py uses for
Q), B = Q. e4m3 runs as two fp16 m16n8k16 with the slot map of
``tma_kernels.ptx.mma.mma_e4m3_m16n8k32_via_f16`` (low byte pair of a register -> k' = 2q,
high -> k' = 8 + 2q; the same map on both operands, so the contraction is unchanged).

Softmax per query column: each lane reduces its tokens, then lanes of equal q (shuffles
xor 4, 8, 16); the log2-domain running max and partial sums as in consumer.py.

P V as O^T = V^T P^T. B = P^T: a C fragment of S^T packed to 16 bits is one 8 x 8 matrix
per token half (lane: token g, columns 2q, 2q+1); ``movmatrix.trans`` gives the B layout
(lane: column g, tokens 2q, 2q+1). e4m3 rounds P to e4m3 first, as FA3 does, then unpacks.
A = V^T:
- bf16: ``ldmatrix.x4.trans`` of 16 tokens x 16 dims (the lane gets dim g of tokens 2q, 2q+1);
- e4m3: ``ldmatrix.x4.trans`` on byte pairs over 32 tokens x 16 dims (consumer.py's V
  load): register i holds dims 2g, 2g+1 of tokens 8i + 2q, +1; ``prmt`` gathers the even
  dim (0x6420) and the odd dim (0x7531) of tokens 2q, 2q+1, 8+2q, 9+2q, and the unpacks
  give A rows g = dim 2g (a0, a2) and g + 8 = dim 2g + 1 (a1, a3): one ldmatrix feeds two
  fp16 mmas (tokens 0-15, 16-31), each covering all 16 dims of the block.

Checked on the CPU by the warp emulation in tests/cpu/test_paged_kv_fragments_kq.py.
"""
import math
import types

from numba import cuda, float32, int32, uint32
from tma_kernels.ptx import mbarrier_arrive, mbarrier_wait_parity
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

from .consumer import (
    EVEN_BYTES,
    FULL_MASK,
    NEG_INF,
    ODD_BYTES,
    ONE,
    SCORE_FLOOR,
    ZERO,
    make_q_loader,
    make_row_limit,
)
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


def make_kq_tiles(variant, q_blocks, token_blocks, dim_blocks, q_stride=1, p_stride=1, store_acc=None,
                  lazy_rescale_log2=None):
    """The per-tile device functions of an S^T = K Q^T consumer warp that holds ``q_blocks``
    mma N blocks of 8 query columns, computes S^T over ``token_blocks`` blocks of 16 tokens
    of a K tile (the caller points ``k_tile`` at the first) and O^T over ``dim_blocks``
    blocks of 16 head dims from ``first_db`` on, over all ``block_n`` tokens of a V tile.
    make_kq_consumer: one warp does all of a tile; consumer_split.py: the warps share it.
    scores_tile reads Q's fragment register i as ``qf[q_lane + i * q_stride]`` and pv_tile
    P^T's as ``pf[p_lane + i * p_stride]``: registers (kq: lane offset 0, stride 1) or a
    lane-minor copy in shared memory (split: stride 32). ``store_acc`` replaces
    store_acc_column where O^T's registers hold other dims (consumer_pv.py). With
    ``lazy_rescale_log2`` (kq_wgmma_rs_lazy), softmax_finish keeps a column's running max until
    the tile's exceeds it by more than that (log2 units), as FlashAttention-4 does: the
    correction is then exactly 1 and P at most 2 ** lazy_rescale_log2."""
    head_dim = variant.head_dim
    head_bytes = variant.head_bytes
    lazy = lazy_rescale_log2 is not None
    lazy_log2 = float32(lazy_rescale_log2 if lazy else 0.0)
    block_n = variant.block_n
    block_m = variant.group_m
    row_bytes = variant.row_bytes
    mask = variant.swizzle_mask
    fp8 = variant.dtype == E4M3
    k_steps = head_bytes // MMA_K_BYTES
    pv_token_blocks = block_n // ROW_BLOCK
    q_regs_per_step = 4 if fp8 else 2         # e4m3: four fp16 pairs, bf16: b0, b1
    q_regs = q_blocks * k_steps * q_regs_per_step
    score_regs = token_blocks * q_blocks * 4
    p_regs = score_regs // 2                  # P^T's B fragments, packed to 16 bits
    # A token block's ldmatrix address is block 0's plus a constant (ptxas folds it into the
    # instruction): true while 16 rows span whole swizzle atoms (the pattern reads bits 7..9)
    if ROW_BLOCK * row_bytes % TILE_ALIGN_BYTES:
        raise VariantError(f"{variant.name}: {ROW_BLOCK} rows of {row_bytes} bytes are not whole "
                           f"{TILE_ALIGN_BYTES}-byte swizzle atoms")

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
                    i = q_lane + uint32((qb * k_steps + kk) * q_regs_per_step * q_stride)
                    if fp8:
                        d = mma_f16_m16n8k16(x0, x1, y0, y1, qf[i], qf[i + uint32(q_stride)],
                                             scores[j], scores[j + 1], scores[j + 2], scores[j + 3])
                        d = mma_f16_m16n8k16(x2, x3, y2, y3, qf[i + uint32(2 * q_stride)],
                                             qf[i + uint32(3 * q_stride)], d[0], d[1], d[2], d[3])
                    else:
                        d = mma_bf16_m16n8k16(a[0], a[1], a[2], a[3], qf[i], qf[i + uint32(q_stride)],
                                              scores[j], scores[j + 1], scores[j + 2], scores[j + 3])
                    scores[j], scores[j + 1], scores[j + 2], scores[j + 3] = d[0], d[1], d[2], d[3]

    @cuda.jit(device=True, inline=True)
    def mask_tile(scores, first_key, group_lane, limits):
        """-inf for keys at or past each column's limit (sequence end, or causal diagonal)."""
        for tb in range(token_blocks):
            for r in range(4):
                key = first_key + tb * ROW_BLOCK + group_lane + 8 * (r >> 1)
                for qb in range(q_blocks):
                    if key >= limits[2 * qb + (r & 1)]:
                        scores[(tb * q_blocks + qb) * 4 + r] = NEG_INF

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
        store_acc_column = store_acc           # noqa: F811 (the dims of consumer_pv.py's registers)

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

    # register-array lengths: Q's fragments, the warp's S^T (then P), its P^T fragments
    return types.SimpleNamespace(q_regs=q_regs, score_regs=score_regs, p_regs=p_regs,
                                 load_q_fragments=load_q_fragments, scores_tile=scores_tile,
                                 mask_tile=mask_tile, column_max=column_max,
                                 softmax_finish=softmax_finish, p_fragments=p_fragments,
                                 pv_tile=pv_tile_e4m3 if fp8 else pv_tile_bf16,
                                 store_acc_column=store_acc_column, store_column=store_column)


def make_kq_consumer(variant):
    """The kq consumer's device functions for ``variant``: ``.consume(...)`` has the
    signature of consumer.py's; the others are its steps, for the CPU warp emulation."""
    head_dim = variant.head_dim
    block_n = variant.block_n
    stages = variant.stages
    kv_tile_bytes = variant.kv_tile_bytes
    rows = variant.rows_per_warp
    q_blocks = rows // Q_ROWS_PER_BLOCK
    columns = 2 * q_blocks                    # query columns a lane holds
    token_blocks = block_n // ROW_BLOCK
    dim_blocks = head_dim // 16
    acc_regs = dim_blocks * q_blocks * 4
    load_q = make_q_loader(variant)
    row_limit = make_row_limit(variant.causal)
    steps = make_kq_tiles(variant, q_blocks, token_blocks, dim_blocks)
    q_regs, score_regs, p_regs = steps.q_regs, steps.score_regs, steps.p_regs
    load_q_fragments, scores_tile, mask_tile = steps.load_q_fragments, steps.scores_tile, steps.mask_tile
    column_max, softmax_finish, p_fragments = steps.column_max, steps.softmax_finish, steps.p_fragments
    pv_tile, store_acc_column, store_column = steps.pv_tile, steps.store_acc_column, steps.store_column

    @cuda.jit(device=True, inline=True)
    def softmax_column(scores, column, m_old, l_old, scale_log2):
        """Online softmax of one of the lane's query columns over the whole tile."""
        return softmax_finish(scores, column, column_max(scores, column), m_old, l_old, scale_log2)

    @cuda.jit(device=True, inline=True)
    def consume(q_smem, k_smem, v_smem, full_k, full_v, empty, q_address, out, lse, warp, lane,
                m_start, rows_valid, group, batch, kv_head, seqlen_q, q_heads, kv_len, n_begin,
                tiles, scale_log2, out_row_base):
        load_q(q_smem, q_address, warp, lane, m_start, rows_valid, group, batch, kv_head,
               seqlen_q, q_heads)
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
        smallest_limit = kv_len
        for c in range(columns):
            limits[c] = row_limit(first_row + 8 * (c >> 1) + (c & 1), group, kv_len, seqlen_q)
            smallest_limit = min(smallest_limit, limits[c])
            m_run[c] = NEG_INF
            l_run[c] = ZERO
        for k in range(tiles):
            stage = k % stages
            phase = (k // stages) & 1
            barrier = uint32(stage * 8)
            k_tile = k_smem + uint32(stage * kv_tile_bytes)
            v_tile = v_smem + uint32(stage * kv_tile_bytes)
            mbarrier_wait_parity(full_k + barrier, phase)
            scores_tile(scores, qf, uint32(0), k_tile, lane)
            first_key = (n_begin + k) * block_n
            if first_key + block_n > smallest_limit:
                mask_tile(scores, first_key, group_lane, limits)
            for c in range(columns):
                m_run[c], l_run[c], corrections[c] = softmax_column(scores, c, m_run[c], l_run[c],
                                                                    scale_log2)
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

    return types.SimpleNamespace(load_q=load_q, load_q_fragments=load_q_fragments,
                                 scores_tile=scores_tile, mask_tile=mask_tile,
                                 column_max=column_max, softmax_finish=softmax_finish,
                                 softmax_column=softmax_column, p_fragments=p_fragments,
                                 pv_tile=pv_tile, store_acc_column=store_acc_column,
                                 column_sum=column_sum, store_column=store_column, consume=consume)
