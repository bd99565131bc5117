"""Addresses of numba arrays in the forms PTX operands take.

- :func:`addr_of`: 64-bit generic address (uint64) of any array's data, the
  form of every global-memory operand and of a tensor-map operand;
- :func:`smem_u32`: 32-bit shared-window address (uint32) of a shared array,
  the form of every ``.shared::cta`` / ``.shared::cluster`` operand.
"""

from llvmlite import ir
from numba import types
from numba.cuda.extending import intrinsic

from ._asm import U32, U64, Effect, inline_asm

_GENERIC_TO_SHARED = (
    "{ .reg .u64 shared_window; cvta.to.shared.u64 shared_window, $1;"
    " cvt.u32.u64 $0, shared_window; }"
)


def _data_pointer_u64(context, builder, array_type, array_value):
    array = context.make_array(array_type)(context, builder, value=array_value)
    return builder.ptrtoint(array.data, ir.IntType(U64.bitwidth))


@intrinsic
def addr_of(typingctx, array):
    """Generic address (uint64) of ``array``'s first element; emits no PTX
    instruction (an LLVM ``ptrtoint``)."""
    if not isinstance(array, types.Array):
        return None

    def codegen(context, builder, sig, args):
        return _data_pointer_u64(context, builder, sig.args[0], args[0])

    return U64(array), codegen


@intrinsic
def smem_u32(typingctx, array):
    """Shared-window address (uint32) of a shared ``array``: emits
    ``cvta.to.shared.u64 t, generic; cvt.u32.u64 addr, t;``.

    Only meaningful for arrays from ``cuda.shared.array``; any other array gives
    an address outside the shared window.
    """
    if not isinstance(array, types.Array):
        return None

    def codegen(context, builder, sig, args):
        generic = _data_pointer_u64(context, builder, sig.args[0], args[0])
        return inline_asm(
            builder, ir.IntType(U32.bitwidth), [generic.type], [generic],
            _GENERIC_TO_SHARED, "=r,l", Effect.PURE,
        )

    return U32(array), codegen
