"""numba's on-disk kernel cache, keyed so that another process finds what one compiled.

numba keys a cached kernel by its bytecode and a pickle of its closure. The paged_kv
kernels come from a factory whose closure holds device functions, and those pickle with
a per-process id, so every process missed the cache a worker had filled (measured on the
H200: a second process recompiled in 4.3 s and wrote a second entry). Here the closure's
pickle is replaced by a caller-given key that says everything the closure depends on (a
kernel variant's repr). Callers must also key the cache *folder* by the kernel sources
(tma_study.harness.parallel_compile does), since neither key covers the device functions'
code. Private numba-cuda API (``CUDACache._index_key``), pinned by pyproject.
"""
from __future__ import annotations

import hashlib


def keyed_cache(py_func, key: str):
    """numba's CUDA cache for ``py_func``, its entries named by ``key`` (not the closure)."""
    import numba_cuda
    from numba.cuda.dispatcher import CUDACache

    class KeyedCache(CUDACache):
        def _index_key(self, sig, codegen):
            code = hashlib.sha256(self._py_func.__code__.co_code).hexdigest()
            return (sig, codegen.magic_tuple(), numba_cuda.__version__,
                    (code, hashlib.sha256(key.encode()).hexdigest()))

    return KeyedCache(py_func)


def jit_cached(signature: str, key: str, **options):
    """Like ``cuda.jit(signature, cache=True, **options)``, with the cache entry named by
    ``key`` instead of a pickle of the function's closure."""
    from numba import cuda
    from numba.cuda.core import sigutils

    def decorate(pyfunc):
        dispatcher = cuda.jit(**options)(pyfunc)        # lazy: nothing compiled yet
        dispatcher._cache = keyed_cache(dispatcher.py_func, key)
        argtypes, _ = sigutils.normalize_signature(signature)
        dispatcher.compile(argtypes)
        # as cuda.jit(signature) does (numba_cuda decorators.py): one signature, no more
        # compiles, so get_regs_per_thread() & co. answer a number rather than a dict by signature
        dispatcher._specialized = True
        dispatcher.disable_compile()
        return dispatcher
    return decorate
