"""``ldmatrix``: a warp loads four 8 x 8 matrices of 16-bit elements from shared
memory straight into mma fragments (SASS ``LDSM.16.M88.4`` / ``LDSM.16.MT88.4``).

Operand: ``addr``, the uint32 shared-window address this lane supplies: lanes
8i .. 8i+7 give the 8 row addresses (16 bytes each, 16-byte aligned) of matrix
i. Result: ``UniTuple(uint32, 4)``, register i from matrix i. Without ``.trans``
lane l receives row ``l >> 2``, elements ``2*(l & 3)`` and ``+1`` (low half:
the lower column); with ``.trans`` the matrix is transposed first, so lane l
receives column ``l >> 2``, rows ``2*(l & 3)`` and ``+1`` (low half: the lower
row). Used on 8-bit data the "elements" are byte pairs.

``movmatrix_trans(x)`` is the register-to-register counterpart: the warp's 8 x 8 matrix
of 16-bit elements held as lane l's row ``l >> 2``, elements ``2*(l & 3)``, +1 (an mma
C fragment packed to 16 bits) is transposed, so lane l then holds column ``l >> 2``,
rows ``2*(l & 3)`` and +1 (a B fragment). SASS ``MOVM.16.MT88``.
"""

from numba.cuda.extending import intrinsic

from ._asm import U32, V4_U32, asm_intrinsic
from ._float_asm import float_asm_intrinsic


@intrinsic
def ldmatrix_x4(typingctx, addr):
    """``ldmatrix.sync.aligned.m8n8.x4.shared.b16 {r0, r1, r2, r3}, [addr];``"""
    return asm_intrinsic(
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {$0, $1, $2, $3}, [$4];",
        (addr,), (U32,), result=V4_U32,
    )


@intrinsic
def ldmatrix_x4_trans(typingctx, addr):
    """``ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {r0, r1, r2, r3}, [addr];``"""
    return asm_intrinsic(
        "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {$0, $1, $2, $3}, [$4];",
        (addr,), (U32,), result=V4_U32,
    )


@intrinsic
def movmatrix_trans(typingctx, x):
    """``movmatrix.sync.aligned.m8n8.trans.b16 d, x;`` (one 8 x 8 b16 matrix over the warp)."""
    return float_asm_intrinsic("movmatrix.sync.aligned.m8n8.trans.b16 $0, $1;", (x,), (U32,), (U32,))
