"""Without a GPU: every GPU test module imports, and each of its kernels
compiles to PTX for sm_90a with the signature the GPU test uses, emitting the
instructions the test is about. Catches typos and typing errors before a GPU
run."""

import importlib.util
from pathlib import Path

import pytest

import tma_kernels.numpy_compat  # noqa: F401  before numba compiles anything
from numba import cuda

GPU_TESTS = Path(__file__).resolve().parents[1] / "gpu"
GPU_TEST_MODULES = ("test_tensor_map_gpu", "test_cluster_launch_gpu")
HOPPER = (9, 0, "a")

TMA_LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
#: kernel name -> PTX fragments its test relies on
EXPECTED_PTX = {
    "tma_tile_copy": [TMA_LOAD, "mbarrier.init.shared::cta.b64", "mbarrier.try_wait.parity"],
    "cluster_identity": [
        "%cluster_ctarank",
        "%nclusterid.x",
        "barrier.cluster.arrive",
        "mapa.shared::cluster.u32",
        "ld.shared::cluster.u32",
    ],
    "multicast_tile": [
        TMA_LOAD + ".multicast::cluster",
        "fence.mbarrier_init.release.cluster",
        "barrier.cluster.wait",
    ],
    "reverse_through_dynamic_shared": [".extern .shared"],
}


def load_gpu_test_module(name):
    """Import tests/gpu/<name>.py under a private name (no package needed)."""
    spec = importlib.util.spec_from_file_location(f"gpu_tests_{name}", GPU_TESTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def all_kernels():
    for module_name in GPU_TEST_MODULES:
        module = load_gpu_test_module(module_name)
        for kernel_name, (function, signature) in module.KERNELS.items():
            yield pytest.param(function, signature, id=f"{module_name}::{kernel_name}")


@pytest.mark.parametrize("function, signature", list(all_kernels()))
def test_gpu_test_kernel_compiles_for_sm90a(function, signature):
    ptx, _ = cuda.compile(function, signature, device=False, cc=HOPPER, output="ptx", abi="numba")
    assert ".target sm_90a" in ptx
    missing = [fragment for fragment in EXPECTED_PTX[function.__name__] if fragment not in ptx]
    assert not missing, f"{function.__name__}: PTX lacks {missing}"


def test_every_gpu_test_kernel_has_expected_ptx_listed():
    names = {
        name
        for module_name in GPU_TEST_MODULES
        for name in load_gpu_test_module(module_name).KERNELS
    }
    assert names == set(EXPECTED_PTX)
