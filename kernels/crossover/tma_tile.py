"""Producer: TMA tensor tiles (``cp.async.bulk.tensor.2d``, SASS ``UTMALDG.2D``).

The source is viewed as a 2-D tensor of uint32, ``TENSOR_COLS`` elements (1 KiB) per row.
A transfer of B bytes is one box: ``min(B/4, 256)`` columns by ``max(1, B/1024)`` rows, so a
box covers exactly the B contiguous bytes of its chunk. The producer is one warp: its first
``issue_threads`` lanes issue the boxes of a stage; lane 0 first arms the stage's barrier with
the stage's bytes.
"""
from numba import cuda, uint32

from tma_kernels.ptx import tma_load_2d

from .consumer import chunk_of
from .engine import arm_stage

TENSOR_COLS = 256               # uint32 elements per tensor row (1 KiB)
LOG2_TENSOR_COLS = 8
LOG2_ELEMENT_BYTES = 2


@cuda.jit(device=True, inline=True)
def produce_stage(stage_smem, full_barrier, stage_bytes, first_transfer, log2_bytes_per_transfer,
                  order_multiplier, chunk_mask, source_address, tensor_map, producer_rank,
                  producer_threads, issue_threads):
    lane = producer_rank
    if lane < issue_threads:
        arm_stage(full_barrier, stage_bytes, lane, issue_threads)
        transfers = stage_bytes >> log2_bytes_per_transfer
        for i in range(lane, transfers, issue_threads):
            chunk = chunk_of(first_transfer + i, order_multiplier, chunk_mask)
            element = chunk << (log2_bytes_per_transfer - LOG2_ELEMENT_BYTES)
            tma_load_2d(stage_smem + uint32(i << log2_bytes_per_transfer), tensor_map, full_barrier,
                        element & (TENSOR_COLS - 1), element >> LOG2_TENSOR_COLS)
