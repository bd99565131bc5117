"""The heldout study without a GPU: its grid, the operand each case is described as, and the
aggregation of paired samples into cases the advisor is scored on (synthetic raw data that pass
the study's raw schema)."""
import json

import numpy as np
import pandas as pd
import pytest
import yaml

from tma_study.advisor import frozen
from tma_study.advisor.operand import from_mapping
from tma_study.advisor.validation.cases import COLUMNS, operand_spec
from tma_study.config import REPO_ROOT
from tma_study.harness import provenance, raw_data
from tma_study.studies.heldout import STUDY, aggregate, describe, grid
from tma_study.studies.heldout.measure import alternative

CONFIG = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())["studies"]["heldout"]


def test_the_configured_sweep_has_at_least_150_cases_of_every_family():
    cases = grid.cases(CONFIG)
    assert len(cases) >= 150 and {c.family for c in cases} == set(grid.FAMILIES)


def test_every_case_is_an_operand_the_advisor_accepts():
    for case in grid.cases(CONFIG):
        spec = describe.operand(case, shared_bytes=65536, registers=128)
        from_mapping(operand_spec({k: v for k, v in spec.items() if k != "fa3_load_path"}))


def test_ctas_per_sm_is_limited_by_shared_memory_registers_and_warps():
    assert describe.ctas_per_sm(100_000, 64, 4) == 2          # two 100 kB CTAs fit 228 KiB
    assert describe.ctas_per_sm(1000, 255, 8) == 1            # 255 registers x 256 threads: one CTA
    assert describe.ctas_per_sm(0, 16, 4) == 16               # 64 warps / 4


def test_the_pointer_kernel_is_cp_async_only_where_it_issues_more_ldgsts_into_a_buffer_of_the_operand():
    assert alternative({"sass_ldgsts": 4}, {"sass_ldgsts": 40, "shared_bytes": 3084}, 1024) == "cp_async"
    assert alternative({"sass_ldgsts": 4}, {"sass_ldgsts": 4, "shared_bytes": 3084}, 1024) == "plain_loads"
    # a gather of short rows: its LDGSTS are the index prefetches, the rows go to registers
    assert alternative({"sass_ldgsts": 4}, {"sass_ldgsts": 67, "shared_bytes": 12}, 64) == "plain_loads"


def _synthetic_raw(folder, ratio_by_family):
    """Raw data as measure.py writes them, for the small sweep below, with TMA / pointer times
    drawn around ``ratio_by_family``."""
    small = {**CONFIG, "gemm": {**CONFIG["gemm"], "shapes": [[512, 512, 512]]},
             "attention": {**CONFIG["attention"], "tokens": [1024]},
             "paged_decode": {**CONFIG["paged_decode"], "context_tokens": [2048]},
             "gather": {**CONFIG["gather"], "row_elements": [32, 2048]}}
    version = frozen.current_version()
    rng = np.random.default_rng(0)
    cases, samples, kernels = [], [], []
    for case in grid.cases(small):
        cases.append({"family": case.family, "case": case.key, **case.params,
                      **describe.operand(case, 65536, 128), "alternative": "cp_async", "tma_max_error": 0.001,
                      "pointer_max_error": 0.001, "advisor_version": version["version"],
                      "advisor_sha256": version["sha256"], "measured_on": "NVIDIA H200"})
        for pair in range(8):
            pointer = 100 * rng.uniform(0.99, 1.01)
            order = ["tma", "pointer"] if pair % 2 == 0 else ["pointer", "tma"]
            wobble = 1.01 if pair % 2 else 0.99          # ratios 1% either side: a ratio of 1 ties
            times = {"pointer": pointer, "tma": pointer * ratio_by_family[case.family] * wobble}
            samples += [{"case": case.key, "pair": pair, "position": i, "variant": v, "time_us": times[v]}
                        for i, v in enumerate(order)]
        for variant in ("tma", "pointer"):
            kernels.append({"case": case.key, "variant": variant, "kernel": f"{case.family}_{variant}",
                            "warps": case["warps"], "registers": 128, "shared_bytes": 65536,
                            "sass_utmaldg": 4 if variant == "tma" else 0, "sass_ldgsts": 0 if variant == "tma" else 8,
                            "sass_ldg": 0, "sass_hgmma": 4, "sass_qgmma": 0, "sass_hmma": 0})
    folder.mkdir(parents=True)
    frame = pd.DataFrame(cases)
    frame.to_csv(folder / "cases.csv", index=False)
    pd.DataFrame(samples).to_csv(folder / "samples.csv", index=False)
    pd.DataFrame(kernels).to_csv(folder / "kernels.csv", index=False)
    gpu = json.loads((REPO_ROOT / "results" / "h200" / "crossover" / "provenance.json").read_text())["gpu"]
    record = provenance.build(study="heldout", gpu=gpu, study_config=small,
                              repo=REPO_ROOT, started=provenance.utc_now(), extra={"configurations": len(frame)})
    (folder / "provenance.json").write_text(json.dumps(record, default=str))
    return frame


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    folder = tmp_path_factory.mktemp("results") / "h200" / "heldout"
    _synthetic_raw(folder, {"gemm": 0.8, "attention": 1.0, "paged_decode": 1.2, "gather": 1.5})
    return folder


def test_synthetic_raw_data_pass_the_schema(raw):
    loaded = raw_data.load(STUDY, raw)
    assert len(loaded["cases.csv"]) == loaded.provenance["configurations"]


def test_aggregate_decides_each_case_by_the_bootstrap_interval_of_its_pairs(raw, tmp_path):
    aggregate.aggregate(raw, tmp_path / "derived")
    cases = pd.read_csv(tmp_path / "derived" / "cases.csv")
    assert list(cases.columns[:len(COLUMNS)]) == list(COLUMNS)
    assert (cases.ratio_low <= cases.ratio).all() and (cases.ratio <= cases.ratio_high).all()
    by_family = cases.groupby("family").winner.agg(set)
    assert by_family["gemm"] == {"tma"} and by_family["gather"] == {"cp_async"}
    assert by_family["paged_decode"] == {"cp_async"} and by_family["attention"] == {"tie"}
    families = pd.read_csv(tmp_path / "derived" / "families.csv")
    assert families.cases.sum() == len(cases)
