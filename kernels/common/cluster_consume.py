"""The consumer every cluster-study kernel shares: read a stage 16 bytes at a time, fold a
checksum.

Each thread adds ``(w0 + w1 + w2 + w3) ^ v`` for every 16-byte vector ``v`` of the stage it
reads (vector index within the stage), so a slice that lands at the wrong offset, a stale
stage or a missing copy changes the checksum. ``VECTORS_IN_FLIGHT`` loads are issued before
their sums are used. The load is passed in at build time: a local 128-bit shared load
(``LDS.128``) for stages that landed in this CTA, or a ``ld.shared::cluster`` for a DSM pull
from another CTA. Host reference: :mod:`tma_study.harness.cluster_checksums`.
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


# The compute consumer: every loaded 32-bit word goes through ``work_rounds`` dependent steps of
# a linear congruential generator (one IMAD each, Numerical Recipes' constants) before the fold,
# so the consumer's time per stage grows with work_rounds while the bytes stay the same.
# Host reference: tma_study.harness.cluster_checksums.churned.
LCG_MULTIPLIER = 1664525
LCG_INCREMENT = 1013904223


@cuda.jit(device=True, inline=True)
def churn(w, work_rounds):
    """(w0..w3) after ``work_rounds`` steps w = w * LCG_MULTIPLIER + LCG_INCREMENT (mod 2^32):
    four independent dependent chains."""
    w0, w1, w2, w3 = w[0], w[1], w[2], w[3]
    for _ in range(work_rounds):
        w0 = uint32(w0 * uint32(LCG_MULTIPLIER) + uint32(LCG_INCREMENT))
        w1 = uint32(w1 * uint32(LCG_MULTIPLIER) + uint32(LCG_INCREMENT))
        w2 = uint32(w2 * uint32(LCG_MULTIPLIER) + uint32(LCG_INCREMENT))
        w3 = uint32(w3 * uint32(LCG_MULTIPLIER) + uint32(LCG_INCREMENT))
    return (w0, w1, w2, w3)


def make_consume_compute(load_v4):
    """``consume(stage_address, stage_bytes, rank, threads, checksum, work_rounds) -> checksum``:
    as :func:`make_consume`'s consumer, each 16-byte vector churned ``work_rounds`` times first."""

    @cuda.jit(device=True, inline=True)
    def consume(stage, stage_bytes, rank, threads, checksum, work_rounds):
        step = threads * BYTES_PER_VECTOR
        offset = rank * BYTES_PER_VECTOR
        while offset + (VECTORS_IN_FLIGHT - 1) * step < stage_bytes:
            a = load_v4(stage + uint32(offset))
            b = load_v4(stage + uint32(offset + step))
            c = load_v4(stage + uint32(offset + 2 * step))
            d = load_v4(stage + uint32(offset + 3 * step))
            checksum += fold(churn(a, work_rounds), offset >> LOG2_BYTES_PER_VECTOR)
            checksum += fold(churn(b, work_rounds), (offset + step) >> LOG2_BYTES_PER_VECTOR)
            checksum += fold(churn(c, work_rounds), (offset + 2 * step) >> LOG2_BYTES_PER_VECTOR)
            checksum += fold(churn(d, work_rounds), (offset + 3 * step) >> LOG2_BYTES_PER_VECTOR)
            offset += VECTORS_IN_FLIGHT * step
        while offset < stage_bytes:
            checksum += fold(churn(load_v4(stage + uint32(offset)), work_rounds), offset >> LOG2_BYTES_PER_VECTOR)
            offset += step
        return checksum

    return consume
