"""Merge split-KV partial outputs: out = sum_s 2**lse_s O_s / sum_s 2**lse_s.

Each split of :mod:`.kernel` wrote its normalised partial output ``O_s`` and ``lse_s``
(log2 of its row sum, scaled-max included). One CTA per output row, one thread per head
dimension; a row no split saw (all ``lse_s = -inf``) gets zeros.

The split count is a compile-time constant (:func:`combine_kernel` builds one kernel per
count): both loops over the splits unroll, so a thread issues every split's ``lse`` load at
once and then every split's partial load at once, two memory round trips in all. Counts the
unroll cannot hold in registers (128: a local-memory array) stay correct, only slower.

The combine runs as a programmatic dependent launch of the attention (``launch_combine``,
``dependent=True``): its first instruction is ``griddepcontrol.wait``, so it is scheduled while
the attention runs and starts at its end. The merge's earlier forms and what they measured:
docs/paged_kv_history.md.
"""
import functools
import math

import numpy as np
from numba import cuda
from tma_kernels.launch import launch_dependent
from tma_kernels.ptx import griddepcontrol_wait

NEG_INF = np.float32(-np.inf)
ZERO = np.float32(0.0)

#: (partial[num_splits * rows * head_dim], lse[num_splits * rows], final[rows * head_dim],
#:  rows, head_dim); launch ``[rows, head_dim]``
COMBINE_SIGNATURE = "void(float32[::1], float32[::1], float32[::1], int32, int32)"
MAX_HEAD_DIM = 1024             # one thread per head dimension: a CTA's thread limit


def make_combine(num_splits: int):
    """The combine kernel's Python function for ``num_splits`` (>= 2) splits."""
    if num_splits < 2:
        raise ValueError(f"num_splits={num_splits}: a combine merges at least 2 splits")

    def combine_splits(partial,  # float32: (num_splits, rows, head_dim) partial outputs
                       lse,  # float32: (num_splits, rows) log2-sum-exp of each split's row
                       final,  # float32: (rows, head_dim) output
                       rows,  # int32: batch * seqlen_q * q_heads
                       head_dim):  # int32
        griddepcontrol_wait()       # the attention's partials (a no-op unless launched dependent)
        row = cuda.blockIdx.x
        element = row * head_dim + cuda.threadIdx.x
        split_lse = cuda.local.array(num_splits, np.float32)
        top = NEG_INF
        for s in range(num_splits):
            split_lse[s] = lse[s * rows + row]
            top = max(top, split_lse[s])
        if top == NEG_INF:
            final[element] = ZERO
            return
        weighted = ZERO
        weights = ZERO
        for s in range(num_splits):
            weight = math.exp2(split_lse[s] - top)
            weighted += weight * partial[s * rows * head_dim + element]
            weights += weight
        final[element] = weighted / weights

    return combine_splits


@functools.cache
def combine_kernel(num_splits: int, cache=None):
    """The compiled combine for ``num_splits`` splits (once per count per process): from
    ``cache`` (a tma_kernels.cache.KernelCache, its cubin loaded) or compiled by numba."""
    if cache is None:
        return cuda.jit(COMBINE_SIGNATURE)(make_combine(num_splits))
    from ..loaded import load
    return load(cache.compile(f"combine_splits_{num_splits}", make_combine(num_splits), COMBINE_SIGNATURE),
                COMBINE_SIGNATURE)


def launch_combine(partial, lse, final, num_splits: int, rows: int, head_dim: int, stream=0,
                   dependent: bool = True, cache=None) -> None:
    """Enqueue the combine of ``num_splits`` splits of ``rows`` rows on ``stream``. With
    ``dependent``, as a programmatic dependent launch: it is scheduled while the attention
    ahead of it still runs (the attention kernel triggers it at its start) and waits in
    ``griddepcontrol.wait`` for the attention's end, so the kernel boundary's launch gap and
    the combine's ramp overlap the attention's tail. ``cache``: as combine_kernel's."""
    if not 1 <= head_dim <= MAX_HEAD_DIM:
        raise ValueError(f"head_dim={head_dim}: the combine runs one thread per head dimension, "
                         f"at most {MAX_HEAD_DIM}")
    kernel = combine_kernel(num_splits, cache)
    if dependent:
        launch_dependent(kernel, rows, head_dim, 0, partial, lse, final, rows, head_dim,
                         stream=None if stream == 0 else stream)
    else:
        kernel[rows, head_dim, stream](partial, lse, final, rows, head_dim)
