"""Steps of a one-thread issue-to-arrival chase (crossover's latency_chain, tma_issue's chases):
issue one TMA-engine transfer of chunk ``chunk`` onto an mbarrier, and wait for it with a bounded
``mbarrier.try_wait`` loop (a wait that sees no completion for ``WAIT_LIMIT_CYCLES`` gives up and
returns 1, so a lost completion fails the run instead of hanging the GPU).

    issue_tma_tile   mbarrier.arrive.expect_tx(bytes); one cp.async.bulk.tensor.2d box of the chunk
                     (a tensor of uint32 TENSOR_COLS elements per row, the box one chunk)
    issue_bulk_copy  mbarrier.arrive.expect_tx(bytes); one cp.async.bulk of the chunk
"""
from numba import cuda, uint32, uint64

from tma_kernels.ptx import bulk_load, clock64, mbarrier_arrive_expect_tx, mbarrier_try_wait_parity, tma_load_2d

WAIT_LIMIT_CYCLES = 1 << 31             # about a second at Hopper's clocks: far beyond any transfer
TENSOR_COLS = 256                       # the tensor view: uint32 elements per row
LOG2_TENSOR_COLS = 8
LOG2_ELEMENT_BYTES = 2


@cuda.jit(device=True, inline=True)
def wait_try(bar, parity):
    if mbarrier_try_wait_parity(bar, parity) != 0:
        return 0
    start = clock64()
    while mbarrier_try_wait_parity(bar, parity) == 0:
        if clock64() - start > WAIT_LIMIT_CYCLES:
            return 1
    return 0


@cuda.jit(device=True, inline=True)
def issue_tma_tile(stage_smem, bar, chunk, log2_bytes_per_transfer, source_address, tensor_map):
    mbarrier_arrive_expect_tx(bar, uint32(1) << uint32(log2_bytes_per_transfer))
    element = chunk << uint32(log2_bytes_per_transfer - LOG2_ELEMENT_BYTES)
    tma_load_2d(stage_smem, tensor_map, bar, element & uint32(TENSOR_COLS - 1), element >> uint32(LOG2_TENSOR_COLS))


@cuda.jit(device=True, inline=True)
def issue_bulk_copy(stage_smem, bar, chunk, log2_bytes_per_transfer, source_address, tensor_map):
    bytes_per_transfer = uint32(1) << uint32(log2_bytes_per_transfer)
    mbarrier_arrive_expect_tx(bar, bytes_per_transfer)
    bulk_load(stage_smem, source_address + (uint64(chunk) << uint64(log2_bytes_per_transfer)),
              bytes_per_transfer, bar)
