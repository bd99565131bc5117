"""The gemm study's analysis on synthetic data: derived tables, the 95 % bar, the rules table,
SM100 rows reported as not measured everywhere they would show, tables and figures."""
import runpy
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from gemm_fixture import write_raw_folder

from tma_study.report import figures
from tma_study.studies.gemm import STUDY
from tma_study.studies.gemm.aggregate import aggregate
from tma_study.studies.gemm.tables import write_kernel_table, write_tables

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("gemm")
    raw = write_raw_folder(root / "results" / "gemm")
    aggregate(raw, raw / "derived")
    write_tables(raw / "derived", __import__("json").loads((raw / "provenance.json").read_text()), root / "tables")
    write_kernel_table(STUDY, raw / "kernels.csv", root / "tables")
    return raw, raw / "derived", root / "tables"


def test_bar_compares_the_best_sm90_tma_variant_with_cublas(folders):
    _, derived, tables = folders
    bar = pd.read_csv(derived / "bar.csv").iloc[0]
    assert bar.variant == "sm90_tma_cooperative_bf16_t128x256x64_c2x1"
    assert bar.fraction_of_cublas == pytest.approx(0.97 * 1.01, rel=1e-6) and bar.passes
    assert "| met |" in (tables / "gemm_bar.md").read_text()


def test_speedup_pairs_best_with_best_and_same_configuration(folders):
    _, derived, _ = folders
    speedup = pd.read_csv(derived / "speedup.csv")
    big = speedup[(speedup["shape"] == "square/square/m8192n8192k8192") & (speedup.dtype == "bf16")]
    assert set(big.compared) == {"best", "cooperative 128x256x64 1x1"}
    same = big[big.compared != "best"].iloc[0]
    assert same.speedup == pytest.approx(1 / 0.8) and same.winner == "tma"
    small = speedup[(speedup.m == 16) & (speedup.compared != "best")]
    assert set(small.winner) == {"cpasync"}


def test_multicast_gain_is_relative_to_the_same_variant_at_1x1(folders):
    _, derived, _ = folders
    summary = pd.read_csv(derived / "multicast_summary.csv")
    assert set(summary.cluster) == {"2x1"} and summary.median_gain.iloc[0] == pytest.approx(1.01)


def test_cublas_fraction_uses_the_same_shape_and_dtype(folders):
    _, derived, _ = folders
    cublas = pd.read_csv(derived / "cublas.csv")
    row = cublas[(cublas.m == 1024) & (cublas.dtype == "fp8_e4m3") & (cublas.load == "tma")].iloc[0]
    assert row.fraction_of_cublas == pytest.approx(0.6 * 1.01 / 0.65)


def test_rules_without_other_studies_say_not_measured(folders):
    _, derived, tables = folders
    rules = pd.read_csv(derived / "rules.csv")
    assert all(rules.status.str.startswith("NOT MEASURED"))
    assert "NOT MEASURED" in (tables / "gemm_rules.md").read_text()


def test_crossover_rule_is_scored_when_crossover_data_is_beside(folders, tmp_path):
    from crossover_fixture import write_realistic_raw_folder

    from tma_study.studies.gemm.aggregate import speedup, with_cublas_fraction
    from tma_study.studies.gemm.predict import crossover_verdicts, rules

    raw, _, _ = folders
    crossover = crossover_verdicts(write_realistic_raw_folder(tmp_path / "crossover"))
    scored = rules(speedup(with_cublas_fraction(pd.read_csv(raw / "gemm.csv"))), crossover, None, None,
                   tmp_path / "multicast")
    rows = scored[scored.rule == "crossover"]
    assert len(rows) and set(rows.status) == {"measured"}
    assert all(rows.predicted_right + rows.predicted_wrong + rows.ties == rows.comparisons)
    assert scored[scored.rule == "multicast"].status.iloc[0].startswith("NOT MEASURED")


def test_sm100_is_reported_as_not_measured(folders):
    _, derived, tables = folders
    status = pd.read_csv(derived / "status.csv")
    sm100 = status[status.arch == "sm100"]
    assert set(sm100.status) == {"not measured: needs an SM100 GPU (Blackwell: B200)"}
    assert set(sm100.load) == {"tma", "cpasync"}
    assert "needs an SM100 GPU" in (tables / "gemm_status.md").read_text()
    assert "needs an SM100 GPU" in (tables / "gemm_run.md").read_text()


def test_kernel_table_lists_every_variant(folders):
    raw, _, tables = folders
    text = (tables / "gemm_kernels.md").read_text()
    assert all(name in text for name in pd.read_csv(raw / "kernels.csv").variant)


@pytest.mark.parametrize("name", ["gemm_speedup", "gemm_cublas"])
def test_figures_draw_and_say_what_was_not_measured(folders, monkeypatch, name):
    raw, derived, _ = folders
    drawn = []
    lay_out = figures.finish
    monkeypatch.setattr(figures, "finish", lambda fig, provenance, pdf, **layout: (
        lay_out(fig, provenance, None, **layout), drawn.append(fig)))
    snakemake = SimpleNamespace(params=SimpleNamespace(derived=str(derived)),
                                input=SimpleNamespace(provenance=str(raw / "provenance.json")),
                                output=SimpleNamespace(pdf=str(raw / f"{name}.pdf")))
    runpy.run_path(str(REPO / "notebooks" / f"{name}.py"), init_globals={"snakemake": snakemake})
    (fig,) = drawn
    texts = ([t.get_text() for ax in fig.axes for t in ax.texts] + [t.get_text() for t in fig.texts]
             + [legend.get_title().get_text() for legend in fig.legends])
    assert any("synthetic test data" in t for t in texts)
    assert any("needs an SM100 GPU" in t for t in texts)


# ---------------------------------------------------------------- rows that could not be measured well

THROTTLED = "not measured: no valid cold sample within the timeout (nvbench discards samples taken while the GPU throttles)"
BAR_VARIANT = "sm90_tma_cooperative_bf16_t128x256x64_c1x1"
SQUARE_8192 = "square/square/m8192n8192k8192"


@pytest.fixture(scope="module")
def throttled(tmp_path_factory):
    """The synthetic run with one bar candidate never measured (every sample throttled), one
    row with fewer samples than min_samples at the throttle floor, and a TMA variant that spills."""
    import json

    root = tmp_path_factory.mktemp("gemm-throttled")
    raw = write_raw_folder(root / "results" / "gemm")
    gemm = pd.read_csv(raw / "gemm.csv")
    at = (gemm.variant == BAR_VARIANT) & (gemm["shape"] == SQUARE_8192)
    gemm.loc[at, ["status", "timing_status"]] = THROTTLED          # as measure.py writes such a row
    timed = [c for c in gemm.columns if c.startswith("time_")] + ["tflops", "sm_clock_mhz_mean"]
    gemm.loc[at, timed] = float("nan")
    gemm.loc[at, "samples"] = 0
    weak = (gemm.variant == "sm90_tma_cooperative_bf16_t128x256x64_c2x1") & (gemm["shape"] == SQUARE_8192)
    gemm.loc[weak, ["samples", "sm_clock_mhz_mean"]] = [3, 1486.0]
    gemm.to_csv(raw / "gemm.csv", index=False)
    kernels = pd.read_csv(raw / "kernels.csv")
    kernels["spill_store_bytes"] = [880 if v.startswith("sm90_tma_cooperative_fp8") else 0 for v in kernels.variant]
    kernels.to_csv(raw / "kernels.csv", index=False)
    provenance = json.loads((raw / "provenance.json").read_text())
    provenance["gpu"]["max_sm_clock_khz"] = 1980000
    (raw / "provenance.json").write_text(json.dumps(provenance))
    aggregate(raw, raw / "derived")
    write_tables(raw / "derived", provenance, root / "tables")
    return raw / "derived", root / "tables"


def test_the_bar_names_the_candidates_that_were_not_measured(throttled):
    derived, tables = throttled
    bar = pd.read_csv(derived / "bar.csv").iloc[0]
    assert (bar.tma_candidates, bar.tma_measured, bar.tma_not_measured) == (2, 1, 1)
    assert bar.tma_not_measured_variants == "tma_cooperative_t128x256x64_c1x1"
    assert bar.variant == "sm90_tma_cooperative_bf16_t128x256x64_c2x1" and bar.samples == 3
    text = (tables / "gemm_bar.md").read_text()
    assert "TMA candidates measured | 1 of 2" in text
    assert "NOT MEASURED | 1: tma_cooperative_t128x256x64_c1x1 (not measured: no valid cold sample" in text
    assert "mean SM clock, MHz (TMA / cuBLAS) | 1486 / 1980" in text


def test_weak_timings_are_flagged_not_dropped(throttled):
    derived, tables = throttled
    measured = pd.read_csv(derived / "measured.csv")
    weak = measured[measured.fewer_than_min_samples]
    assert list(weak.variant) == ["sm90_tma_cooperative_bf16_t128x256x64_c2x1"] and bool(weak.at_throttle_floor.iloc[0])
    assert measured.at_throttle_floor.sum() == 1
    assert weak.sm_clock_fraction_of_max.iloc[0] == pytest.approx(1486 / 1980)
    status = pd.read_csv(derived / "status.csv").set_index(["arch", "load", "status"])
    assert status.loc[("sm90", "tma", "measured"), "fewer_than_min_samples"] == 1
    assert status.loc[("sm90", "tma", THROTTLED), "rows"] == 1
    assert "throttle floor (75 % of the 1980 MHz maximum, i.e. 1485 MHz)" in (tables / "gemm_status.md").read_text()


def test_speedup_counts_unmeasured_candidates_and_spills(throttled):
    derived, tables = throttled
    speedup = pd.read_csv(derived / "speedup.csv")
    best = speedup[(speedup["shape"] == SQUARE_8192) & (speedup.dtype == "bf16") & (speedup.compared == "best")].iloc[0]
    assert (best.tma_not_measured, best.tma_candidates, best.cpasync_not_measured) == (1, 2, 0)
    fp8 = speedup[(speedup.dtype == "fp8_e4m3") & (speedup.compared != "best")]
    assert set(fp8.tma_spill_store_bytes) == {880} and set(fp8.cpasync_spill_store_bytes) == {0}
    assert "| sm90 | bf16 | square | 2 |" in (tables / "gemm_speedup.md").read_text()
    assert "| 1 of 4 / 0 of 2 |" in (tables / "gemm_speedup.md").read_text()


def test_a_multicast_gain_without_its_1x1_side_says_why(throttled):
    derived, _ = throttled
    gains = pd.read_csv(derived / "multicast.csv")
    row = gains[(gains.variant == "sm90_tma_cooperative_bf16_t128x256x64_c2x1") & (gains["shape"] == SQUARE_8192)]
    assert row.gain.isna().all() and row.status.iloc[0] == f"not compared: its 1x1 variant {THROTTLED}"
    idle = gains[(gains.m == 16) & (gains.arch == "sm90")]
    assert len(idle) and idle.cluster_exceeds_tiles.all()
    assert not gains[(gains.m == 4096) & (gains.arch == "sm90")].cluster_exceeds_tiles.any()
    summary = pd.read_csv(derived / "multicast_summary.csv")
    bf16 = summary[(summary.arch == "sm90") & (summary.dtype == "bf16")].iloc[0]
    assert bf16.not_compared == 1 and bf16.comparisons == 3 and bf16.comparisons_every_cta_busy == 2


def _multicast_stream(status_of_tile: dict[int, float]) -> pd.DataFrame:
    """A 2-D multicast sweep at cluster 2x1: own copies 100 us, multicast as given per tile."""
    rows = []
    for tile, multicast_us in status_of_tile.items():
        for x, y, variant, us in ((1, 1, "no_cluster", 50.0), (2, 1, "no_cluster", 100.0), (2, 1, "cluster", 100.0),
                                  (2, 1, "multicast", multicast_us)):
            rows.append({"pattern": "2d", "working_set": "hbm", "cluster_x": x, "cluster_y": y, "variant": variant,
                         "tile_bytes": tile, "stages": 4, "ctas_per_sm": 1, "consumer_threads": 256,
                         "release": "warp", "grid_ctas": 132, "clusters": 66, "max_active_clusters": 66,
                         "busy_cta_share": 1.0, "steps_total": 10, "stage_bytes": 2 * tile, "bytes_delivered": 1e9,
                         "bytes_requested": 1e9, "time_us_median": us, "time_us_iqr": 0.001 * us,
                         "delivered_gbps": 1.0, "requested_gbps": 1.0, "sm_clock_mhz_mean": 1980.0})
    return pd.DataFrame(rows)


def test_the_multicast_rule_is_scored_at_the_gemm_cluster_and_a_tile(throttled, tmp_path):
    from tma_study.studies.gemm.predict import multicast_stream_verdicts, score_multicast

    derived, _ = throttled
    folder = tmp_path / "multicast"
    folder.mkdir()
    # bf16 A tile (128 x 64 x 2 B) = 16 KiB: multicast loses; fp8 A tile = 8 KiB: multicast wins
    verdicts = multicast_stream_verdicts(_multicast_stream({16384: 110.0, 8192: 80.0}))
    gains = pd.read_csv(derived / "multicast.csv")
    rows = pd.DataFrame(score_multicast(gains, verdicts, folder))
    every = rows[rows.scope == "every cluster"].iloc[0]
    busy = gains[(gains.status == "measured") & ~gains.cluster_exceeds_tiles]
    assert every.comparisons == len(busy) == 5          # 3 fp8 + 2 bf16 (one bf16 side throttled)
    assert (every.predicted_losses, every.predicted_wins) == (2, 3)
    assert every.gemm_ties == 5 and every.agree == 0    # the synthetic 2x1 gain is 1.01: a tie
    assert every.not_faster_predicted == 2 and every.not_faster_held == 2
    assert every.left_out_idle_ctas == 2 and every.left_out_not_measured == 1


def test_paper_numbers_and_rules_of_thumb_come_from_the_derived_data(throttled):
    import json

    from tma_study.paper.rules_of_thumb import check_rows
    from tma_study.studies.gemm.macros import macros
    from tma_study.studies.gemm.rules import rules_of_thumb

    derived, _ = throttled
    provenance = json.loads((derived.parent / "provenance.json").read_text())
    numbers = macros(derived, provenance)
    bar = pd.read_csv(derived / "bar.csv").iloc[0]
    assert numbers["gemmBarPercentCublas"] == f"{100 * bar.fraction_of_cublas:.1f}"
    assert (numbers["gemmBarCandidatesNotMeasured"], numbers["gemmRowsFewSamples"]) == ("1", "1")
    assert numbers["gemmRowsNotMeasuredTma"] == "1" and numbers["gemmRowsNotMeasuredCpasync"] == "0"
    assert numbers["gemmThrottleFloorMhz"] == "1485"
    rows = rules_of_thumb(derived, provenance)
    check_rows(rows, STUDY)
    best = pd.read_csv(derived / "speedup.csv").query("compared == 'best'")
    losses = int((best.winner == "cpasync").sum())
    mainloop = next(r for r in rows if r["figure"] == "gemm_speedup")
    assert losses and f"cp.async won {losses} of {len(best)} shapes" in mainloop["rule"]   # the wording follows
    assert f"median {best.speedup.median():.2f}" in mainloop["evidence"]


def test_every_row_says_how_it_accumulates(folders):
    """Data that record ``accumulation``: every fp8 row of this code accumulates without
    promotion (cuBLAS with use_fast_accum=True), and the tables say so."""
    _, derived, tables = folders
    measured = pd.read_csv(derived / "measured.csv")
    fp8 = measured[measured.dtype == "fp8_e4m3"]
    assert set(fp8.accumulation) == {"fp8_no_promotion"} and set(fp8.accumulation_source) == {"recorded"}
    assert set(measured[measured.dtype == "bf16"].accumulation) == {"fp32"}
    speedup = pd.read_csv(derived / "speedup.csv")
    assert set(speedup[speedup.dtype == "fp8_e4m3"][["tma_accumulation", "cpasync_accumulation",
                                                      "cublas_accumulation"]].stack()) == {"fp8_no_promotion"}
    assert "| sm90 | fp8_e4m3 | square | 2 | no promotion / no promotion / no promotion |" in \
        (tables / "gemm_speedup.md").read_text()
    cublas = pd.read_csv(derived / "cublas.csv")
    assert set(cublas[cublas.dtype == "fp8_e4m3"].cublas_accumulation) == {"fp8_no_promotion"}
    run = (tables / "gemm_run.md").read_text()
    assert "| fp8 accumulation | TMA: no promotion; cp.async: no promotion; cuBLAS: no promotion |" in run
    assert "| cuBLAS fp8 use_fast_accum | not recorded (the run predates the key) |" in run   # fixture lacks it
    assert "no promotion" in (tables / "gemm_kernels.md").read_text()


@pytest.mark.parametrize("name", ["gemm.csv", "kernels.csv"])
def test_data_without_the_accumulation_column_are_refused_not_inferred(tmp_path, name):
    """Every row says how it accumulated: a gemm.csv or kernels.csv without the column is refused
    naming it (an inferred value once turned the paper's 'without promotion' into 'with')."""
    from tma_study.harness import raw_data

    raw = write_raw_folder(tmp_path / "results" / "gemm")
    pd.read_csv(raw / name).drop(columns="accumulation").to_csv(raw / name, index=False)
    with pytest.raises(raw_data.RawDataError, match=rf"{name}: missing column\(s\) \['accumulation'\]"):
        raw_data.load(STUDY, raw)
    assert not (raw / "derived").exists()


def test_the_bar_and_multicast_rules_follow_the_data(throttled, tmp_path):
    """The cuBLAS rule says "comes close" only when the bar passes, and otherwise gives the
    per-clock share; the multicast rule names the dtype and cluster that gained (a pandas row's
    ``.dtype`` is the Series' own dtype, which once printed "object")."""
    import json

    from tma_study.studies.gemm.macros import macros
    from tma_study.studies.gemm.rules import _bar_rule, _multicast_rule

    derived, _ = throttled
    bar = pd.read_csv(derived / "bar.csv")
    passing = _bar_rule(bar.assign(passes=True))["rule"]
    failing = _bar_rule(bar.assign(passes=False))["rule"]
    r = bar.iloc[0]
    per_clock = (r.tflops / r.sm_clock_mhz) / (r.cublas_tflops / r.cublas_sm_clock_mhz)
    assert "comes close" in passing and "comes close" not in failing
    assert f"per clock cycle it did {100 * per_clock:.0f} %" in failing
    provenance = json.loads((derived.parent / "provenance.json").read_text())
    assert macros(derived, provenance)["gemmBarPercentCublasPerClock"] == f"{100 * per_clock:.1f}"
    summary = pd.DataFrame({"dtype": ["bf16", "fp8_e4m3"], "cluster": ["1x2", "2x1"],
                            "median_gain": [0.99, 1.05], "wins": [1, 3], "comparisons": [4, 4]})
    rule = _multicast_rule(summary)["rule"]
    assert "fp8_e4m3 cluster 2x1 (1.05x)" in rule and "object" not in rule


def test_multicast_l2_rule_predicts_a_win_from_the_boundary_and_counts_its_misses():
    import numpy as np

    from tma_study.studies.gemm.predict import gemm_l2_read_gbps, score_multicast_l2
    # bf16 128x128x64 at 1x1 reads (128+128) x 2 B per 2 x 128 x 128 FLOP = 1/64 B/FLOP: 640 TFLOP/s -> 10 TB/s
    def row(gain, tflops_1x1, m, clocks_differ=False):
        return {"arch": "sm90", "dtype": "bf16", "tile": "128x128x64", "cluster": "1x2", "cluster_m": 1,
                "cluster_n": 2, "m": m, "n": 8192, "status": "measured", "cluster_exceeds_tiles": False,
                "tflops_1x1": tflops_1x1, "gain": gain, "spread": 0.0, "clocks_differ": clocks_differ}
    gains = pd.DataFrame([row(1.10, 640, 8192), row(1.00, 640, 8192), row(1.10, 64, 8192),
                          row(1.00, 64, 8192), row(1.10, 64, 128, True)])
    assert np.allclose(gemm_l2_read_gbps(gains.iloc[:1]), 10000.0)
    boundary = pd.DataFrame({"cluster_x": [1], "cluster_y": [2], "win_from_l2_read_fraction": [0.5],
                             "l2_read_ceiling_gbps": [10000.0]})
    every = pd.DataFrame(score_multicast_l2(gains, boundary, 132)).set_index("scope").loc["every cluster"]
    # right: the fast win (predicted win) and the slow tie; wrong: the fast tie (predicted win), the
    # slow win and the slow win on a one-wave grid whose clocks differ
    assert every.predicted_wins == 2 and every.gemm_wins == 3 and every.agree == 2
    assert every.wrong_gemm_wins_below == 2 and every.wrong_predicted_wins == 1
    assert every.wrong_where_clocks_differ == 1 and every.wrong_in_two_waves_or_fewer == 1
    assert every.wrong_unexplained == 2 and np.isclose(every.fraction_wrong_explained, 1 / 3)
    # the best threshold on these data predicts a win everywhere: right for the 3 wins of 5
    assert np.isclose(every.best_threshold_fraction_agree, 0.6)
    missing = pd.DataFrame(score_multicast_l2(gains, None, 132))
    assert missing.status.iloc[0].startswith("NOT MEASURED")
