"""One SM90 GEMM variant against torch on the GPU: correct on a small shape (every output, not
a sample), NaN-poisoned output fully written, and the ABI's errors on a real device.

The library: gemm_library.sm90_library (build/gemm/libgemm_sm90.so when the compile step
(`snakemake build/compile/gemm/resources.csv`) made it, else the two variants compiled here).
"""
import pytest
from gemm_library import sm90_library

from tma_study.gemm_lib import abi
from tma_study.studies.gemm import measure as M

torch = pytest.importorskip("torch", reason="the gemm study's GPU tests need PyTorch")

VARIANT = "sm90_tma_cooperative_bf16_t128x128x64_c2x1"
CPASYNC = "sm90_cpasync_cooperative_bf16_t128x128x64_c1x1"
CORRECTNESS = {"samples": 512, "rtol_output": 2.0 ** -7, "rtol_accumulate": 2.0 ** -12}


# the gemm_cluster study's kind of variant: TMA multicast in a 2x2 cluster, both input types
SCHEDULED = {"bf16": "sm90_tma_pingpong_bf16_t128x128x64_c2x2", "fp8_e4m3": "sm90_tma_cooperative_fp8_e4m3_t128x256x64_c1x2"}


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    return sm90_library(tmp_path_factory, [VARIANT, CPASYNC])


@pytest.fixture(scope="module")
def library_scheduled(tmp_path_factory):
    return sm90_library(tmp_path_factory, list(SCHEDULED.values()))


@pytest.mark.parametrize("name", [VARIANT, CPASYNC])
@pytest.mark.parametrize("m, n, k", [(256, 384, 512), (16, 1024, 4096), (200, 136, 72)])
def test_variant_matches_a_float64_reference_everywhere(library, name, m, n, k):
    variant = library.variant(name)
    variant.require(m, n, k)
    a = (torch.rand(m, k, device="cuda") * 2 - 1).to(torch.bfloat16)
    b = (torch.rand(n, k, device="cuda") * 2 - 1).to(torch.bfloat16)
    d = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    workspace = torch.empty(max(1, variant.workspace_bytes(m, n, k)), dtype=torch.uint8, device="cuda")
    variant.run(a.data_ptr(), b.data_ptr(), d.data_ptr(), m, n, k, workspace.data_ptr(), workspace.numel(),
                torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    reference = a.double() @ b.double().t()
    magnitude = a.double().abs() @ b.double().abs().t()
    bound = CORRECTNESS["rtol_output"] * reference.abs() + CORRECTNESS["rtol_accumulate"] * magnitude
    assert not torch.isnan(d).any()
    assert ((d.double() - reference).abs() <= bound).all()
    M.check_sampled(torch, a, b, d, CORRECTNESS, name)          # the measure step's check agrees


def test_the_measure_check_catches_a_wrong_result(library):
    m = n = k = 256
    a = (torch.rand(m, k, device="cuda") * 2 - 1).to(torch.bfloat16)
    b = (torch.rand(n, k, device="cuda") * 2 - 1).to(torch.bfloat16)
    d = (a.float() @ b.float().t()).to(torch.bfloat16)
    d[:, : n // 2] = (a[:, : k - 64].float() @ b[: n // 2, : k - 64].float().t()).to(torch.bfloat16)  # one k-tile lost
    with pytest.raises(AssertionError, match="outside tolerance"):
        M.check_sampled(torch, a, b, d, CORRECTNESS, "lost k-tile")


@pytest.mark.parametrize("dtype", ["bf16", "fp8_e4m3"])
def test_every_tile_order_writes_the_same_product_as_the_default_run(library_scheduled, dtype):
    """run_scheduled (gemm_abi.cuh: the scheduler's max_swizzle_size and raster_order, the
    gemm_cluster study's tile orders) only reorders tiles: at every swizzle and raster order the
    output is bit for bit the default run's, every element written. 1024 x 1536 has 8 x 12 tiles,
    so every swizzle up to 8 takes effect."""
    name = SCHEDULED[dtype]
    variant = library_scheduled.variant(name)
    m, n, k = 1024, 1536, 512
    element = torch.bfloat16 if dtype == "bf16" else torch.float8_e4m3fn
    a = (torch.rand(m, k, device="cuda") * 2 - 1).to(element)
    b = (torch.rand(n, k, device="cuda") * 2 - 1).to(element)
    workspace = torch.empty(max(1, variant.workspace_bytes(m, n, k)), dtype=torch.uint8, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream

    def product(run, *order):
        d = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        run(a.data_ptr(), b.data_ptr(), d.data_ptr(), m, n, k, workspace.data_ptr(), workspace.numel(), stream, *order)
        torch.cuda.synchronize()
        return d

    default = product(variant.run)
    assert not torch.isnan(default).any()
    M.check_sampled(torch, a, b, default, CORRECTNESS, name)
    for swizzle in abi.SWIZZLES:
        for raster in abi.RASTER_ORDERS:
            assert torch.equal(product(variant.run_scheduled, swizzle, raster), default), (name, swizzle, raster)


def test_misaligned_pointer_is_refused_before_launch(library):
    variant = library.variant(VARIANT)
    buffer = torch.zeros(1 << 20, dtype=torch.bfloat16, device="cuda")
    with pytest.raises(abi.GemmStatusError, match="kErrorMisalignedOperand"):
        variant.run(buffer.data_ptr() + 2, buffer.data_ptr(), buffer.data_ptr(), 128, 128, 128)



def test_the_preheat_keeps_the_gpu_busy_with_cublas_for_the_asked_time():
    """The measure step's pre-heat on a real GPU: 4096^3 bf16 cuBLAS back to back for 0.2 s; its
    launches x one GEMM's time (device events) cover at least 80 % of the host's wall time."""
    from tma_study.gemm_lib import protocol as P
    from tma_study.gemm_lib import shapes as S

    problem = M.Problem(torch, S.Shape("square", "square", 4096, 4096, 4096), "bf16", 0)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    problem.cublas()
    start.record()
    for _ in range(20):
        problem.cublas()
    end.record()
    torch.cuda.synchronize()
    one_gemm_s = start.elapsed_time(end) / 1000 / 20
    ran = P.preheat(problem.cublas, torch.cuda.synchronize, 0.2)
    assert 0.2 <= ran["seconds"] < 0.3
    assert ran["launches"] * one_gemm_s >= 0.8 * ran["seconds"]     # clocks may drop while it runs
    problem.release()
