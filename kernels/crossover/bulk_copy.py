"""Producer: 1-D bulk copies (``cp.async.bulk``, TMA engine without a tensor map; SASS ``UBLKCP``).

One copy per transfer, straight from the chunk's global address. The producer is one warp:
its first ``issue_threads`` lanes issue the copies of a stage; lane 0 first arms the barrier.
"""
from numba import cuda, uint32, uint64

from tma_kernels.ptx import bulk_load

from .consumer import chunk_of
from .engine import arm_stage


@cuda.jit(device=True, inline=True)
def produce_stage(stage_smem, full_barrier, stage_bytes, first_transfer, log2_bytes_per_transfer,
                  order_multiplier, chunk_mask, source_address, tensor_map, producer_rank,
                  producer_threads, issue_threads):
    lane = producer_rank
    if lane < issue_threads:
        arm_stage(full_barrier, stage_bytes, lane, issue_threads)
        transfers = stage_bytes >> log2_bytes_per_transfer
        bytes_per_transfer = uint32(1) << uint32(log2_bytes_per_transfer)
        for i in range(lane, transfers, issue_threads):
            chunk = chunk_of(first_transfer + i, order_multiplier, chunk_mask)
            bulk_load(stage_smem + uint32(i << log2_bytes_per_transfer),
                      source_address + (uint64(chunk) << uint64(log2_bytes_per_transfer)),
                      bytes_per_transfer, full_barrier)
