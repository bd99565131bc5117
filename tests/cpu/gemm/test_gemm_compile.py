"""Compile two SM90 and one SM100 GEMM variant (in parallel, no GPU), check their SASS and
load the linked library through the C ABI.

About two minutes on two cores: each CUTLASS translation unit takes 30-70 s of nvcc.
"""
import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from tma_study.gemm_lib import abi
from tma_study.gemm_lib import build as B
from tma_study.gemm_lib import variants as V

pytestmark = pytest.mark.slow      # about 2 minutes of nvcc: scheduled first (tests/cpu/conftest.py)

SM90 = "sm90_tma_cooperative_bf16_t128x128x64_c2x1"      # TMA multicast of B across a 2x1 cluster
SM100 = "sm100_tma_1sm_bf16_t128x128x64_c1x1"
# fp8 ping-pong 128x128: one consumer warp group holds a whole tile's accumulators. With CUTLASS's
# promoting fp8 mainloop (the plain TMA schedule) ptxas spilled ~880 B here; with FP8FastAccum, none.
SM90_FP8 = "sm90_tma_pingpong_fp8_e4m3_t128x128x64_c1x1"
NAMES = (SM90, SM100, SM90_FP8)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("gemm-build")

    def one(name):
        source = out / f"{name}.cu"
        source.write_text(V.render_source(V.parse_name(name)))
        return B.compile_variant(name, source, out / f"{name}.o")

    with ThreadPoolExecutor(max_workers=2) as pool:
        reports = dict(zip(NAMES, pool.map(one, NAMES)))
    library = out / "libgemm_test.so"
    B.link([out / f"{name}.o" for name in NAMES], library)
    return out, reports, library


def test_both_variants_pass_their_sass_checks(built):
    _, reports, _ = built
    for report in reports.values():
        assert report["problems"] == [], report["problems"]
        assert not report["wgmma_serialized"]
        assert report["flags"].split().count("-DNDEBUG") == 1


def test_sm90_tma_variant_issues_multicast_tma_loads_and_hgmma(built):
    out, reports, _ = built
    counts = B.opcode_counts((out / f"{SM90}.sass").read_text())
    assert sum(n for op, n in counts.items() if op.startswith("UTMALDG.3D.MULTICAST")) > 0
    assert sum(n for op, n in counts.items() if op.startswith("HGMMA")) > 0
    assert sum(n for op, n in counts.items() if op.startswith("LDGSTS")) == 0
    assert reports[SM90]["registers"] > 0


def test_fp8_tma_pingpong_accumulates_without_promotion_and_does_not_spill(built):
    """The FP8FastAccum schedule: no second accumulator fragment, so no spills and no FADD folding
    it into the first (the promoting mainloop had 384 FADD and ~220 STL here)."""
    out, reports, _ = built
    report = reports[SM90_FP8]
    assert report["problems"] == [] and report["kernel_schedule"] == "KernelTmaWarpSpecializedPingpongFP8FastAccum"
    assert report["accumulation"] == "fp8_no_promotion"
    assert (report["spill_store_bytes"], report["spill_load_bytes"]) == (0, 0)
    counts = B.opcode_counts((out / f"{SM90_FP8}.sass").read_text())
    assert sum(n for op, n in counts.items() if op.startswith("QGMMA")) > 0
    assert sum(n for op, n in counts.items() if op.startswith(("STL", "FADD"))) == 0


def test_sm100_tma_variant_issues_tma_loads_and_umma(built):
    out, _, _ = built
    counts = B.opcode_counts((out / f"{SM100}.sass").read_text())
    assert sum(n for op, n in counts.items() if op.startswith("UTMALDG")) > 0
    assert sum(n for op, n in counts.items() if op.startswith("UTCHMMA")) > 0


def test_the_library_describes_each_variant_through_the_abi(built):
    _, _, path = built
    library = abi.GemmLibrary(path)
    for name in NAMES:
        info = library.variant(name).info()
        variant = V.parse_name(name)
        assert info["name"] == name and info["mainloop"] == variant.mainloop and info["element_ab"] == variant.dtype
        assert (info["tile_m"], info["tile_n"], info["cluster_m"]) == (variant.tile_m, variant.tile_n, variant.cluster_m)
        assert info["stages"] >= 2 and info["shared_storage_bytes"] > 0
        assert info["cutlass_version"] == "4.2.0"
    assert json.loads(library.variant(SM90)._info().decode())["arch"] == "sm_90a"


def test_problem_checks_need_no_gpu(built):
    _, _, path = built
    variant = abi.GemmLibrary(path).variant(SM90)
    assert variant.can_implement(8192, 8192, 8192)
    with pytest.raises(abi.GemmStatusError, match="kErrorMisalignedOperand"):
        variant.require(256, 256, 100)          # K = 100 bf16 is not a multiple of 16 bytes
    with pytest.raises(abi.GemmStatusError, match="kErrorInvalidProblem"):
        variant.require(0, 256, 256)
    assert variant.workspace_bytes(4096, 4096, 4096) >= 0


def test_every_variant_exports_run_scheduled_which_checks_the_tile_order_first(built):
    """_run_scheduled (gemm_abi.cuh) refuses a tile order the scheduler has no meaning for before
    anything else, and otherwise reaches the same checks as _run: a misaligned A (address 8) is
    refused as misaligned by both, with or without a GPU, so nothing is launched here."""
    _, _, path = built
    library = abi.GemmLibrary(path)
    misaligned, invalid_problem = 1, 4               # cutlass::Status codes (abi.CUTLASS_STATUS)
    for name in NAMES:
        variant = library.variant(name)
        args = (8, None, None, 256, 256, 256, None, 0, None)
        assert variant._run(*args) == misaligned
        for swizzle in abi.SWIZZLES:
            for raster in abi.RASTER_ORDERS.values():
                assert variant._run_scheduled(*args, swizzle, raster) == misaligned, (name, swizzle, raster)
        for swizzle, raster in ((0, 0), (3, 0), (16, 0), (1, -1), (1, 3)):
            assert variant._run_scheduled(*args, swizzle, raster) == invalid_problem, (name, swizzle, raster)


def test_a_missing_variant_names_the_fix(built):
    _, _, path = built
    with pytest.raises(KeyError, match="build/compile/gemm/resources.csv"):
        abi.GemmLibrary(path).variant("sm90_tma_pingpong_bf16_t128x128x64_c1x1")
