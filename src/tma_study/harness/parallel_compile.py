"""Compile many numba-cuda kernels at once: one spawned process per core.

numba compiles one kernel at a time in a process (the GIL); the paged_kv study's attention
variants take several seconds each. Worker processes (spawned, so each has its own numba
state and, on a GPU machine, its own CUDA context) compile into the shared kernel cache
(``harness.kernel_builds``), which the caller then reads.
"""
from __future__ import annotations

import concurrent.futures
import multiprocessing


def process_map(function, *iterables, workers: int):
    """``map(function, *iterables)`` in ``workers`` spawned processes, results in order; in
    this process when ``workers`` is 1 or there is one item. ``function`` must be importable
    by name (module level)."""
    arguments = list(zip(*iterables))
    if workers <= 1 or len(arguments) <= 1:
        yield from (function(*a) for a in arguments)
        return
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(min(workers, len(arguments)), mp_context=context) as pool:
        yield from pool.map(function, *zip(*arguments))      # an error surfaces here, in order
