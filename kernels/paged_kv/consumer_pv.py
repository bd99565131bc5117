"""The P V step of ``score_layout="kq_wgmma_pv"`` (consumer_split.py's kq_wgmma otherwise):
O^T += V^T P^T as one warpgroup ``wgmma`` a tile, both operands e4m3 from shared memory
(transpose_v.py: the V^T ring the transpose warp fills, the P^T buffer, the token order).

Per tile, after the softmax has turned S^T's registers into P (fp32):
- ``store_p``: each lane rounds its P to e4m3 (``cvt.rn.satfinite.e4m3x2``, as FA3 rounds
  P for its fp8 P V) and stores, per query column, its two tokens ``16 w + g`` and
  ``16 w + g + 8`` as one 16-bit word at positions ``16 w + 2 g``, ``+ 1`` of that row of P^T;
- the caller fences the stores to the async proxy and syncs the tile's warps;
- ``pv``: once the tile's V^T is in (``vt_full``), a wgmma of M = 64 head dims for each of the
  ``head_dim / 64`` blocks, N = the block_m query rows, K = the 64 positions (two k-steps of
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
from tma_kernels.ptx.convert import cvt_e4m3x2_f32
from tma_kernels.ptx.wgmma import K_STEP_BYTES, k_major_descriptor, make_wgmma_ss
from tma_kernels.ptx.wgmma import M as WGMMA_M

from .transpose_v import ROW_BYTES, kmajor_offset


MAX_RESULTS = 32                    # fp32 results of one P V wgmma call (make_pv)


def p_buffer_bytes(variant) -> int:
    """Bytes of P^T (e4m3, one 64-byte row per query row of the CTA)."""
    return variant.block_m * ROW_BYTES


def make_pv(variant):
    """``pv(acc, vt_desc, p_desc, corrections)``: ``acc[i] = acc[i] * corrections[column of i]
    + (V^T P^T)[i]`` for every register, as straight-line code with constant indices, in
    wgmmas of at most MAX_RESULTS results (a run of M blocks each). Why so:
    - a ``range`` loop over the wgmma's results indexes the returned tuple at run time; ptxas
      then kept all 64 (head dim 256, 32 rows) on the stack: 288 bytes of local memory and ten
      times the kernel's time on the H200;
    - 64 fresh results beside the 64 of O^T spilled at the 168 registers that two CTAs of 5
      warps a SM allow; two wgmmas of 32 do not."""
    q_blocks = variant.block_m // 8
    per_block = variant.block_m // 2
    m_blocks = variant.head_dim // WGMMA_M
    blocks_per_call = max(1, min(m_blocks, MAX_RESULTS // per_block))
    steps = tuple((k, k) for k in range(0, ROW_BYTES, K_STEP_BYTES))
    wgmma = make_wgmma_ss(variant.dtype, variant.block_m, steps,
                          a_blocks=tuple(mb * WGMMA_M * ROW_BYTES for mb in range(blocks_per_call)))
    lines = []
    for first in range(0, m_blocks, blocks_per_call):
        lines.append(f"    d = wgmma(vt_desc + uint64({first * WGMMA_M * ROW_BYTES >> 4}), p_desc)")
        base = first * per_block
        for j in range(blocks_per_call * per_block):
            i = base + j
            lines.append(f"    acc[{i}] = acc[{i}] * corrections[{2 * ((i >> 2) % q_blocks) + (i & 1)}] + d[{j}]")
    namespace = {"wgmma": wgmma, "uint64": uint64}
    exec("def pv(acc, vt_desc, p_desc, corrections):\n" + "\n".join(lines), namespace)   # noqa: S102
    return cuda.jit(device=True, inline=True)(namespace["pv"])


def make_pv_steps(variant):
    """``store_p``, ``p_descriptor``, ``pv`` and ``store_acc_column`` of ``variant``."""
    q_blocks = variant.block_m // 8
    m_blocks = variant.head_dim // WGMMA_M
    acc_regs = m_blocks * variant.block_m // 2
    pv_tile = make_pv(variant)

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

    @cuda.jit(device=True, inline=True)
    def pv(acc, vt_tile, p_desc, corrections):
        """acc = acc * (its column's correction) + V^T P^T of the tile."""
        pv_tile(acc, k_major_descriptor(vt_tile, ROW_BYTES), p_desc, corrections)

    @cuda.jit(device=True, inline=True)
    def store_acc_column(out, out_base, acc, column, inverse, group_lane, warp):
        """out[out_base + dim] = acc * inverse for the lane's dims of one of its columns."""
        qb = column >> 1
        e = column & 1
        for mb in range(m_blocks):
            i = 4 * q_blocks * mb + 4 * qb + e
            dim = WGMMA_M * mb + 16 * warp + group_lane
            out[out_base + dim] = acc[i] * inverse
            out[out_base + dim + 8] = acc[i + 2] * inverse

    return types.SimpleNamespace(store_p=store_p, p_descriptor=p_descriptor, pv=pv,
                                 store_acc_column=store_acc_column, acc_regs=acc_regs)
