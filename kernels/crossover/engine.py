"""What the two TMA-engine producers (tma_tile, bulk_copy) share.

Lane 0 of the producer warp arms the stage's ``full`` barrier with the stage's bytes
(``mbarrier.arrive.expect_tx``: one arrival, then the copies' bytes complete the phase); the
issuing lanes then sync so none issues a copy before the barrier expects its bytes.
"""
from numba import cuda

from tma_kernels.ptx import mbarrier_arrive_expect_tx

FULL_WARP_MASK = 0xFFFFFFFF


@cuda.jit(device=True, inline=True)
def arm_stage(full_barrier, stage_bytes, lane, issue_threads):
    if lane == 0:
        mbarrier_arrive_expect_tx(full_barrier, stage_bytes)
    cuda.syncwarp((1 << issue_threads) - 1 if issue_threads < 32 else FULL_WARP_MASK)
