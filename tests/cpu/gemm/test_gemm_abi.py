"""The ctypes side of the GEMM ABI: status codes become errors that say what went wrong.

A small C library with the ABI's five functions stands in for a CUTLASS variant, so the
argument and return types are exercised for real without nvcc or a GPU.
"""
import ctypes
import re
import shutil
import subprocess

import pytest

from tma_study.gemm_lib import abi
from tma_study.gemm_lib import build as B

FAKE = r"""
#include <stdint.h>
int fake_can_implement(int64_t m, int64_t n, int64_t k) { return (k % 8) ? 1 : (m <= 0 ? 4 : 0); }
int fake_workspace_bytes(int64_t m, int64_t n, int64_t k, int64_t* bytes) { *bytes = m * 4; return 0; }
int fake_run(const void* a, const void* b, void* d, int64_t m, int64_t n, int64_t k,
             void* ws, int64_t ws_bytes, void* stream) {
  if (ws_bytes < m * 4) return 6;
  if (stream != 0) return 1000 + 209;     /* cudaErrorNoKernelImageForDevice */
  return 0;
}
/* the tile order it was last called with, for the test to read back */
int last_swizzle = -1, last_raster = -1;
int fake_run_scheduled(const void* a, const void* b, void* d, int64_t m, int64_t n, int64_t k,
                       void* ws, int64_t ws_bytes, void* stream, int max_swizzle_size, int raster_order) {
  last_swizzle = max_swizzle_size;
  last_raster = raster_order;
  return fake_run(a, b, d, m, n, k, ws, ws_bytes, stream);
}
const char* fake_info(void) { return "{\"name\": \"fake\", \"stages\": 4}"; }
"""


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build the stand-in library")
    out = tmp_path_factory.mktemp("fake-abi")
    (out / "fake.c").write_text(FAKE)
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(out / "libfake.so"), str(out / "fake.c")], check=True)
    return abi.GemmLibrary(out / "libfake.so").variant("fake")


def test_success_passes_and_values_come_back(fake):
    assert fake.can_implement(128, 128, 64)
    assert fake.workspace_bytes(100, 1, 1) == 400
    assert fake.info() == {"name": "fake", "stages": 4}
    fake.run(16, 16, 16, 100, 8, 8, workspace=32, workspace_size=400, stream=0)


@pytest.mark.parametrize("call, says", [
    (lambda v: v.require(128, 128, 60), (r"can_implement for M, N, K = \(128, 128, 60\) returned status 1 "
                                         r"\(cutlass::Status::kErrorMisalignedOperand")),
    (lambda v: v.require(0, 128, 64), "kErrorInvalidProblem"),
    (lambda v: v.run(16, 16, 16, 100, 8, 8, workspace=32, workspace_size=8), "kErrorWorkspaceNull"),
    (lambda v: v.run(16, 16, 16, 1, 8, 8, workspace=32, workspace_size=8, stream=7),
     r"status 1209 \(CUDA launch error 209 \(cudaErrorNoKernelImageForDevice\)\)"),
])
def test_failures_raise_with_the_variant_call_and_meaning(fake, call, says):
    with pytest.raises(abi.GemmStatusError, match=says) as error:
        call(fake)
    assert "GEMM variant fake" in str(error.value)


@pytest.mark.parametrize("swizzle, raster, code", [(1, "heuristic", 0), (8, "along_m", 1), (4, "along_n", 2), (2, 2, 2)])
def test_run_scheduled_passes_the_tile_order(fake, swizzle, raster, code):
    fake.run_scheduled(16, 16, 16, 100, 8, 8, workspace=32, workspace_size=400, stream=0,
                       max_swizzle_size=swizzle, raster_order=raster)
    library = fake.library
    assert (ctypes.c_int.in_dll(library, "last_swizzle").value, ctypes.c_int.in_dll(library, "last_raster").value) \
        == (swizzle, code)
    with pytest.raises(abi.GemmStatusError, match=r"run_scheduled\(swizzle 2, raster along_n\).*kErrorWorkspaceNull"):
        fake.run_scheduled(16, 16, 16, 100, 8, 8, workspace=32, workspace_size=8, max_swizzle_size=2,
                           raster_order="along_n")


@pytest.mark.parametrize("swizzle, raster", [(3, "heuristic"), (16, 0), (1, "along_k"), (1, 3)])
def test_run_scheduled_refuses_a_tile_order_the_abi_does_not_take(fake, swizzle, raster):
    with pytest.raises(ValueError, match="allowed: swizzle in"):
        fake.run_scheduled(16, 16, 16, 100, 8, 8, workspace=32, workspace_size=400, max_swizzle_size=swizzle,
                           raster_order=raster)


def test_raster_codes_follow_cutlass_enum():
    header = B.cutlass_include_dirs()[0] / "cutlass" / "gemm" / "kernel" / "tile_scheduler_detail.hpp"
    body = re.search(r"enum class RasterOrderOptions \{(.*?)\};", header.read_text(), re.DOTALL).group(1)
    names = [n.strip() for n in body.split(",") if n.strip()]
    assert names == ["Heuristic", "AlongM", "AlongN"]
    assert [abi.RASTER_ORDERS[k] for k in ("heuristic", "along_m", "along_n")] == [0, 1, 2]


def test_unknown_codes_are_reported_as_unknown():
    assert "unknown status" in abi.describe_status(57)


def test_status_table_follows_cutlass_h():
    header = B.cutlass_include_dirs()[0] / "cutlass" / "cutlass.h"
    body = re.search(r"enum class Status \{(.*?)\};", header.read_text(), re.DOTALL).group(1)
    names = re.findall(r"^\s*(k\w+)", body, re.MULTILINE)
    assert names == [name for name, _ in abi.CUTLASS_STATUS]


def test_a_missing_library_says_how_to_build_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="build/compile/gemm/resources.csv"):
        abi.GemmLibrary(tmp_path / "libgemm_sm90.so")


def test_missing_tools_name_what_to_install(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("NVCC", raising=False)
    monkeypatch.setattr(B, "_wheel_tool", lambda name: None)
    with pytest.raises(B.BuildToolError, match=r"cuda-toolkit\[nvcc\]"):
        B.find_tool("nvcc", "NVCC")


def test_missing_cutlass_headers_name_the_wheel(monkeypatch):
    monkeypatch.setattr(B.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(B.BuildToolError, match=r"pip install nvidia-cutlass==4\.2\.0\.0"):
        B.cutlass_include_dirs()
