"""The P V step of rung 4 (consumer_kq_wgmma_rs_lazy.py) and rung 5: O^T += V^T P^T as warpgroup
``wgmma``s with e4m3 operands as they are, accumulating into O^T's registers in place.

    O^T += V^T P^T     O^T: (head_dim, group_m) in registers; P^T: (group_m, 64) e4m3 in shared
                       memory (B); V^T: (head_dim, 64), gathered from the V tile into A registers

Per tile, after the softmax has turned S^T's registers into P (fp32):
- ``store_p``: each lane rounds its P to e4m3 (``cvt.rn.satfinite.e4m3x2``, as FA3 rounds P for
  its fp8 P V) and stores, per query column, its two tokens ``16 w + g`` and ``16 w + g + 8`` as
  one 16-bit word at *positions* ``16 w + 2 g``, ``+ 1`` of that row of P^T (``p_offset``: rows of
  P_ROW_BYTES, the 64-byte swizzle);
- the caller fences the stores to the async proxy and syncs the group's warps;
- ``pv``: per M block of 64 head dims and 32-token k-step, one ``ldmatrix.x4.trans`` of 32
  tokens x the warp's 16 dims (``16 w ..`` of the block) and four ``prmt`` give the wgmma's A
  fragment (make_wgmma_rs): the fp8 bytes as they landed, no unpack and no transpose in shared
  memory (an e4m3 wgmma reads a shared-memory operand only K-major; V lands token-major). The
  A rows are dims ``2 g`` (row g) and ``2 g + 1`` (row g + 8), and the bytes follow P^T's
  positions (EVEN_DIM_TOKENS, ODD_DIM_TOKENS): the sum over K does not depend on the order of
  the tokens in it, only on A and B agreeing on it.

Results: register ``i = 4 q_blocks mb + 4 qb + r`` of warp ``w`` is head dim
``64 mb + 16 w + 2 g (+ 1 for r = 2, 3)`` of query column ``8 qb + 2 (lane & 3) + (r & 1)``
(tma_kernels.ptx.wgmma's result layout): rung 2's columns, so its corrections and column stores
stand; ``store_acc_column`` writes these dims.
"""
import types

from numba import cuda, uint16, uint32
from tma_kernels.ptx import smem_u32
from tma_kernels.ptx.convert import cvt_e4m3x2_f32, prmt
from tma_kernels.ptx.ldmatrix import ldmatrix_x4_trans
from tma_kernels.ptx.wgmma import K_STEP_BYTES, k_major_descriptor, make_wgmma_rs
from tma_kernels.ptx.wgmma import M as WGMMA_M

from .geometry import P_ROW_BYTES, register_budget, swizzle, tile_offset

# the A fragment's bytes j = 0..3 from ldmatrix.trans's byte pairs x[2h], x[2h + 1] (tokens
# 16 h + 2 c (+ 1) and 16 h + 8 + 2 c (+ 1), dims 2 g, 2 g + 1): tokens 2 c, 8 + 2 c, 2 c + 1,
# 9 + 2 c (P^T's positions 4 c + j) of the even dim, then of the odd
EVEN_DIM_TOKENS, ODD_DIM_TOKENS = 0x6240, 0x7351
SWIZZLE_64B_MASK = 3
# results a wgmma call: fewer where registers are short, as the A fragments take registers too
# (8 a block); where a thread may take RS_WIDE_REGISTERS or more (one CTA of 5 warps an SM: 255),
# every M block in one call: one wait for a wgmma's results a tile
RS_MAX_RESULTS, RS_MAX_BLOCKS = 16, 2
RS_WIDE_RESULTS, RS_WIDE_REGISTERS = 32, 224
# the row_split layouts take the wide calls up to this many rows a group: at their 9 warps a
# thread may take 168 registers, and a group's O^T of 16 rows leaves room
RS_WIDE_GROUP_ROWS = 16


@cuda.jit(device=True, inline=True)
def p_offset(row, position):
    """Byte of (row, position) in P^T: rows of P_ROW_BYTES, 64-byte swizzle (K-major for the wgmma)."""
    return swizzle(row * P_ROW_BYTES + position, SWIZZLE_64B_MASK)


def column_of(register: int, q_blocks: int) -> int:
    """The query column (index into ``corrections``) of O^T's register ``register``."""
    return 2 * ((register >> 2) % q_blocks) + (register & 1)


@cuda.jit(device=True, inline=True)
def rs_v_offset(mb, ks, warp, lane, block_n, row_bytes, mask):
    """V tile byte of the row a lane hands ``ldmatrix.x4.trans`` for M block ``mb`` and k-step
    ``ks`` of make_pv_rs: token ``32 ks + lane``, the warp's 16 dims ``64 mb + 16 warp ..``."""
    return tile_offset(K_STEP_BYTES * ks + lane, WGMMA_M * mb + 16 * warp, block_n, row_bytes, mask)


def rs_max_results(variant) -> int:
    """make_pv_rs's results a wgmma call for ``variant``'s register budget (its threads, and the
    CTAs an SM its launch bounds ask for)."""
    wide = (register_budget(variant.threads, variant.min_ctas_per_sm) >= RS_WIDE_REGISTERS
            or (variant.row_groups > 1 and variant.group_m <= RS_WIDE_GROUP_ROWS))
    return RS_WIDE_RESULTS if wide else RS_MAX_RESULTS


def rescale_lines(count: int, q_blocks: int) -> list[str]:
    """Source lines ``acc[i] *= corrections[column of i]`` for O^T's ``count`` registers, under
    ``if rescale:``."""
    return ["    if rescale:"] + [f"        acc[{i}] *= corrections[{column_of(i, q_blocks)}]" for i in range(count)]


def make_pv_rs(variant):
    """``pv(acc, v_tile, p_desc, corrections, warp, lane, rescale)``: O^T rescaled where
    ``rescale`` (some column's running max moved), then ``acc += V^T P^T`` by wgmmas accumulating
    in place (make_wgmma_rs ``accumulate``: no fresh results, no adds), at a wide register budget
    every M block in one call. Straight-line code with constant register indices (a ``range``
    loop over a wgmma's results indexes the returned tuple at run time, and ptxas then keeps
    them all on the stack)."""
    q_blocks = variant.group_m // 8
    per_block = variant.group_m // 2
    m_blocks = variant.head_dim // WGMMA_M
    k_steps = P_ROW_BYTES // K_STEP_BYTES
    wide = rs_max_results(variant) == RS_WIDE_RESULTS
    blocks_per_call = m_blocks if wide else max(1, min(m_blocks, RS_MAX_BLOCKS))
    wgmma = make_wgmma_rs(variant.group_m, tuple(k * K_STEP_BYTES for k in range(k_steps)), blocks_per_call,
                          accumulate=True)
    block_n, row_bytes, mask = variant.block_n, variant.row_bytes, variant.swizzle_mask
    lines = rescale_lines(m_blocks * per_block, q_blocks)
    for first in range(0, m_blocks, blocks_per_call):
        fragments = []
        for mb in range(first, first + blocks_per_call):
            for ks in range(k_steps):
                x = f"x{mb}_{ks}"
                lines.append(f"    {x} = ldmatrix_x4_trans(v_tile + uint32(rs_v_offset({mb}, {ks}, warp, lane, "
                             f"{block_n}, {row_bytes}, {mask})))")
                fragments += [f"prmt({x}[0], {x}[1], EVEN)", f"prmt({x}[0], {x}[1], ODD)",
                              f"prmt({x}[2], {x}[3], EVEN)", f"prmt({x}[2], {x}[3], ODD)"]
        first_acc, count = first * per_block, blocks_per_call * per_block
        accumulators = ", ".join(f"acc[{i}]" for i in range(first_acc, first_acc + count))
        lines.append(f"    d = wgmma(p_desc, {', '.join(fragments)}, {accumulators})")
        lines += [f"    acc[{first_acc + k}] = d[{k}]" for k in range(count)]
    namespace = {"wgmma": wgmma, "uint32": uint32, "ldmatrix_x4_trans": ldmatrix_x4_trans, "prmt": prmt,
                 "rs_v_offset": rs_v_offset, "EVEN": EVEN_DIM_TOKENS, "ODD": ODD_DIM_TOKENS}
    exec("def pv(acc, v_tile, p_desc, corrections, warp, lane, rescale):\n" + "\n".join(lines), namespace)  # noqa: S102
    return cuda.jit(device=True, inline=True)(namespace["pv"])


def make_pv_steps(variant):
    """``store_p``, ``p_descriptor``, ``pv`` (make_pv_rs) and ``store_acc_column`` of ``variant``."""
    q_blocks = variant.group_m // 8
    m_blocks = variant.head_dim // WGMMA_M
    acc_regs = m_blocks * variant.group_m // 2
    pv_tile = make_pv_rs(variant)

    @cuda.jit(device=True, inline=True)
    def store_p(p_smem, scores, warp, lane):
        """The lane's P (fp32 S^T registers, after the softmax) into P^T as e4m3."""
        halves = cuda.shared.array(0, uint16)
        base = (p_smem - smem_u32(halves)) >> uint32(1)
        position = 16 * warp + 2 * (lane >> 2)
        for qb in range(q_blocks):
            for e in range(2):
                row = 8 * qb + 2 * (lane & 3) + e
                pair = cvt_e4m3x2_f32(scores[4 * qb + 2 + e], scores[4 * qb + e])
                halves[base + uint32(p_offset(row, position) >> 1)] = uint16(pair)

    @cuda.jit(device=True, inline=True)
    def p_descriptor(p_smem):
        return k_major_descriptor(p_smem, P_ROW_BYTES)

    @cuda.jit(device=True, inline=True)
    def pv(acc, v_tile, p_desc, corrections, warp, lane, rescale):
        """acc = acc * (its column's correction, where ``rescale``) + V^T P^T of the tile."""
        pv_tile(acc, v_tile, p_desc, corrections, warp, lane, rescale)

    @cuda.jit(device=True, inline=True)
    def store_acc_column(out, out_base, acc, column, inverse, group_lane, warp):
        """out[out_base + dim] = acc * inverse for the lane's dims of one of its columns."""
        qb = column >> 1
        e = column & 1
        for mb in range(m_blocks):
            i = 4 * q_blocks * mb + 4 * qb + e
            dim = WGMMA_M * mb + 16 * warp + 2 * group_lane
            out[out_base + dim] = acc[i] * inverse
            out[out_base + dim + 1] = acc[i + 2] * inverse

    return types.SimpleNamespace(store_p=store_p, p_descriptor=p_descriptor, pv=pv,
                                 store_acc_column=store_acc_column, acc_regs=acc_regs)
