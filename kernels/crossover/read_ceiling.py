"""Ceiling: a pure-read stream, 128-bit loads straight into registers (``LDG.E.128``).

No shared memory and no stage bookkeeping: the fastest way this GPU reads a buffer, against
which each mechanism's stream is reported. Grid-stride over 16-byte vectors with
``LOADS_IN_FLIGHT`` independent loads per thread per iteration; vector v of the launch reads
vector ``v & vector_mask`` of the buffer (several passes over an L2-resident buffer).
Checksum: the sum of ``w0 + w1 + w2 + w3`` over every vector read (the consumer's formula
with chunk 0).
"""
from numba import cuda, uint64

from tma_kernels.ptx import ld_global_v4_u32

LOADS_IN_FLIGHT = 4
VECTOR_BYTES = 16
LOG2_VECTOR_BYTES = 4
# (source_address, vectors_total, vector_mask, checksums)
READ_SIGNATURE = "void(uint64, int64, int64, uint64[::1])"


@cuda.jit(device=True, inline=True)
def _sum4(source_address, vector, vector_mask):
    w = ld_global_v4_u32(source_address + (uint64(vector & vector_mask) << uint64(LOG2_VECTOR_BYTES)))
    return uint64(w[0]) + uint64(w[1]) + uint64(w[2]) + uint64(w[3])


def read_stream(source_address,  # uint64: global address of the buffer
                vectors_total,  # int64: 16-byte vectors read by the whole launch (all passes)
                vector_mask,  # int64: vectors in the buffer - 1 (a power of two)
                checksums):  # uint64[grid * threads]: one checksum per thread (output)
    thread = cuda.grid(1)
    threads = cuda.gridsize(1)
    checksum = uint64(0)
    v = thread
    while v + (LOADS_IN_FLIGHT - 1) * threads < vectors_total:
        a = _sum4(source_address, v, vector_mask)
        b = _sum4(source_address, v + threads, vector_mask)
        c = _sum4(source_address, v + 2 * threads, vector_mask)
        d = _sum4(source_address, v + 3 * threads, vector_mask)
        checksum += (a + b) + (c + d)
        v += LOADS_IN_FLIGHT * threads
    while v < vectors_total:
        checksum += _sum4(source_address, v, vector_mask)
        v += threads
    checksums[thread] = checksum
