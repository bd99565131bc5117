"""Launch numba-compiled kernels with what numba's own ``kernel[grid, block]`` lacks.

- ``launch_cluster``: a 1-D grid of thread-block clusters (cluster sizes 1..16),
  dynamic shared memory above the default 48 KiB;
- ``launch_dependent``: a 1-D grid launched with programmatic stream serialization
  (programmatic dependent launch: it may overlap the tail of the kernel ahead of it);
- ``set_max_dynamic_shared_bytes`` / ``allow_nonportable_cluster_size``: the
  kernel attributes those need (``launch_cluster`` sets both by itself);
- ``max_active_clusters``: the occupancy query for a cluster shape.

Arguments are checked by ``validate_launch`` (pure Python, no GPU) before any
driver call; errors name the argument and its allowed values.

Private numba-cuda API: the launch reuses numba's argument marshalling
(``_Kernel._prepare_args``), the loaded function (``_Kernel._codelibrary
.get_cufunc()``, whose ``.kernel`` is a ``cuda.core.Kernel``) and numba's stream
conversion (``numba.cuda.cudadrv.driver._to_core_stream``). These exist in
numba-cuda 0.30.x (pyproject pins 0.30.4); ``check_numba_internals`` runs before
the first use and raises ``NumbaInternalsError`` naming what is missing. Unlike
numba's launch, kernels compiled with ``debug=True`` do not report device-side
exceptions here.
"""

from __future__ import annotations

import inspect
import numbers
import weakref

from cuda.bindings import driver as drv
from cuda.core import LaunchConfig
from cuda.core import launch as core_launch

CLUSTER_SIZES = (1, 2, 4, 8, 16)  # 1-D cluster shapes this module launches
MAX_PORTABLE_CLUSTER_SIZE = 8  # larger ones need NON_PORTABLE_CLUSTER_SIZE_ALLOWED
MAX_THREADS_PER_BLOCK = 1024
DEFAULT_DYNAMIC_SHARED_BYTES = 48 * 1024  # usable without the opt-in attribute
HOPPER_MAX_DYNAMIC_SHARED_BYTES = 232_448  # sm_90 opt-in limit per block (227 KiB)
MAX_GRID_BLOCKS_X = 2**31 - 1
REQUIRED_NUMBA_CUDA = "0.30.x"

_FUNC_ATTRIBUTE = drv.CUfunction_attribute
_MAX_DYNAMIC_SHARED = _FUNC_ATTRIBUTE.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
_NON_PORTABLE_CLUSTER = _FUNC_ATTRIBUTE.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED


class LaunchError(ValueError):
    """A launch argument outside what the hardware or this module allows."""


class NumbaInternalsError(RuntimeError):
    """The installed numba-cuda lacks the private API this module reuses."""


class DriverCallError(RuntimeError):
    """A CUDA driver call returned an error."""


# ---------------------------------------------------------------- validation (no GPU)
def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _require_int(name: str, value, low: int, high: int, allowed: str) -> None:
    if not _is_int(value):
        raise LaunchError(f"{name}={value!r} must be an integer in {allowed}")
    if not low <= value <= high:
        raise LaunchError(f"{name}={value} is outside {allowed}")


def validate_dynamic_shared_bytes(
    dynamic_shared_bytes, max_dynamic_shared_bytes: int = HOPPER_MAX_DYNAMIC_SHARED_BYTES
) -> None:
    """Raise ``LaunchError`` unless 0 <= dynamic_shared_bytes <= the limit."""
    _require_int(
        "dynamic_shared_bytes",
        dynamic_shared_bytes,
        0,
        max_dynamic_shared_bytes,
        f"0..{max_dynamic_shared_bytes} (the device's opt-in limit per block)",
    )


def validate_launch(
    clusters,
    cluster_size,
    threads,
    dynamic_shared_bytes,
    max_dynamic_shared_bytes: int = HOPPER_MAX_DYNAMIC_SHARED_BYTES,
) -> None:
    """Raise ``LaunchError`` naming the first argument a cluster launch cannot take.

    ``max_dynamic_shared_bytes`` defaults to Hopper's opt-in limit; launches pass
    the device's own limit less the kernel's static shared memory.
    """
    if not _is_int(cluster_size) or cluster_size not in CLUSTER_SIZES:
        raise LaunchError(f"cluster_size={cluster_size!r} is not one of {CLUSTER_SIZES}")
    _require_int("threads", threads, 1, MAX_THREADS_PER_BLOCK, f"1..{MAX_THREADS_PER_BLOCK}")
    validate_dynamic_shared_bytes(dynamic_shared_bytes, max_dynamic_shared_bytes)
    max_clusters = MAX_GRID_BLOCKS_X // cluster_size
    _require_int(
        "clusters",
        clusters,
        1,
        max_clusters,
        f"1..{max_clusters} (at most 2**31-1 blocks in all)",
    )


def needs_nonportable_cluster(cluster_size: int) -> bool:
    """Whether ``cluster_size`` needs the non-portable cluster-size attribute."""
    return cluster_size > MAX_PORTABLE_CLUSTER_SIZE


# ---------------------------------------------------------------- numba internals
_INTERNALS_CHECKED = False


def _missing_numba_internals() -> list[str]:
    from numba.cuda import codegen, dispatcher
    from numba.cuda.cudadrv import driver as numba_driver

    missing = []
    kernel_class = getattr(dispatcher, "_Kernel", None)
    if kernel_class is None:
        return ["numba.cuda.dispatcher._Kernel"]
    prepare = getattr(kernel_class, "_prepare_args", None)
    expected = ["self", "ty", "val", "stream", "retr", "kernelargs"]
    if prepare is None or list(inspect.signature(prepare).parameters) != expected:
        missing.append("_Kernel._prepare_args(self, ty, val, stream, retr, kernelargs)")
    if not isinstance(getattr(kernel_class, "argument_types", None), property):
        missing.append("_Kernel.argument_types")
    library_class = getattr(codegen, "CUDACodeLibrary", None)
    if library_class is None or not hasattr(library_class, "get_cufunc"):
        missing.append("numba.cuda.codegen.CUDACodeLibrary.get_cufunc")
    if not hasattr(numba_driver, "_to_core_stream"):
        missing.append("numba.cuda.cudadrv.driver._to_core_stream")
    function_class = getattr(numba_driver, "CudaPythonFunction", None)
    slots = getattr(function_class, "__slots__", ())
    if not {"kernel", "handle"} <= set(slots):
        missing.append("numba.cuda.cudadrv.driver.CudaPythonFunction.kernel/.handle")
    return missing


def check_numba_internals() -> None:
    """Raise ``NumbaInternalsError`` unless numba-cuda has the private API used here."""
    global _INTERNALS_CHECKED
    if _INTERNALS_CHECKED:
        return
    missing = _missing_numba_internals()
    if missing:
        from importlib.metadata import version

        raise NumbaInternalsError(
            f"tma_kernels.launch reuses private numba-cuda API that numba-cuda "
            f"{version('numba-cuda')} lacks: {'; '.join(missing)}. It needs numba-cuda "
            f"{REQUIRED_NUMBA_CUDA} (pyproject pins 0.30.4)."
        )
    _INTERNALS_CHECKED = True


def compiled_kernel(dispatcher):
    """The single compiled overload (numba ``_Kernel``) of a ``cuda.jit`` dispatcher.

    The kernel must be compiled with exactly one explicit signature, e.g.
    ``cuda.jit("void(uint64, float32[:, ::1])")``.
    """
    overloads = list(getattr(dispatcher, "overloads", {}).values())
    if len(overloads) != 1:
        name = getattr(getattr(dispatcher, "py_func", None), "__name__", repr(dispatcher))
        raise LaunchError(
            f"kernel {name} has {len(overloads)} compiled overloads; it must have exactly 1: "
            "compile it with one explicit signature, "
            'e.g. cuda.jit("void(uint64, float32[:, ::1])")'
        )
    return overloads[0]


def _loaded_function(dispatcher):
    """(numba _Kernel, numba CudaPythonFunction loaded on the current device)."""
    check_numba_internals()
    kernel = compiled_kernel(dispatcher)
    if not hasattr(kernel, "_codelibrary"):
        raise NumbaInternalsError(
            f"compiled kernel has no _codelibrary; tma_kernels.launch needs numba-cuda "
            f"{REQUIRED_NUMBA_CUDA}"
        )
    return kernel, kernel._codelibrary.get_cufunc()


# ---------------------------------------------------------------- driver calls
def _check_result(call: str, result) -> None:
    err = result[0] if isinstance(result, tuple) else result
    if err != drv.CUresult.CUDA_SUCCESS:
        raise DriverCallError(f"{call} returned {err.name} ({int(err)})")


# compiled numba kernel -> {(device id, attribute): value this module set}
_ATTRIBUTES_SET: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _attribute_set_here(kernel, cufunc, attribute) -> int | None:
    """The value this module last set for ``attribute`` (None: never set)."""
    return _ATTRIBUTES_SET.get(kernel, {}).get((cufunc.device.id, int(attribute)))


def _set_function_attribute(kernel, cufunc, attribute, value: int) -> None:
    """Set a function attribute; numba's handle is a CUkernel (library-managed) or
    a CUfunction. Calls the driver only when the value changes."""
    if _attribute_set_here(kernel, cufunc, attribute) == value:
        return
    device_id = cufunc.device.id
    if isinstance(cufunc.handle, drv.CUkernel):
        call = f"cuKernelSetAttribute({attribute.name}, {value})"
        result = drv.cuKernelSetAttribute(attribute, value, cufunc.handle, device_id)
    else:
        call = f"cuFuncSetAttribute({attribute.name}, {value})"
        result = drv.cuFuncSetAttribute(cufunc.handle, attribute, value)
    _check_result(call, result)
    _ATTRIBUTES_SET.setdefault(kernel, {})[(device_id, int(attribute))] = value


def device_max_dynamic_shared_bytes() -> int:
    """The current device's opt-in shared memory per block (232448 on H200)."""
    from numba import cuda

    return int(cuda.get_current_device().MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)


def _dynamic_shared_limit(kernel) -> int:
    """Opt-in limit of the device less the kernel's static shared memory."""
    return device_max_dynamic_shared_bytes() - int(kernel.shared_mem_per_block)


def set_max_dynamic_shared_bytes(dispatcher, nbytes: int) -> None:
    """Allow launches of this kernel with up to ``nbytes`` of dynamic shared memory."""
    validate_dynamic_shared_bytes(nbytes)  # before any driver call
    kernel, cufunc = _loaded_function(dispatcher)
    validate_dynamic_shared_bytes(nbytes, _dynamic_shared_limit(kernel))
    _set_function_attribute(kernel, cufunc, _MAX_DYNAMIC_SHARED, int(nbytes))


def allow_nonportable_cluster_size(dispatcher) -> None:
    """Allow cluster sizes above 8 (Hopper supports 16) for this kernel."""
    kernel, cufunc = _loaded_function(dispatcher)
    _set_function_attribute(kernel, cufunc, _NON_PORTABLE_CLUSTER, 1)


def _prepare_for(dispatcher, clusters, cluster_size, threads, dynamic_shared_bytes):
    """Validate, then set the attributes this shape needs; returns (kernel, cufunc)."""
    validate_launch(clusters, cluster_size, threads, dynamic_shared_bytes)
    dynamic_shared_bytes = int(dynamic_shared_bytes)
    kernel, cufunc = _loaded_function(dispatcher)
    validate_dynamic_shared_bytes(dynamic_shared_bytes, _dynamic_shared_limit(kernel))
    above_default = (
        dynamic_shared_bytes + kernel.shared_mem_per_block > DEFAULT_DYNAMIC_SHARED_BYTES
    )
    allowed = _attribute_set_here(kernel, cufunc, _MAX_DYNAMIC_SHARED) or 0
    if above_default and allowed < dynamic_shared_bytes:  # only ever raised here
        _set_function_attribute(kernel, cufunc, _MAX_DYNAMIC_SHARED, dynamic_shared_bytes)
    if needs_nonportable_cluster(cluster_size):
        _set_function_attribute(kernel, cufunc, _NON_PORTABLE_CLUSTER, 1)
    return kernel, cufunc


def _core_stream(stream):
    """A cuda.core stream for a numba stream (None: numba's default stream)."""
    from numba import cuda
    from numba.cuda.cudadrv.driver import _to_core_stream

    return _to_core_stream(cuda.default_stream() if stream is None else stream)


def max_active_clusters(
    dispatcher, cluster_size: int, threads: int, dynamic_shared_bytes: int = 0
) -> int:
    """How many clusters of this shape can be resident on the device at once.

    Sets the kernel attributes the shape needs first (as ``launch_cluster`` would).
    """
    _, cufunc = _prepare_for(dispatcher, 1, cluster_size, threads, dynamic_shared_bytes)
    config = LaunchConfig(
        grid=1, cluster=int(cluster_size), block=int(threads), shmem_size=int(dynamic_shared_bytes)
    )
    return int(cufunc.kernel.occupancy.max_active_clusters(config, stream=_core_stream(None)))


def _check_argument_count(dispatcher, args) -> None:
    argument_types = compiled_kernel(dispatcher).argument_types
    if len(args) != len(argument_types):
        raise LaunchError(
            f"kernel takes {len(argument_types)} arguments {argument_types}, got {len(args)}"
        )


def _launch(kernel, cufunc, config: LaunchConfig, args, stream) -> None:
    """Marshal ``args`` as numba would and launch ``config`` on ``stream``."""
    core_stream = _core_stream(stream)
    kernel_args, write_backs = [], []
    for numba_type, value in zip(kernel.argument_types, args):
        kernel._prepare_args(numba_type, value, core_stream, write_backs, kernel_args)
    core_launch(core_stream, config, cufunc.kernel, *kernel_args)
    for write_back in write_backs:  # host arrays numba copied in are copied back
        write_back()


def launch_cluster(
    dispatcher, clusters, cluster_size, threads, dynamic_shared_bytes, *args, stream=None
):
    """Launch ``clusters`` clusters of ``cluster_size`` blocks of ``threads`` threads.

    Blocks are numbered 0 .. clusters * cluster_size - 1 along x (``blockIdx.x``);
    ``args`` are passed as numba would (device arrays, host arrays, scalars).
    Dynamic shared memory above 48 KiB and cluster size 16 get their kernel
    attributes set here, once per kernel. Asynchronous on ``stream`` (a numba
    stream; None: numba's default stream).
    """
    check_numba_internals()
    _check_argument_count(dispatcher, args)
    kernel, cufunc = _prepare_for(dispatcher, clusters, cluster_size, threads, dynamic_shared_bytes)
    config = LaunchConfig(
        grid=int(clusters),
        cluster=int(cluster_size),
        block=int(threads),
        shmem_size=int(dynamic_shared_bytes),
    )
    _launch(kernel, cufunc, config, args, stream)


def launch_dependent(dispatcher, blocks, threads, dynamic_shared_bytes, *args, stream=None):
    """Launch ``blocks`` blocks (no cluster) with programmatic stream serialization: the
    kernel may start once every CTA of the kernel ahead of it on ``stream`` has issued
    ``griddepcontrol.launch_dependents`` (or exited), so it must ``griddepcontrol.wait``
    before it reads that kernel's output (``tma_kernels.ptx.grid_dependency``). Arguments
    as for ``launch_cluster``."""
    check_numba_internals()
    _check_argument_count(dispatcher, args)
    kernel, cufunc = _prepare_for(dispatcher, blocks, 1, threads, dynamic_shared_bytes)
    config = LaunchConfig(
        grid=int(blocks),
        block=int(threads),
        shmem_size=int(dynamic_shared_bytes),
        programmatic_stream_serialization=True,
    )
    _launch(kernel, cufunc, config, args, stream)
