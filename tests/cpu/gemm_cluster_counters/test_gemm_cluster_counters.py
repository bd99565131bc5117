"""gemm_cluster_counters without a GPU: the configurations it profiles, its config checks, the ncu
command and output parsing, and the analysis of synthetic counters whose derived numbers are known."""
import copy
from pathlib import Path

import pandas as pd
import pytest
import yaml
from gemm_cluster_counters_fixture import CLOCK_HZ, DURATION_NS, SM_COUNT, synthetic_raw
from gemm_cluster_fixture import synthetic_samples

from tma_study.harness.ncu import base_name, listed_metrics, number
from tma_study.studies import discover
from tma_study.studies.gemm_cluster_counters import (
    aggregate,
    configs,
    macros,
    ncu_run,
    rules,
    tables,
)

REPO = Path(__file__).resolve().parents[3]
CONFIG = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
STUDY = CONFIG["studies"]["gemm_cluster_counters"]
CLUSTER_STUDY = CONFIG["studies"]["gemm_cluster"]


@pytest.fixture(scope="module")
def samples():
    """gemm_cluster's synthetic samples (best order of every variant: swizzle 2 for the 1x1, ...)."""
    return synthetic_samples(CLUSTER_STUDY)


def test_profiles_each_variant_at_its_best_order_then_the_default(samples):
    profiled = configs.profiled(STUDY, samples)
    count = len(STUDY["dtypes"]) * len(STUDY["families"]) * len(STUDY["clusters"])
    assert len(profiled) == 2 * count
    assert [p.order for p in profiled] == ["best"] * count + ["default"] * count
    best = {p.variant: (p.swizzle, p.raster_order) for p in profiled if p.order == "best"}
    one = next(n for n in best if n.endswith("_c1x1"))
    assert best[one][0] == 2                       # the fixture's 1x1 is fastest at swizzle 2
    assert all((p.swizzle, p.raster_order) == (1, "heuristic") for p in profiled if p.order == "default")
    assert len({p.key for p in profiled}) == len(profiled)


def test_a_size_the_orders_run_lacks_names_the_key(samples):
    study = {**STUDY, "size": 2048}
    with pytest.raises(ValueError, match=r"studies.gemm_cluster_counters.size.*2048.*4096"):
        configs.profiled(study, samples)


def test_a_variant_the_orders_run_lacks_names_the_key(samples):
    study = {**STUDY, "clusters": [[1, 1], [2, 1]]}
    few = samples[~samples.variant.str.endswith("_c2x1")]
    with pytest.raises(ValueError, match=r"studies.gemm_cluster_counters.orders_from.*c2x1"):
        configs.profiled(study, few)


def test_config_checks_name_this_study_key():
    study = copy.deepcopy(STUDY)
    study["clusters"] = [[2, 1]]
    messages = configs.check_config(study)
    assert messages and all("studies.gemm_cluster_counters.clusters" in m for m in messages)
    study = copy.deepcopy(STUDY)
    study["families"][0]["mainloop"] = "cpasync_warpspecialized"
    assert any("studies.gemm_cluster_counters.families[0].mainloop" in m for m in configs.check_config(study))


def test_a_measure_run_needs_the_orders_run(tmp_path, monkeypatch):
    config = copy.deepcopy(CONFIG)
    config["run_studies"] = ["gemm_cluster_counters"]
    study = {**config["studies"]["gemm_cluster_counters"], "orders_from": "no-such-label"}
    messages = configs.check_config(study, expand=True, config=config)
    assert any("orders_from" in m and "no-such-label" in m and "does not exist" in m for m in messages)
    assert configs.check_config(study, expand=False, config=config) == []     # analysis needs no orders run


def test_the_config_validation_refuses_an_unknown_key():
    from tma_study import config as config_mod
    config = copy.deepcopy(CONFIG)
    config["studies"]["gemm_cluster_counters"]["sizes"] = [8192]
    with pytest.raises(config_mod.ConfigError, match="gemm_cluster_counters"):
        config_mod.validate(config, discover())


def test_compile_inputs_are_the_gemm_objects():
    inputs = configs.compile_inputs(STUDY)
    assert len(inputs) == 2 * len(configs.variants(STUDY))
    assert all(p.startswith("build/gemm/obj/sm90_tma_") for p in inputs)


QUERY = """Device NVIDIA H200 (GH100)
------------------------------------------------------------------------------
Metric Name                                     Metric Type  Metric Unit  Metric Description
gpu__time_duration                              Counter      nsecond      total duration in nanoseconds
sm__cycles_elapsed                              Counter      cycle        # of cycles elapsed on SM
lts__t_sectors_srcunit_tex_op_read              Counter      sector       # of LTS sectors from unit TEX for reads
lts__t_requests_srcunit_tex_op_read             Counter                   # of LTS requests from unit TEX for reads
lts__throughput                                 Throughput   %            L2 throughput
"""


def test_metrics_this_ncu_lacks_are_left_out():
    listed = listed_metrics(QUERY)
    assert "lts__t_sectors_srcunit_tex_op_read" in listed and "Metric" not in listed
    kept, missing = ncu_run.usable(listed)
    assert set(kept) == {"duration_ns", "sm_clock_hz", "l2_read_sectors", "l2_read_requests", "l2_read_sectors_pct",
                         "l2_throughput_pct"}
    assert "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active" in missing
    assert base_name("lts__t_sectors.avg.pct_of_peak_sustained_elapsed") == "lts__t_sectors"


def test_without_the_required_metrics_it_stops():
    with pytest.raises(ValueError, match="lts__t_sectors_srcunit_tex_op_read.sum"):
        ncu_run.usable({"gpu__time_duration", "sm__cycles_elapsed"})


def test_the_command_counts_only_the_window_with_clocks_as_they_are():
    kept, _ = ncu_run.usable(listed_metrics(QUERY))
    cmd = ncu_run.command("ncu", kept, "spec.json", "checks.json")
    assert cmd[cmd.index("--profile-from-start") + 1] == "off"
    assert cmd[cmd.index("--clock-control") + 1] == "none"
    assert cmd[-3:] == [ncu_run.CHILD_MODULE, "spec.json", "checks.json"]
    assert cmd[cmd.index("--metrics") + 1].split(",") == list(kept.values())


def _raw_csv(metrics: dict, rows: int, duration_unit: str = "ns") -> str:
    names = ["ID", "Kernel Name", *metrics.values()]
    units = ["", "", *(duration_unit if c == "duration_ns" else "" for c in metrics)]
    lines = ["==PROF== Connected to process", ",".join(f'"{n}"' for n in names), ",".join(f'"{u}"' for u in units)]
    for i in range(rows):
        values = [str(i), "void cutlass::device_kernel<Gemm<int, 3>>(Params)",
                  *("1,000.5" if c == "duration_ns" else str(i + 1) for c in metrics)]
        lines.append(",".join(f'"{v}"' for v in values))
    return "\n".join(lines)


def test_parse_reads_one_row_per_configuration():
    kept, _ = ncu_run.usable(listed_metrics(QUERY))
    rows = ncu_run.parse(_raw_csv(kept, 3, "us"), kept, 3)
    assert len(rows) == 3 and rows[0]["duration_ns"] == pytest.approx(1000.5e3)
    assert rows[2]["l2_read_sectors"] == 3
    assert rows[0]["kernel"] == "void cutlass::device_kernel"
    assert pd.isna(rows[0]["tensor_active_pct"])                 # left out: empty column
    with pytest.raises(ValueError, match="counted 3 kernels, expected one per configuration \\(4\\)"):
        ncu_run.parse(_raw_csv(kept, 3), kept, 4)
    with pytest.raises(ValueError, match="not a time unit"):
        ncu_run.parse(_raw_csv(kept, 3, "byte"), kept, 3)
    assert pd.isna(number("n/a")) and number("1,234.5") == 1234.5


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    results = tmp_path_factory.mktemp("results") / "h200"
    raw = synthetic_raw(results / "gemm_cluster_counters", STUDY)
    from gemm_cluster_fixture import synthetic_raw as cluster_raw
    cluster_raw(results / "gemm_cluster", CLUSTER_STUDY, multicast=False)
    study = {**STUDY, "orders_from": "h200"}
    assert aggregate.gemm_cluster_dir(raw, study) == results / "gemm_cluster"
    aggregate.aggregate(raw, raw / "derived")
    return raw


def test_derived_quantities(analysed):
    counters = pd.read_csv(analysed / "derived" / "counters.csv")
    row = counters[(counters.cluster == "1x1") & (counters.tile == "128x128x64") & (counters.dtype == "fp8_e4m3")
                   & (counters.order == "best")].iloc[0]
    kblocks = (8192 // 128) ** 2 * (8192 // 64)
    assert row.kblocks == kblocks
    assert row.tflops == pytest.approx(2 * 8192 ** 3 / (DURATION_NS * 1e-9) / 1e12)
    assert row.cycles_per_kblock == pytest.approx(DURATION_NS * 1e-9 * CLOCK_HZ * SM_COUNT / kblocks)
    assert row.l2_reads_per_operand_byte == pytest.approx(1.0)
    assert row.bytes_per_l2_request == pytest.approx(64.0)
    pair = counters[(counters.cluster == "2x1") & (counters.order == "best")]
    assert pair.l2_reads_per_operand_byte.tolist() == pytest.approx([0.75] * len(pair))
    assert row.dram_reads_per_operand_byte == pytest.approx(4 * 8192 ** 2 / (2 * 8192 ** 2))


def test_contrast_pairs_each_cluster_with_its_best_1x1_and_the_timed_gain(analysed):
    contrast = pd.read_csv(analysed / "derived" / "contrast.csv")
    assert len(contrast) == len(STUDY["dtypes"]) * len(STUDY["families"]) * (len(STUDY["clusters"]) - 1)
    assert (contrast.sibling.str.endswith("_c1x1")).all()
    assert contrast.l2_reads_ratio[contrast.cluster == "2x2"].tolist() == pytest.approx([0.5] * 6)
    two = contrast[contrast.cluster == "2x1"]
    # the gemm_cluster fixture: 2x1 best (0.88) against the 1x1's best (0.95): 8 % faster, a win
    assert two.timed_fair_gain.tolist() == pytest.approx([0.95 / 0.88] * len(two), rel=0.01)
    noisy = two.family == "tma_pingpong_t128x128x64"          # the fixture's rounds alternate by 10 %: ties
    assert set(two.timed_fair_verdict[~noisy]) == {"win"} and set(two.timed_fair_verdict[noisy]) == {"tie"}


def test_rule_scores_the_l2_request_bound_families_against_every_timed_size(analysed):
    rule = pd.read_csv(analysed / "derived" / "rule.csv")
    assert list(rule.scope) == ["4096", "8192", "16384", aggregate.EVERY_SIZE]
    every = rule[rule.scope == aggregate.EVERY_SIZE].iloc[0]
    assert every.comparisons == 3 * len(STUDY["dtypes"]) * len(STUDY["families"]) * (len(STUDY["clusters"]) - 1)
    assert every.predicted_wins == 0                 # the fixture's tag share is 60 %: no family is L2-request bound
    assert every.gemm_wins > 0 and every.gemm_wins_predicted == 0
    assert every.fraction_agree == pytest.approx(1 - every.gemm_wins / every.comparisons)


def test_rule_marks_a_tag_bound_family(analysed):
    counters = pd.read_csv(analysed / "derived" / "counters.csv")
    bound = (counters.family == "tma_pingpong_t128x128x64") & (counters.dtype == "fp8_e4m3")
    counters.loc[bound, ["l2_tag_requests_pct", "tensor_active_pct"]] = [95.0, 80.0]
    timed = aggregate.fair_gains(analysed.parent / "gemm_cluster")
    every = aggregate.rule(counters, timed).iloc[-1]
    assert every.bound_families == "fp8_e4m3/tma_pingpong_t128x128x64"
    assert every.predicted_wins == 3 * (len(STUDY["clusters"]) - 1)


def test_rule_of_thumb_quotes_the_every_size_row(analysed):
    rows = rules.rules_of_thumb(analysed / "derived", {"config": STUDY})
    every = pd.read_csv(analysed / "derived" / "rule.csv").iloc[-1]
    assert len(rows) == 1 and set(rows[0]["claims"]) == set(rules.CLAIMS)
    assert f"names {every.gemm_wins_predicted} of {every.gemm_wins} wins" in rows[0]["evidence"]
    assert f"agrees with {every.agree} of {every.comparisons} comparisons" in rows[0]["evidence"]


def test_without_gemm_cluster_samples_the_rule_says_so(analysed):
    counters = pd.read_csv(analysed / "derived" / "counters.csv")
    rule = aggregate.rule(counters, None)
    assert rule.status.iloc[0].startswith("not measured")


def test_tables_and_macros(analysed, tmp_path):
    from tma_study.harness import provenance as provenance_mod
    record = provenance_mod.read(analysed / "provenance.json", study="gemm_cluster_counters")
    tables.write_tables(analysed / "derived", record, tmp_path)
    for name in discover()["gemm_cluster_counters"].tables:
        assert (tmp_path / f"{name}.tex").read_text().count(r"\begin{table") == 1
    text = (tmp_path / "gemm_cluster_counters.tex").read_text()
    assert "0.75" in text and "1.00" in text
    values = macros.macros(analysed / "derived", record)
    assert values["gemmClusterCountersLtwoReadsPerOperandByteFpeightPingpongSmallTwoByOne"] == "0.75"
    assert values["gemmClusterCountersSize"] == "8192"
    assert all(name.isalpha() for name in values)
