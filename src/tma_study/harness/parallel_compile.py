"""Compile many numba-cuda kernels at once by filling numba's on-disk cache in parallel.

numba compiles one kernel at a time in a process (the GIL); the paged_kv study's ~50
attention variants take ~7 s each on the H200 machine, longer than its timing. Worker
processes (spawned, so each has its own CUDA context) compile with ``cache=True`` into
one cache folder; the measuring process then builds the same kernels with ``cache=True``
and loads each (PTX and cubin) from that folder in well under a second.

The folder is named by a hash of every ``kernels/**/*.py`` and of the numba-cuda
version: numba's own cache key covers only the kernel function's bytecode and closure,
not the device functions it calls in other modules, so an edited helper must not hit a
stale entry. A miss is never wrong, only slow: the main process compiles it itself.
"""
from __future__ import annotations

import concurrent.futures
import hashlib
import importlib
import multiprocessing
import os
from importlib.metadata import version
from pathlib import Path

from tma_study.config import REPO_ROOT

CACHE_ROOT = REPO_ROOT / "build" / "numba-cache"


def cache_dir(kernels_root: Path = REPO_ROOT / "kernels") -> Path:
    """build/numba-cache/<hash of the kernel sources and numba-cuda's version>."""
    digest = hashlib.sha256(version("numba-cuda").encode())
    for path in sorted(kernels_root.rglob("*.py")):
        digest.update(str(path.relative_to(kernels_root)).encode() + b"\0" + path.read_bytes())
    return CACHE_ROOT / digest.hexdigest()[:16]


def use_cache_dir(path: Path) -> None:
    """Point numba's kernel cache of this process (and of processes it spawns) at ``path``."""
    from numba.cuda.core import config
    path.mkdir(parents=True, exist_ok=True)
    os.environ["NUMBA_CACHE_DIR"] = str(path)
    config.CACHE_DIR = str(path)


def _compile_one(compile_path: str, item) -> tuple[str, bool]:
    """(item's name, False if the compile function returned False: it declined the item)."""
    module, function = compile_path.split(":")
    use_cache_dir(Path(os.environ["NUMBA_CACHE_DIR"]))
    result = getattr(importlib.import_module(module), function)(item)
    return getattr(item, "name", repr(item)), result is not False


def process_map(function, *iterables, workers: int):
    """``map(function, *iterables)`` in ``workers`` spawned processes (each its own CUDA
    context and numba state), results in order; in this process when ``workers`` is 1.
    ``function`` must be importable by name (module level)."""
    arguments = list(zip(*iterables))
    if workers <= 1 or len(arguments) <= 1:
        yield from (function(*a) for a in arguments)
        return
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(min(workers, len(arguments)), mp_context=context) as pool:
        yield from pool.map(function, *zip(*arguments))      # an error surfaces here, in order


def warm(compile_path: str, items: list, cache: Path, workers: int | None = None, progress=None) -> list:
    """Run ``compile_path`` ("module:function", which compiles one item with
    ``cache=True``) on every item in worker processes, filling ``cache``. Returns the items
    the function declined (returned False for); an error raised in it propagates."""
    use_cache_dir(cache)
    declined = []
    for item, (done, built) in zip(items, process_map(_compile_one, [compile_path] * len(items), items,
                                                      workers=workers or os.cpu_count() or 1)):
        if not built:
            declined.append(item)
        if progress is not None:
            progress.step(done)
    return declined
