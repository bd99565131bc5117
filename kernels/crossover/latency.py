"""Latency of one transfer per mechanism: a dependent chain (pointer chase) timed with clock64.

One CTA (every thread a producer) moves one chunk at a time with a mechanism's own producer (the stream kernels'
``produce_stage`` with a one-transfer stage and the identity order), waits for it, and reads
the chunk's first uint32: the index of the next chunk to fetch. No transfer can start before
the previous one landed, so ``(clock64 after - before) / hops`` is the latency of one
transfer of ``bytes_per_transfer`` bytes, including the wait and one ``__syncthreads``
(which every mechanism pays alike). ``globaltimer`` gives the same span in nanoseconds.
"""
from numba import cuda, uint32, uint64

from tma_kernels.ptx import (clock64, fence_mbarrier_init_cluster, globaltimer, mbarrier_init,
                             mbarrier_wait_parity, smem_u32)

from .kernels import MECHANISMS
from .ring import ARRIVALS_ONE_THREAD, RING_ALIGN_BYTES

IDENTITY_ORDER = 1
# (source_address, tensor_map, log2_bytes_per_transfer, chunk_mask, start_chunk, hops,
#  issue_threads, result[cycles, nanoseconds, final_chunk])
LATENCY_SIGNATURE = "void(uint64, uint64, int32, int64, int64, int32, int32, uint64[::1])"


def latency_dynamic_shared_bytes(bytes_per_transfer: int) -> int:
    return bytes_per_transfer + RING_ALIGN_BYTES


def _make_chase(produce_stage, arrivals):
    def chase(source_address, tensor_map, log2_bytes_per_transfer, chunk_mask, start_chunk, hops,
              issue_threads, result):
        ring = cuda.shared.array(0, uint32)
        full = cuda.shared.array(1, uint64)
        tid = cuda.threadIdx.x
        ring_base = smem_u32(ring)
        stage_smem = (ring_base + uint32(RING_ALIGN_BYTES - 1)) & ~uint32(RING_ALIGN_BYTES - 1)
        first_word = (stage_smem - ring_base) >> 2          # index of the stage's word 0 in `ring`
        bar = smem_u32(full)
        if tid == 0:
            mbarrier_init(bar, 1 if arrivals == ARRIVALS_ONE_THREAD else cuda.blockDim.x)
            fence_mbarrier_init_cluster()
        cuda.syncthreads()
        bytes_per_transfer = 1 << log2_bytes_per_transfer
        chunk = start_chunk
        start_cycles = clock64()
        start_ns = globaltimer()
        for hop in range(hops):
            produce_stage(stage_smem, bar, bytes_per_transfer, chunk, log2_bytes_per_transfer,
                          IDENTITY_ORDER, chunk_mask, source_address, tensor_map, tid,
                          cuda.blockDim.x, issue_threads)
            mbarrier_wait_parity(bar, hop & 1)
            chunk = ring[first_word]
            cuda.syncthreads()                              # all read before the next hop overwrites
        end_cycles = clock64()
        end_ns = globaltimer()
        if tid == 0:
            result[0] = end_cycles - start_cycles
            result[1] = end_ns - start_ns
            result[2] = chunk

    return chase


def latency_kernel(mechanism: str):
    """The Python kernel function of ``mechanism``'s chase (compile with LATENCY_SIGNATURE)."""
    producer, arrivals = MECHANISMS[mechanism]  # the stream kernels' producers
    kernel = _make_chase(producer.produce_stage, arrivals)
    kernel.__name__ = kernel.__qualname__ = f"latency_{mechanism}"
    return kernel
