"""Host references for the crossover kernels' checksums (numpy, exact integer arithmetic).

Every kernel thread accumulates, for each 16-byte vector it reads, ``(w0+w1+w2+w3) ^ chunk``
in uint64 (wrapping), where ``chunk`` is the index of the chunk the vector belongs to. Every
chunk is read exactly ``passes`` times whatever the order, so the launch's total is
``passes * sum_v((w0+w1+w2+w3)_v ^ (v * 16 // bytes_per_transfer))`` modulo 2**64.
"""
from __future__ import annotations

import numpy as np

from tma_study.harness.pointer_chase import chase_chain, chase_path, follow  # noqa: F401  (re-exported)

VECTOR_BYTES = 16
WORDS_PER_VECTOR = 4
UINT64_MASK = (1 << 64) - 1


def vector_sums(words: np.ndarray) -> np.ndarray:
    """uint64 sum of the four uint32 words of every 16-byte vector."""
    vectors = words.reshape(-1, WORDS_PER_VECTOR)
    return (vectors[:, 0].astype(np.uint64) + vectors[:, 1] + vectors[:, 2] + vectors[:, 3]).astype(np.uint64)


def expected_checksum(sums: np.ndarray, bytes_per_transfer: int | None, passes: int) -> int:
    """Total over all threads' checksums for a launch reading the buffer ``passes`` times.

    ``bytes_per_transfer=None`` means no chunk XOR (the read-ceiling kernel).
    """
    if bytes_per_transfer is None:
        once = int(sums.sum(dtype=np.uint64))
    else:
        shift = int(bytes_per_transfer).bit_length() - 1 - (VECTOR_BYTES.bit_length() - 1)
        chunk = np.arange(sums.size, dtype=np.uint64) >> np.uint64(shift)
        once = int(np.bitwise_xor(sums, chunk).sum(dtype=np.uint64))
    return (once * passes) & UINT64_MASK


def total_of(checksums: np.ndarray) -> int:
    """Sum of the per-thread checksums modulo 2**64."""
    return int(checksums.astype(np.uint64).sum(dtype=np.uint64))


def chunk_word_sum(words: np.ndarray, words_per_chunk: int, path: np.ndarray) -> int:
    """Sum modulo 2**64 of every uint32 word of the chunks in ``path`` (each visit counted): the
    plain-loads issue-to-arrival chase's checksum."""
    chunks = words.reshape(-1, words_per_chunk)[path]
    return int(chunks.astype(np.uint64).sum(dtype=np.uint64)) & UINT64_MASK
