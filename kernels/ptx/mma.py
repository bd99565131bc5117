"""Warp-level tensor-core MMA (``mma.sync``): ``D = A * B + C`` over one warp,
fp32 accumulation. SASS on sm_90a (ptxas 13.0; checked in tests/cpu/kernels/test_ptx_mma_sass.py):
``HMMA.16816.F32.BF16`` for bf16. Hopper has no fp8 ``mma.sync`` instruction (its fp8
tensor-core path is ``wgmma``; ``QMMA`` is sm_89 / sm_120): for
``mma.sync...e4m3.e4m3`` ptxas unpacks both operands to fp16 (``F2FP.F16.E4M3.UNPACK_B``),
runs two ``HMMA.16816.F32`` from a zero accumulator and adds their result into C with
four ``FADD`` each time. :func:`mma_e4m3_m16n8k32_via_f16` does the same unpack but chains
the two fp16 mmas through C itself, which drops those FADDs (docs/history.md: what that
saved in the paged attention kernel).

Fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16 / m16n8k32"), with
``group = lane >> 2`` and ``quad = lane & 3``:

- ``a0..a3`` (uint32 each): A is 16 x K, row-major. a0 holds row ``group``,
  a1 row ``group + 8``; a2 / a3 the same rows, the upper half of K. Each register
  packs consecutive K elements, the lowest K index in the lowest bits: bf16
  (K = 16) 2 elements, k = 2*quad, 2*quad+1 (+8 for a2/a3); e4m3 (K = 32)
  4 elements, k = 4*quad .. 4*quad+3 (+16 for a2/a3).
- ``b0, b1`` (uint32): B is K x 8, "col" (stored N-major: column n contiguous
  over K). Column ``n = group``; b0 the K elements of a0 (same k), b1 those of a2.
- ``c0..c3`` / results ``d0..d3`` (float32): C is 16 x 8; d0, d1 row ``group``,
  columns 2*quad, 2*quad+1; d2, d3 row ``group + 8``, same columns.
"""

from numba.cuda.extending import intrinsic

from ._asm import U32
from ._float_asm import F32, float_asm_intrinsic

_OPERANDS = (U32,) * 6 + (F32,) * 4
_RESULTS = (F32,) * 4
_REFS = "{$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13}"

#: Shape of one bf16 mma.sync (M, N, K) and of one e4m3 mma.sync.
BF16_MMA_SHAPE = (16, 8, 16)
E4M3_MMA_SHAPE = (16, 8, 32)


@intrinsic
def mma_bf16_m16n8k16(typingctx, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
    """``mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`` -> (d0, d1, d2, d3)."""
    return float_asm_intrinsic(
        f"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {_REFS};",
        (a0, a1, a2, a3, b0, b1, c0, c1, c2, c3), _OPERANDS, _RESULTS,
    )


@intrinsic
def mma_e4m3_m16n8k32(typingctx, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
    """``mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32`` -> (d0, d1, d2, d3)."""
    return float_asm_intrinsic(
        f"mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {_REFS};",
        (a0, a1, a2, a3, b0, b1, c0, c1, c2, c3), _OPERANDS, _RESULTS,
    )


# One e4m3 m16n8k32 as two f16 m16n8k16 on the unpacked operands. e4m3 register r holds
# k = 4q .. 4q+3 (q = lane & 3); its low half (k = 4q, 4q+1) feeds the fp16 slot k' = 2q, 2q+1
# and its high half (k = 4q+2, 4q+3) the slot k' = 8+2q, 9+2q. A and B use the same map, a
# bijection of k = 0..15 (then 16..31 for a2, a3, b1), so the contraction is unchanged;
# products of fp16-exact values, summed in fp32 (in another order than the fp8 mma's).
_VIA_F16 = """{
.reg .b16 l<6>, h<6>;
.reg .b32 x<6>, y<6>;
.reg .f32 t<4>;
mov.b32 {l0, h0}, $4; mov.b32 {l1, h1}, $5; mov.b32 {l2, h2}, $6;
mov.b32 {l3, h3}, $7; mov.b32 {l4, h4}, $8; mov.b32 {l5, h5}, $9;
cvt.rn.f16x2.e4m3x2 x0, l0; cvt.rn.f16x2.e4m3x2 y0, h0;
cvt.rn.f16x2.e4m3x2 x1, l1; cvt.rn.f16x2.e4m3x2 y1, h1;
cvt.rn.f16x2.e4m3x2 x2, l2; cvt.rn.f16x2.e4m3x2 y2, h2;
cvt.rn.f16x2.e4m3x2 x3, l3; cvt.rn.f16x2.e4m3x2 y3, h3;
cvt.rn.f16x2.e4m3x2 x4, l4; cvt.rn.f16x2.e4m3x2 y4, h4;
cvt.rn.f16x2.e4m3x2 x5, l5; cvt.rn.f16x2.e4m3x2 y5, h5;
mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {t0, t1, t2, t3}, {x0, x1, y0, y1}, {x4, y4}, {$10, $11, $12, $13};
mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {$0, $1, $2, $3}, {x2, x3, y2, y3}, {x5, y5}, {t0, t1, t2, t3};
}"""


@intrinsic
def mma_e4m3_m16n8k32_via_f16(typingctx, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
    """The e4m3 ``mma.m16n8k32`` contract (same fragments as :func:`mma_e4m3_m16n8k32`) as
    ``cvt.rn.f16x2.e4m3x2`` of every operand byte pair and two fp16 ``mma.m16n8k16``
    accumulating into C directly -> (d0, d1, d2, d3). Exact products, fp32 sums."""
    return float_asm_intrinsic(_VIA_F16, (a0, a1, a2, a3, b0, b1, c0, c1, c2, c3), _OPERANDS, _RESULTS)


@intrinsic
def mma_f16_m16n8k16(typingctx, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
    """``mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`` -> (d0, d1, d2, d3); the
    fragments of :func:`mma_bf16_m16n8k16` with fp16 halves (SASS ``HMMA.16816.F32``)."""
    return float_asm_intrinsic(
        f"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {_REFS};",
        (a0, a1, a2, a3, b0, b1, c0, c1, c2, c3), _OPERANDS, _RESULTS,
    )
