"""The heldout study's Triton kernels on the H200: each family's two kernels compute the reference's
answer on fresh inputs (a poisoned output), load as named (UTMALDG only in the TMA kernel), and
the paired timer returns one sample per pair and kernel. No test asserts a time."""
import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

from tma_study.harness import paired  # noqa: E402
from tma_study.studies.heldout import builds, grid  # noqa: E402
from tma_study.studies.heldout.problems import Problem  # noqa: E402

SMALL = {
    "gemm": {"shapes": [[512, 512, 768]], "dtypes": ["bf16", "fp8_e4m3"], "tiles": [[128, 128], [64, 128]],
             "stages": [3]},
    "attention": {"batch": 1, "heads": 2, "tokens": [512], "head_dims": [64, 128], "causal": [False, True],
                  "block_m": 128, "block_n": [64], "stages": [2]},
    "paged_decode": {"sequences": 4, "q_heads": 32, "kv_heads": 8, "head_dims": [64], "dtypes": ["bf16", "fp8_e4m3"],
                     "page_sizes": [16, 128], "context_tokens": [2048], "stages": [2]},
    "gather": {"row_elements": [32, 2048], "tables": {"l2": 4194304}, "bytes_gathered": 4194304,
               "rows_per_cta": 64, "stages": [2, 4]},
    "shared_memory_limit_bytes": 225280,
    "timing": {"pairs": 4, "sleep_us": 20, "seed": 0},
}
CASES = grid.cases(SMALL)


@pytest.mark.parametrize("case", CASES, ids=[c.key for c in CASES])
def test_both_kernels_match_the_reference_and_load_as_named(case):
    import torch
    compiled = {b.variant: (b, builds.compile_build(b)) for b in builds.builds(case)}
    resources = {v: builds.resources(k) for v, (_, k) in compiled.items()}
    assert resources["tma"]["sass_utmaldg"] > 0 and resources["pointer"]["sass_utmaldg"] == 0
    problem = Problem(case, torch, compiled)
    for variant in compiled:
        assert problem.check(variant) <= 0.02


def test_the_paired_timer_alternates_and_times_every_sample():
    import torch
    case = CASES[0]
    compiled = {b.variant: (b, builds.compile_build(b)) for b in builds.builds(case)}
    problem = Problem(case, torch, compiled)
    launchers = {v: problem.launcher(v) for v in compiled}
    samples = paired.time_pairs(torch, launchers, 4, 1000, paired.L2Cleaner(torch))
    assert len(samples) == 8 and all(s["time_us"] > 0 for s in samples)
    firsts = [s["variant"] for s in samples if s["position"] == 0]
    assert firsts == ["tma", "pointer", "tma", "pointer"]
