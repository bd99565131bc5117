"""Conversions and bit shuffles the attention kernels need between the fp32
accumulator and the 16- / 8-bit mma operands, plus the fast exp2.

- ``cvt_bf16x2_f32(hi, lo)``: two float32 -> one uint32 of two bf16 (round to
  nearest even), ``lo`` in bits 0..15 (SASS ``F2FP.BF16.F32.PACK_AB``);
- ``cvt_e4m3x2_f32(hi, lo)``: two float32 -> uint32 whose bits 0..15 hold two
  fp8 e4m3 (round to nearest even, saturating to +-448), ``lo`` in bits 0..7
  (SASS ``F2FP.SATFINITE.E4M3.F32.PACK_AB_MERGE_C``);
- ``cvt_f16x2_e4m3x2_low(x)`` / ``cvt_f16x2_e4m3x2_high(x)``: the two e4m3 bytes of
  bits 0..15 (bits 16..31) of ``x`` -> one uint32 of two fp16, the lower byte in bits
  0..15 (exact; SASS ``F2FP.F16.E4M3.UNPACK_B``);
- ``prmt(a, b, selector)``: byte permute of the 8 bytes ``b:a`` (``a`` bytes
  0..3, ``b`` bytes 4..7); nibble i of ``selector`` picks result byte i (SASS
  ``PRMT``). The selector must be an immediate: use a module-level constant.
- ``ex2_approx(x)``: ``ex2.approx.ftz.f32``, 2**x (SASS ``MUFU.EX2``); 2**-inf = 0.
"""

from numba.cuda.extending import intrinsic

from ._asm import U32
from ._float_asm import F32, float_asm_intrinsic

_E4M3X2 = (
    "{ .reg .b16 pair; cvt.rn.satfinite.e4m3x2.f32 pair, $1, $2; cvt.u32.u16 $0, pair; }"
)


@intrinsic
def cvt_bf16x2_f32(typingctx, hi, lo):
    """``cvt.rn.bf16x2.f32 d, hi, lo;``: uint32 with bf16(lo) in bits 0..15."""
    return float_asm_intrinsic("cvt.rn.bf16x2.f32 $0, $1, $2;", (hi, lo), (F32, F32), (U32,))


@intrinsic
def cvt_e4m3x2_f32(typingctx, hi, lo):
    """``cvt.rn.satfinite.e4m3x2.f32 d, hi, lo;`` widened to uint32: e4m3(lo)
    in bits 0..7, e4m3(hi) in bits 8..15, zeros above."""
    return float_asm_intrinsic(_E4M3X2, (hi, lo), (F32, F32), (U32,))


_F16X2_OF_E4M3X2 = "{{ .reg .b16 lo, hi; mov.b32 {{lo, hi}}, $1; cvt.rn.f16x2.e4m3x2 $0, {half}; }}"


@intrinsic
def cvt_f16x2_e4m3x2_low(typingctx, x):
    """``cvt.rn.f16x2.e4m3x2`` of bits 0..15 of ``x``: uint32 of fp16(byte 0) in bits 0..15,
    fp16(byte 1) in bits 16..31."""
    return float_asm_intrinsic(_F16X2_OF_E4M3X2.format(half="lo"), (x,), (U32,), (U32,))


@intrinsic
def cvt_f16x2_e4m3x2_high(typingctx, x):
    """``cvt.rn.f16x2.e4m3x2`` of bits 16..31 of ``x`` (bytes 2 and 3)."""
    return float_asm_intrinsic(_F16X2_OF_E4M3X2.format(half="hi"), (x,), (U32,), (U32,))


@intrinsic
def prmt(typingctx, a, b, selector):
    """``prmt.b32 d, a, b, selector;`` (byte permute; ``selector`` an integer
    literal or constant)."""
    from numba import types

    if not isinstance(selector, (types.IntegerLiteral, types.Integer)):
        return None
    return float_asm_intrinsic("prmt.b32 $0, $1, $2, $3;", (a, b, selector), (U32, U32, U32), (U32,))


@intrinsic
def ex2_approx(typingctx, x):
    """``ex2.approx.ftz.f32 y, x;``: 2**x (about 2 ulp; subnormals flushed)."""
    return float_asm_intrinsic("ex2.approx.ftz.f32 $0, $1;", (x,), (F32,), (F32,))
