"""Rung 4 (``kq_wgmma_rs_lazy``) adds over rung 3 (consumer_kq_wgmma.py): P V by wgmma, lazy rescale.

``score_layout="kq_wgmma_rs_lazy"`` (layouts.py; e4m3 only): rung 3 with P V on the tensor cores'
warpgroup instruction too:

    S^T = K Q^T                     one wgmma a tile (rung 3's)
    P^T = exp2(S^T scale_log2 - m)  m moves only when a tile's max exceeds it by LAZY_RESCALE_LOG2
    O^T += V^T P^T                  wgmma, O^T (head_dim, group_m) accumulating in registers in place;
                                    O^T *= correction first, only in a tile where some m moved

What it adds over rung 3:
- P V as wgmma (pv_wgmma.py): P^T goes through shared memory as e4m3 (a buffer of P_ROW_BYTES
  rows, no longer rung 3's fp16 fragments), V^T is gathered from the V tile into the wgmma's A
  registers by ``ldmatrix.trans`` and byte permutes: no e4m3 operand is unpacked to fp16. Warp w's
  O^T registers hold dims ``64 mb + 16 w + 2 g (+ 1)`` of every M block mb (not rung 3's
  contiguous share of the head dims).
- The lazy rescale (as FlashAttention-4): a column's running max stays until a tile's exceeds it
  by more than LAZY_RESCALE_LOG2 (P then stays at most 2 ** 8 = 256, under e4m3's largest finite
  448), so most tiles' corrections are exactly 1; a warp vote (``any_sync``) skips O^T's rescale.
- From head dim SPECULATIVE_MIN_HEAD_DIM (``Variant.speculates``) the softmax speculates: each
  lane first computes its P under the maxima as they stand (``speculate``: no shuffles, no
  ``red``), stores P^T, and one ``bar.red.or`` tells every warp whether any lane saw a score past
  its column's max by more than the threshold (always, on a column's first tile). If none did,
  that P is what the lazy step would compute (the same maxima, corrections of 1) and P V follows
  at once: one named barrier a tile instead of rung 3's two. If one did, the tile runs the exact
  lazy step from its S^T again (the K tile is still in; its ``empty`` arrival comes after). As
  P^T is then written with no barrier since the previous tile's P V, tile k writes P^T buffer
  ``k & 1``: a warp reaches tile k + 2's write only after every warp has passed tile k + 1's
  barrier, so after its wgmma of tile k. ``red`` is touched only on the exact step's tiles.

Scratch past the V ring (``Variant.scratch_bytes``): each group's P^T buffers, then each group's
``red``. The consume loop is written for the CTA's group ``group_of(warp)`` of consumer warps, each
with its own rows, Q tile, P^T, ``red`` and named barrier: one group here (group 0, a constant);
rung 5 (consumer_kq_wgmma_rs_lazy_rowsplit.py) runs two.
"""
import types

from numba import cuda, float32, int32, uint32
from tma_kernels.ptx import (
    fence_proxy_async_shared,
    mbarrier_arrive,
    mbarrier_wait_parity,
    named_barrier_red_or,
    named_barrier_sync,
    smem_u32,
)
from tma_kernels.ptx.convert import ex2_approx

from .consumer_kq_wgmma import CONSUMER_BARRIER, make_exchange, make_wgmma_scores
from .consumer_qk import FULL_MASK, ONE, SCORE_FLOOR, ZERO, make_q_loader
from .kernel_steps import make_ring_wait
from .consumer_steps import make_shared_softmax, make_start_columns
from .kq_steps import Q_ROWS_PER_BLOCK, ROW_BLOCK, make_kq_tiles
from .pv_wgmma import make_pv_steps

# a column's running max stays until a tile's exceeds it by this much (log2 units), so P stays at
# most 2 ** 8 = 256, under e4m3's largest finite 448 (FlashAttention-4's threshold: the same 8)
LAZY_RESCALE_LOG2 = 8.0


@cuda.jit(device=True, inline=True)
def one_group(warp):
    """The group of consumer warp ``warp``: one group, so a constant (no group arithmetic left)."""
    return 0


def make_speculate(columns, q_blocks, warp_token_blocks):
    """``speculate(scores, sums, m_run, scale_log2)``: the lazy softmax's usual case, with no
    exchange among the warps: P (in place of the scores) under the running maxima as they stand,
    each column's sum over the lane's tokens into ``sums``. Returns 1 if some score of the lane
    exceeds its column's running max by more than LAZY_RESCALE_LOG2 (``x > m + threshold``;
    always, for a finite score, while the max is -inf), the case where the exact step
    (softmax_finish) would move the max; else 0, where its P, sums and corrections of 1 are these."""
    lazy_log2 = float32(LAZY_RESCALE_LOG2)

    @cuda.jit(device=True, inline=True)
    def speculate(scores, sums, m_run, scale_log2):
        over = False
        for c in range(columns):
            qb = c >> 1
            e = c & 1
            m_use = max(m_run[c], SCORE_FLOOR)
            bound = m_run[c] + lazy_log2
            col_sum = ZERO
            for tb in range(warp_token_blocks):
                for h in range(2):
                    j = (tb * q_blocks + qb) * 4 + 2 * h + e
                    x = scores[j] * scale_log2
                    over = over | (x > bound)
                    p = ex2_approx(x - m_use)
                    scores[j] = p
                    col_sum += p
            sums[c] = col_sum
        return uint32(over)

    return speculate


def make_lazy_pv(variant, pv_steps):
    """``tile_pv``, the exact step's P V: P^T into the group's ``p_smem`` as e4m3; once every warp's
    is in and the tile's V too, O^T = O^T * correction (in a tile where some column's max moved) +
    V^T P^T."""
    tile_threads = uint32(32 * variant.tile_warps)
    kv_tile_bytes = variant.kv_tile_bytes
    columns = 2 * (variant.group_m // Q_ROWS_PER_BLOCK)
    store_p, p_descriptor, pv = pv_steps.store_p, pv_steps.p_descriptor, pv_steps.pv

    @cuda.jit(device=True, inline=True)
    def tile_pv(acc, corrections, scores, v_smem, p_smem, stage, full_v, phase, warp, lane, tile_barrier):
        store_p(p_smem, scores, warp, lane)
        fence_proxy_async_shared()
        moved = False       # every warp holds every column, with the same corrections: a uniform branch
        for c in range(columns):
            moved = moved or corrections[c] != ONE
        rescale = cuda.any_sync(FULL_MASK, moved)
        named_barrier_sync(tile_barrier, tile_threads)
        mbarrier_wait_parity(full_v, phase)
        pv(acc, v_smem + uint32(stage * kv_tile_bytes), p_descriptor(p_smem), corrections, warp, lane, rescale)

    return tile_pv


def make_group_scratch(variant, red_lane, group_of):
    """``warp_group(warp)``: the group of consumer warp ``warp`` (``group_of``), the warp's place in it
    and the group's named barrier; ``group_scratch(group_id, lane, q_smem, v_smem, m_start, red)``:
    what is the group's own (the lane's offset in ``red``, P^T buffer, Q tile, first row). Past the V
    ring: each group's P^T buffers, then each group's ``red``."""
    warps = variant.tile_warps
    p_offset = variant.stages * variant.kv_tile_bytes   # from v_smem, past the V ring: group g's P^T ..
    p_bytes = variant.p_buffer_bytes
    scratch = p_offset + variant.row_groups * p_bytes   # .. then group g's ``red``
    group_words = variant.red_bytes // 4
    group_q_step = variant.group_q_tile_bytes           # group g's Q tile at q_smem + g * group_q_step
    block_m = variant.group_m

    @cuda.jit(device=True, inline=True)
    def warp_group(warp):
        group_id = group_of(warp)
        return group_id, warp - group_id * warps, uint32(CONSUMER_BARRIER + group_id)

    @cuda.jit(device=True, inline=True)
    def group_scratch(group_id, lane, q_smem, v_smem, m_start, red):
        lane_red = red_lane(((v_smem + uint32(scratch) - smem_u32(red)) >> uint32(2))
                            + uint32(group_id * group_words), lane)
        p_smem = v_smem + uint32(p_offset) + uint32(group_id) * uint32(p_bytes)
        return lane_red, p_smem, q_smem + uint32(group_id * group_q_step), m_start + group_id * block_m

    return warp_group, group_scratch


def make_speculative_steps(variant, pv_steps, speculate, columns):
    """The usual case of a speculating tile: ``speculate_p`` (``speculate``'s P under the maxima as
    they stand, stored as P^T; one ``bar.red.or`` returns whether some lane's max would move) and,
    where none would, ``speculative_pv`` (P V at once, the stage released)."""
    tile_threads = uint32(32 * variant.tile_warps)
    kv_tile_bytes = variant.kv_tile_bytes
    store_p, p_descriptor, pv = pv_steps.store_p, pv_steps.p_descriptor, pv_steps.pv

    @cuda.jit(device=True, inline=True)
    def speculate_p(scores, maxima, m_run, tile_p, warp, lane, tile_barrier, scale_log2):
        over = speculate(scores, maxima, m_run, scale_log2)
        store_p(tile_p, scores, warp, lane)
        fence_proxy_async_shared()
        return named_barrier_red_or(tile_barrier, tile_threads, over)

    @cuda.jit(device=True, inline=True)
    def speculative_pv(acc, maxima, l_run, corrections, tile_p, v_smem, stage, full_v, empty, phase, warp, lane):
        for c in range(columns):
            l_run[c] += maxima[c]
        mbarrier_wait_parity(full_v, phase)
        pv(acc, v_smem + uint32(stage * kv_tile_bytes), p_descriptor(tile_p), corrections, warp, lane, False)
        mbarrier_arrive(empty)

    return speculate_p, speculative_pv


def make_rung_steps(variant, group_of):
    """The device functions rung 4's consume calls, for the consumer warps' groups ``group_of``, and
    its sizes (``sizes``: warps, block_n, kv_tile_bytes, columns, acc_regs, warp_token_blocks,
    score_regs). S^T and its mask stay inline in consume: as one helper, ptxas scheduled the
    kqwrl8 kernels differently."""
    warps = variant.tile_warps
    q_blocks = variant.group_m // Q_ROWS_PER_BLOCK
    columns = 2 * q_blocks
    warp_token_blocks = variant.block_n // ROW_BLOCK // warps
    pv_steps = make_pv_steps(variant)
    steps = make_kq_tiles(variant, q_blocks, warp_token_blocks, variant.head_dim // 16 // warps,
                          store_acc=pv_steps.store_acc_column, lazy_rescale_log2=LAZY_RESCALE_LOG2)
    exchange = make_exchange(variant, steps.p_regs)
    speculate = make_speculate(columns, q_blocks, warp_token_blocks)
    speculate_p, speculative_pv = make_speculative_steps(variant, pv_steps, speculate, columns)
    tile_softmax, finish = make_shared_softmax(columns, steps, exchange, uint32(32 * warps))
    wgmma = make_wgmma_scores(variant)
    return types.SimpleNamespace(
        steps=steps, exchange=exchange, speculate=speculate, speculate_p=speculate_p, speculative_pv=speculative_pv,
        load_q=make_q_loader(variant), start_columns=make_start_columns(variant, columns),
        ring_wait=make_ring_wait(variant.stages), group_steps=make_group_scratch(variant, exchange.red_lane, group_of),
        prepare_q=wgmma.prepare_q, tile_scores=wgmma.tile_scores, tile_softmax=tile_softmax, finish=finish,
        tile_pv=make_lazy_pv(variant, pv_steps),
        sizes=(warps, variant.block_n, variant.kv_tile_bytes, columns, pv_steps.acc_regs, warp_token_blocks,
               steps.score_regs))


def make_consumer(variant, group_of=one_group):
    """``.consume(...)`` (rung 1's signature) and its steps, for consumer warp groups ``group_of(warp)``."""
    parts = make_rung_steps(variant, group_of)
    warps, block_n, kv_tile_bytes, columns, acc_regs, warp_token_blocks, score_regs = parts.sizes
    load_q, start_columns, ring_wait, prepare_q = parts.load_q, parts.start_columns, parts.ring_wait, parts.prepare_q
    warp_group, group_scratch = parts.group_steps
    tile_scores, mask_tile, tile_softmax = parts.tile_scores, parts.steps.mask_tile, parts.tile_softmax
    tile_pv, finish, speculate_p, speculative_pv = parts.tile_pv, parts.finish, parts.speculate_p, parts.speculative_pv
    speculative, p_tile = variant.speculates, variant.p_tile_bytes if variant.speculates else 0   # P^T buffer k & 1

    @cuda.jit(device=True, inline=True)
    def consume(q_smem, k_smem, v_smem, full_k, full_v, empty, q_address, out, lse, warp, lane,
                m_start, rows_valid, group, batch, kv_head, seqlen_q, q_heads, kv_len, n_begin,
                tiles, scale_log2, out_row_base):
        group_id, warp, tile_barrier = warp_group(warp)     # its own rows, Q tile, P^T, red, barrier
        red = cuda.shared.array(0, float32)
        cuda.shared.array(0, uint32)    # unused: keeps the PTX of rungs 3-5's one loop (%dynamic_smem_size)
        lane_red, p_smem, q_tile, row_start = group_scratch(group_id, lane, q_smem, v_smem, m_start, red)
        load_q(q_tile, q_address, warp, lane, row_start, rows_valid, group, batch, kv_head, seqlen_q, q_heads)
        q_desc = prepare_q(q_tile, tile_barrier, uint32(32 * warps))
        scores = cuda.local.array(score_regs, float32)
        acc = cuda.local.array(acc_regs, float32)
        for i in range(acc_regs):
            acc[i] = ZERO
        group_lane = lane >> 2
        first_row = row_start + 2 * (lane & 3)
        first_token = warp * warp_token_blocks * ROW_BLOCK
        limits = cuda.local.array(columns, int32)
        m_run = cuda.local.array(columns, float32)
        l_run = cuda.local.array(columns, float32)
        corrections = cuda.local.array(columns, float32)
        maxima = cuda.local.array(columns, float32)
        smallest_limit = start_columns(limits, m_run, l_run, first_row, group, kv_len, seqlen_q)
        for k in range(tiles):
            stage, phase, barrier = ring_wait(full_k, k)
            k_tile = k_smem + uint32(stage * kv_tile_bytes)
            tile_scores(scores, q_desc, k_tile)
            first_key = (n_begin + k) * block_n + first_token
            masked = first_key + warp_token_blocks * ROW_BLOCK > smallest_limit
            if masked:
                mask_tile(scores, first_key, group_lane, limits)
            tile_p = p_smem + uint32((k & 1) * p_tile)
            if speculative:     # one barrier tells every warp whether some warp's max would move
                if speculate_p(scores, maxima, m_run, tile_p, warp, lane, tile_barrier, scale_log2) == 0:
                    speculative_pv(acc, maxima, l_run, corrections, tile_p, v_smem, stage, full_v + barrier,
                                   empty + barrier, phase, warp, lane)
                    continue
                # some max moves: the exact step, from the raw scores again (the K tile is still in)
                tile_scores(scores, q_desc, k_tile)
                if masked:
                    mask_tile(scores, first_key, group_lane, limits)
            tile_softmax(scores, maxima, m_run, l_run, corrections, red, lane_red, warp, lane, tile_barrier,
                         scale_log2)
            tile_pv(acc, corrections, scores, v_smem, tile_p, stage, full_v + barrier, phase, warp, lane,
                    tile_barrier)
            mbarrier_arrive(empty + barrier)
        finish(out, lse, acc, maxima, m_run, l_run, red, lane_red, warp, lane, tile_barrier, first_row,
               rows_valid, group, out_row_base, q_heads, kv_head, warp)

    return types.SimpleNamespace(**vars(parts), consume=consume)
