"""The warp-specialised shared-memory ring every crossover kernel runs (persistent grid).

    threads [0, consumer_threads)            consumers: read stages, fold checksums
    threads [consumer_threads, blockDim)     producers: fill stages with one mechanism

    CTA b handles tiles b, b + grid, b + 2*grid, ...; its k-th tile uses stage s = k % stages.
    producer:  wait empty[s] (after the first round) -> fill stage s, completing on full[s]
    consumer:  wait full[s] -> consume stage s -> arrive on empty[s]

Producers run up to ``stages`` tiles ahead of the consumers and nothing waits on the whole
CTA, as in FlashAttention-3 and CUTLASS's warp-specialised mainloops. A *tile* is one
stage's worth of transfers (``stage_bytes / bytes_per_transfer``). The producer is the only
thing that differs between mechanisms; it is passed in at build time, so each mechanism
compiles to its own kernel with no run-time branch on mechanism.

Shared memory: ``stages * stage_bytes`` dynamic (+ ``RING_ALIGN_BYTES`` slack to align the
ring by hand) and 2 x ``MAX_STAGES`` mbarriers in static shared memory.
"""
from numba import cuda, uint32, uint64

from tma_kernels.ptx import (fence_mbarrier_init_cluster, mbarrier_arrive, mbarrier_init,
                             mbarrier_wait_parity, smem_u32)

from .consumer import consume_stage

MAX_STAGES = 8
RING_ALIGN_BYTES = 128          # TMA boxes and bulk copies want >= 16 B; 128 B also suits swizzles
MBARRIER_BYTES = 8
ARRIVALS_ONE_THREAD = 0         # full[s] completes on one arrive.expect_tx + the bytes (TMA engine)
ARRIVALS_EVERY_PRODUCER = 1     # full[s] completes when every producer thread arrived

# (source_address, tensor_map, log2_bytes_per_transfer, transfers_total, chunk_mask,
#  order_multiplier, stage_bytes, stages, consumer_threads, issue_threads, checksums)
KERNEL_SIGNATURE = ("void(uint64, uint64, int32, int64, int64, int64, int32, int32, int32, int32, "
                    "uint64[::1])")


def dynamic_shared_bytes(stages: int, stage_bytes: int) -> int:
    """Dynamic shared memory a launch must request."""
    return stages * stage_bytes + RING_ALIGN_BYTES


@cuda.jit(device=True, inline=True)
def init_ring(fills, stages, consumer_threads, full_smem, empty_smem):
    """Thread 0's barrier init: full[s] completes on ``fills`` arrivals, empty[s] on every consumer's."""
    for s in range(stages):
        mbarrier_init(full_smem + uint32(s * MBARRIER_BYTES), fills)
        mbarrier_init(empty_smem + uint32(s * MBARRIER_BYTES), consumer_threads)
    fence_mbarrier_init_cluster()


def make_stream_kernel(produce_stage, arrivals):
    """Build the Python kernel function for one producer (compile it with KERNEL_SIGNATURE)."""

    def stream(source_address,  # uint64: global address of chunk 0 (unused by tma_tile)
               tensor_map,  # uint64: global address of the CUtensorMap (tma_tile only)
               log2_bytes_per_transfer,  # int32: log2 of the bytes one transfer moves
               transfers_total,  # int64: transfers over the whole launch (all passes)
               chunk_mask,  # int64: chunk_count - 1 (chunk_count is a power of two)
               order_multiplier,  # int64: odd; transfer t visits chunk (t * m) & chunk_mask
               stage_bytes,  # int32: bytes per stage (a multiple of bytes_per_transfer)
               stages,  # int32: stages in the ring, 1 .. MAX_STAGES
               consumer_threads,  # int32: threads [0, consumer_threads) consume; the rest produce
               issue_threads,  # int32: producer lanes that issue TMA-engine copies (1 .. 32)
               checksums):  # uint64[grid * blockDim]: one checksum per thread (output)
        ring = cuda.shared.array(0, uint32)
        full = cuda.shared.array(MAX_STAGES, uint64)
        empty = cuda.shared.array(MAX_STAGES, uint64)
        tid = cuda.threadIdx.x
        grid = cuda.gridDim.x
        producer_threads = cuda.blockDim.x - consumer_threads
        ring_smem = (smem_u32(ring) + uint32(RING_ALIGN_BYTES - 1)) & ~uint32(RING_ALIGN_BYTES - 1)
        full_smem = smem_u32(full)
        empty_smem = smem_u32(empty)
        if tid == 0:
            init_ring(1 if arrivals == ARRIVALS_ONE_THREAD else producer_threads, stages, consumer_threads,
                      full_smem, empty_smem)
        cuda.syncthreads()

        transfers_per_tile = stage_bytes >> log2_bytes_per_transfer
        tiles = transfers_total // transfers_per_tile
        checksum = uint64(0)
        k = 0
        tile = cuda.blockIdx.x
        if tid >= consumer_threads:
            # Producers: refill stage s once the consumers released it.
            while tile < tiles:
                s = k % stages
                if k >= stages:
                    mbarrier_wait_parity(empty_smem + uint32(s * MBARRIER_BYTES), ((k // stages) - 1) & 1)
                produce_stage(ring_smem + uint32(s * stage_bytes), full_smem + uint32(s * MBARRIER_BYTES),
                              stage_bytes, tile * transfers_per_tile, log2_bytes_per_transfer,
                              order_multiplier, chunk_mask, source_address, tensor_map,
                              tid - consumer_threads, producer_threads, issue_threads)
                tile += grid
                k += 1
        else:
            # Consumers: read stage s once it is full, then release it.
            while tile < tiles:
                s = k % stages
                mbarrier_wait_parity(full_smem + uint32(s * MBARRIER_BYTES), (k // stages) & 1)
                checksum = consume_stage(ring_smem + uint32(s * stage_bytes), stage_bytes,
                                         tile * transfers_per_tile, log2_bytes_per_transfer,
                                         order_multiplier, chunk_mask, tid, consumer_threads, checksum)
                mbarrier_arrive(empty_smem + uint32(s * MBARRIER_BYTES))
                tile += grid
                k += 1
        checksums[cuda.blockIdx.x * cuda.blockDim.x + tid] = checksum

    return stream
