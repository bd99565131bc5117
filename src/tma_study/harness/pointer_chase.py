"""Pointer-chase chains for latency probes (the crossover study's latency chains, the dsm
study's SM-to-SM chase): a random single cycle through all chunks, and where a chase ends."""
from __future__ import annotations

import numpy as np


def chase_chain(chunk_count: int, rng: np.random.Generator) -> np.ndarray:
    """next[c] for a single random cycle through all chunks (a pointer-chase permutation)."""
    order = rng.permutation(chunk_count)
    successor = np.empty(chunk_count, dtype=np.int64)
    successor[order] = np.roll(order, -1)
    return successor


def chase_path(successor: np.ndarray, start: int, hops: int) -> np.ndarray:
    """The ``hops`` chunks a chase from ``start`` reads, in order (the last one's word 0 is where
    it ends: ``successor[path[-1]]``)."""
    path = np.empty(hops, dtype=np.int64)
    chunk = start
    for hop in range(hops):
        path[hop] = chunk
        chunk = int(successor[chunk])
    return path


def follow(successor: np.ndarray, start: int, hops: int) -> int:
    """The chunk reached after ``hops`` steps from ``start``."""
    chunk = start
    for _ in range(hops):
        chunk = int(successor[chunk])
    return chunk
