"""CPU: the gemm_cluster study: its config and the errors that name a key, its variants (the gemm
study's objects), the round-robin plan, the sample runner on its samples, and the analysis
(tile order, gains at both baselines, ties, the multicast rule's score, tables, macros, claims) on
synthetic samples whose gains are known."""
import copy
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from gemm_cluster_fixture import NOISY, synthetic_raw
from gpu_fakes import CountingMonitor, FakeEvent, FakeStream, FakeTorch
from tma_study import config as config_mod
from tma_study.paper.macros import check_macros
from tma_study.studies import discover
from tma_study.gemm_lib import variants as gemm_variants
from tma_study.gemm_lib.rows import TIE_TOLERANCE
from tma_study.gemm_lib import cluster_configs as configs
from tma_study.studies.gemm_cluster import STUDY, library, schedule
from tma_study.studies.gemm_cluster import aggregate as agg
from tma_study.studies.gemm_cluster.macros import macros
from tma_study.studies.gemm_cluster.tables import write_tables
from tma_study.gemm_lib.runner import SampleRunner

REPO = Path(__file__).resolve().parents[3]
CONFIG = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
GPU_BUDGET_S = 240.0                  # the default config's GPU time at its estimated rates


@pytest.fixture
def study_config():
    return copy.deepcopy(CONFIG["studies"]["gemm_cluster"])


# ---------------------------------------------------------------- config and variants

@pytest.mark.parametrize("key,value,fragment", [
    ("sizes", [1000], "studies.gemm_cluster.sizes[0]"),
    ("swizzles", [1, 3], "studies.gemm_cluster.swizzles[1]"),
    ("raster_orders", ["along_k"], "studies.gemm_cluster.raster_orders[0]"),
    ("families", [{"mainloop": "cpasync_cooperative", "tile": [128, 128, 64]}],
     "studies.gemm_cluster.families[0].mainloop"),
    ("rounds", 1, "studies.gemm_cluster.rounds"),
    ("estimate_tflops", {"bf16": 700}, "studies.gemm_cluster.estimate_tflops"),
    # rules between keys (configs.check_config)
    ("clusters", [[2, 1], [1, 2]], "studies.gemm_cluster.clusters': must include [1, 1]"),
    ("swizzles", [2, 4, 8], "studies.gemm_cluster.swizzles': must include 1"),
    ("raster_orders", ["along_m"], "studies.gemm_cluster.raster_orders': must include heuristic"),
    ("families", [{"mainloop": "tma_pingpong", "tile": [128, 256, 64]}],
     "studies.gemm_cluster.families[0]': tma_pingpong_t128x256x64 is not built: ping-pong"),
    # what studies.gemm does not build
    ("families", [{"mainloop": "tma_cooperative", "tile": [128, 128, 64]},
                  {"mainloop": "tma_cooperative", "tile": [64, 128, 64]}],
     "studies.gemm_cluster.families[1]': the gemm study does not build sm90_tma_cooperative_bf16_t64x128x64_c1x1"),
    ("clusters", [[1, 1], [4, 1]], "studies.gemm_cluster.clusters[1]': [4, 1] is not a cluster of studies.gemm"),
])
def test_bad_config_names_the_key(key, value, fragment):
    config = copy.deepcopy(CONFIG)
    config["studies"]["gemm_cluster"][key] = value
    config["run_studies"] = ["gemm_cluster"]
    with pytest.raises(config_mod.ConfigError, match=re.escape(fragment)):
        config_mod.validate(config, discover(), expand=True)         # a measure run's start


def test_only_a_measure_run_of_the_study_needs_gemm_to_build_its_variants(study_config):
    """A run that narrows studies.gemm (fewer variants to build) or only analyses committed data builds
    none of gemm_cluster's variants; the compile and measure steps get build/config/gemm_cluster.json,
    which holds no studies.gemm."""
    narrowed = copy.deepcopy(CONFIG)
    narrowed["studies"]["gemm"]["variants"]["sm90"]["clusters"] = [[1, 1]]
    config_mod.validate(narrowed, discover())
    config_mod.validate({**narrowed, "run_studies": ["gemm"]}, discover(), expand=True)
    with pytest.raises(config_mod.ConfigError, match=re.escape("studies.gemm_cluster.clusters[1]")):
        config_mod.validate({**narrowed, "run_studies": ["gemm", "gemm_cluster"]}, discover(), expand=True)
    alone = {"measure": False, "reference_gpu": CONFIG["reference_gpu"], "studies": {"gemm_cluster": study_config}}
    study_config["clusters"] = [[1, 1], [4, 1]]             # only studies.gemm could refuse it
    config_mod.validate(alone, discover(), expand=True)
    with pytest.raises(ValueError, match=r"studies.gemm_cluster.clusters\[1\]"):
        configs.variants(study_config, gemm_study=CONFIG["studies"]["gemm"])


def test_variants_are_gemm_objects_named_as_gemm_names_them(study_config):
    chosen = configs.variants(study_config, gemm_study=CONFIG["studies"]["gemm"])
    built = {v.name for v in gemm_variants.variants(CONFIG["studies"]["gemm"], "sm90")}
    assert {v.name for v in chosen} <= built
    assert len(chosen) == len(study_config["families"]) * len(study_config["clusters"]) * len(study_config["dtypes"])
    assert all(v.load == "tma" and v.arch == "sm90" for v in chosen)
    assert "sm90_tma_pingpong_fp8_e4m3_t128x128x64_c2x2" in {v.name for v in chosen}
    inputs = library.compile_inputs(study_config)
    assert inputs == [p for v in chosen for p in (f"build/gemm/obj/{v.name}.json", f"build/gemm/obj/{v.name}.o")]
    assert library.library_path(Path("build/compile/gemm_cluster")).name == "libgemm_cluster_sm90.so"
    per_dtype = configs.configurations(study_config, "bf16")
    assert len(per_dtype) == len(chosen) // 2 * len(study_config["swizzles"]) * len(study_config["raster_orders"])
    assert sum(c.is_default_order for c in per_dtype) == len(chosen) // 2
    assert per_dtype[0].key == "sm90_tma_cooperative_bf16_t128x128x64_c1x1/swizzle1/heuristic"


# ---------------------------------------------------------------- the plan

def test_every_round_runs_every_configuration_once_in_its_own_seeded_order(study_config):
    shape = schedule.Shape(8192, "bf16")
    rounds = schedule.plan(study_config, shape)
    expected = configs.configurations(study_config, "bf16")
    assert len(rounds) == study_config["rounds"]
    orders = []
    for r, samples in enumerate(rounds):
        assert sorted(s.configuration.key for s in samples) == sorted(c.key for c in expected)
        assert [s.position for s in samples] == list(range(len(expected)))
        assert {s.round for s in samples} == {r} and {s.launches for s in samples} == {13}
        assert samples[0].kernel == samples[0].configuration.key          # the runner's launcher key
        orders.append([s.kernel for s in samples])
    assert len({tuple(o) for o in orders}) == len(orders)                # shuffled afresh each round
    assert schedule.plan(study_config, shape) == rounds                  # seeded: the same plan again
    other = schedule.plan({**study_config, "order_seed": 1}, shape)
    assert [s.kernel for s in other[0]] != orders[0]
    assert [s.kernel for s in schedule.plan(study_config, schedule.Shape(8192, "fp8_e4m3"))[0]] \
        != [s.kernel.replace("bf16", "fp8_e4m3") for s in rounds[0]]


def test_launches_per_sample_and_the_gpu_time_estimate(study_config):
    shapes = schedule.shapes(study_config)
    assert [(s.size, s.dtype) for s in shapes] == [(size, d) for size in (4096, 8192, 16384)
                                                   for d in ("bf16", "fp8_e4m3")]
    launches = {(s.size, s.dtype): schedule.launches_per_sample(study_config, s) for s in shapes}
    assert launches[16384, "bf16"] == 2 and launches[16384, "fp8_e4m3"] == 3 and launches[4096, "bf16"] == 102
    for s in shapes:     # each sample about sample_s long at the estimated rate
        seconds = launches[s.size, s.dtype] * schedule.seconds_per_launch(study_config, s)
        assert seconds == pytest.approx(study_config["sample_s"], rel=0.3)
    total = schedule.estimate_seconds(study_config)
    warmups = len(shapes) * study_config["warmup_s"]
    assert warmups < total < GPU_BUDGET_S
    assert schedule.launches_per_sample({**study_config, "sample_s": 0.001}, schedule.Shape(16384, "bf16")) == 1


def test_the_runner_times_gemm_cluster_samples():
    """gemm_paired's runner takes any sample with a kernel key and a launch count."""
    study = copy.deepcopy(CONFIG["studies"]["gemm_cluster"])
    study.update(rounds=3, sizes=[4096], dtypes=["bf16"], swizzles=[1, 2])
    samples = schedule.plan(study, schedule.Shape(4096, "bf16"))[0][:6]
    stream, monitor = FakeStream(), CountingMonitor()
    work_ms = {s.kernel: 0.1 * (i + 1) for i, s in enumerate(samples)}

    def launcher(kernel):
        def launch():
            stream.pending_work += work_ms[kernel]
        return launch

    FakeEvent.clock[0] = 0.0
    rows = SampleRunner(FakeTorch, stream, monitor, poll_s=0.0, study="gemm_cluster").run(
        samples, {k: launcher(k) for k in work_ms}, deadline_s=10, started=0.0)
    for sample, row in zip(samples, rows):
        assert row["time_us"] == pytest.approx(1e3 * work_ms[sample.kernel])


def test_the_runner_names_the_study_at_its_deadline():
    class NeverDone(FakeEvent):
        def query(self):
            return False
    torch = type("T", (), {"cuda": type("C", (), {"Event": NeverDone})})
    sample = schedule.Sample(4096, "bf16", 0, 0, configs.Configuration("v", 1, "heuristic"), 1)
    with pytest.raises(TimeoutError, match="^gemm_cluster: sample"):
        SampleRunner(torch, FakeStream(), CountingMonitor(), 0.001, study="gemm_cluster").run(
            [sample], {sample.kernel: lambda: None}, deadline_s=0.05, started=0.0)


# ---------------------------------------------------------------- analysis on synthetic samples

@pytest.fixture
def analysed(tmp_path, study_config):
    raw = synthetic_raw(tmp_path / "results" / "gemm_cluster", study_config)
    STUDY.entry("aggregate")(raw, raw / "derived")
    return raw


def test_derived_files_and_configurations(analysed, study_config):
    derived = analysed / "derived"
    assert {p.name for p in derived.iterdir()} == set(STUDY.derived_files)
    table = pd.read_csv(derived / "configurations.csv")
    assert len(table) == sum(len(configs.configurations(study_config, s.dtype)) for s in schedule.shapes(study_config))
    assert (table.rounds == study_config["rounds"]).all()
    best = table[table.is_best_order]
    assert len(best) == len(table.drop_duplicates(["variant", "size"]))          # one best order per variant
    by_cluster = best.groupby("cluster").swizzle.unique()
    assert list(by_cluster["1x1"]) == [2] and list(by_cluster["2x1"]) == [4] and list(by_cluster["2x2"]) == [8]
    assert list(by_cluster["1x2"]) == [1]                      # equal medians: the smaller swizzle


def test_tile_order_gain_of_the_1x1_baseline(analysed):
    order = pd.read_csv(analysed / "derived" / "tile_order.csv")
    ones = order[order.cluster == "1x1"]
    assert ones.order_gain.values == pytest.approx(1 / 0.95, rel=1e-3)
    assert (ones.order_verdict == "win").all() and (ones.best_swizzle == 2).all()
    assert order[order.cluster == "1x2"].order_gain.values == pytest.approx(1.0)


def test_gains_at_both_baselines_and_the_tie_rule(analysed, study_config):
    gains = pd.read_csv(analysed / "derived" / "gains.csv")
    assert len(gains) == 3 * 3 * 3 * 2                # families x cluster shapes x sizes x dtypes
    quiet = gains[gains.family + gains.cluster != "".join(NOISY)].set_index(["family", "cluster", "size", "dtype"])
    for cluster, default, fair, verdict in (("2x1", 1 / 0.90, 0.95 / 0.88, "win"), ("1x2", 1 / 0.94, 0.95 / 0.94, "tie"),
                                            ("2x2", 1 / 0.96, 0.95 / 0.945, "tie")):
        rows = quiet.xs(cluster, level="cluster")
        assert rows.default_gain.values == pytest.approx(default, rel=1e-3)
        assert rows.fair_gain.values == pytest.approx(fair, rel=1e-3)
        assert (rows.default_verdict == "win").all() and (rows.fair_verdict == verdict).all()
        assert rows.one_order_gain.values == pytest.approx(1 / 0.95, rel=1e-3)
        share = 1 - (fair - 1) / (default - 1)
        assert rows.order_share_of_gain.values == pytest.approx(share, rel=1e-2)
        assert (rows.fair_spread < TIE_TOLERANCE).all() and (rows.fair_tolerance == TIE_TOLERANCE).all()
    noisy = gains[(gains.family == NOISY[0]) & (gains.cluster == NOISY[1])]
    assert (noisy.default_gain > 1 + TIE_TOLERANCE).all()                     # a gain above the tolerance...
    assert (noisy.default_spread > noisy.default_gain - 1).all()
    assert (noisy.default_verdict == "tie").all()                             # ...inside the rounds' spread
    assert not gains.cluster_exceeds_tiles.any()
    assert set(gains.a_tile_bytes) == {16384, 8192}                          # 128 x 64 bf16, fp8
    same = pd.read_csv(analysed / "derived" / "same_order.csv")
    assert len(same) == len(gains) * len(study_config["swizzles"]) * len(study_config["raster_orders"])
    at_default = same[same.is_default_order].set_index(["variant", "size"]).gain
    assert at_default.values == pytest.approx(gains.set_index(["variant", "size"]).default_gain[at_default.index].values)
    two = same[(same.cluster == "2x1") & (same.swizzle == 2) & (same.family != NOISY[0])]
    assert two.gain.values == pytest.approx(0.95 / 0.89, rel=1e-3)


def test_summary_per_dtype_and_cluster(analysed):
    summary = pd.read_csv(analysed / "derived" / "summary.csv")
    assert sorted(zip(summary.dtype, summary.cluster)) == [(d, c) for d in ("bf16", "fp8_e4m3")
                                                           for c in ("1x2", "2x1", "2x2")]
    row = summary[(summary.dtype == "bf16") & (summary.cluster == "2x1")].iloc[0]
    assert row.comparisons == 9 and row.fair_wins == 6 and row.fair_ties == 3       # the noisy family ties
    assert row.fair_gain_median == pytest.approx(0.95 / 0.88, rel=1e-3)


def test_rule_scoring_against_both_baselines():
    """The microbenchmark predicts 'not faster' (loss) for 2x1 and 2x2 and 'win' for 1x2 in hbm: its
    not-faster prediction holds where the GEMM does not win."""
    gains = pd.DataFrame({"cluster": ["2x1", "1x2", "2x2", "2x2"], "cluster_m": [2, 1, 2, 2], "cluster_n": [1, 2, 2, 2],
                          "a_tile_bytes": [16384] * 4, "cluster_exceeds_tiles": [False, False, False, True],
                          "default_gain": [1.2, 1.1, 1.05, 1.3], "default_verdict": ["win", "win", "win", "win"],
                          "fair_gain": [1.1, 1.0, 0.99, 1.3], "fair_verdict": ["win", "tie", "tie", "win"]})
    verdicts = pd.DataFrame({"working_set": "hbm", "cluster_x": [2, 1, 2], "cluster_y": [1, 2, 2],
                             "tile_bytes": 16384, "status_vs_no_cluster": ["loss", "win", "tie"]})
    rule = agg.rule(gains, verdicts, Path("nowhere")).set_index(["baseline", "scope"])
    every = rule.loc[("default_order", agg.EVERY_CLUSTER)]
    assert (every.comparisons, every.predicted_not_faster, every.not_faster_held) == (3, 2, 0)
    assert every.left_out_idle_ctas == 1 and every.fraction_agree == pytest.approx(1 / 3)
    fair = rule.loc[("best_order", agg.EVERY_CLUSTER)]
    assert (fair.not_faster_held, fair.fraction_not_faster_held) == (1, 0.5)
    assert rule.loc[("best_order", "2x2")].fraction_not_faster_held == 1.0
    assert np.isnan(rule.loc[("best_order", "1x2")].fraction_not_faster_held)      # predicted a win: no score
    missing = agg.rule(gains, None, Path("results/x/multicast"))
    assert missing.status.iloc[0].startswith("NOT MEASURED") and "baseline" not in missing


def test_rule_on_the_committed_multicast_data(analysed):
    rule = pd.read_csv(analysed / "derived" / "rule.csv")
    assert set(rule.baseline) == {"default_order", "best_order"} and set(rule.working_set) == {"hbm", "l2"}
    every = rule[rule.scope == agg.EVERY_CLUSTER].set_index(["baseline", "working_set"])
    assert (every.comparisons == 54).all()
    held = every.not_faster_held
    # synthetic gains: at the default order every cluster wins except the noisy family's ties;
    # best against best only 2x1 wins
    assert (held.xs("default_order") <= 6).all() and (held.xs("best_order") >= 36 - 1).all()


def test_without_multicast_data_the_rule_says_so(tmp_path, study_config):
    raw = synthetic_raw(tmp_path / "results" / "gemm_cluster", study_config, multicast=False)
    STUDY.entry("aggregate")(raw, raw / "derived")
    rule = pd.read_csv(raw / "derived" / "rule.csv")
    assert rule.status.iloc[0].startswith("NOT MEASURED")
    provenance = json.loads((raw / "provenance.json").read_text())
    write_tables(raw / "derived", provenance, tmp_path / "tables")
    check_macros(macros(raw / "derived", provenance), "gemm_cluster", prefix="gemmCluster")


def test_tables_macros_and_paper_section(analysed, tmp_path):
    provenance = json.loads((analysed / "provenance.json").read_text())
    tables = tmp_path / "tables"
    write_tables(analysed / "derived", provenance, tables)
    for name in STUDY.tables:
        assert "synthetic test data" in (tables / f"{name}.tex").read_text()
    assert "tma_cooperative_t128x256x64" in (tables / "gemm_cluster_gains.md").read_text()
    STUDY.entry("kernel_table")(STUDY, analysed / "kernels.csv", tables)
    assert (tables / "gemm_cluster_kernels.md").is_file()
    found = macros(analysed / "derived", provenance)
    check_macros(found, "gemm_cluster", prefix="gemmCluster")
    assert found["gemmClusterOneOrderGainLarge"] == f"{1 / 0.95:.2f}"
    assert found["gemmClusterFairGainBfTwoByOne"] == f"{0.95 / 0.88:.2f}"
    assert found["gemmClusterSwizzles"] == "1, 2, 4, 8" and found["gemmClusterRounds"] == "12"
    section = (REPO / "paper" / "sections" / "studies" / "gemm_cluster.tex").read_text()
    used = set(re.findall(r"\\(gemmCluster[A-Za-z]+)", section))
    assert used and used <= set(found), sorted(used - set(found))


def test_every_claim_evaluates_on_synthetic_data(analysed):
    """Each claim reads columns that exist (PASS or FAIL, never NOT MEASURED) once data exist, and
    says NOT MEASURED while they do not."""
    from tma_study.paper.claims import evaluate, load_claims
    claims = [c for c in load_claims(studies=discover()) if c.study == "gemm_cluster"]
    assert len(claims) == 6
    outcomes = {c.id: evaluate(c, analysed.parent) for c in claims}
    assert outcomes.pop("gemm_cluster_gains_only_for_small_fp8_tiles").status in ("PASS", "FAIL")
    assert outcomes.pop("gemm_cluster_gains_only_for_small_fp8_tiles_by_interval").status in ("PASS", "FAIL")
    assert outcomes.pop("gemm_cluster_multicast_rule_beats_its_baselines").status in ("PASS", "FAIL")
    assert {k: o.status for k, o in outcomes.items()} == {
        "gemm_cluster_tile_order_lifts_1x1": "PASS",                   # 1/0.95 > 1.02
        "gemm_cluster_gain_against_best_1x1": "FAIL",                  # the median of win, tie, tie: 0.95/0.94
        "gemm_cluster_multicast_rule_holds_against_fair_baseline": "FAIL"}, {k: o.reason for k, o in outcomes.items()}
    empty = analysed.parent.parent / "empty"
    empty.mkdir()
    assert {evaluate(c, empty).status for c in claims} == {"NOT MEASURED"}


def test_the_rule_of_thumb_counts_the_fair_wins_and_names_its_claims(analysed):
    from tma_study.studies.gemm_cluster.rules import CLAIMS, rules_of_thumb
    gains = pd.read_csv(analysed / "derived" / "gains.csv")
    (row,) = rules_of_thumb(analysed / "derived", {})
    wins = int((gains.fair_verdict == "win").sum())
    assert f"against it a cluster won {wins} of {len(gains)} comparisons" in row["rule"]
    assert row["claims"] == CLAIMS and row["figure"] in STUDY.tables


def test_a_missing_gemm_object_names_the_rule_that_builds_it(tmp_path):
    """gemm_cluster and gemm_paired link the gemm study's objects (gemm.build.link_study_library):
    one not built yet stops the compile step with the files and the workflow target to build them."""
    from tma_study.gemm_lib import build as gemm_build
    with pytest.raises(gemm_build.BuildToolError, match=r"1 files of the gemm_cluster variants are not built "
                                                        r"\(.*not_a_variant\.json.*snakemake -c16 "
                                                        r"build/compile/gemm_cluster/resources\.csv"):
        gemm_build.link_study_library("gemm_cluster", ["build/gemm/obj/not_a_variant.json"], tmp_path,
                                      tmp_path / "lib.so")
    assert not (tmp_path / "resources.csv").exists()
