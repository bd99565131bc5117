"""Producer: plain 128-bit loads into registers, then 128-bit shared stores (``LDG.E.128`` + ``STS.128``).

Every producer thread loads its 16-byte pieces of the stage, ``LOADS_IN_FLIGHT`` at a time
(all issued before the first store, so that many loads per thread are in flight), stores them
to the stage and arrives on the stage's barrier (which expects one arrival per producer).
Unlike the asynchronous mechanisms the thread waits for its loads, so the bytes in flight are
bounded by registers: ``producer_threads * LOADS_IN_FLIGHT * 16`` bytes per CTA.
"""
from numba import cuda, uint32, uint64

from tma_kernels.ptx import ld_global_v4_u32, mbarrier_arrive, st_shared_v4_u32

from .consumer import BYTES_PER_VECTOR, chunk_of

LOADS_IN_FLIGHT = 4


@cuda.jit(device=True, inline=True)
def piece_address(offset, first_transfer, log2_bytes_per_transfer, order_multiplier, chunk_mask,
                  source_address):
    chunk = chunk_of(first_transfer + (offset >> log2_bytes_per_transfer), order_multiplier, chunk_mask)
    within_chunk = offset & ((1 << log2_bytes_per_transfer) - 1)
    return source_address + (uint64(chunk) << uint64(log2_bytes_per_transfer)) + uint64(within_chunk)


@cuda.jit(device=True, inline=True)
def produce_stage(stage_smem, full_barrier, stage_bytes, first_transfer, log2_bytes_per_transfer,
                  order_multiplier, chunk_mask, source_address, tensor_map, producer_rank,
                  producer_threads, issue_threads):
    step = producer_threads * BYTES_PER_VECTOR
    offset = producer_rank * BYTES_PER_VECTOR
    while offset + (LOADS_IN_FLIGHT - 1) * step < stage_bytes:
        a = ld_global_v4_u32(piece_address(offset, first_transfer, log2_bytes_per_transfer,
                                           order_multiplier, chunk_mask, source_address))
        b = ld_global_v4_u32(piece_address(offset + step, first_transfer, log2_bytes_per_transfer,
                                           order_multiplier, chunk_mask, source_address))
        c = ld_global_v4_u32(piece_address(offset + 2 * step, first_transfer, log2_bytes_per_transfer,
                                           order_multiplier, chunk_mask, source_address))
        d = ld_global_v4_u32(piece_address(offset + 3 * step, first_transfer, log2_bytes_per_transfer,
                                           order_multiplier, chunk_mask, source_address))
        st_shared_v4_u32(stage_smem + uint32(offset), a[0], a[1], a[2], a[3])
        st_shared_v4_u32(stage_smem + uint32(offset + step), b[0], b[1], b[2], b[3])
        st_shared_v4_u32(stage_smem + uint32(offset + 2 * step), c[0], c[1], c[2], c[3])
        st_shared_v4_u32(stage_smem + uint32(offset + 3 * step), d[0], d[1], d[2], d[3])
        offset += LOADS_IN_FLIGHT * step
    while offset < stage_bytes:
        a = ld_global_v4_u32(piece_address(offset, first_transfer, log2_bytes_per_transfer,
                                           order_multiplier, chunk_mask, source_address))
        st_shared_v4_u32(stage_smem + uint32(offset), a[0], a[1], a[2], a[3])
        offset += step
    mbarrier_arrive(full_barrier)
