"""Warp-level tensor-core MMA (``mma.sync``): ``D = A * B + C`` over one warp,
fp32 accumulation. SASS on sm_90a: ``HMMA.16816.F32.BF16`` for bf16 and
``QMMA.16832.F32.E4M3.E4M3`` for fp8 e4m3 (ptxas 13.0; checked in
tests/cpu/test_ptx_mma_sass.py).

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
