"""DSM bandwidth: every CTA streams its cluster partner's shared memory.

Each CTA of rank r copies block r of the global input (``BUFFER_BYTES``) into its shared
memory; after a cluster barrier every thread reads the buffer of its partner ``passes`` times,
the partner given by the read pattern: ``ring``, CTA ``(r + 1) % n`` (every CTA of the cluster
on one cycle), or ``pair``, CTA ``r xor 1`` (the cluster split into pairs that read each other;
the same as the ring at n = 2), with 128-bit ``ld.shared::cluster`` loads (``remote=True``); the
local baseline (``remote=False``) reads its own buffer with ``LDS.128``. Both fold the checksum of
:mod:`tma_kernels.common.cluster_consume`. A cluster barrier before exit keeps each buffer alive while
its partner reads it. Persistent grid: as many clusters as fit.
"""
from numba import cuda, uint32, uint64
from tma_kernels.common.cluster_consume import make_consume
from tma_kernels.ptx import (
    cluster_ctarank,
    cluster_nctarank,
    cluster_sync,
    ld_shared_cluster_v4_u32,
    ld_shared_v4_u32,
    mapa_shared,
    smem_u32,
)

BUFFER_BYTES = 32768
BUFFER_WORDS = BUFFER_BYTES // 4

# (blocks_global, passes, checksums)
SIGNATURE = "void(uint32[::1], int32, uint64[::1])"

_consume_remote = make_consume(ld_shared_cluster_v4_u32)
_consume_local = make_consume(ld_shared_v4_u32)

PATTERNS = ("ring", "pair")             # whose buffer a remote reader streams (module docstring)


@cuda.jit(device=True, inline=True)
def _ring_partner(rank, size):
    return (rank + uint32(1)) % size


@cuda.jit(device=True, inline=True)
def _pair_partner(rank, size):
    return rank ^ uint32(1)


_PARTNERS = {"ring": _ring_partner, "pair": _pair_partner}


def make_neighbour_read(remote: bool, pattern: str = "ring"):
    """The Python kernel function (compile with SIGNATURE); ``pattern`` picks the remote partner."""
    partner = _PARTNERS[pattern]

    def neighbour_read(blocks, passes, checksums):
        buffer = cuda.shared.array(BUFFER_WORDS, uint32)
        rank = cluster_ctarank()
        size = cluster_nctarank()
        tid = cuda.threadIdx.x
        for i in range(tid, BUFFER_WORDS, cuda.blockDim.x):
            buffer[i] = blocks[rank * BUFFER_WORDS + i]
        cluster_sync()
        checksum = uint64(0)
        if remote:
            source = mapa_shared(smem_u32(buffer), partner(rank, size))
            for _ in range(passes):
                checksum = _consume_remote(source, BUFFER_BYTES, tid, cuda.blockDim.x, checksum)
        else:
            source = smem_u32(buffer)
            for _ in range(passes):
                checksum = _consume_local(source, BUFFER_BYTES, tid, cuda.blockDim.x, checksum)
        cluster_sync()
        checksums[cuda.blockIdx.x * cuda.blockDim.x + tid] = checksum

    return neighbour_read
