"""GPU tests run only on a Hopper GPU (compute capability 9.x); elsewhere every
module here is skipped, with the reason, instead of failing. Under pytest-xdist (the
project's default, ``-n auto``) the GPU test modules still run one at a time: each holds a
file lock for its whole run, so no two workers share the GPU."""

import fcntl
import functools
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


@pytest.fixture(scope="module", autouse=True)
def require_hopper():
    reason = hopper_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    with GPU_TEST_LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)      # released when the module's tests are done
        yield
