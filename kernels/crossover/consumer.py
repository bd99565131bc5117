"""The consumer every crossover kernel shares: read each 16 B of a stage, fold a checksum.

Each thread reads the stage with 128-bit shared loads (``LDS.128``: narrower reads would cap a
TMA stream below what it delivers; docs/history.md) and adds ``(w0 + w1 + w2 + w3) ^ chunk`` for
every 16 bytes, where ``chunk`` is the chunk those bytes must come from. The XOR with the
expected chunk index makes a transfer that lands in the wrong slot change the checksum; the
sum touches every byte, so no load can be elided. Host reference: :func:`tma_study.studies.
crossover.reference.expected_checksum`.
"""
from numba import cuda, uint32, uint64

from tma_kernels.ptx import ld_shared_v4_u32

BYTES_PER_VECTOR = 16
VECTORS_IN_FLIGHT = 4


@cuda.jit(device=True, inline=True)
def chunk_of(transfer, order_multiplier, chunk_mask):
    """Chunk index visited by global transfer number ``transfer`` (scattered order).

    Only the low 32 bits of the product matter (chunk_mask < 2**32), so 32-bit operands do.
    """
    return (uint32(transfer) * uint32(order_multiplier)) & uint32(chunk_mask)


@cuda.jit(device=True, inline=True)
def _fold(w, transfer, order_multiplier, chunk_mask):
    words = uint64(w[0]) + uint64(w[1]) + uint64(w[2]) + uint64(w[3])
    return words ^ uint64(chunk_of(transfer, order_multiplier, chunk_mask))


@cuda.jit(device=True, inline=True)
def consume_stage(stage_smem, stage_bytes, first_transfer, log2_bytes_per_transfer,
                  order_multiplier, chunk_mask, consumer_rank, consumer_threads, checksum):
    """Fold one full stage into this thread's running uint64 checksum and return it.

    ``VECTORS_IN_FLIGHT`` shared loads are issued before their sums are used, so a few warps
    per SM keep the consumer ahead of any load mechanism. Consumer ``consumer_rank`` of
    ``consumer_threads`` reads vectors rank, rank + threads, ... of the stage.
    """
    step = consumer_threads * BYTES_PER_VECTOR
    offset = consumer_rank * BYTES_PER_VECTOR
    while offset + (VECTORS_IN_FLIGHT - 1) * step < stage_bytes:
        a = ld_shared_v4_u32(stage_smem + uint32(offset))
        b = ld_shared_v4_u32(stage_smem + uint32(offset + step))
        c = ld_shared_v4_u32(stage_smem + uint32(offset + 2 * step))
        d = ld_shared_v4_u32(stage_smem + uint32(offset + 3 * step))
        checksum += _fold(a, first_transfer + (offset >> log2_bytes_per_transfer), order_multiplier, chunk_mask)
        checksum += _fold(b, first_transfer + ((offset + step) >> log2_bytes_per_transfer),
                          order_multiplier, chunk_mask)
        checksum += _fold(c, first_transfer + ((offset + 2 * step) >> log2_bytes_per_transfer),
                          order_multiplier, chunk_mask)
        checksum += _fold(d, first_transfer + ((offset + 3 * step) >> log2_bytes_per_transfer),
                          order_multiplier, chunk_mask)
        offset += VECTORS_IN_FLIGHT * step
    while offset < stage_bytes:
        w = ld_shared_v4_u32(stage_smem + uint32(offset))
        checksum += _fold(w, first_transfer + (offset >> log2_bytes_per_transfer), order_multiplier, chunk_mask)
        offset += step
    return checksum
