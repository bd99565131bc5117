"""GPU tests run only on a Hopper GPU (compute capability 9.x); elsewhere every
module here is skipped, with the reason, instead of failing. Under pytest-xdist (the
project's default, ``-n auto``) the GPU test modules still run one at a time: each holds a
file lock for its whole run, so no two workers share the GPU.

Before the first GPU test, every kernel the GPU test modules list (their ``KERNELS``) is
compiled into the kernel cache on every CPU core at once (the first worker does it; the
others wait, then find them there), so the tests load cubins instead of compiling one
kernel at a time."""

import concurrent.futures
import fcntl
import functools
import importlib.util
import multiprocessing
import os
import tempfile
from pathlib import Path

import pytest

import tma_kernels.numpy_compat  # noqa: F401  before numba compiles anything

HOPPER_MAJOR = 9


@functools.cache
def hopper_unavailable_reason() -> str | None:
    """None on a Hopper GPU, else why not; never raises (no driver is fine)."""
    try:
        from numba import cuda

        if not cuda.is_available():
            return "no CUDA GPU or driver (numba.cuda.is_available() is False)"
        major, minor = cuda.get_current_device().compute_capability
    except Exception as exc:  # noqa: BLE001  any driver failure means: no usable GPU
        return f"CUDA device query failed: {type(exc).__name__}: {exc}"
    if major != HOPPER_MAJOR:
        return f"needs a Hopper GPU (compute capability 9.x), found {major}.{minor}"
    return None


GPU_TEST_LOCK = Path(tempfile.gettempdir()) / "tma-study-gpu-tests.lock"
PRECOMPILE_LOCK = Path(tempfile.gettempdir()) / "tma-study-gpu-precompile.lock"
GPU_TESTS = Path(__file__).resolve().parent


@functools.cache
def _module(path: str):
    spec = importlib.util.spec_from_file_location(f"gpu_precompile_{Path(path).stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _compile_listed(path: str, name: str) -> str:
    """Compile KERNELS[name] of the GPU test module at ``path`` into the kernel cache (worker)."""
    from tma_study.harness.kernel_builds import kernel_cache
    function, signature = _module(path).KERNELS[name]
    kernel_cache().compile(name, function, signature)
    return name


def _listed_kernels(exhaustive: bool):
    """(module path, kernel name) for every GPU test module's KERNELS (without its
    EXHAUSTIVE_KERNELS, which only ``-m exhaustive`` runs, unless ``exhaustive``)."""
    for path in sorted(GPU_TESTS.rglob("test_*_gpu.py")):     # tests/gpu/ and its study folders
        module = _module(str(path))
        skipped = set() if exhaustive else getattr(module, "EXHAUSTIVE_KERNELS", set())
        for name in getattr(module, "KERNELS", {}):
            if name not in skipped:
                yield str(path), name


def _selects_exhaustive(config) -> bool:
    """Whether the run's -m expression can select tests marked exhaustive."""
    expression = config.getoption("markexpr") or ""
    return "exhaustive" in expression and "not exhaustive" not in expression


@pytest.fixture(scope="session", autouse=True)
def precompiled_kernels(request):
    """Every listed kernel in the kernel cache before any GPU test runs (see the docstring)."""
    if hopper_unavailable_reason() is not None:
        yield
        return
    with PRECOMPILE_LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        listed = list(_listed_kernels(_selects_exhaustive(request.config)))
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(os.cpu_count(), mp_context=context) as pool:
            list(pool.map(_compile_listed, *zip(*listed)))
    yield


@pytest.fixture(scope="module", autouse=True)
def require_hopper():
    reason = hopper_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    with GPU_TEST_LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)      # released when the module's tests are done
        yield
