"""GEMM variants from the config: names, exclusions with reasons, generated sources, shapes,
and the config errors a wrong gemm section gets."""
import copy
import re

import pytest
import yaml

from tma_study import config as config_mod
from tma_study.studies import discover
from tma_study.gemm_lib import shapes as shapes_mod
from tma_study.gemm_lib import variants as V

REPO_CONFIG = config_mod.REPO_ROOT / "config" / "config.yaml"


@pytest.fixture(scope="module")
def study():
    return yaml.safe_load(REPO_CONFIG.read_text())["studies"]["gemm"]


def test_every_name_round_trips_and_is_unique(study):
    names = [v.name for v in V.variants(study)]
    assert len(names) == len(set(names))
    assert all(V.parse_name(n).name == n for n in names)


def test_the_default_config_builds_the_issue_s_sm90_set(study):
    sm90 = V.variants(study, "sm90")
    tma = [v for v in sm90 if v.load == "tma"]
    assert {v.cluster for v in tma} == {"1x1", "2x1", "1x2", "2x2"}
    assert {v.cluster for v in sm90 if v.load == "cpasync"} == {"1x1"}
    assert {v.dtype for v in sm90} == {"bf16", "fp8_e4m3"}
    assert {v.tile for v in tma} == {"128x128x64", "128x256x64"}
    assert "sm90_tma_cooperative_bf16_t128x256x64_c2x1" in {v.name for v in sm90}   # the probe's kernel


def test_excluded_combinations_say_why(study):
    reasons = {v.name: why for v, why in V.excluded_variants(study)}
    assert "multicast" in reasons["sm90_cpasync_cooperative_bf16_t128x128x64_c2x1"]
    assert "registers" in reasons["sm90_tma_pingpong_bf16_t128x256x64_c1x1"]
    assert "even" in reasons["sm100_tma_2sm_bf16_t256x128x64_c1x2"]
    built = {v.name for v in V.variants(study)}
    assert not built & set(reasons)


def test_two_sm_variants_span_the_cta_pair(study):
    two_sm = [v for v in V.variants(study, "sm100") if v.mainloop == "tma_2sm"]
    assert two_sm and all(v.tile_m == 256 and v.cluster_m % 2 == 0 for v in two_sm)


@pytest.mark.parametrize("name, must_have, must_not", [
    ("sm90_tma_cooperative_bf16_t128x128x64_c2x1", {"UTMALDG", "HGMMA", "UTMALDG.3D.MULTICAST"}, {"LDGSTS"}),
    ("sm90_cpasync_pingpong_fp8_e4m3_t128x128x64_c1x1", {"LDGSTS", "QGMMA"}, {"UTMALDG"}),
    ("sm100_tma_1sm_fp8_e4m3_t128x256x64_c1x1", {"UTMALDG", "UTCQMMA"}, {"LDGSTS"}),
    ("sm100_mixed_1sm_bf16_t128x128x64_c1x1", {"UTMALDG", "LDGSTS", "UTCHMMA"}, set()),
])
def test_expected_sass_follows_the_mechanism(name, must_have, must_not):
    required, forbidden = V.parse_name(name).expected_sass()
    assert set(required) == must_have and set(forbidden) == must_not


def test_generated_source_holds_only_the_parameters():
    source = V.render_source(V.parse_name("sm90_tma_pingpong_fp8_e4m3_t128x128x64_c2x2"))
    assert '#include "gemm_sm90.cuh"' in source
    assert "TMA_GEMM_SM90(sm90_tma_pingpong_fp8_e4m3_t128x128x64_c2x2, TmaPingpong, fp8_e4m3, 128, 128, 64, 2, 2)" \
        in source
    assert len(source.splitlines()) == 5           # and the schedule check (next test)
    assert len(V.render_source(V.parse_name("sm100_tma_1sm_bf16_t128x128x64_c1x1")).splitlines()) == 4


def test_fp8_tma_variants_take_the_fp8_fast_accum_schedules(study):
    """fp8 on TMA must not get CUTLASS's promoting fp8 mainloop, which cp.async has no counterpart
    of: the generated source names (and static_asserts) the FP8FastAccum schedule."""
    sm90 = V.variants(study, "sm90")
    fp8_tma = [v for v in sm90 if v.dtype == "fp8_e4m3" and v.load == "tma"]
    assert {v.schedule for v in fp8_tma} == {"cooperative", "pingpong"}
    for v in fp8_tma:
        fast = {"cooperative": "KernelTmaWarpSpecializedCooperativeFP8FastAccum",
                "pingpong": "KernelTmaWarpSpecializedPingpongFP8FastAccum"}[v.schedule]
        assert v.kernel_schedule == fast
        assert (f"static_assert(cute::is_same_v<{v.name}_variant::Schedule, cutlass::gemm::{fast}>"
                in V.render_source(v))
    for v in sm90:
        if not (v.dtype == "fp8_e4m3" and v.load == "tma"):
            assert "FP8" not in v.kernel_schedule and "FP8" not in V.render_source(v)
    assert {v.accumulation for v in V.variants(study) if v.dtype == "fp8_e4m3"} == {"fp8_no_promotion"}
    assert {v.accumulation for v in V.variants(study) if v.dtype == "bf16"} == {"fp32"}


def test_the_sm90_template_picks_the_schedules_the_table_records():
    """gemm_sm90.cuh's Kernel (bf16) and KernelFp8 (fp8) per mainloop struct agree with
    SM90_KERNEL_SCHEDULES, and the template refuses CUTLASS's promoting fp8 mainloop."""
    text = (config_mod.REPO_ROOT / "kernels" / "gemm" / "gemm_sm90.cuh").read_text()
    for mainloop, (struct, _, _) in V.MAINLOOPS["sm90"].items():
        body = re.search(rf"struct {struct} \{{(.*?)\n\}};", text, re.DOTALL)
        assert body, f"no struct {struct} in gemm_sm90.cuh"
        bf16 = re.search(r"using Kernel = cutlass::gemm::(\w+);", body[1])[1]
        fp8 = re.search(r"using KernelFp8 = (?:cutlass::gemm::)?(\w+);", body[1])[1]
        assert bf16 == V.SM90_KERNEL_SCHEDULES[mainloop, "bf16"]
        assert (bf16 if fp8 == "Kernel" else fp8) == V.SM90_KERNEL_SCHEDULES[mainloop, "fp8_e4m3"]
    assert "static_assert(!PromotesFp8<typename CollectiveMainloop::DispatchPolicy>::value" in text
    assert "MainloopSm90TmaGmmaWarpSpecializedFP8<Stages, ClusterShape, Schedule>" in text


@pytest.mark.parametrize("name", ["sm90_tma_1sm_bf16_t128x128x64_c1x1", "sm80_tma_cooperative_bf16_t128x128x64_c1x1",
                                  "sm90_tma_cooperative_fp16_t128x128x64_c1x1", "sm90_tma_cooperative_bf16"])
def test_bad_names_are_rejected_with_the_expected_form(name):
    with pytest.raises(ValueError, match="<arch>_<mainloop>_<dtype>"):
        V.parse_name(name)


def test_shapes_cover_square_and_every_projection(study):
    shapes = shapes_mod.shapes(study)
    square = [s for s in shapes if s.family == "square"]
    assert [s.m for s in square] == study["shapes"]["square"]
    llm = [s for s in shapes if s.family != "square"]
    assert len(llm) == len(study["shapes"]["tokens"]) * len(study["shapes"]["projections"])
    gate_up = next(s for s in llm if s.family == "llama3_70b" and s.layer == "gate_up")
    assert (gate_up.n, gate_up.k) == (28672, 8192)
    assert len({s.key for s in shapes}) == len(shapes)


def _validate(study_section):
    config = yaml.safe_load(REPO_CONFIG.read_text())
    config["studies"] = {"gemm": study_section}
    return config_mod.validate(config, discover())


@pytest.mark.parametrize("path, value, says", [
    (("variants", "sm90", "mainloops"), ["tma_cooperative", "tma_1sm"],
     "studies.gemm.variants.sm90.mainloops[1]': 'tma_1sm' is not allowed"),
    (("variants", "sm100", "dtypes"), ["fp16"], "studies.gemm.variants.sm100.dtypes[0]': 'fp16' is not allowed"),
    (("variants", "sm90", "tiles"), [[128, 120, 64]], "studies.gemm.variants.sm90.tiles[0][1]"),
    (("variants", "sm90", "clusters"), [[3, 1]], "studies.gemm.variants.sm90.clusters[0][0]': 3 is not allowed"),
    (("shapes", "tokens"), [16, 100], "studies.gemm.shapes.tokens[1]"),
    (("shapes", "projections"), {"Llama/q": [4096, 4096]}, "studies.gemm.shapes.projections"),
    (("correctness", "rtol_output"), 0.5, "studies.gemm.correctness.rtol_output"),
])
def test_config_errors_name_the_key(study, path, value, says):
    section = copy.deepcopy(study)
    target = section
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(config_mod.ConfigError) as error:
        _validate(section)
    assert says in str(error.value)


def test_the_shipped_gemm_config_is_valid(study):
    _validate(study)
