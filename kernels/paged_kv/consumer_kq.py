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

e4m3 with ``kv_unpack="per_cta"``: each fp8 K or V tile is unpacked once per CTA, not once
per warp. The consumer warps each convert a share of its 16-byte pieces into an fp16 tile
in shared memory (after the rings; the bf16 tile layout), meet at a named barrier, and
run the bf16 code paths with f16 mmas. A K piece (row r, dims 16p..16p+15; word j holds
dims 4j..4j+3) becomes the low pairs of its words, then the high pairs, so the fp16 k
order matches the e4m3 Q fragments' slot map above; a V piece keeps dim order, so O^T's
rows are the bf16 ones. Two barriers a tile: after the K unpack (every warp has read the
previous V tile, and K is whole) and after the V unpack (every warp has read K). FA3's
fp8 kernel likewise passes V through shared memory once per CTA (its in-smem transpose).

Checked on the CPU by the warp emulation in tests/cpu/test_paged_kv_fragments_kq.py.
"""
import math
import types

from numba import cuda, float32, int32, uint32
from tma_kernels.ptx import (
    ld_shared_v4_u32,
    mbarrier_arrive,
    mbarrier_wait_parity,
    named_barrier_sync,
    st_shared_v4_u32,
)
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
    PIECE_BYTES,
    a_lane_row_col,
    q_b_lane_row_col,
    tile_offset,
    v_e4m3_lane_row_col,
    vt_bf16_lane_row_col,
)

Q_ROWS_PER_BLOCK = 8        # mma N
UNPACK_BARRIER = 1          # named barrier of the consumer warps (kv_unpack "per_cta"); 0 is syncthreads
UNPACKED_ROW_BYTES = 128    # the fp16 tiles: head_dim * 2 >= 128 bytes a row, SWIZZLE_128B chunks
UNPACKED_MASK = 7


def make_kq_consumer(variant):
    """The kq consumer's device functions for ``variant``: ``.consume(...)`` has the
    signature of consumer.py's; the others are its steps, for the CPU warp emulation."""
    head_dim = variant.head_dim
    head_bytes = variant.head_bytes
    block_n = variant.block_n
    block_m = variant.block_m
    stages = variant.stages
    row_bytes = variant.row_bytes
    mask = variant.swizzle_mask
    kv_tile_bytes = variant.kv_tile_bytes
    causal = variant.causal
    fp8 = variant.dtype == E4M3
    cta_unpack = variant.kv_unpack == "per_cta"
    gathered = fp8 and not cta_unpack         # e4m3 fragments built in registers (else 16-bit tiles)
    mma16 = mma_f16_m16n8k16 if fp8 else mma_bf16_m16n8k16
    tile_row_bytes = UNPACKED_ROW_BYTES if cta_unpack else row_bytes   # of the tiles the mmas read
    tile_mask = UNPACKED_MASK if cta_unpack else mask
    steps16 = head_dim // 16                  # 16-bit path: k-steps of 16 dims (32 bytes)
    consumer_threads = variant.consumer_threads
    unpacked_tile_bytes = variant.unpacked_tile_bytes
    pieces_per_row = head_bytes // PIECE_BYTES
    log2_pieces_per_row = pieces_per_row.bit_length() - 1
    pieces_per_thread = block_n * pieces_per_row // consumer_threads
    rows = variant.rows_per_warp
    q_blocks = rows // Q_ROWS_PER_BLOCK
    columns = 2 * q_blocks                    # query columns a lane holds
    k_steps = head_bytes // MMA_K_BYTES
    token_blocks = block_n // 16
    dim_blocks = head_dim // 16
    q_regs_per_step = 4 if fp8 else 2         # e4m3: four fp16 pairs, bf16: b0, b1
    q_regs = q_blocks * k_steps * q_regs_per_step
    score_regs = token_blocks * q_blocks * 4
    acc_regs = dim_blocks * q_blocks * 4
    p_regs = score_regs // 2                  # P^T's B fragments, packed to 16 bits
    load_q = make_q_loader(variant)
    row_limit = make_row_limit(causal)

    @cuda.jit(device=True, inline=True)
    def load_q_fragments(qf, q_smem, warp, lane):
        """qf = Q's B fragments of every k-step and query block (e4m3: unpacked to fp16)."""
        r, c = q_b_lane_row_col(lane)
        for qb in range(q_blocks):
            for pair in range(k_steps // 2):
                x = ldmatrix_x4(q_smem + uint32(tile_offset(warp * rows + qb * 8 + r, pair * 64 + c,
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
    def unpack_tile(dst, src, thread, natural):
        """This thread's share of an e4m3 tile at ``src`` (pieces thread, thread +
        consumer_threads, ..) as fp16 at ``dst``: piece (row, dims 16p..) -> 32 bytes at
        (row, 32p); K (natural False): the words' low pairs, then their high pairs; V: dim order."""
        for i in range(pieces_per_thread):
            piece = i * consumer_threads + thread
            row = piece >> log2_pieces_per_row
            col = (piece & (pieces_per_row - 1)) * PIECE_BYTES
            w = ld_shared_v4_u32(src + uint32(tile_offset(row, col, block_n, row_bytes, mask)))
            first = dst + uint32(tile_offset(row, 2 * col, block_n, UNPACKED_ROW_BYTES, UNPACKED_MASK))
            second = dst + uint32(tile_offset(row, 2 * col + PIECE_BYTES, block_n, UNPACKED_ROW_BYTES,
                                              UNPACKED_MASK))
            lo0, hi0 = cvt_f16x2_e4m3x2_low(w[0]), cvt_f16x2_e4m3x2_high(w[0])
            lo1, hi1 = cvt_f16x2_e4m3x2_low(w[1]), cvt_f16x2_e4m3x2_high(w[1])
            lo2, hi2 = cvt_f16x2_e4m3x2_low(w[2]), cvt_f16x2_e4m3x2_high(w[2])
            lo3, hi3 = cvt_f16x2_e4m3x2_low(w[3]), cvt_f16x2_e4m3x2_high(w[3])
            if natural:
                st_shared_v4_u32(first, lo0, hi0, lo1, hi1)
                st_shared_v4_u32(second, lo2, hi2, lo3, hi3)
            else:
                st_shared_v4_u32(first, lo0, lo1, lo2, lo3)
                st_shared_v4_u32(second, hi0, hi1, hi2, hi3)

    @cuda.jit(device=True, inline=True)
    def scores_tile(scores, qf, k_tile, lane):
        """scores = K_tile Q_warp^T (fp32): block_n tokens x rows query columns."""
        for i in range(score_regs):
            scores[i] = ZERO
        a_row, a_col = a_lane_row_col(lane)
        if gathered:
            for tb in range(token_blocks):
                for kk in range(k_steps):
                    a = ldmatrix_x4(k_tile + uint32(tile_offset(tb * 16 + a_row, kk * MMA_K_BYTES + a_col,
                                                                block_n, row_bytes, mask)))
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
                        i = (qb * k_steps + kk) * q_regs_per_step
                        d = mma_f16_m16n8k16(x0, x1, y0, y1, qf[i], qf[i + 1],
                                             scores[j], scores[j + 1], scores[j + 2], scores[j + 3])
                        d = mma_f16_m16n8k16(x2, x3, y2, y3, qf[i + 2], qf[i + 3], d[0], d[1], d[2], d[3])
                        scores[j], scores[j + 1], scores[j + 2], scores[j + 3] = d[0], d[1], d[2], d[3]
        else:
            # 16-bit tiles (bf16, or e4m3 unpacked per CTA): k-step kk is dims 16 kk..16 kk + 15,
            # whose B fragments are qf[2 (qb * steps16 + kk)], +1 for either dtype's Q layout
            for tb in range(token_blocks):
                for kk in range(steps16):
                    a = ldmatrix_x4(k_tile + uint32(tile_offset(tb * 16 + a_row, kk * MMA_K_BYTES + a_col,
                                                                block_n, tile_row_bytes, tile_mask)))
                    for qb in range(q_blocks):
                        j = (tb * q_blocks + qb) * 4
                        i = (qb * steps16 + kk) * 2
                        d = mma16(a[0], a[1], a[2], a[3], qf[i], qf[i + 1],
                                  scores[j], scores[j + 1], scores[j + 2], scores[j + 3])
                        scores[j], scores[j + 1], scores[j + 2], scores[j + 3] = d[0], d[1], d[2], d[3]

    @cuda.jit(device=True, inline=True)
    def mask_tile(scores, first_key, group_lane, limits):
        """-inf for keys at or past each column's limit (sequence end, or causal diagonal)."""
        for tb in range(token_blocks):
            for r in range(4):
                key = first_key + tb * 16 + group_lane + 8 * (r >> 1)
                for qb in range(q_blocks):
                    if key >= limits[2 * qb + (r & 1)]:
                        scores[(tb * q_blocks + qb) * 4 + r] = NEG_INF

    @cuda.jit(device=True, inline=True)
    def softmax_column(scores, column, m_old, l_old, scale_log2):
        """Online softmax of one of the lane's query columns (column = 2 qb + e): scores -> P
        in place; returns (m_new, l_new partial to this lane, correction of the old O)."""
        qb = column >> 1
        e = column & 1
        mx = NEG_INF
        for tb in range(token_blocks):
            j = (tb * q_blocks + qb) * 4 + e
            mx = max(mx, max(scores[j], scores[j + 2]))
        mx = max(mx, cuda.shfl_xor_sync(FULL_MASK, mx, 4))
        mx = max(mx, cuda.shfl_xor_sync(FULL_MASK, mx, 8))
        mx = max(mx, cuda.shfl_xor_sync(FULL_MASK, mx, 16))
        m_new = max(m_old, mx * scale_log2)
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
    def pv_tile_16bit(acc, pf, v_tile, lane):
        """O^T += V^T P^T from a 16-bit V tile (bf16, or e4m3 unpacked per CTA to fp16)."""
        v_row, v_col = vt_bf16_lane_row_col(lane)
        for tb in range(token_blocks):
            for db in range(dim_blocks):
                a = ldmatrix_x4_trans(v_tile + uint32(tile_offset(tb * 16 + v_row, db * 32 + v_col,
                                                                  block_n, tile_row_bytes, tile_mask)))
                for qb in range(q_blocks):
                    j = 2 * (tb * q_blocks + qb)
                    i = (db * q_blocks + qb) * 4
                    d = mma16(a[0], a[1], a[2], a[3], pf[j], pf[j + 1],
                              acc[i], acc[i + 1], acc[i + 2], acc[i + 3])
                    acc[i], acc[i + 1], acc[i + 2], acc[i + 3] = d[0], d[1], d[2], d[3]

    @cuda.jit(device=True, inline=True)
    def pv_tile_e4m3(acc, pf, v_tile, lane):
        v_row, v_col = v_e4m3_lane_row_col(lane)
        for t in range(token_blocks // 2):
            for db in range(dim_blocks):
                x = ldmatrix_x4_trans(v_tile + uint32(tile_offset(t * 32 + v_row, db * 16 + v_col,
                                                                  block_n, row_bytes, mask)))
                for h in range(2):
                    even = prmt(x[2 * h], x[2 * h + 1], EVEN_BYTES)
                    odd = prmt(x[2 * h], x[2 * h + 1], ODD_BYTES)
                    a0 = cvt_f16x2_e4m3x2_low(even)
                    a1 = cvt_f16x2_e4m3x2_low(odd)
                    a2 = cvt_f16x2_e4m3x2_high(even)
                    a3 = cvt_f16x2_e4m3x2_high(odd)
                    tb = 2 * t + h
                    for qb in range(q_blocks):
                        j = 2 * (tb * q_blocks + qb)
                        i = (db * q_blocks + qb) * 4
                        d = mma_f16_m16n8k16(a0, a1, a2, a3, pf[j], pf[j + 1],
                                             acc[i], acc[i + 1], acc[i + 2], acc[i + 3])
                        acc[i], acc[i + 1], acc[i + 2], acc[i + 3] = d[0], d[1], d[2], d[3]

    @cuda.jit(device=True, inline=True)
    def store_acc_column(out, out_base, acc, column, inverse, group_lane):
        """out[out_base + dim] = acc * inverse for the lane's dims of one of its columns: of
        dim block db, 16-bit tiles ``16 db + g`` (acc r = 0, 1) and ``+ 8`` (r = 2, 3); e4m3
        per warp (rows gathered as even / odd dims) ``16 db + 2g`` and ``+ 1``."""
        qb = column >> 1
        e = column & 1
        first = 2 * group_lane if gathered else group_lane
        second = first + (1 if gathered else 8)
        for db in range(dim_blocks):
            i = (db * q_blocks + qb) * 4 + e
            out[out_base + db * 16 + first] = acc[i] * inverse
            out[out_base + db * 16 + second] = acc[i + 2] * inverse

    @cuda.jit(device=True, inline=True)
    def column_sum(l_part):
        """The softmax denominator of a column: the partial sums of the lanes of equal q."""
        l_sum = l_part + cuda.shfl_xor_sync(FULL_MASK, l_part, 4)
        l_sum += cuda.shfl_xor_sync(FULL_MASK, l_sum, 8)
        return l_sum + cuda.shfl_xor_sync(FULL_MASK, l_sum, 16)

    @cuda.jit(device=True, inline=True)
    def store_column(out, lse, acc, column, m_run, l_part, row, rows_valid, group, out_row_base,
                     group_lane, q_heads, kv_head):
        """Normalise and write one of the lane's query columns (and its log2-sum-exp) if real.
        Output row (token, head) is row ``out_row_base + token * q_heads + head`` of ``lse``
        and of ``out`` viewed as (rows, head_dim)."""
        l_sum = column_sum(l_part)
        if row >= rows_valid:
            return
        token = row // group
        head = kv_head * group + (row - token * group)
        out_row = out_row_base + token * q_heads + head
        inverse = ONE / l_sum if l_sum > ZERO else ZERO
        store_acc_column(out, out_row * head_dim, acc, column, inverse, group_lane)
        if group_lane == 0:
            lse[out_row] = m_run + float32(math.log2(l_sum)) if l_sum > ZERO else NEG_INF

    @cuda.jit(device=True, inline=True)
    def consume(q_smem, k_smem, v_smem, full_k, full_v, empty, q_address, out, lse, warp, lane,
                m_start, rows_valid, group, batch, kv_head, seqlen_q, q_heads, kv_len, n_begin,
                tiles, scale_log2, out_row_base):
        load_q(q_smem, q_address, warp, lane, m_start, rows_valid, group, batch, kv_head,
               seqlen_q, q_heads)
        qf = cuda.local.array(q_regs, uint32)
        load_q_fragments(qf, q_smem, warp, lane)
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
        thread = warp * 32 + lane
        k_unpacked = v_smem + uint32(stages * kv_tile_bytes)     # kv_unpack "per_cta": after the V ring
        v_unpacked = k_unpacked + uint32(unpacked_tile_bytes)
        for k in range(tiles):
            stage = k % stages
            phase = (k // stages) & 1
            barrier = uint32(stage * 8)
            k_tile = k_smem + uint32(stage * kv_tile_bytes)
            v_tile = v_smem + uint32(stage * kv_tile_bytes)
            mbarrier_wait_parity(full_k + barrier, phase)
            if cta_unpack:
                unpack_tile(k_unpacked, k_tile, thread, False)
                named_barrier_sync(UNPACK_BARRIER, consumer_threads)
                k_tile = k_unpacked
            scores_tile(scores, qf, k_tile, lane)
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
            if cta_unpack:
                unpack_tile(v_unpacked, v_tile, thread, True)
                mbarrier_arrive(empty + barrier)      # this thread's reads of the stage are done
                named_barrier_sync(UNPACK_BARRIER, consumer_threads)
                pv_tile_16bit(acc, pf, v_unpacked, lane)
            else:
                if gathered:
                    pv_tile_e4m3(acc, pf, v_tile, lane)
                else:
                    pv_tile_16bit(acc, pf, v_tile, lane)
                mbarrier_arrive(empty + barrier)
        for c in range(columns):
            store_column(out, lse, acc, c, m_run[c], l_run[c], first_row + 8 * (c >> 1) + (c & 1),
                         rows_valid, group, out_row_base, group_lane, q_heads, kv_head)

    return types.SimpleNamespace(load_q=load_q, load_q_fragments=load_q_fragments,
                                 scores_tile=scores_tile, mask_tile=mask_tile,
                                 softmax_column=softmax_column, p_fragments=p_fragments,
                                 unpack_tile=unpack_tile, pv_tile_16bit=pv_tile_16bit,
                                 pv_tile_e4m3=pv_tile_e4m3,
                                 store_acc_column=store_acc_column,
                                 column_sum=column_sum, store_column=store_column, consume=consume)
