"""V^T and P^T in shared memory for ``score_layout="kq_wgmma_pv"``: O^T += V^T P^T as one
warpgroup ``wgmma`` a tile, e4m3 operands as they are (no unpack to fp16).

Why a transpose. A ``wgmma`` with e4m3 operands takes both from shared memory *K-major*
(tma_kernels.ptx.wgmma): for O^T = V^T P^T, K is the tile's tokens, so A = V^T needs each
head dim's tokens contiguous and B = P^T each query row's tokens contiguous. A V tile lands
(TMA or cp.async) token-major, as the pool holds it; only 16-bit types may be transposed by
the instruction. So a *transpose warp* (the CTA's last warp, after the producers) copies each V
tile, once it has landed, into a transposed tile of the *V^T ring* (FlashAttention-3 does the
same for fp8: hopper/mainloop_fwd_sm90_tma_gmma_ws.hpp, ``transpose_V``, run by its producer
warpgroup), and the consumers write P^T, rounded to e4m3 as FA3 and the other consumers do,
into a K-major buffer of their own.

Why a warp of its own. Built into the producer's loop instead (transpose tile k - 1 after
issuing tile k's loads), the producer waits on every V tile's arrival before it can issue the
next tile: about one tile of loads in flight whatever the ring's depth (in the first H200
probe, config/probes/paged_kv_pv_consumer.yaml, 4 stages ran slower than 2). The transpose
warp waits on ``full_v`` of tile k, transposes it and arrives on the V^T ring's barrier; it
never waits on ``empty``: tile k's V landed after the producer waited on ``empty`` of tile
k - stages, which the consumers arrive on once done with that tile's V^T stage.

What it gained: nothing at the decode bar. In that probe (e4m3 decode, batch 32, 8K tokens,
128-token pages, two transpose steps an iteration) kq_wgmma_pv was slower than kq_wgmma at every
point but those of head dim 64: level there on cp.async, faster on TMA; so the sweep does not
run it (config.yaml's
``decode_consumers``). Not profiled; the transpose sits between a V tile's arrival and its
P V, in a ring of two stages, and a deeper ring (V and V^T both in shared memory) fits fewer
CTAs.

Token order. The sum over K does not depend on the order of the tokens in it, only on A and
B agreeing on it. Both use *position* ``pos(t) = 16 w + 2 g + h`` for token ``t = 16 w + 8 h + g``
(``w`` 0..3, ``g`` 0..7, ``h`` 0..1): in S^T's wgmma results warp ``w``'s lane with ``g =
lane >> 2`` holds tokens ``16 w + g`` and ``16 w + g + 8`` of each of its query columns,
which land side by side, one 16-bit store per column.

Layouts (both K-major with rows of 64 bytes, the wgmma's 64-byte swizzle, byte ``o`` of the
dense block at ``geometry.swizzle(o, 3)``):
- a V^T tile: row ``d`` (head dim, 0 .. head_dim - 1) of ``block_n = 64`` positions; the
  M block of head dims ``64 m ..`` is the 4096 bytes from ``64 m * 64``;
- P^T: row ``r`` (query row of the CTA, 0 .. block_m - 1) of 64 positions.

The transpose: a *unit* is 4 head dims x 4 positions. For step ``s`` of a tile a
warp's lane ``(ql = lane & 3, dgl = lane >> 2)`` takes position group ``q = 4 (s & 3) + ql``
and dim group ``dg = 8 (s >> 2) + dgl``: four 32-bit loads (dims ``4 dg ..`` of the 4 tokens
at positions ``4 q ..``), a byte rotation by ``rot = dgl >> 1`` (``prmt``), a 4 x 4 byte
transpose (8 ``prmt``) and four 32-bit stores, the store of dim ``4 dg + (j + rot) & 3``
as the j-th. With 128-byte V rows the loads of a warp hit 32 distinct banks (the tokens'
``t & 7`` spread the 16-byte pieces over the swizzle), and the rotation spreads the stores
over the 32 banks of the 64-byte-swizzled V^T; at head dim 64 (64-byte V rows) the loads
are 2-way conflicted. Every address is a per-lane constant plus a per-step one, in 32-bit
arithmetic (first written as array indices in numba's 64-bit integers, the transpose took
well over a hundred instructions a step, mostly address arithmetic and negative-index checks).
tests/cpu/test_paged_kv_transpose_v.py runs the transpose (``py_func``) over the warp,
recording every load's and store's 32 addresses, and checks the transposed tile, the
positions and the banks.
"""
import types

from numba import cuda, uint32
from tma_kernels.ptx import (
    fence_proxy_async_shared,
    ld_shared_u32,
    mbarrier_arrive,
    mbarrier_wait_parity,
    st_shared_u32,
)
from tma_kernels.ptx.convert import prmt

from .geometry import swizzle

ROW_BYTES = 64                      # a V^T or P^T row: block_n e4m3 positions
TRANSPOSE_WARPS = 1                 # warps of a CTA that transpose V (after the producer warps)
STEPS_PER_ITERATION = 4             # transpose steps unrolled in one loop iteration (make_transposer)
SWIZZLE_64B_MASK = 3
TOKENS = 64                         # the tile (kq_wgmma's block_n, S^T's wgmma M)
UNIT = 4                            # a unit: 4 dims x 4 positions
DIMS_PER_STEP = 8 * UNIT            # a warp step: 8 dim groups ..
POSITION_GROUPS = TOKENS // UNIT    # .. of the 16 position groups, 4 at a time
# the 4 x 4 byte transpose: (a0, a1) -> bytes 0 and 1 of each, interleaved (low half) / 2, 3
LOW_PAIRS, HIGH_PAIRS = 0x5140, 0x7362
LOW_HALVES, HIGH_HALVES = 0x5410, 0x7632


@cuda.jit(device=True, inline=True)
def token_position(token):
    """The position of ``token`` (0..63) in a V^T row and a P^T row."""
    return (token & 48) | ((token & 7) << 1) | ((token >> 3) & 1)


@cuda.jit(device=True, inline=True)
def position_token(position):
    """The token at ``position`` (token_position's inverse)."""
    return (position & 48) | ((position & 1) << 3) | ((position >> 1) & 7)


@cuda.jit(device=True, inline=True)
def kmajor_offset(row, position):
    """Byte of (row, position) in a V^T tile or in P^T: 64-byte rows, 64-byte swizzle."""
    return swizzle(row * ROW_BYTES + position, SWIZZLE_64B_MASK)


@cuda.jit(device=True, inline=True)
def rotation_selector(rot):
    """``prmt`` selector of the byte rotation: result byte j = byte (j + rot) & 3."""
    return (uint32(0x32103210) >> (uint32(4) * rot)) & uint32(0xFFFF)


@cuda.jit(device=True, inline=True)
def transpose_4x4(a0, a1, a2, a3):
    """Four words of 4 bytes (rows) -> four words of their columns: result j holds byte j of
    a0, a1, a2, a3 in bytes 0..3."""
    t0 = prmt(a0, a1, LOW_PAIRS)
    t1 = prmt(a0, a1, HIGH_PAIRS)
    t2 = prmt(a2, a3, LOW_PAIRS)
    t3 = prmt(a2, a3, HIGH_PAIRS)
    return (prmt(t0, t2, LOW_HALVES), prmt(t0, t2, HIGH_HALVES),
            prmt(t1, t3, LOW_HALVES), prmt(t1, t3, HIGH_HALVES))


@cuda.jit(device=True, inline=True)
def load_row(v_tile, ql, i, row_bytes):
    """Shared address of the row (in chunk 0, warp step w = 0) of the token a lane's i-th load
    reads: position 4 ql + i of position group ql, token 8 (i & 1) + 2 ql + (i >> 1)."""
    return v_tile + (uint32(8 * (i & 1) + (i >> 1)) + uint32(2) * ql) * uint32(row_bytes)


@cuda.jit(device=True, inline=True)
def load_column(ql, dgl, i, row_bytes, mask):
    """The byte column of a lane's i-th load in its row, swizzled (dims 4 dgl ..; XOR it with
    the step's column, a multiple of 32 below row_bytes, as the swizzle XORs bits 4..6)."""
    token = uint32(8 * (i & 1) + (i >> 1)) + uint32(2) * ql
    return (uint32(4) * dgl) ^ ((((token * uint32(row_bytes)) >> uint32(7)) & uint32(mask)) << uint32(4))


@cuda.jit(device=True, inline=True)
def store_row(vt_tile, ql, dgl, rot, j):
    """Shared address of a lane's j-th store (warp step 0, unswizzled): V^T row 4 dgl +
    (j + rot) & 3, positions 4 ql .."""
    return vt_tile + (uint32(4) * dgl + ((uint32(j) + rot) & uint32(3))) * uint32(ROW_BYTES) + uint32(4) * ql


@cuda.jit(device=True, inline=True)
def store_swizzle(dgl, rot, j):
    """The 64-byte swizzle of a lane's j-th store row, as a byte XOR of its position piece."""
    return (((uint32(4) * dgl + ((uint32(j) + rot) & uint32(3))) >> uint32(1)) & uint32(3)) << uint32(4)


def vt_bytes(variant) -> int:
    """Bytes of the V^T ring (one transposed tile per stage)."""
    return variant.stages * variant.kv_tile_bytes


@cuda.jit(device=True, inline=True)
def transpose_step(s, rows, columns, stores, swizzles, selector, row_bytes, chunk_bytes):
    """Warp step ``s`` of a tile (position groups 4 (s & 3) .., dim groups 8 (s >> 2) ..) from a
    lane's constants (load_row, load_column, store_row, store_swizzle, rotation_selector)."""
    w = uint32(s) & uint32(3)
    first_dim = uint32(32) * (uint32(s) >> uint32(2))          # 4 x the step's first dim group
    load_step = (first_dim // uint32(row_bytes)) * uint32(chunk_bytes) + uint32(16) * w * uint32(row_bytes)
    column = first_dim % uint32(row_bytes)
    a0 = prmt(ld_shared_u32(rows[0] + load_step + (column ^ columns[0])), uint32(0), selector)
    a1 = prmt(ld_shared_u32(rows[1] + load_step + (column ^ columns[1])), uint32(0), selector)
    a2 = prmt(ld_shared_u32(rows[2] + load_step + (column ^ columns[2])), uint32(0), selector)
    a3 = prmt(ld_shared_u32(rows[3] + load_step + (column ^ columns[3])), uint32(0), selector)
    b0, b1, b2, b3 = transpose_4x4(a0, a1, a2, a3)           # b_j: dim 4 dg + (j + rot) & 3
    store_step = first_dim * uint32(ROW_BYTES)                # the step's first V^T row
    piece = uint32(16) * w
    st_shared_u32(stores[0] + store_step + (swizzles[0] ^ piece), b0)
    st_shared_u32(stores[1] + store_step + (swizzles[1] ^ piece), b1)
    st_shared_u32(stores[2] + store_step + (swizzles[2] ^ piece), b2)
    st_shared_u32(stores[3] + store_step + (swizzles[3] ^ piece), b3)


def transpose_steps(variant) -> int:
    """Warp steps of one V tile's transpose (32 units each)."""
    return variant.head_dim // DIMS_PER_STEP * (POSITION_GROUPS // UNIT)


def make_transposer(variant):
    """``transpose(vt_tile, v_tile, full_v, phase, vt_full, rank)``: wait for the V tile's
    ``full_v`` barrier, write its transpose into ``vt_tile``, fence it to the async proxy
    and arrive on ``vt_full`` (which expects every transpose thread; ``rank`` is the thread's
    among them). Every address is a per-lane constant (load_row .. store_swizzle) plus a
    per-step one, in 32-bit arithmetic. STEPS_PER_ITERATION steps an iteration, one from each
    quarter of the tile, so each lane has 16 independent loads in flight."""
    row_bytes = variant.row_bytes
    mask = variant.swizzle_mask
    chunk_bytes = variant.block_n * row_bytes
    steps = transpose_steps(variant)
    quarter = steps // STEPS_PER_ITERATION

    @cuda.jit(device=True, inline=True)
    def transpose(vt_tile, v_tile, full_v, phase, vt_full, rank):
        lane = uint32(rank) & uint32(31)
        ql = lane & uint32(3)
        dgl = lane >> uint32(2)
        rot = dgl >> uint32(1)
        selector = rotation_selector(rot)
        rows = (load_row(v_tile, ql, 0, row_bytes), load_row(v_tile, ql, 1, row_bytes),
                load_row(v_tile, ql, 2, row_bytes), load_row(v_tile, ql, 3, row_bytes))
        columns = (load_column(ql, dgl, 0, row_bytes, mask), load_column(ql, dgl, 1, row_bytes, mask),
                   load_column(ql, dgl, 2, row_bytes, mask), load_column(ql, dgl, 3, row_bytes, mask))
        stores = (store_row(vt_tile, ql, dgl, rot, 0), store_row(vt_tile, ql, dgl, rot, 1),
                  store_row(vt_tile, ql, dgl, rot, 2), store_row(vt_tile, ql, dgl, rot, 3))
        swizzles = (store_swizzle(dgl, rot, 0), store_swizzle(dgl, rot, 1),
                    store_swizzle(dgl, rot, 2), store_swizzle(dgl, rot, 3))
        mbarrier_wait_parity(full_v, phase)
        for s in range(quarter):
            transpose_step(s, rows, columns, stores, swizzles, selector, row_bytes, chunk_bytes)
            transpose_step(s + quarter, rows, columns, stores, swizzles, selector, row_bytes, chunk_bytes)
            transpose_step(s + 2 * quarter, rows, columns, stores, swizzles, selector, row_bytes, chunk_bytes)
            transpose_step(s + 3 * quarter, rows, columns, stores, swizzles, selector, row_bytes, chunk_bytes)
        fence_proxy_async_shared()
        mbarrier_arrive(vt_full)

    return types.SimpleNamespace(transpose=transpose, steps=steps)
