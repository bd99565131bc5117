"""Named CTA barriers (``bar.sync id, threads``): synchronise a subset of a CTA's warps,
e.g. the consumer warps of a warp-specialised ring, without the producer warps;
``bar.red.or.pred`` does so and hands every thread the OR of a flag over the threads.

Operands: ``barrier_id`` (uint32, 1..15; 0 is ``__syncthreads``'s) and ``threads`` (uint32,
a multiple of 32: how many threads, in whole warps, meet at this barrier).
"""

from numba.cuda.extending import intrinsic

from ._asm import U32, asm_intrinsic


@intrinsic
def named_barrier_sync(typingctx, barrier_id, threads):
    """``bar.sync barrier_id, threads;``: wait until ``threads`` threads (whole warps) arrived
    at barrier ``barrier_id``; orders their shared-memory accesses like ``__syncthreads``."""
    return asm_intrinsic("bar.sync $0, $1;", (barrier_id, threads), (U32, U32))


_RED_OR = ("{ .reg .pred flag, any; setp.ne.u32 flag, $3, 0; bar.red.or.pred any, $1, $2, flag;"
           " selp.u32 $0, 1, 0, any; }")


@intrinsic
def named_barrier_red_or(typingctx, barrier_id, threads, flag):
    """``bar.red.or.pred``: named_barrier_sync's barrier, returning uint32 1 to every one of the
    ``threads`` threads if any of them passed a nonzero ``flag`` (uint32), else 0."""
    return asm_intrinsic(_RED_OR, (barrier_id, threads, flag), (U32, U32, U32), result=U32)
