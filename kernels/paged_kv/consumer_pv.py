"""The P V step of ``score_layout="kq_wgmma_pv"`` and ``"kq_wgmma_rs"`` (consumer_split.py's
kq_wgmma otherwise): O^T += V^T P^T as warpgroup ``wgmma``s, e4m3 operands as they are. P^T is
e4m3 in shared memory (transpose_v.py: the P^T buffer, the token order); V^T is, for
kq_wgmma_pv, the V^T ring the transpose warp fills (transpose_v.py), and for kq_wgmma_rs the
wgmma's A operand in registers, gathered from the V tile as it landed (make_pv_rs).

Per tile, after the softmax has turned S^T's registers into P (fp32):
- ``store_p``: each lane rounds its P to e4m3 (``cvt.rn.satfinite.e4m3x2``, as FA3 rounds
  P for its fp8 P V) and stores, per query column, its two tokens ``16 w + g`` and
  ``16 w + g + 8`` as one 16-bit word at positions ``16 w + 2 g``, ``+ 1`` of that row of P^T;
- the caller fences the stores to the async proxy and syncs the tile's warps;
- ``pv``: once the tile's V^T is in (``vt_full``), a wgmma of M = 64 head dims for each of the
  ``head_dim / 64`` blocks, N = the group_m query rows, K = the 64 positions (two k-steps of
  32 bytes), into fresh registers (at most 32 a call: make_pv); then ``acc = acc * correction
  + D`` (the online softmax's rescale of the old O, folded into the add).

Results: register ``i = 4 q_blocks mb + 4 qb + r`` of warp ``w`` is head dim
``64 mb + 16 w + g (+ 8 for r = 2, 3)`` of query column ``8 qb + 2 (lane & 3) + (r & 1)``
(tma_kernels.ptx.wgmma's result layout): the columns of consumer_split's other layouts, so
their corrections index and their stores by column stand; ``store_acc_column`` writes the dims.
"""
import types

from numba import cuda, uint16, uint32, uint64
from tma_kernels.ptx import smem_u32
from tma_kernels.ptx.convert import cvt_e4m3x2_f32, prmt
from tma_kernels.ptx.ldmatrix import ldmatrix_x4_trans
from tma_kernels.ptx.wgmma import K_STEP_BYTES, k_major_descriptor, make_wgmma_rs, make_wgmma_ss
from tma_kernels.ptx.wgmma import M as WGMMA_M

from .geometry import LAZY_LAYOUTS, RS_LAYOUTS, register_budget, tile_offset
from .transpose_v import ROW_BYTES, kmajor_offset

# kq_wgmma_rs: the A fragment's bytes j = 0..3 from ldmatrix.trans's byte pairs x[2h], x[2h + 1]
# (tokens 16 h + 2 c (+ 1) and 16 h + 8 + 2 c (+ 1), dims 2 g, 2 g + 1): tokens 2 c, 8 + 2 c,
# 2 c + 1, 9 + 2 c (positions 4 c + j of transpose_v's order) of the even dim, then of the odd
EVEN_DIM_TOKENS, ODD_DIM_TOKENS = 0x6240, 0x7351


MAX_RESULTS = 32                    # fp32 results of one P V wgmma call (make_pv)
# make_pv_rs: fewer a call where registers are short, as its A fragments take registers too (8 a
# block): 32 results and 16 A registers spilled 156 bytes at head dim 256, 32 rows, under two
# CTAs' 168 registers. Where a thread may take RS_WIDE_REGISTERS or more (one CTA of 5 warps an
# SM: 255), RS_WIDE_RESULTS a call: half the calls, so half the waits for a wgmma's results.
RS_MAX_RESULTS, RS_MAX_BLOCKS = 16, 2
RS_WIDE_RESULTS, RS_WIDE_REGISTERS = 32, 224
# The rowsplit layouts take the wide calls up to this many rows a group: at their 9 warps a thread
# may take 168 registers, and a group's O^T of 16 rows leaves room (kq_wgmma_rs_lazy_rowsplit at head
# dim 256: 148 registers, no spill; 133 with RS_MAX_BLOCKS a call)
RS_WIDE_GROUP_ROWS = 16


def p_tile_bytes(variant) -> int:
    """Bytes of one tile's P^T (e4m3, one 64-byte row per query row of the CTA)."""
    return variant.group_m * ROW_BYTES


def p_buffer_bytes(variant) -> int:
    """Bytes of a consumer group's P^T buffers: one tile's, or where the softmax speculates
    (``Variant.speculates``) two, tile k using buffer ``k & 1``: it writes a tile's P^T with no
    barrier since the previous tile's P V, whose wgmma may still be reading the other buffer."""
    return p_tile_bytes(variant) * (2 if variant.speculates else 1)


def column_of(register: int, q_blocks: int) -> int:
    """The query column (index into ``corrections``) of O^T's register ``register``."""
    return 2 * ((register >> 2) % q_blocks) + (register & 1)


def accumulate_lines(first: int, count: int, q_blocks: int) -> list[str]:
    """Source lines ``acc[i] = acc[i] * corrections[column of i] + d[i - first]`` for O^T's
    registers ``first .. first + count`` (constant indices; make_pv says why)."""
    return [f"    acc[{i}] = acc[{i}] * corrections[{column_of(i, q_blocks)}] + d[{i - first}]"
            for i in range(first, first + count)]


def make_pv(variant):
    """``pv(acc, vt_desc, p_desc, corrections)``: ``acc[i] = acc[i] * corrections[column of i]
    + (V^T P^T)[i]`` for every register, as straight-line code with constant indices, in
    wgmmas of at most MAX_RESULTS results (a run of M blocks each). Why so:
    - a ``range`` loop over the wgmma's results indexes the returned tuple at run time; ptxas
      then kept all 64 (head dim 256, 32 rows) on the stack: 288 bytes of local memory and ten
      times the kernel's time on the H200;
    - 64 fresh results beside the 64 of O^T spilled at the 168 registers that two CTAs of 5
      or 6 warps a SM allow; two wgmmas of 32 do not."""
    q_blocks = variant.group_m // 8
    per_block = variant.group_m // 2
    m_blocks = variant.head_dim // WGMMA_M
    blocks_per_call = max(1, min(m_blocks, MAX_RESULTS // per_block))
    steps = tuple((k, k) for k in range(0, ROW_BYTES, K_STEP_BYTES))
    wgmma = make_wgmma_ss(variant.dtype, variant.group_m, steps,
                          a_blocks=tuple(mb * WGMMA_M * ROW_BYTES for mb in range(blocks_per_call)))
    lines = []
    for first in range(0, m_blocks, blocks_per_call):
        lines.append(f"    d = wgmma(vt_desc + uint64({first * WGMMA_M * ROW_BYTES >> 4}), p_desc)")
        lines += accumulate_lines(first * per_block, blocks_per_call * per_block, q_blocks)
    namespace = {"wgmma": wgmma, "uint64": uint64}
    exec("def pv(acc, vt_desc, p_desc, corrections):\n" + "\n".join(lines), namespace)   # noqa: S102
    return cuda.jit(device=True, inline=True)(namespace["pv"])


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
    ``if rescale:`` (make_pv_rs's in-place form)."""
    return ["    if rescale:"] + [f"        acc[{i}] *= corrections[{column_of(i, q_blocks)}]" for i in range(count)]


def make_pv_rs(variant):
    """kq_wgmma_rs: ``pv(acc, v_tile, p_desc, corrections, warp, lane)``, make_pv's product
    with A = V^T from registers (make_wgmma_rs) gathered from the V tile as it landed: per M
    block and 32-token k-step one ``ldmatrix.x4.trans`` of 32 tokens x the warp's 16 dims
    (``16 w ..`` of the block) and four ``prmt``, the fp8 bytes kept as they are (no unpack, no
    transpose in shared memory). The warp's A rows are dims ``2 g`` (row g) and ``2 g + 1`` (row
    g + 8), so O^T's rows are too (store_acc_column_rs).

    kq_wgmma_rs_lazy: ``pv(acc, v_tile, p_desc, corrections, warp, lane, rescale)``, O^T rescaled
    only where ``rescale`` (some column's running max moved: the lazy softmax, consumer_kq), then
    the wgmmas accumulate into O^T's registers in place (make_wgmma_rs ``accumulate``): no fresh
    results, no adds, and at a wide register budget every M block in one call, one wait a tile."""
    q_blocks = variant.group_m // 8
    per_block = variant.group_m // 2
    m_blocks = variant.head_dim // WGMMA_M
    k_steps = ROW_BYTES // K_STEP_BYTES
    in_place = variant.score_layout in LAZY_LAYOUTS
    if in_place:     # no fresh results: the A fragments (8 registers a block) bound a call
        wide = rs_max_results(variant) == RS_WIDE_RESULTS
        blocks_per_call = m_blocks if wide else max(1, min(m_blocks, RS_MAX_BLOCKS))
    else:
        blocks_per_call = max(1, min(m_blocks, rs_max_results(variant) // per_block, RS_MAX_BLOCKS))
    wgmma = make_wgmma_rs(variant.group_m, tuple(k * K_STEP_BYTES for k in range(k_steps)), blocks_per_call,
                          accumulate=in_place)
    block_n, row_bytes, mask = variant.block_n, variant.row_bytes, variant.swizzle_mask
    lines = rescale_lines(m_blocks * per_block, q_blocks) if in_place else []
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
        if in_place:
            accumulators = ", ".join(f"acc[{i}]" for i in range(first_acc, first_acc + count))
            lines.append(f"    d = wgmma(p_desc, {', '.join(fragments)}, {accumulators})")
            lines += [f"    acc[{first_acc + k}] = d[{k}]" for k in range(count)]
        else:
            lines.append(f"    d = wgmma(p_desc, {', '.join(fragments)})")
            lines += accumulate_lines(first_acc, count, q_blocks)
    namespace = {"wgmma": wgmma, "uint32": uint32, "ldmatrix_x4_trans": ldmatrix_x4_trans, "prmt": prmt,
                 "rs_v_offset": rs_v_offset, "EVEN": EVEN_DIM_TOKENS, "ODD": ODD_DIM_TOKENS}
    exec("def pv(acc, v_tile, p_desc, corrections, warp, lane, rescale):\n" + "\n".join(lines), namespace)  # noqa: S102
    return cuda.jit(device=True, inline=True)(namespace["pv"])


def make_pv_steps(variant):
    """``store_p``, ``p_descriptor``, ``pv`` and ``store_acc_column`` of ``variant``
    (kq_wgmma_pv: ``pv(acc, vt_tile, ...)`` over the V^T ring; kq_wgmma_rs: ``pv(acc, v_tile,
    ...)`` over the V ring, make_pv_rs)."""
    q_blocks = variant.group_m // 8
    m_blocks = variant.head_dim // WGMMA_M
    acc_regs = m_blocks * variant.group_m // 2
    from_registers = variant.score_layout in RS_LAYOUTS
    pv_tile = make_pv_rs(variant) if from_registers else make_pv(variant)
    second_row = 1 if from_registers else 8          # O^T row g + 8: dim 2 g + 1 (rs) or g + 8
    row_scale = 2 if from_registers else 1

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
                halves[base + uint32(kmajor_offset(row, position) >> 1)] = uint16(pair)

    @cuda.jit(device=True, inline=True)
    def p_descriptor(p_smem):
        return k_major_descriptor(p_smem, ROW_BYTES)

    if from_registers:
        @cuda.jit(device=True, inline=True)
        def pv(acc, v_tile, p_desc, corrections, warp, lane, rescale):
            """acc = acc * (its column's correction) + V^T P^T of the tile (V tile as it landed;
            kq_wgmma_rs_lazy: the rescale only where ``rescale``)."""
            pv_tile(acc, v_tile, p_desc, corrections, warp, lane, rescale)
    else:
        @cuda.jit(device=True, inline=True)
        def pv(acc, vt_tile, p_desc, corrections, warp, lane, rescale):
            """acc = acc * (its column's correction) + V^T P^T of the tile (the V^T ring's)."""
            pv_tile(acc, k_major_descriptor(vt_tile, ROW_BYTES), p_desc, corrections)

    @cuda.jit(device=True, inline=True)
    def store_acc_column(out, out_base, acc, column, inverse, group_lane, warp):
        """out[out_base + dim] = acc * inverse for the lane's dims of one of its columns."""
        qb = column >> 1
        e = column & 1
        for mb in range(m_blocks):
            i = 4 * q_blocks * mb + 4 * qb + e
            dim = WGMMA_M * mb + 16 * warp + row_scale * group_lane
            out[out_base + dim] = acc[i] * inverse
            out[out_base + dim + second_row] = acc[i + 2] * inverse

    return types.SimpleNamespace(store_p=store_p, p_descriptor=p_descriptor, pv=pv,
                                 store_acc_column=store_acc_column, acc_regs=acc_regs)
