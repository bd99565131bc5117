"""fp8 accumulation on the GPU: a TMA variant on CUTLASS's FP8FastAccum schedule and its cp.async
partner (same schedule and tile) accumulate alike, and both, and the cuBLAS anchor with
use_fast_accum=True, meet the study's tolerance (config studies.gemm.correctness) at the sweep's
longest K.

Why equality is expected: both mainloops issue the same wgmma instructions (the same TiledMma
from CUTLASS's builder) over the k-blocks in the same order into one fp32 accumulator fragment,
with no promotion step; only how the tiles reach shared memory differs (and, when K is not a
multiple of the tile's K, the order of the k-tiles: see the first test). The promoting fp8
mainloop (the plain TMA schedule) would round differently.

The library: gemm_library.sm90_library (build/gemm/libgemm_sm90.so when the compile step
(`snakemake build/compile/gemm/resources.csv`) made it with these variants, else them compiled here).
"""

import pytest
import yaml
from gemm_library import sm90_library

from tma_study.config import REPO_ROOT
from tma_study.studies.gemm import measure as M
from tma_study.gemm_lib import shapes as shapes_mod
from tma_study.gemm_lib import variants as V

torch = pytest.importorskip("torch", reason="the gemm study's GPU tests need PyTorch")

PAIRS = [("sm90_tma_pingpong_fp8_e4m3_t128x128x64_c1x1", "sm90_cpasync_pingpong_fp8_e4m3_t128x128x64_c1x1"),
         ("sm90_tma_cooperative_fp8_e4m3_t128x256x64_c1x1", "sm90_cpasync_cooperative_fp8_e4m3_t128x256x64_c1x1")]
NAMES = [name for pair in PAIRS for name in pair]
STUDY = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())["studies"]["gemm"]
CORRECTNESS = STUDY["correctness"]
LONGEST_K = max(s.k for s in shapes_mod.shapes(STUDY))          # 28672 (Llama-3-70B down_proj)
# ragged M, N and a K residue (K % 64 != 0); TMA needs 16-byte rows: K a multiple of 16 fp8
SHAPES = [(256, 384, 4096), (200, 136, 80), (256, 256, LONGEST_K)]


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    return sm90_library(tmp_path_factory, NAMES)


def _inputs(m, n, k, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a = (torch.rand(m, k, device="cuda", generator=gen) * 2 - 1).to(torch.float8_e4m3fn)
    b = (torch.rand(n, k, device="cuda", generator=gen) * 2 - 1).to(torch.float8_e4m3fn)
    return a, b


def _run(library, name, a, b):
    (m, k), n = a.shape, b.shape[0]
    variant = library.variant(name)
    variant.require(m, n, k)
    d = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    workspace = torch.empty(max(1, variant.workspace_bytes(m, n, k)), dtype=torch.uint8, device="cuda")
    variant.run(a.data_ptr(), b.data_ptr(), d.data_ptr(), m, n, k, workspace.data_ptr(), workspace.numel(),
                torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    return d


def _error_over_bound(a, b, d) -> float:
    """max over every output of |D - float64 reference| / the study's bound (must be <= 1)."""
    a64, b64 = a.to(torch.float64), b.to(torch.float64)
    reference, magnitude = a64 @ b64.t(), a64.abs() @ b64.abs().t()
    bound = CORRECTNESS["rtol_output"] * reference.abs() + CORRECTNESS["rtol_accumulate"] * magnitude
    return float(((d.to(torch.float64) - reference).abs() / bound).max())


@pytest.mark.parametrize("tma, cpasync", PAIRS)
@pytest.mark.parametrize("m, n, k", SHAPES)
def test_fast_accum_tma_and_cp_async_give_the_same_result(library, tma, cpasync, m, n, k):
    """Bit for bit when K is a multiple of the tile's K (every sweep shape). With a K residue
    the order differs by design: CUTLASS's cp.async mainloop shifts A and B so the partial
    k-tile is loaded and accumulated *first* (sm90_mma_multistage_gmma_ss_warpspecialized.hpp,
    nvidia-cutlass 4.2.0.0, lines 221-283: "Shift tensor so residue_k is at origin"), while TMA
    reads the tiles in order and zero-fills past K, so fp32 sums in another order (seen on the
    H200: 481 of 27200 outputs differ at K = 80). There both must meet the study's bound."""
    a, b = _inputs(m, n, k, seed=m + n + k)
    d_tma, d_cpasync = _run(library, tma, a, b), _run(library, cpasync, a, b)
    assert not torch.isnan(d_tma).any()
    tile_k = V.parse_name(tma).tile_k
    if k % tile_k:
        for name, d in ((tma, d_tma), (cpasync, d_cpasync)):
            assert _error_over_bound(a, b, d) <= 1.0, f"{name} at K={k} (residue {k % tile_k})"
        return
    differ = int((d_tma.view(torch.int16) != d_cpasync.view(torch.int16)).sum())
    assert differ == 0, f"{tma} and {cpasync} differ in {differ} of {m * n} outputs"


@pytest.mark.parametrize("name", NAMES)
def test_fp8_variants_meet_the_study_tolerance_at_the_longest_k(library, name):
    m, n, k = SHAPES[-1]
    a, b = _inputs(m, n, k, seed=7)
    d = _run(library, name, a, b)
    ratio = _error_over_bound(a, b, d)
    print(f"{name}: K={k}, max |error| / bound over all {m * n} outputs = {ratio:.3f}")
    assert ratio <= 1.0
    M.check_sampled(torch, a, b, d, CORRECTNESS, name)               # the measure step's check agrees


def test_the_cublas_anchor_uses_fast_accumulation_and_meets_the_tolerance():
    assert M.CUBLAS_FP8_FAST_ACCUM and M.CUBLAS_ACCUMULATION["fp8_e4m3"] == "fp8_no_promotion"
    m, n, k = SHAPES[-1]
    problem = M.Problem(torch, shapes_mod.Shape("square", "square", m, n, k), "fp8_e4m3", 0)
    fast = problem.cublas().clone()
    promoted = torch._scaled_mm(problem.a, problem.b.t(), scale_a=problem.unit_scale, scale_b=problem.unit_scale,
                                out_dtype=torch.bfloat16, use_fast_accum=False)
    torch.cuda.synchronize()
    ratios = [_error_over_bound(problem.a, problem.b, d) for d in (fast, promoted)]
    print(f"cuBLAS fp8 K={k}: max |error| / bound {ratios[0]:.3f} with fast accumulation, {ratios[1]:.3f} without")
    assert ratios[0] <= 1.0
    M.check_sampled(torch, problem.a, problem.b, fast, CORRECTNESS, "cublas fp8 fast accumulation")
