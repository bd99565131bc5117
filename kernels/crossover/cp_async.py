"""Producer: ``cp.async.cg`` 16-byte copies (SASS ``LDGSTS.E.BYPASS.128``).

Every producer thread copies 16-byte pieces of the stage (piece p goes to producer p %
producer_threads, so a warp covers 512 contiguous stage bytes), then
``cp.async.mbarrier.arrive.noinc`` makes the stage's barrier receive this thread's arrival
once its copies have landed. The barrier expects one arrival per producer thread. ``.cg`` caches in L2 only, as streamed operands should.
"""
from numba import cuda, uint32, uint64

from tma_kernels.ptx import cp_async_cg16, cp_async_mbarrier_arrive_noinc

from .consumer import BYTES_PER_VECTOR, chunk_of


@cuda.jit(device=True, inline=True)
def produce_stage(stage_smem, full_barrier, stage_bytes, first_transfer, log2_bytes_per_transfer,
                  order_multiplier, chunk_mask, source_address, tensor_map, producer_rank,
                  producer_threads, issue_threads):
    within_chunk_mask = (1 << log2_bytes_per_transfer) - 1
    offset = producer_rank * BYTES_PER_VECTOR
    step = producer_threads * BYTES_PER_VECTOR
    while offset < stage_bytes:
        chunk = chunk_of(first_transfer + (offset >> log2_bytes_per_transfer), order_multiplier, chunk_mask)
        source = (source_address + (uint64(chunk) << uint64(log2_bytes_per_transfer))
                  + uint64(offset & within_chunk_mask))
        cp_async_cg16(stage_smem + uint32(offset), source)
        offset += step
    cp_async_mbarrier_arrive_noinc(full_barrier)
