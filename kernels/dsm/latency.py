"""DSM latency: a dependent chain of 4-byte loads through another CTA's shared memory.

Launch one cluster of n CTAs. Every CTA copies its own chain (CTA r: words
[r * CHAIN_WORDS, (r + 1) * CHAIN_WORDS) of the global input, a random cycle of word
indices) into shared memory; after a cluster barrier, thread 0 of CTA 0 follows ``hops``
links of CTA ``target``'s chain, each load's address depending on the previous value, and
times them with ``clock64`` (SM cycles). ``target < 0`` chases its own chain with plain
``ld.shared`` (``LDS``) as the local baseline; otherwise every hop is a
``ld.shared::cluster`` (``mapa`` address; the target may be CTA 0 itself). The final index
is written out so the host can check the chain was followed.
"""
from numba import cuda, uint32, uint64
from tma_kernels.ptx import (
    clock64,
    cluster_ctarank,
    cluster_sync,
    ld_shared_cluster_u32,
    mapa_shared,
    smem_u32,
)

CHAIN_WORDS = 4096                  # 16 KiB per CTA
WORD_BYTES = 4
LOCAL = -1                          # target: plain ld.shared on the own chain

# (chain_words_global, target, start, hops, out: [cycles, final index])
SIGNATURE = "void(uint32[::1], int32, uint32, int32, uint64[::1])"
THREADS = 128


def chase(chains, target, start, hops, out):
    chain = cuda.shared.array(CHAIN_WORDS, uint32)
    rank = cluster_ctarank()
    for i in range(cuda.threadIdx.x, CHAIN_WORDS, cuda.blockDim.x):
        chain[i] = chains[rank * CHAIN_WORDS + i]
    cluster_sync()
    if rank == 0 and cuda.threadIdx.x == 0:
        index = start
        if target == LOCAL:
            began = clock64()
            for _ in range(hops):
                index = chain[index]
            ended = clock64()
        else:
            base = mapa_shared(smem_u32(chain), uint32(target))
            began = clock64()
            for _ in range(hops):
                index = ld_shared_cluster_u32(base + index * uint32(WORD_BYTES))
            ended = clock64()
        out[0] = uint64(ended - began)
        out[1] = uint64(index)
    cluster_sync()



