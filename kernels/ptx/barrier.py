"""Named CTA barriers (``bar.sync id, threads``): synchronise a subset of a CTA's warps,
e.g. the consumer warps of a warp-specialised ring, without the producer warps.

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
