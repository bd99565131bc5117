"""Merge split-KV partial outputs: out = sum_s 2**lse_s O_s / sum_s 2**lse_s.

Each split of :mod:`.kernel` wrote its normalised partial output ``O_s`` and ``lse_s``
(log2 of its row sum, scaled-max included). One thread per output element; a row no
split saw (all ``lse_s = -inf``) gets zeros.
"""
import numpy as np
from numba import cuda

NEG_INF = np.float32(-np.inf)
ZERO = np.float32(0.0)

#: (partial[num_splits * rows * head_dim], lse[num_splits * rows], final[rows * head_dim],
#:  num_splits, rows, head_dim)
COMBINE_SIGNATURE = "void(float32[::1], float32[::1], float32[::1], int32, int32, int32)"
COMBINE_THREADS = 256


def combine_splits(partial,  # float32: (num_splits, rows, head_dim) partial outputs
                   lse,  # float32: (num_splits, rows) log2-sum-exp of each split's row
                   final,  # float32: (rows, head_dim) output
                   num_splits,  # int32
                   rows,  # int32: batch * seqlen_q * q_heads
                   head_dim):  # int32
    element = cuda.grid(1)
    if element >= rows * head_dim:
        return
    row = element // head_dim
    top = NEG_INF
    for s in range(num_splits):
        top = max(top, lse[s * rows + row])
    if top == NEG_INF:
        final[element] = ZERO
        return
    weighted = ZERO
    weights = ZERO
    for s in range(num_splits):
        weight = np.float32(2.0) ** (lse[s * rows + row] - top)
        weighted += weight * partial[s * rows * head_dim + element]
        weights += weight
    final[element] = weighted / weights
