"""Host references for the cluster rings' checksums (numpy, exact integer arithmetic); the
``multicast`` and ``dsm`` studies check every launch with them.

Every consumer thread adds ``(w0+w1+w2+w3) ^ v`` (uint64, wrapping) for each 16-byte vector
``v`` of a stage it reads, ``v`` counted from the start of the stage (kernels/common/
cluster_consume.py). A stage is an A tile, then (2-D pattern) a B tile, so a CTA's total is the sum,
over the steps it ran, of its A tile's check plus its B tile's check with ``v`` offset by
the A tile's vectors. Totals are compared per CTA: every CTA of every cluster must have
received exactly its tiles. The compute consumer first takes every word through
``work_rounds`` steps w = w * LCG_MULTIPLIER + LCG_INCREMENT (mod 2^32): ``churned`` applies
the same map in closed form, so the checks are those of the churned words.
"""
from __future__ import annotations

import numpy as np

VECTOR_BYTES = 16
WORDS_PER_VECTOR = 4
LCG_MULTIPLIER = 1664525          # kernels/common/cluster_consume.py
LCG_INCREMENT = 1013904223
WORD_MODULUS = 2**32


def lcg_power(work_rounds: int) -> tuple[int, int]:
    """(m, c) with LCG^work_rounds(w) = m * w + c (mod 2^32)."""
    m, c = 1, 0
    for _ in range(work_rounds):
        m, c = (m * LCG_MULTIPLIER) % WORD_MODULUS, (c * LCG_MULTIPLIER + LCG_INCREMENT) % WORD_MODULUS
    return m, c


def churned(words: np.ndarray, work_rounds: int) -> np.ndarray:
    """Every uint32 word after ``work_rounds`` LCG steps (uint32, wrapping), as the kernel's churn."""
    if work_rounds == 0:
        return words
    m, c = lcg_power(work_rounds)
    return (words.astype(np.uint32) * np.uint32(m) + np.uint32(c)).astype(np.uint32)


def vector_sums(words: np.ndarray) -> np.ndarray:
    """uint64 sum of the four uint32 words of every 16-byte vector."""
    vectors = words.reshape(-1, WORDS_PER_VECTOR).astype(np.uint64)
    return vectors.sum(axis=1, dtype=np.uint64)


def tile_checks(words: np.ndarray, tile_bytes: int, vector_offset: int = 0) -> np.ndarray:
    """check[t] = sum over vector v of tile t of (vector sum) ^ (v + vector_offset), uint64."""
    vectors_per_tile = tile_bytes // VECTOR_BYTES
    sums = vector_sums(words).reshape(-1, vectors_per_tile)
    index = np.arange(vectors_per_tile, dtype=np.uint64) + np.uint64(vector_offset)
    return np.bitwise_xor(sums, index).sum(axis=1, dtype=np.uint64)


def cta_expected(a_checks: np.ndarray, b_checks: np.ndarray | None, steps_total: int, grid: int,
                 cluster_x: int, cluster_y: int, same_tiles: bool = False) -> np.ndarray:
    """uint64 total each CTA of the launch must report (kernels/multicast/ring.py's schedule).

    CTA c is rank c % size of group c // size; group g runs steps g, g + groups, ...;
    CTA (x, y) gets A tile (q*cluster_x + x) mod a_tiles and B tile (q*cluster_y + y) mod b_tiles,
    with q the step, or (``same_tiles``) the group's own step count 0, 1, ...
    """
    size = cluster_x * cluster_y
    if grid % size:
        raise ValueError(f"grid {grid} is not a whole number of clusters of {size}")
    groups = grid // size
    expected = np.zeros(grid, dtype=np.uint64)
    for cta in range(grid):
        rank, group = cta % size, cta // size
        x, y = rank % cluster_x, rank // cluster_x
        steps = np.arange(group, steps_total, groups, dtype=np.int64)
        if same_tiles:
            steps = np.arange(steps.size, dtype=np.int64)
        total = a_checks[(steps * cluster_x + x) % a_checks.size].sum(dtype=np.uint64)
        if b_checks is not None:
            total += b_checks[(steps * cluster_y + y) % b_checks.size].sum(dtype=np.uint64)
        expected[cta] = total
    return expected


def per_cta(checksums: np.ndarray, grid: int) -> np.ndarray:
    """Per-CTA totals of a launch's per-thread checksums (uint64, wrapping)."""
    return checksums.astype(np.uint64).reshape(grid, -1).sum(axis=1, dtype=np.uint64)


def mismatches(got: np.ndarray, want: np.ndarray, cluster_size: int) -> str:
    """'' when equal, else which CTAs (cluster, rank) differ, for the error message."""
    bad = np.flatnonzero(got != want)
    if bad.size == 0:
        return ""
    shown = ", ".join(f"CTA {c} (cluster {c // cluster_size}, rank {c % cluster_size})" for c in bad[:6])
    return f"{bad.size} of {got.size} CTAs got wrong data: {shown}" + (" ..." if bad.size > 6 else "")
