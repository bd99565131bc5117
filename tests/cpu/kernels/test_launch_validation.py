"""tma_kernels.launch without a GPU: argument validation, the numba-internals
guard, and the kernel-attribute logic (driver calls replaced by fakes)."""

import re
from types import SimpleNamespace

import pytest
from cuda.bindings import driver as drv
from numba.cuda import dispatcher as numba_dispatcher

import tma_kernels.launch as launch
from tma_kernels.launch import (
    CLUSTER_SIZES,
    HOPPER_MAX_DYNAMIC_SHARED_BYTES,
    DriverCallError,
    LaunchError,
    NumbaInternalsError,
    validate_launch,
)

VALID = dict(clusters=4, cluster_size=2, threads=128, dynamic_shared_bytes=0)


def rejects(message: str, **changes) -> None:
    with pytest.raises(LaunchError, match=re.escape(message)):
        validate_launch(**{**VALID, **changes})


# ---------------------------------------------------------------- validate_launch
@pytest.mark.parametrize("cluster_size", CLUSTER_SIZES)
def test_every_supported_cluster_size_passes(cluster_size):
    validate_launch(**{**VALID, "cluster_size": cluster_size})


def test_limits_themselves_pass():
    validate_launch(
        clusters=1,
        cluster_size=16,
        threads=1024,
        dynamic_shared_bytes=HOPPER_MAX_DYNAMIC_SHARED_BYTES,
    )
    validate_launch(clusters=1, cluster_size=1, threads=1, dynamic_shared_bytes=0)


@pytest.mark.parametrize("cluster_size", [0, 3, 32, 4.0, True, "4"])
def test_cluster_size_must_be_a_supported_power_of_two(cluster_size):
    rejects(
        f"cluster_size={cluster_size!r} is not one of (1, 2, 4, 8, 16)", cluster_size=cluster_size
    )


@pytest.mark.parametrize("threads", [0, 1025])
def test_threads_within_1_to_1024(threads):
    rejects(f"threads={threads} is outside 1..1024", threads=threads)


def test_threads_must_be_an_integer():
    rejects("threads=128.0 must be an integer in 1..1024", threads=128.0)


@pytest.mark.parametrize("nbytes", [-1, HOPPER_MAX_DYNAMIC_SHARED_BYTES + 1])
def test_dynamic_shared_bytes_within_the_opt_in_limit(nbytes):
    rejects(
        f"dynamic_shared_bytes={nbytes} is outside 0..232448 (the device's opt-in limit per block)",
        dynamic_shared_bytes=nbytes,
    )


def test_dynamic_shared_limit_can_be_the_devices_own():
    with pytest.raises(
        LaunchError, match=re.escape("dynamic_shared_bytes=100000 is outside 0..99000")
    ):
        validate_launch(
            **{**VALID, "dynamic_shared_bytes": 100_000}, max_dynamic_shared_bytes=99_000
        )


def test_clusters_at_least_1():
    rejects("clusters=0 is outside 1..1073741823 (at most 2**31-1 blocks in all)", clusters=0)


def test_clusters_times_cluster_size_fit_the_grid():
    rejects("clusters=134217728 is outside 1..134217727", clusters=2**27, cluster_size=16)


def test_only_sizes_above_8_are_non_portable():
    assert [launch.needs_nonportable_cluster(size) for size in CLUSTER_SIZES] == [
        False,
        False,
        False,
        False,
        True,
    ]


# ---------------------------------------------------------------- compiled_kernel
def fake_dispatcher(*overloads):
    def my_kernel():
        pass

    return SimpleNamespace(overloads={i: o for i, o in enumerate(overloads)}, py_func=my_kernel)


@pytest.mark.parametrize("count", [0, 2])
def test_compiled_kernel_needs_exactly_one_overload(count):
    dispatcher = fake_dispatcher(*[object()] * count)
    message = (
        f"kernel my_kernel has {count} compiled overloads; it must have exactly 1: "
        "compile it with one explicit signature"
    )
    with pytest.raises(LaunchError, match=re.escape(message)):
        launch.compiled_kernel(dispatcher)


def test_compiled_kernel_returns_the_single_overload():
    overload = object()
    assert launch.compiled_kernel(fake_dispatcher(overload)) is overload


# ---------------------------------------------------------------- numba internals guard
def test_installed_numba_cuda_has_the_internals_launch_needs():
    assert launch._missing_numba_internals() == []
    launch.check_numba_internals()


def test_missing_internals_name_the_required_numba_cuda(monkeypatch):
    monkeypatch.setattr(launch, "_INTERNALS_CHECKED", False)
    monkeypatch.delattr(numba_dispatcher._Kernel, "_prepare_args")
    with pytest.raises(
        NumbaInternalsError, match=r"_Kernel\._prepare_args.*needs numba-cuda 0\.30\.x"
    ):
        launch.check_numba_internals()


# ---------------------------------------------------------------- before any driver call
class ExplodingLibrary:
    def get_cufunc(self):
        raise AssertionError("a driver call happened before validation")


class FakeKernel:
    """Stands in for numba's compiled _Kernel (weak-referenceable, hashable)."""

    def __init__(self, argument_types=("uint64",), static_shared_bytes=0):
        self.argument_types = argument_types
        self.shared_mem_per_block = static_shared_bytes
        self._codelibrary = ExplodingLibrary()


def test_launch_cluster_validates_before_the_driver():
    dispatcher = fake_dispatcher(FakeKernel())
    with pytest.raises(LaunchError, match="cluster_size=32 is not one of"):
        launch.launch_cluster(dispatcher, 1, 32, 128, 0, 0x1000)


def test_launch_cluster_checks_the_argument_count_before_the_driver():
    dispatcher = fake_dispatcher(FakeKernel(argument_types=("uint64", "float32[:, ::1]")))
    with pytest.raises(
        LaunchError,
        match=re.escape("kernel takes 2 arguments ('uint64', 'float32[:, ::1]'), got 1"),
    ):
        launch.launch_cluster(dispatcher, 1, 2, 128, 0, 0x1000)


def test_launch_dependent_validates_before_the_driver():
    with pytest.raises(LaunchError, match="threads=2048 is outside 1..1024"):
        launch.launch_dependent(fake_dispatcher(FakeKernel()), 4, 2048, 0, 0x1000)


def test_launch_dependent_checks_the_argument_count_before_the_driver():
    dispatcher = fake_dispatcher(FakeKernel(argument_types=("uint64", "int32")))
    with pytest.raises(LaunchError, match=re.escape("kernel takes 2 arguments")):
        launch.launch_dependent(dispatcher, 4, 128, 0, 0x1000)


def test_max_active_clusters_validates_before_the_driver():
    with pytest.raises(LaunchError, match="threads=2048 is outside 1..1024"):
        launch.max_active_clusters(fake_dispatcher(FakeKernel()), 2, 2048, 0)


def test_set_max_dynamic_shared_bytes_validates_before_the_driver():
    with pytest.raises(LaunchError, match="dynamic_shared_bytes=300000 is outside"):
        launch.set_max_dynamic_shared_bytes(fake_dispatcher(FakeKernel()), 300_000)


# ---------------------------------------------------------------- kernel attributes, fake driver
MAX_DYNAMIC = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
NON_PORTABLE = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
DEVICE_ID = 0


@pytest.fixture
def fake_driver(monkeypatch):
    """A loaded kernel whose attribute calls are recorded instead of made."""
    kernel = FakeKernel(static_shared_bytes=1024)
    cufunc = SimpleNamespace(handle=drv.CUkernel(), device=SimpleNamespace(id=DEVICE_ID))
    calls = []

    def set_kernel_attribute(attribute, value, handle, device):
        calls.append(("cuKernelSetAttribute", attribute, value, device))
        return (drv.CUresult.CUDA_SUCCESS,)

    def set_func_attribute(handle, attribute, value):
        calls.append(("cuFuncSetAttribute", attribute, value))
        return (drv.CUresult.CUDA_SUCCESS,)

    monkeypatch.setattr(launch, "_loaded_function", lambda dispatcher: (kernel, cufunc))
    monkeypatch.setattr(
        launch, "device_max_dynamic_shared_bytes", lambda: HOPPER_MAX_DYNAMIC_SHARED_BYTES
    )
    monkeypatch.setattr(drv, "cuKernelSetAttribute", set_kernel_attribute)
    monkeypatch.setattr(drv, "cuFuncSetAttribute", set_func_attribute)
    return SimpleNamespace(dispatcher=fake_dispatcher(kernel), cufunc=cufunc, calls=calls)


def test_small_dynamic_shared_memory_needs_no_attribute(fake_driver):
    launch._prepare_for(fake_driver.dispatcher, 1, 8, 128, 16 * 1024)
    assert fake_driver.calls == []


def test_large_dynamic_shared_memory_and_cluster_16_set_their_attributes_once(fake_driver):
    launch._prepare_for(fake_driver.dispatcher, 1, 16, 128, 100_000)
    launch._prepare_for(fake_driver.dispatcher, 1, 16, 128, 60_000)  # already allowed
    launch._prepare_for(fake_driver.dispatcher, 1, 16, 128, 200_000)  # raised again
    assert fake_driver.calls == [
        ("cuKernelSetAttribute", MAX_DYNAMIC, 100_000, DEVICE_ID),
        ("cuKernelSetAttribute", NON_PORTABLE, 1, DEVICE_ID),
        ("cuKernelSetAttribute", MAX_DYNAMIC, 200_000, DEVICE_ID),
    ]


def test_static_shared_memory_counts_against_the_device_limit(fake_driver):
    limit = HOPPER_MAX_DYNAMIC_SHARED_BYTES - 1024
    with pytest.raises(
        LaunchError, match=f"dynamic_shared_bytes={limit + 1} is outside 0..{limit}"
    ):
        launch._prepare_for(fake_driver.dispatcher, 1, 1, 128, limit + 1)


def test_explicit_attribute_setters(fake_driver):
    launch.set_max_dynamic_shared_bytes(fake_driver.dispatcher, 150_000)
    launch.allow_nonportable_cluster_size(fake_driver.dispatcher)
    assert fake_driver.calls == [
        ("cuKernelSetAttribute", MAX_DYNAMIC, 150_000, DEVICE_ID),
        ("cuKernelSetAttribute", NON_PORTABLE, 1, DEVICE_ID),
    ]


def test_function_handles_use_cu_func_set_attribute(fake_driver):
    fake_driver.cufunc.handle = drv.CUfunction()
    launch.allow_nonportable_cluster_size(fake_driver.dispatcher)
    assert fake_driver.calls == [("cuFuncSetAttribute", NON_PORTABLE, 1)]


def test_driver_errors_name_the_call_and_the_result(fake_driver, monkeypatch):
    monkeypatch.setattr(
        drv, "cuKernelSetAttribute", lambda *args: (drv.CUresult.CUDA_ERROR_INVALID_VALUE,)
    )
    message = (
        "cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1) "
        "returned CUDA_ERROR_INVALID_VALUE (1)"
    )
    with pytest.raises(DriverCallError, match=re.escape(message)):
        launch.allow_nonportable_cluster_size(fake_driver.dispatcher)


def test_launch_dependent_asks_for_programmatic_stream_serialization(fake_driver, monkeypatch):
    launched = []
    fake_driver.dispatcher.overloads[0]._prepare_args = (
        lambda numba_type, value, stream, write_backs, kernel_args: kernel_args.append(value))
    monkeypatch.setattr(launch, "_core_stream", lambda stream: "stream")
    monkeypatch.setattr(launch, "core_launch", lambda stream, config, kernel, *args:
                        launched.append((stream, config, args)))
    fake_driver.cufunc.kernel = "kernel"
    launch.launch_dependent(fake_driver.dispatcher, 300, 256, 0, 0x1000)
    [(stream, config, args)] = launched
    assert (stream, args) == ("stream", (0x1000,))
    assert config.programmatic_stream_serialization
    assert (config.grid, config.block, config.cluster) == ((300, 1, 1), (256, 1, 1), None)
