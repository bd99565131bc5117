"""The paged_kv analysis without a GPU: aggregate -> tables -> figure on synthetic raw data
shaped like measure.py's output (paged_kv_fixture.synthetic_raw); the sweep grid and the config
checks: test_paged_kv_grid.py."""
import itertools
import json
import runpy
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from paged_kv_fixture import (
    COPY_GBPS,
    FAST_UNTIMED_CELL,
    HALF_TIMED_CELL,
    ONE_WARP_FASTER,
    ONE_WARP_SLOWER,
    REPO,
    SAME_BYTES_COPY_FRACTION,
    UNTIMED_CELL,
    synthetic_raw,
)
from tma_study.report import figures
from tma_study.studies.paged_kv import STUDY
from tma_study.studies.paged_kv.aggregate import aggregate
from tma_study.studies.paged_kv.grid import sweep_configs
from tma_study.studies.paged_kv.tables import write_tables


@pytest.fixture
def analysed(tmp_path, study_config):
    raw = synthetic_raw(tmp_path / "raw", study_config)
    aggregate(raw, tmp_path / "derived")
    return tmp_path


def test_aggregate_finds_the_known_winners(analysed):
    speedup = pd.read_csv(analysed / "derived" / "speedup.csv")
    half_timed = cell_rows(speedup.assign(load_path="tma"), HALF_TIMED_CELL).index
    both = speedup.dropna(subset=["tma_speedup"]).drop(half_timed)
    assert set(both[both.page_size >= 64].measured_winner) == {"tma"}
    assert set(both[both.page_size < 64].measured_winner) == {"cp_async"}
    e4m3_decode = (both.dtype == "e4m3") & (both.phase == "decode")
    bf16_decode = (both.dtype == "bf16") & (both.phase == "decode")
    assert np.allclose(both[(both.page_size >= 64) & ~e4m3_decode & ~bf16_decode].tma_speedup, 1.25)
    # bf16 cp.async decode runs at its 1-producer-warp time
    assert np.allclose(both[(both.page_size >= 64) & bf16_decode].tma_speedup, ONE_WARP_FASTER / 0.8)
    # only the 4-stage TMA row was timed there (1.3 x 0.8 of the cp.async time)
    assert speedup.loc[half_timed, "measured_winner"].tolist() == ["cp_async"]
    only = speedup[speedup.page_size < 16]
    assert set(only.measured_winner) == {"cp_async (only path)"} and only.fa3_agrees.all()
    # FA3 picks TMA only for prefill at pages that are multiples of its kBlockN: agrees there
    picked = speedup[speedup.fa3_load_path == "tma"]
    assert len(picked) and (picked.phase == "prefill").all() and picked.fa3_agrees.all()


def cell_rows(frame: pd.DataFrame, cell: tuple) -> pd.DataFrame:
    shape, dtype, phase, batch, seqlen_q, context, page, path = cell
    return frame[(frame["shape"] == shape) & (frame.dtype == dtype) & (frame.phase == phase)
                 & (frame.batch == batch) & (frame.seqlen_q == seqlen_q) & (frame.context_tokens == context)
                 & (frame.page_size == page) & (frame.load_path == path)]


def test_each_path_runs_at_its_best_stage_count(analysed):
    tuning = pd.read_csv(analysed / "derived" / "tuning.csv")
    odd = cell_rows(tuning, HALF_TIMED_CELL).index.union(cell_rows(tuning, FAST_UNTIMED_CELL).index)
    measured = tuning[tuning.status == "measured"].drop(odd)
    deeper_wins = (measured.load_path == "cp_async") & (measured.dtype == "e4m3") & (measured.phase == "decode")
    assert set(measured[deeper_wins].stages_chosen) == {4}
    assert set(measured[~deeper_wins].stages_chosen) == {2}
    assert set(measured[deeper_wins].kernel.str.contains("_s4_")) == {True}
    # distinct counts, whatever the number of producer-warp rows per stage count
    assert set(tuning[tuning.phase == "decode"].stages_swept) == {"2 4"}
    (half,) = cell_rows(tuning, HALF_TIMED_CELL).itertuples()
    assert half.status == "measured" and half.stages_chosen == 4 and pd.isna(half.time_us_s2_p1)
    assert half.resident_ctas_per_sm == 1 and half.producer_warps_chosen == 1
    speedup = pd.read_csv(analysed / "derived" / "speedup.csv")
    e4m3 = speedup[(speedup.dtype == "e4m3") & (speedup.phase == "decode") & (speedup.page_size >= 64)
                   & speedup.tma_speedup.notna()]
    assert np.allclose(e4m3.tma_speedup, 0.9 / 0.8) and set(e4m3.cp_async_stages) == {4}
    assert set(e4m3.tma_stages) == {2}


def test_each_path_runs_at_its_best_producer_warps(analysed):
    """cp.async sweeps 1 and 4 producer warps: in decode 1 wins in bf16 (more resident CTAs), 4
    in e4m3; in prefill 4 wins; TMA runs 1 warp, with nothing to choose."""
    tuning = pd.read_csv(analysed / "derived" / "tuning.csv")
    measured = tuning[tuning.status == "measured"].drop(cell_rows(tuning, FAST_UNTIMED_CELL).index)
    gather_decode = measured[(measured.load_path == "cp_async") & (measured.phase == "decode")]
    assert set(tuning[tuning.load_path == "cp_async"].producer_warps_swept) == {"1 4"}
    assert set(tuning[tuning.load_path == "tma"].producer_warps_swept) == {"1"}
    bf16, e4m3 = gather_decode[gather_decode.dtype == "bf16"], gather_decode[gather_decode.dtype == "e4m3"]
    assert set(bf16.producer_warps_chosen) == {1} and set(bf16.stages_chosen) == {2}
    assert set(bf16.kernel.str.endswith("_s2_p1_causal_kq8")) == {True} and set(bf16.producer_warps) == {1}
    assert set(bf16.resident_ctas_per_sm) == {3} and set(bf16.resident_ctas_per_sm_s2_p4) == {2}
    assert set(e4m3.producer_warps_chosen) == {4} and set(e4m3.stages_chosen) == {4}
    assert np.allclose(e4m3.time_us_s4_p1 / e4m3.time_us_s4_p4, ONE_WARP_SLOWER)
    assert set(measured[measured.load_path == "tma"].producer_warps_chosen) == {1}
    assert set(measured[(measured.load_path == "cp_async") & (measured.phase == "prefill")].producer_warps_chosen) \
        == {4}
    assert tuning[tuning.load_path == "tma"].time_us_s2_p4.isna().all()
    speedup = pd.read_csv(analysed / "derived" / "speedup.csv")
    decode = speedup[(speedup.phase == "decode") & speedup.tma_speedup.notna()]
    assert set(decode[decode.dtype == "e4m3"].cp_async_producer_warps) == {4}
    assert set(decode.tma_producer_warps) == {1}


def test_an_untimed_combination_never_wins(analysed):
    """The fastest combination of FAST_UNTIMED_CELL was not timed: the fastest timed one wins,
    and every downstream table carries its knobs and its time."""
    derived = analysed / "derived"
    (cell,) = cell_rows(pd.read_csv(derived / "tuning.csv"), FAST_UNTIMED_CELL).itertuples()
    assert cell.status == "measured" and pd.isna(cell.time_us_s2_p1)
    assert (cell.stages_chosen, cell.producer_warps_chosen) == (2, 4) and cell.kernel.endswith("_s2_p4_causal_kq8")
    assert cell.resident_ctas_per_sm == 2
    # the chosen kernel's launch: 32 x 8 CTAs a split, 2 per SM fit 256 of 264 slots unsplit
    assert (cell.num_splits, cell.split_rule) == (1, "fa3_wave_efficiency_over_resident_slots")
    assert cell.waves == pytest.approx(256 / 264)
    speedup = pd.read_csv(derived / "speedup.csv")
    (row,) = cell_rows(speedup.assign(load_path="cp_async"), FAST_UNTIMED_CELL).itertuples()
    assert row.cp_async_time_us == 500.0 and (row.cp_async_stages, row.cp_async_producer_warps) == (2, 4)
    # every other bf16 cp.async decode cell at this page ran at 1 warp, 5 % faster
    others = speedup[(speedup.dtype == "bf16") & (speedup.phase == "decode") & (speedup.page_size == 32)]
    assert set(others.drop(row.Index).cp_async_time_us) == {500.0 * ONE_WARP_FASTER}
    decode = pd.read_csv(derived / "decode.csv")
    assert set(decode[decode.best_load_path == "cp_async"].best_producer_warps.dropna()) <= {1, 4}
    assert {"best_stages", "best_producer_warps"} <= set(decode.columns)
    for name in ("prefill.csv", "scaling.csv"):
        frame = pd.read_csv(derived / name)
        assert frame.loc[frame.status == "measured", ["stages", "producer_warps"]].notna().all().all(), name


def test_a_cell_without_a_timed_row_says_not_measured(analysed):
    derived = analysed / "derived"
    (untimed,) = cell_rows(pd.read_csv(derived / "tuning.csv"), UNTIMED_CELL).itertuples()
    assert untimed.status.startswith("not measured: no valid cold sample") and pd.isna(untimed.stages_chosen)
    speedup = pd.read_csv(derived / "speedup.csv")
    (row,) = cell_rows(speedup.assign(load_path="cp_async"), UNTIMED_CELL).itertuples()
    assert row.measured_winner == "not measured: cp_async" and pd.isna(row.fa3_agrees)
    assert pd.isna(row.tma_speedup) and row.tma_stages == 2 and pd.isna(row.cp_async_producer_warps)
    assert pd.isna(untimed.producer_warps_chosen)
    agreement = pd.read_csv(derived / "fa3_agreement.csv").set_index(["dtype", "phase"])
    assert agreement.not_measured.to_dict() == {("bf16", "decode"): 0, ("bf16", "prefill"): 0,
                                                ("e4m3", "decode"): 1, ("e4m3", "prefill"): 0}
    scaling = pd.read_csv(derived / "scaling.csv")
    (missing,) = cell_rows(scaling[scaling.series == "decode_batch"], UNTIMED_CELL).itertuples()
    assert missing.status.startswith("not measured") and pd.isna(missing.stages) and pd.isna(missing.gbps)
    assert pd.isna(missing.producer_warps)


def test_decode_fraction_of_copy_and_bar(analysed):
    decode = pd.read_csv(analysed / "derived" / "decode.csv")
    row = decode[(decode["shape"] == "llama3_8b") & (decode.dtype == "bf16") & (decode.seqlen_q == 1)
                 & (decode.batch == 32) & (decode.context_tokens == 8192)].iloc[0]
    assert row.best_load_path == "tma" and row.best_stages == 2 and row.d2d_copy_gbps == COPY_GBPS
    assert row.best_producer_warps == 1
    assert row.fraction_of_d2d_copy == pytest.approx(row.best_gbps / COPY_GBPS)
    assert row.bar_applies and row.torch_sdpa_gbps == 3000.0
    assert row.same_bytes_copy_gbps == SAME_BYTES_COPY_FRACTION * COPY_GBPS
    assert row.fraction_of_same_bytes_copy == pytest.approx(row.best_gbps / row.same_bytes_copy_gbps)
    scaling_points = decode[(decode["shape"] == "llama3_8b") & (decode.seqlen_q == 1)]
    assert sorted(set(zip(scaling_points.batch, scaling_points.context_tokens))) == [
        (1, 8192), (8, 8192), (32, 1024), (32, 8192), (32, 32768), (128, 8192)]


def test_scaling_series(analysed):
    scaling = pd.read_csv(analysed / "derived" / "scaling.csv")
    assert set(scaling["shape"]) == {"llama3_8b"} and set(scaling.page_size) == {64}
    for dtype, path in itertools.product(("bf16", "e4m3"), ("tma", "cp_async")):
        mine = scaling[(scaling.dtype == dtype) & (scaling.load_path == path)]
        batch = mine[mine.series == "decode_batch"]
        assert sorted(batch.batch) == [1, 8, 32, 128] and set(batch.context_tokens) == {8192}
        context = mine[mine.series == "decode_context"]
        assert sorted(context.context_tokens) == [1024, 8192, 32768] and set(context.batch) == {32}
        prefill = mine[mine.series == "prefill"]
        assert sorted(zip(prefill.batch, prefill.seqlen_q, prefill.context_tokens)) == [
            (1, 4096, 16384), (2, 2048, 4096), (4, 1024, 8192), (8, 512, 1024)]
        assert prefill.tflops.notna().all() and prefill.torch_sdpa_gbps.isna().all()
    decode = scaling[scaling.phase == "decode"]
    assert (decode.d2d_copy_gbps == COPY_GBPS).all()
    sdpa = decode.dropna(subset=["torch_sdpa_gbps"])
    assert set(zip(sdpa.batch, sdpa.context_tokens)) == {(32, 8192), (128, 8192)}
    tma = decode[(decode.load_path == "tma") & (decode.status == "measured")]
    assert np.allclose(tma.fraction_of_d2d_copy, tma.gbps / COPY_GBPS) and set(tma.stages) == {2}
    speedup = pd.read_csv(analysed / "derived" / "speedup.csv")
    scaling_points = speedup[~speedup.page_sweep]
    assert set(scaling_points.page_size) == {64} and len(scaling_points) == 2 * 8
    assert speedup[speedup.page_sweep].page_size.nunique() == 7


def render(analysed, monkeypatch, name: str):
    drawn = []
    monkeypatch.setattr(figures, "finish", lambda fig, provenance, pdf, **layout: drawn.append(fig))
    snakemake = SimpleNamespace(params=SimpleNamespace(derived=str(analysed / "derived")),
                                input=SimpleNamespace(provenance=str(analysed / "raw" / "provenance.json")),
                                output=SimpleNamespace(pdf=str(analysed / f"{name}.pdf")))
    runpy.run_path(str(REPO / "notebooks" / f"{name}.py"), init_globals={"snakemake": snakemake})
    (fig,) = drawn
    return fig


def test_tables_and_figures(analysed, monkeypatch):
    tables = analysed / "tables"
    write_tables(analysed / "derived", json.loads((analysed / "raw" / "provenance.json").read_text()), tables)
    for name in STUDY.tables:
        assert (tables / f"{name}.md").read_text().count("|") > 10
        assert "synthetic test data" in (tables / f"{name}.tex").read_text()
    scaling = (tables / "paged_kv_scaling.md").read_text()
    assert "not measured" in scaling and "TFLOP/s (2 st., 4 pw)" in scaling and "GB/s (4 st., 4 pw)" in scaling
    assert "GB/s (2 st., 1 pw)" in scaling       # bf16 cp.async decode: 1 producer warp won
    tuning = (tables / "paged_kv_tuning.md").read_text()
    assert "median time 4/2 stages" in tuning and "median time 4/1 producer warps" in tuning
    assert "CTAs/SM at 2 st., 1 pw" in tuning
    # llama3_8b e4m3 decode q1 cp.async: 4 stages and 4 warps won every measured cell (one of
    # the 12 is UNTIMED_CELL); the ratios: time at 4 / at 2 stages, at 4 / at 1 producer warps
    row = next(line for line in tuning.splitlines() if line.startswith("| decode q1 | llama3_8b | e4m3 | cp_async |"))
    assert "| 12 | 1 | 4: 11 | 4: 11 | 4 st., 4 pw: 11 | 0.90 | 0.95 |" in row
    row = next(line for line in tuning.splitlines() if line.startswith("| decode q1 | llama3_8b | bf16 | cp_async |"))
    assert "| 12 | 0 | 2: 12 | 1: 12 | 2 st., 1 pw: 12 | 1.30 | 1.05 |" in row
    speedup = (tables / "paged_kv_speedup.md").read_text()
    assert "cp.async producer warps" in speedup
    decode = (tables / "paged_kv_decode.md").read_text()
    assert "st., " in decode and " pw" in decode
    # the speedup figure: only the page-size sweep's three points, not the scaling points
    fig = render(analysed, monkeypatch, "paged_kv_speedup")
    assert len(fig.axes) == 3 and all(ax.lines for ax in fig.axes)
    assert all(len(line.get_xdata()) > 1 for ax in fig.axes for line in ax.lines[:1])
    fig = render(analysed, monkeypatch, "paged_kv_scaling")
    by_batch, by_context, prefill = fig.axes
    assert "context 8192" in by_batch.get_title() and "batch 32" in by_context.get_title()
    xs = {tuple(line.get_xdata()) for line in by_batch.lines if len(line.get_xdata()) > 1}
    assert (1, 8, 32, 128) in xs
    assert {tuple(line.get_xdata()) for line in by_context.lines if len(line.get_xdata()) > 1} >= {
        (1024, 8192, 32768)}
    assert len(prefill.patches) == 4 * 4 and len(fig.legends) >= 2     # decode lines and prefill bars, under the panels
    assert any("prefill: TMA bf16" == t.get_text() for legend in fig.legends for t in legend.get_texts())
    fig = render(analysed, monkeypatch, "paged_kv_roofline")
    roofline, key = fig.axes
    bar_points = pd.read_csv(analysed / "derived" / "decode.csv").query("bar_applies")
    # per point: the line to its bound, the bound, the point; the copy and 70 % lines
    assert len(roofline.lines) == 3 * len(bar_points) + 2 and key.get_legend() is not None


def test_a_cells_configurations_share_one_reduced_check_problem(study_config):
    """measure._check_case makes each cell's reduced inputs and float64 reference once (fresh
    per cell), and its cache holds every page size of a (shape, dtype, phase) group, the span
    over which sweep_configs comes back to a cell (TMA pages first, then cp.async pages)."""
    from tma_study.studies.paged_kv import measure

    configs = sweep_configs(study_config)
    groups = itertools.groupby(configs, key=lambda c: (c.shape, c.dtype, c.phase))
    assert max(len({c.page_size for c in group}) for _, group in groups) <= measure.CHECK_CELLS_CACHED
    decode = next(c for c in configs if c.phase.name == "decode" and c.page_size == 64
                  and c.shape.name == "mha_16x64")
    measure._check_case.cache_clear()
    first = measure._check_case(decode.phase, decode.shape, 64, decode.dtype)
    assert measure._check_case(decode.phase, decode.shape, 64, decode.dtype) is first
    other = measure._check_case(decode.phase, decode.shape, 32, decode.dtype)
    assert other[1].problem.page_size == 32 and other is not first
    _, inputs, want = first
    assert inputs.problem.page_size == 64 and want.out.shape == want.tolerance.shape
    measure._check_case.cache_clear()
