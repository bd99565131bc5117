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

Why a warp of its own. First built into the producer's loop (transpose tile k - 1 after
issuing tile k's loads), the producer waited on every V tile's arrival before it could issue
the next tile: a tile of loads in flight, whatever the ring's depth. On the H200 (a probe
outside results/, config/probes/paged_kv_pv_consumer.yaml, e4m3 decode at batch 32 and 8K
tokens) that took 1.1 to 2.5 times kq_wgmma's time, 4 stages slower than 2. The transpose
warp waits on ``full_v`` of tile k, transposes it and arrives on the V^T ring's barrier; it
never waits on ``empty``: tile k's V landed after the producer waited on ``empty`` of tile
k - stages, which the consumers arrive on once done with that tile's V^T stage.

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
are 2-way conflicted. tests/cpu/test_paged_kv_transpose_v.py runs the index functions
(``py_func``) over a warp and checks the transpose, the positions and the banks.
"""
import types

from numba import cuda, uint32
from tma_kernels.ptx import fence_proxy_async_shared, mbarrier_arrive, mbarrier_wait_parity, smem_u32
from tma_kernels.ptx.convert import prmt

from .geometry import swizzle, tile_offset

ROW_BYTES = 64                      # a V^T or P^T row: block_n e4m3 positions
TRANSPOSE_WARPS = 1                 # warps of a CTA that transpose V (after the producer warps)
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
def unit_of(step, lane):
    """(position group q, dim group dg, byte rotation) of a lane's unit in warp step ``step``."""
    return ((step & 3) << 2) | (lane & 3), ((step >> 2) << 3) | (lane >> 2), (lane >> 3) & 3


@cuda.jit(device=True, inline=True)
def rotation_selector(rot):
    """``prmt`` selector of the byte rotation: result byte j = byte (j + rot) & 3."""
    return (uint32(0x32103210) >> uint32(4 * rot)) & uint32(0xFFFF)


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


def transpose_error(variant) -> str | None:
    """Why this transpose cannot serve ``variant`` (geometry.Variant raises it), or None."""
    if variant.dtype != "e4m3":
        return f"dtype={variant.dtype!r}: score_layout 'kq_wgmma_pv' is e4m3 only (bf16 V^T needs no transpose)"
    if variant.block_n != TOKENS:
        return f"block_n={variant.block_n}: score_layout 'kq_wgmma_pv' transposes tiles of {TOKENS} tokens"
    return None


def vt_bytes(variant) -> int:
    """Bytes of the V^T ring (one transposed tile per stage)."""
    return variant.stages * variant.kv_tile_bytes


@cuda.jit(device=True, inline=True)
def smem_word(address, words):
    """Index in the dynamic-shared uint32 view ``words`` of shared-window ``address``."""
    return (address - smem_u32(words)) >> uint32(2)


@cuda.jit(device=True, inline=True)
def source_offset(position, dg, block_n, row_bytes, mask):
    """V tile byte of dims 4 dg .. of the token at ``position`` (the V tile layout of geometry)."""
    return tile_offset(position_token(position), UNIT * dg, block_n, row_bytes, mask)


@cuda.jit(device=True, inline=True)
def transpose_unit(words, v_word, vt_word, q, dg, rot, block_n, row_bytes, mask):
    """One lane's unit: dims 4 dg .. of the tokens at positions 4 q .. of the V tile at word
    ``v_word`` of ``words`` into rows 4 dg .. of the V^T tile at word ``vt_word``."""
    selector = rotation_selector(rot)
    a0 = prmt(words[v_word + uint32(source_offset(UNIT * q, dg, block_n, row_bytes, mask) >> 2)],
              uint32(0), selector)
    a1 = prmt(words[v_word + uint32(source_offset(UNIT * q + 1, dg, block_n, row_bytes, mask) >> 2)],
              uint32(0), selector)
    a2 = prmt(words[v_word + uint32(source_offset(UNIT * q + 2, dg, block_n, row_bytes, mask) >> 2)],
              uint32(0), selector)
    a3 = prmt(words[v_word + uint32(source_offset(UNIT * q + 3, dg, block_n, row_bytes, mask) >> 2)],
              uint32(0), selector)
    b0, b1, b2, b3 = transpose_4x4(a0, a1, a2, a3)      # b_j: dim 4 dg + (j + rot) & 3
    words[vt_word + uint32(kmajor_offset(UNIT * dg + (rot & 3), UNIT * q) >> 2)] = b0
    words[vt_word + uint32(kmajor_offset(UNIT * dg + ((rot + 1) & 3), UNIT * q) >> 2)] = b1
    words[vt_word + uint32(kmajor_offset(UNIT * dg + ((rot + 2) & 3), UNIT * q) >> 2)] = b2
    words[vt_word + uint32(kmajor_offset(UNIT * dg + ((rot + 3) & 3), UNIT * q) >> 2)] = b3


def transpose_steps(variant) -> int:
    """Warp steps of one V tile's transpose (32 units each)."""
    return variant.head_dim // DIMS_PER_STEP * (POSITION_GROUPS // UNIT)


def make_transposer(variant):
    """``transpose(vt_tile, v_tile, full_v, phase, vt_full, rank)``: wait for the V tile's
    ``full_v`` barrier, write its transpose into ``vt_tile``, fence it to the async proxy
    and arrive on ``vt_full`` (which expects every transpose thread; ``rank`` is the thread's
    among them). Two steps an iteration, a tile's first and second half, so each lane has
    eight independent loads in flight."""
    block_n = variant.block_n
    row_bytes = variant.row_bytes
    mask = variant.swizzle_mask
    warps = TRANSPOSE_WARPS
    warp_steps = transpose_steps(variant) // warps
    half = warp_steps // 2

    @cuda.jit(device=True, inline=True)
    def transpose(vt_tile, v_tile, full_v, phase, vt_full, rank):
        words = cuda.shared.array(0, uint32)
        v_word = smem_word(v_tile, words)
        vt_word = smem_word(vt_tile, words)
        mbarrier_wait_parity(full_v, phase)
        for s in range(half):
            q, dg, rot = unit_of(s * warps + (rank >> 5), rank & 31)
            q2, dg2, rot2 = unit_of((s + half) * warps + (rank >> 5), rank & 31)
            transpose_unit(words, v_word, vt_word, q, dg, rot, block_n, row_bytes, mask)
            transpose_unit(words, v_word, vt_word, q2, dg2, rot2, block_n, row_bytes, mask)
        fence_proxy_async_shared()
        mbarrier_arrive(vt_full)

    return types.SimpleNamespace(transpose=transpose, warp_steps=warp_steps)
