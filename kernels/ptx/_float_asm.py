"""Inline-PTX intrinsics with float32 operands or results (the tensor-core and
conversion intrinsics), beside :mod:`._asm`, which handles integer ones only.

``float_asm_intrinsic(ptx, args, operand_types, result_types, effect)`` is the
typing result of an intrinsic whose operands are numba ``float32`` / ``uint32``
(or narrower unsigned) values and whose results are one value or a tuple of
values of those types. Constraint letters: ``"f"`` for float32, ``"r"`` for 32-bit
integers, ``"h"`` for 16-bit ones. Pure arithmetic (mma, cvt, ex2, prmt) is
emitted as :attr:`Effect.PURE`; loads from shared memory (ldmatrix) as
:attr:`Effect.MEMORY` so they are not moved across barrier waits.
"""

from llvmlite import ir
from numba import types

from ._asm import Effect, inline_asm

F32 = types.float32


def _llvm_type(numba_type):
    if numba_type == F32:
        return ir.FloatType()
    return ir.IntType(numba_type.bitwidth)


def _constraint(numba_type):
    if numba_type == F32:
        return "f"
    return {16: "h", 32: "r", 64: "l"}[numba_type.bitwidth]


def float_asm_intrinsic(ptx, args, operand_types, result_types, effect=Effect.PURE, tied=0):
    """Typing result ``(signature, codegen)``: ``ptx`` with ``operand_types`` in,
    ``result_types`` (a tuple; one entry gives a scalar result) out. ``tied``: the last
    ``tied`` operands are the results' initial values (LLVM matching constraints: operand
    ``len(operand_types) - tied + i`` lives in result ``i``'s register), so the PTX reads and
    writes them as ``$i``, as an accumulating ``wgmma`` does.

    Returns None (a numba typing error) when the argument count differs or an
    argument is neither an integer nor a float.
    """
    if len(args) != len(operand_types):
        return None
    if not all(isinstance(arg, (types.Integer, types.Float)) for arg in args):
        return None
    result_types = tuple(result_types)
    if len(result_types) == 1:
        result = result_types[0]
        llvm_result = _llvm_type(result)
    else:
        result = types.Tuple(result_types)
        llvm_result = ir.LiteralStructType([_llvm_type(t) for t in result_types])
    if not 0 <= tied <= min(len(result_types), len(operand_types)):
        raise ValueError(f"tied={tied}: at most one tied operand per result")
    free = len(operand_types) - tied
    constraints = ",".join(
        ["=" + _constraint(t) for t in result_types] + [_constraint(t) for t in operand_types[:free]]
        + [str(i) for i in range(tied)]
    )

    def codegen(context, builder, sig, llvm_args):
        values = [
            context.cast(builder, value, from_type, to_type)
            for value, from_type, to_type in zip(llvm_args, sig.args, operand_types)
        ]
        out = inline_asm(
            builder, llvm_result, [_llvm_type(t) for t in operand_types],
            values, ptx, constraints, effect,
        )
        if len(result_types) == 1:
            return out
        parts = [builder.extract_value(out, i) for i in range(len(result_types))]
        return context.make_tuple(builder, result, parts)

    return result(*args), codegen
