"""Timers read from special registers; no operands, uint64 results. Emitted
volatile (never merged or hoisted) without a memory clobber, as CUDA's own
``clock64()`` is."""

from numba.cuda.extending import intrinsic

from ._asm import U64, Effect, asm_intrinsic


@intrinsic
def clock64(typingctx):
    """``mov.u64 value, %clock64;``: this SM's cycle counter."""
    return asm_intrinsic("mov.u64 $0, %clock64;", (), (), result=U64, effect=Effect.VOLATILE)


@intrinsic
def globaltimer(typingctx):
    """``mov.u64 value, %globaltimer;``: the GPU-wide nanosecond timer."""
    return asm_intrinsic(
        "mov.u64 $0, %globaltimer;", (), (), result=U64, effect=Effect.VOLATILE
    )
