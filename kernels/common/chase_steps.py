"""Steps of a one-thread issue-to-arrival chase (crossover's latency_chain, tma_issue's chases):
issue one TMA-engine transfer of chunk ``chunk`` onto an mbarrier, and wait for it with a bounded
``mbarrier.try_wait`` loop (a wait that sees no completion for ``WAIT_LIMIT_CYCLES`` gives up and
returns 1, so a lost completion fails the run instead of hanging the GPU).

    issue_tma_tile   mbarrier.arrive.expect_tx(bytes); one cp.async.bulk.tensor.2d box of the chunk
                     (a tensor of uint32 TENSOR_COLS elements per row, the box one chunk)
    issue_bulk_copy  mbarrier.arrive.expect_tx(bytes); one cp.async.bulk of the chunk

:func:`make_engine_chase` builds the chase itself around an issue and a wait step: per hop, issue
the chunk's transfer, wait, and read the chunk's word 0 (the next chunk) from shared memory.
Arguments (``CHASE_SIGNATURE``): source address, tensor map, log2 bytes per transfer, chunk mask
and issuing threads (unused here: the other chases of a study share the signature), start chunk,
hops; result (uint64[RESULT_WORDS]): cycles, nanoseconds, final chunk, waits given up, 0.
"""
from numba import cuda, uint32, uint64

from tma_kernels.ptx import (
    bulk_load,
    clock64,
    fence_mbarrier_init_cluster,
    globaltimer,
    mbarrier_arrive_expect_tx,
    mbarrier_init,
    mbarrier_try_wait_parity,
    smem_u32,
    tma_load_2d,
)

WAIT_LIMIT_CYCLES = 1 << 31             # about a second at Hopper's clocks: far beyond any transfer
TENSOR_COLS = 256                       # the tensor view: uint32 elements per row
LOG2_TENSOR_COLS = 8
LOG2_ELEMENT_BYTES = 2
STAGE_ALIGN_BYTES = 128                 # TMA boxes and bulk copies want >= 16 B
CHASE_SIGNATURE = "void(uint64, uint64, int32, int64, int64, int32, int32, uint64[::1])"
RESULT_WORDS = 5


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


@cuda.jit(device=True, inline=True)
def store_result(result, start_cycles, end_cycles, start_ns, end_ns, final_chunk, given_up, checksum):
    """A chase's result: cycles, nanoseconds, final chunk, waits given up, checksum (0: none)."""
    result[0] = end_cycles - start_cycles
    result[1] = end_ns - start_ns
    result[2] = final_chunk
    result[3] = given_up
    result[4] = checksum


def make_engine_chase(issue, wait):
    """The one-thread chase of a TMA-engine transfer (``issue``) waited on by ``wait``."""
    def chase(source_address, tensor_map, log2_bytes_per_transfer, chunk_mask, start_chunk, hops,
              issue_threads, result):
        ring = cuda.shared.array(0, uint32)
        full = cuda.shared.array(1, uint64)
        ring_base = smem_u32(ring)
        stage_smem = (ring_base + uint32(STAGE_ALIGN_BYTES - 1)) & ~uint32(STAGE_ALIGN_BYTES - 1)
        first_word = (stage_smem - ring_base) >> 2          # index of the stage's word 0 in `ring`
        bar = smem_u32(full)
        mbarrier_init(bar, 1)
        fence_mbarrier_init_cluster()
        chunk = uint32(start_chunk)
        given_up = 0
        start_cycles = clock64()
        start_ns = globaltimer()
        for hop in range(hops):
            issue(stage_smem, bar, chunk, log2_bytes_per_transfer, source_address, tensor_map)
            if wait(bar, uint32(hop & 1)) != 0:
                given_up = 1
                break
            chunk = ring[first_word]
        end_cycles = clock64()
        end_ns = globaltimer()
        store_result(result, start_cycles, end_cycles, start_ns, end_ns, chunk, given_up, 0)

    return chase
