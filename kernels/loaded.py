"""A launchable numba kernel made from a cached build (PTX and cubin), compiling nothing.

The measure step and the GPU tests time and check exactly the cubin that the compile step
built and SASS-checked (``tma_kernels.cache``): this wraps it in a numba ``CUDADispatcher``
the way numba's own on-disk cache does on a hit (``_Kernel._rebuild`` around a
``CUDACodeLibrary`` holding the PTX and cubin for sm_90a), so ``kernel[grid, block](...)``,
``tma_kernels.launch`` and the resource queries work as on a freshly compiled kernel.

Private numba-cuda API (pinned 0.30.x by pyproject, as tma_kernels.launch): the rebuild
classmethods of ``_Kernel`` and ``CUDACodeLibrary``.
"""
from __future__ import annotations

from .build import SM90A_CC, CompiledKernel, entry_name


def load(compiled: CompiledKernel, signature: str):
    """A numba kernel dispatcher for ``compiled`` (its signature as given to the compile),
    which cannot compile anything else."""
    from cuda.core import ObjectCode
    from numba.cuda import types, typing
    from numba.cuda.codegen import CUDACodeLibrary
    from numba.cuda.core import sigutils
    from numba.cuda.descriptor import cuda_target
    from numba.cuda.dispatcher import CUDADispatcher, _Kernel

    argtypes, return_type = sigutils.normalize_signature(signature)
    entry = entry_name(compiled.ptx)
    cubin = ObjectCode.from_cubin(compiled.cubin, name=compiled.name)    # as numba's linker hands it over
    library = CUDACodeLibrary._rebuild(
        codegen=cuda_target.target_context.codegen(), name=compiled.name, entry_name=entry, llvm_strs=[],
        ptx_cache={SM90A_CC: [compiled.ptx]}, cubin_cache={SM90A_CC: cubin}, linkerinfo_cache={},
        max_registers=None, nvvm_options={}, needs_cudadevrt=False, nrt=False, use_cooperative=False, lto=False)
    kernel = _Kernel._rebuild(
        cooperative=False, name=entry, signature=typing.signature(return_type or types.void, *argtypes),
        codelibrary=library, debug=False, lineinfo=False, call_helper=None, extensions=[])
    dispatcher = CUDADispatcher(_named(compiled.name), targetoptions={})
    dispatcher.add_overload(kernel, argtypes)
    dispatcher._specialized = True      # as cuda.jit(signature): one signature, no more compiles
    dispatcher.disable_compile()
    return dispatcher


def _named(name: str):
    """A placeholder Python function carrying the kernel's name (the dispatcher's py_func)."""
    def kernel(*args):
        raise RuntimeError(f"{name} is a loaded kernel: launch it with kernel[grid, block](...)")
    kernel.__name__ = kernel.__qualname__ = name
    return kernel
