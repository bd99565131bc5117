"""The gemm study's analysis on synthetic data: derived tables, the 95 % bar, the rules table,
SM100 rows reported as not measured everywhere they would show, tables and figures."""
import runpy
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from gemm_fixture import write_raw_folder

from tma_study.report import figures
from tma_study.studies.gemm.aggregate import aggregate
from tma_study.studies.gemm.tables import write_kernel_table, write_tables

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("gemm")
    raw = write_raw_folder(root / "results" / "gemm")
    aggregate(raw, raw / "derived")
    write_tables(raw / "derived", __import__("json").loads((raw / "provenance.json").read_text()), root / "tables")
    write_kernel_table(raw / "kernels.csv", root / "tables")
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

    from tma_study.studies.gemm.aggregate import (
        crossover_rule,
        rules,
        speedup,
        with_cublas_fraction,
    )

    raw, _, _ = folders
    crossover = crossover_rule(write_realistic_raw_folder(tmp_path / "crossover"))
    scored = rules(speedup(with_cublas_fraction(pd.read_csv(raw / "gemm.csv"))), crossover, tmp_path / "multicast")
    rows = scored[scored.rule == "crossover"]
    assert len(rows) and set(rows.status) == {"measured"}
    assert all(rows.predicted_right + rows.predicted_wrong + rows.ties == rows.comparisons)


def test_sm100_is_reported_as_not_measured(folders):
    _, derived, tables = folders
    status = pd.read_csv(derived / "status.csv")
    sm100 = status[status.arch == "sm100"]
    assert list(sm100.status) == ["not measured: needs an SM100 GPU (Blackwell: B200)"]
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
    monkeypatch.setattr(figures, "finish", lambda fig, provenance, pdf: (lay_out(fig, provenance, None), drawn.append(fig)))
    snakemake = SimpleNamespace(params=SimpleNamespace(derived=str(derived)),
                                input=SimpleNamespace(provenance=str(raw / "provenance.json")),
                                output=SimpleNamespace(pdf=str(raw / f"{name}.pdf")))
    runpy.run_path(str(REPO / "notebooks" / f"{name}.py"), init_globals={"snakemake": snakemake})
    (fig,) = drawn
    texts = [t.get_text() for ax in fig.axes for t in ax.texts] + [t.get_text() for t in fig.texts]
    assert any("synthetic test data" in t for t in texts)
    assert any("needs an SM100 GPU" in t for t in texts)
