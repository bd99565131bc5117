"""The consumer every cluster-study kernel shares: read a stage 16 bytes at a time, fold a
checksum.

Each thread adds ``(w0 + w1 + w2 + w3) ^ v`` for every 16-byte vector ``v`` of the stage it
reads (vector index within the stage), so a slice that lands at the wrong offset, a stale
stage or a missing copy changes the checksum. ``VECTORS_IN_FLIGHT`` loads are issued before
their sums are used. The load is passed in at build time: a local 128-bit shared load
(``LDS.128``) for stages that landed in this CTA, or a ``ld.shared::cluster`` for a DSM pull
from another CTA. Host reference: :mod:`tma_study.studies.multicast.reference`.
"""
from numba import cuda, uint32, uint64

BYTES_PER_VECTOR = 16
LOG2_BYTES_PER_VECTOR = 4
VECTORS_IN_FLIGHT = 4


@cuda.jit(device=True, inline=True)
def fold(w, vector):
    return (uint64(w[0]) + uint64(w[1]) + uint64(w[2]) + uint64(w[3])) ^ uint64(vector)


def make_consume(load_v4):
    """``consume(stage_address, stage_bytes, rank, threads, checksum) -> checksum``.

    ``load_v4(address) -> (w0, w1, w2, w3)`` reads 16 bytes at a uint32 shared address;
    thread ``rank`` of ``threads`` reads vectors rank, rank + threads, ... of the stage.
    """

    @cuda.jit(device=True, inline=True)
    def consume(stage, stage_bytes, rank, threads, checksum):
        step = threads * BYTES_PER_VECTOR
        offset = rank * BYTES_PER_VECTOR
        while offset + (VECTORS_IN_FLIGHT - 1) * step < stage_bytes:
            a = load_v4(stage + uint32(offset))
            b = load_v4(stage + uint32(offset + step))
            c = load_v4(stage + uint32(offset + 2 * step))
            d = load_v4(stage + uint32(offset + 3 * step))
            checksum += fold(a, offset >> LOG2_BYTES_PER_VECTOR)
            checksum += fold(b, (offset + step) >> LOG2_BYTES_PER_VECTOR)
            checksum += fold(c, (offset + 2 * step) >> LOG2_BYTES_PER_VECTOR)
            checksum += fold(d, (offset + 3 * step) >> LOG2_BYTES_PER_VECTOR)
            offset += VECTORS_IN_FLIGHT * step
        while offset < stage_bytes:
            checksum += fold(load_v4(stage + uint32(offset)), offset >> LOG2_BYTES_PER_VECTOR)
            offset += step
        return checksum

    return consume
