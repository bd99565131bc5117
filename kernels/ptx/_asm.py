"""Shared helpers behind every inline-PTX intrinsic of ``tma_kernels.ptx``.

An intrinsic of this package is a numba ``@intrinsic`` whose typing function
returns ``asm_intrinsic(ptx, args, operand_types, result, effect)``: the call's
integer arguments are cast explicitly to ``operand_types`` and passed to one
llvmlite ``ir.InlineAsm`` holding ``ptx``. Families made by a factory (tensor
ranks, special registers, wait counts) use :func:`make_asm_intrinsic`.

Operand conventions (the constraint letter follows the operand's width):
- shared-memory addresses: uint32 shared-window addresses, ``"r"``
  (from :func:`tma_kernels.ptx.smem_u32`, or ``mapa`` for ``shared::cluster``);
- global addresses, tensor-map addresses and L2 cache policies: uint64, ``"l"``;
- tensor coordinates: int32, ``"r"``; multicast CTA masks: uint16, ``"h"``.
In the PTX text, ``$0 ..`` number the outputs first, then the operands.
"""

import enum
import inspect

from llvmlite import ir
from numba import types
from numba.cuda.extending import intrinsic

U16, U32, U64, I32 = types.uint16, types.uint32, types.uint64, types.int32

#: Lanes of a 16-byte vector access of 32-bit words (``.v4.u32``).
V4_LANES = 4
V4_U32 = types.UniTuple(U32, V4_LANES)

_CONSTRAINT_BY_BITS = {16: "h", 32: "r", 64: "l"}
_MEMORY_CLOBBER = "~{memory}"


class Effect(enum.Enum):
    """What LLVM may assume about an inline asm."""

    #: Result depends only on the operands: may be merged, hoisted or dropped.
    PURE = enum.auto()
    #: Must run where written (reads a changing register) but touches no memory.
    VOLATILE = enum.auto()
    #: Touches memory or synchronises: volatile plus a ``~{memory}`` clobber, so
    #: LLVM neither drops it nor moves ordinary loads and stores across it.
    MEMORY = enum.auto()


def inline_asm(builder, result_type, operand_types, values, ptx, constraints, effect):
    """Emit one ``ir.InlineAsm`` call of llvm ``result_type`` and return its value."""
    fnty = ir.FunctionType(result_type, operand_types)
    if effect is Effect.MEMORY:
        constraints = ",".join(filter(None, [constraints, _MEMORY_CLOBBER]))
    asm = ir.InlineAsm(fnty, ptx, constraints, side_effect=effect is not Effect.PURE)
    return builder.call(asm, values)


def _llvm_int(numba_type):
    return ir.IntType(numba_type.bitwidth)


def _outputs(result):
    """LLVM result type and output constraints for a numba ``result`` type."""
    if result == types.void:
        return ir.VoidType(), []
    if result == V4_U32:
        return ir.LiteralStructType([_llvm_int(U32)] * V4_LANES), ["=r"] * V4_LANES
    return _llvm_int(result), ["=" + _CONSTRAINT_BY_BITS[result.bitwidth]]


def asm_intrinsic(ptx, args, operand_types, result=types.void, effect=Effect.MEMORY):
    """Typing result ``(signature, codegen)`` of an intrinsic emitting ``ptx``.

    ``args`` are the numba types of the call's arguments; each is cast to the
    matching entry of ``operand_types``. ``result`` is ``void``, an unsigned
    integer type, or :data:`V4_U32`. Returns None (numba then reports a typing
    error) when the argument count differs or an argument is not an integer.
    """
    if len(args) != len(operand_types):
        return None
    if not all(isinstance(arg, types.Integer) for arg in args):
        return None
    result_type, output_constraints = _outputs(result)
    input_constraints = [_CONSTRAINT_BY_BITS[t.bitwidth] for t in operand_types]
    constraints = ",".join(output_constraints + input_constraints)

    def codegen(context, builder, sig, llvm_args):
        values = [
            context.cast(builder, value, from_type, to_type)
            for value, from_type, to_type in zip(llvm_args, sig.args, operand_types)
        ]
        out = inline_asm(
            builder, result_type, [_llvm_int(t) for t in operand_types],
            values, ptx, constraints, effect,
        )
        if result == types.void:
            return context.get_dummy_value()
        if result == V4_U32:
            lanes = [builder.extract_value(out, lane) for lane in range(V4_LANES)]
            return context.make_tuple(builder, V4_U32, lanes)
        return out

    return result(*args), codegen


def make_asm_intrinsic(name, ptx, operands=(), result=types.void, effect=Effect.MEMORY):
    """A generated intrinsic ``name(*operand names)`` emitting ``ptx``.

    ``operands`` is a sequence of ``(name, numba type)``; the intrinsic gets a
    real Python signature (numba lowers calls by it) and a docstring quoting
    ``ptx`` and the operand names.
    """
    operand_types = [numba_type for _, numba_type in operands]

    def typer(typingctx, *args):
        return asm_intrinsic(ptx, args, operand_types, result, effect)

    parameters = ["typingctx"] + [operand_name for operand_name, _ in operands]
    typer.__signature__ = inspect.Signature(
        [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in parameters]
    )
    typer.__name__ = typer.__qualname__ = name
    typer.__doc__ = f"``{ptx}``"
    if operands:
        typer.__doc__ += f"\n\nOperands: {', '.join(parameters[1:])}."
    return intrinsic(typer)
