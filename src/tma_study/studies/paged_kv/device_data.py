"""Fresh random data on the device for the paged_kv measure step: a seed from the OS for every
use, and a kernel filling a word buffer with hashed bits under a mask (the timed K/V pools, the
copy ceilings' sources)."""
from __future__ import annotations

import functools
import os

FILL_THREADS = 256


def fresh_seed() -> int:
    return int.from_bytes(os.urandom(8), "little")


@functools.cache
def fill_kernel():
    from numba import cuda, uint32, uint64

    @cuda.jit("void(uint32[::1], uint64, uint32)")
    def fill(words, seed, mask):
        i = cuda.grid(1)
        if i < words.size:
            x = uint64(i) * uint64(0x9E3779B97F4A7C15) + seed
            x ^= x >> uint64(31)
            x *= uint64(0xBF58476D1CE4E5B9)
            x ^= x >> uint64(29)
            words[i] = uint32(x & uint64(0xFFFFFFFF)) & mask
    return fill
