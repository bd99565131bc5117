"""Rung 3 (``kq_wgmma``) adds over rung 2 (consumer_kq.py): 4 warps share each tile, S^T by one wgmma.

``score_layout="kq_wgmma"`` (layouts.py): rung 2 with the CTA's 4 consumer warps, one warpgroup,
sharing each K/V tile of block_n = 64 tokens:

    S^T = K Q^T        one wgmma a tile: K (64, head_dim) and Q (group_m, head_dim) read from
                       shared memory as they lie; warp w receives S^T's tokens 16 w .. 16 w + 15
    P^T = exp2(S^T scale_log2 - m)        m: each query column's running max over all 4 warps
    O^T[d] = O^T[d] * correction + V^T[d] P^T   d: warp w's head dims, w head_dim/4 ..; mma.sync

What it adds over rung 2:
- S^T on the tensor cores' warpgroup instruction (tma_kernels.ptx.wgmma; sm_90a's native fp8
  path, as FlashAttention-3 computes Q K^T): e4m3 K and Q need no unpack to fp16, and each K tile
  is read once per CTA instead of once per warp. Q, written by the consumers' plain stores, is
  fenced to the async proxy (``fence.proxy.async.shared::cta``) before the barrier after it; K
  tiles from TMA or cp.async reach the wgmma through their mbarrier alone, as in FA3's cp.async
  paged-KV path (hopper/mainloop_fwd_sm90_tma_gmma_ws.hpp, ``cpasync_barrier_arrive``).
- The warps exchange what a softmax over the whole tile needs, through shared memory past the V
  ring (``Variant.scratch_bytes``), between named barriers (CONSUMER_BARRIER, the 4 warps):
  ``red``: each warp's column maxima; after the first barrier every warp reduces the same 4
  values, so all hold the same running max and corrections (each keeps partial sums over its own
  tokens, which meet in ``red`` at the end); ``pbuf``: each warp's P^T B fragments (rung 2's
  ``p_fragments``), lane-minor; after the second barrier every warp's P V reads all of them.

Fragments: warp w's S^T registers are rung 2's for one 16-token block (the wgmma's result layout:
``scores[4 qb + r]`` holds token ``16 w + g`` (r = 0, 1) or ``+ 8`` (r = 2, 3) of query column
``8 qb + 2 (lane & 3) + (r & 1)``); its O^T registers are rung 2's for its head_dim / 64 dim blocks.

``red`` is not reused before it is read: a warp writes tile k + 1's maxima after the second
barrier of tile k, which every warp reaches after reading tile k's; it writes P of tile k + 1
after that tile's first barrier, which every warp reaches after its P V of tile k.

The exchange is checked on the CPU by tests/cpu/paged_kv/test_shared_tile.py, which runs the warps
one after another between the barriers.
"""
import types

from numba import cuda, float32, int32, uint32
from tma_kernels.ptx import (
    fence_proxy_async_shared,
    mbarrier_arrive,
    mbarrier_wait_parity,
    named_barrier_sync,
    smem_u32,
)
from tma_kernels.ptx.wgmma import K_STEP_BYTES, k_major_descriptor, make_wgmma_ss

from .consumer_qk import ZERO, make_q_loader
from .kernel_steps import make_ring_wait
from .consumer_steps import make_shared_softmax, make_start_columns
from .kq_steps import Q_ROWS_PER_BLOCK, ROW_BLOCK, make_kq_tiles

CONSUMER_BARRIER = 1               # bar.sync id of the warps of a tile (group g: 1 + g; 0 is __syncthreads)
LANES = 32


def make_exchange(variant, p_regs_warp):
    """The cross-warp steps over the shared arrays ``red`` (float32) and ``pbuf`` (uint32), each
    lane addressing them from its own element offset (``*_lane``; unsigned, so indexing has no
    negative-index wraparound, and the per-register steps are compile-time constants ptxas folds
    into the instruction). ``p_regs_warp``: make_kq_tiles' P^T fragments a warp. The CPU test
    passes numpy arrays."""
    warps = variant.tile_warps
    q_blocks = variant.group_m // Q_ROWS_PER_BLOCK
    columns = 2 * q_blocks

    @cuda.jit(device=True, inline=True)
    def red_lane(red_base, lane):
        """The lane's offset in ``red``: entry (row, warp) is at row * warps + warp; the lane's
        columns are rows 8 qb + 2 (lane & 3) + e."""
        return red_base + uint32(2 * warps) * uint32(lane & 3)

    @cuda.jit(device=True, inline=True)
    def publish(red, lane_offset, values, warp, lane):
        """red[(row of column c) * warps + warp] = values[c] for every column (warp-wide
        values; lanes 0-3 write)."""
        if lane < 4:
            own = lane_offset + uint32(warp)
            for c in range(columns):
                red[own + uint32((8 * (c >> 1) + (c & 1)) * warps)] = values[c]

    @cuda.jit(device=True, inline=True)
    def gather_max(red, lane_offset, column):
        row = lane_offset + uint32((8 * (column >> 1) + (column & 1)) * warps)
        mx = red[row]
        for w in range(1, warps):
            mx = max(mx, red[row + uint32(w)])
        return mx

    @cuda.jit(device=True, inline=True)
    def gather_sum(red, lane_offset, column):
        row = lane_offset + uint32((8 * (column >> 1) + (column & 1)) * warps)
        total = red[row]
        for w in range(1, warps):
            total += red[row + uint32(w)]
        return total

    @cuda.jit(device=True, inline=True)
    def publish_p(pbuf, p_lane, pf_warp, warp):
        """The warp's P^T B fragments into pbuf at their place among the tile's (lane-minor:
        register i of lane l at i * 32 + l)."""
        own = p_lane + uint32(warp * p_regs_warp * LANES)
        for i in range(p_regs_warp):
            pbuf[own + uint32(i * LANES)] = pf_warp[i]

    return types.SimpleNamespace(red_lane=red_lane, publish=publish, gather_max=gather_max,
                                 gather_sum=gather_sum, publish_p=publish_p, p_regs=p_regs_warp * warps,
                                 p_regs_warp=p_regs_warp)


def make_wgmma_scores(variant):
    """``prepare_q(q_smem, q_barrier, q_threads)``: the group's Q tile (just stored) to the async
    proxy, then every warp's rows are in (the warps of named barrier ``q_barrier``): returns the Q
    tile's wgmma descriptor. ``tile_scores(scores, q_desc, k_tile)``: S^T of the tile, one wgmma of
    M = its 64 tokens, N = the group's query rows, one 32-byte k-step of every row at a time; K
    tile and Q tile alike are column chunks of row_bytes (geometry.tile_offset)."""
    block_n, block_m, row_bytes = variant.block_n, variant.group_m, variant.row_bytes
    score_regs = 4 * (block_m // Q_ROWS_PER_BLOCK)
    steps_ab = tuple(((k // row_bytes) * block_n * row_bytes + k % row_bytes,
                      (k // row_bytes) * block_m * row_bytes + k % row_bytes)
                     for k in range(0, variant.head_bytes, K_STEP_BYTES))
    tile_wgmma = make_wgmma_ss(variant.dtype, block_m, steps_ab)

    @cuda.jit(device=True, inline=True)
    def prepare_q(q_smem, q_barrier, q_threads):
        fence_proxy_async_shared()
        named_barrier_sync(q_barrier, q_threads)
        return k_major_descriptor(q_smem, row_bytes)

    @cuda.jit(device=True, inline=True)
    def tile_scores(scores, q_desc, k_tile):
        d = tile_wgmma(k_major_descriptor(k_tile, row_bytes), q_desc)
        for i in range(score_regs):
            scores[i] = d[i]

    return types.SimpleNamespace(prepare_q=prepare_q, tile_scores=tile_scores)


def make_tile_pv(variant, steps, exchange):
    """``tile_pv``: the old O^T rescaled, every warp's P^T fragments through pbuf, and once the V
    tile is in O^T += V^T P^T over the warp's dims (mma.sync)."""
    tile_threads = uint32(32 * variant.tile_warps)
    tile_barrier = uint32(CONSUMER_BARRIER)
    kv_tile_bytes = variant.kv_tile_bytes
    q_blocks = variant.group_m // Q_ROWS_PER_BLOCK
    acc_regs = variant.head_dim // 16 // variant.tile_warps * q_blocks * 4
    p_fragments, pv_tile, publish_p = steps.p_fragments, steps.pv_tile, exchange.publish_p

    @cuda.jit(device=True, inline=True)
    def tile_pv(acc, corrections, scores, pf, words, p_lane, v_smem, stage, full_v, phase, first_db, lane, warp):
        for i in range(acc_regs):
            acc[i] *= corrections[2 * ((i >> 2) % q_blocks) + (i & 1)]
        p_fragments(pf, scores)
        publish_p(words, p_lane, pf, warp)
        named_barrier_sync(tile_barrier, tile_threads)
        mbarrier_wait_parity(full_v, phase)
        pv_tile(acc, words, p_lane, v_smem + uint32(stage * kv_tile_bytes), first_db, lane)

    return tile_pv


def make_consumer(variant):
    """``.consume(...)``, with the signature of rung 1's, and its steps (for the CPU test)."""
    warps, block_n, kv_tile_bytes = variant.tile_warps, variant.block_n, variant.kv_tile_bytes
    tile_threads, tile_barrier = uint32(32 * warps), uint32(CONSUMER_BARRIER)
    q_blocks = variant.group_m // Q_ROWS_PER_BLOCK
    columns, dim_blocks = 2 * q_blocks, variant.head_dim // 16 // warps   # a warp's O^T: blocks of 16 dims
    acc_regs = dim_blocks * q_blocks * 4
    load_q, start_columns = make_q_loader(variant), make_start_columns(variant, columns)
    steps = make_kq_tiles(variant, q_blocks, block_n // ROW_BLOCK // warps, dim_blocks, p_stride=LANES)
    score_regs, p_regs_warp, ring_wait = steps.score_regs, steps.p_regs, make_ring_wait(variant.stages)
    exchange, wgmma = make_exchange(variant, p_regs_warp), make_wgmma_scores(variant)
    scratch = variant.stages * kv_tile_bytes                 # from v_smem, past the V ring: red, then pbuf
    red_words = variant.red_bytes // 4
    mask_tile, red_lane = steps.mask_tile, exchange.red_lane
    tile_softmax, finish = make_shared_softmax(columns, steps, exchange, tile_threads)
    prepare_q, tile_scores, tile_pv = wgmma.prepare_q, wgmma.tile_scores, make_tile_pv(variant, steps, exchange)

    @cuda.jit(device=True, inline=True)
    def consume(q_smem, k_smem, v_smem, full_k, full_v, empty, q_address, out, lse, warp, lane,
                m_start, rows_valid, group, batch, kv_head, seqlen_q, q_heads, kv_len, n_begin,
                tiles, scale_log2, out_row_base):
        # red, pbuf: float32 / uint32 views of the dynamic shared memory past the V ring
        red = cuda.shared.array(0, float32)
        words = cuda.shared.array(0, uint32)
        red_base = (v_smem + uint32(scratch) - smem_u32(red)) >> uint32(2)
        lane_red = red_lane(red_base, lane)
        p_lane = red_base + uint32(red_words) + uint32(lane)
        load_q(q_smem, q_address, warp, lane, m_start, rows_valid, group, batch, kv_head, seqlen_q, q_heads)
        q_desc = prepare_q(q_smem, tile_barrier, tile_threads)
        scores = cuda.local.array(score_regs, float32)
        pf = cuda.local.array(p_regs_warp, uint32)
        acc = cuda.local.array(acc_regs, float32)
        for i in range(acc_regs):
            acc[i] = ZERO
        group_lane = lane >> 2
        first_row = m_start + 2 * (lane & 3)
        first_token = warp * ROW_BLOCK                  # the warp's tokens of S^T ..
        first_db = warp * dim_blocks                    # .. and its dims of O^T
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
            if first_key + ROW_BLOCK > smallest_limit:
                mask_tile(scores, first_key, group_lane, limits)
            tile_softmax(scores, maxima, m_run, l_run, corrections, red, lane_red, warp, lane, tile_barrier,
                         scale_log2)                # the warps' maxima meet in red
            tile_pv(acc, corrections, scores, pf, words, p_lane, v_smem, stage, full_v + barrier, phase,
                    first_db, lane, warp)                   # the warps' P^T meet in pbuf
            mbarrier_arrive(empty + barrier)
        finish(out, lse, acc, maxima, m_run, l_run, red, lane_red, warp, lane, tile_barrier, first_row,
               rows_valid, group, out_row_base, q_heads, kv_head, first_db)

    return types.SimpleNamespace(consume=consume, steps=steps, exchange=exchange, load_q=load_q)
