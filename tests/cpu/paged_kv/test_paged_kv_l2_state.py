"""The paged_kv L2-state ablation without a GPU: the same-bytes copy timed in the run's (clean)
L2 state and after nvbench's flush alone (dirty), aggregate.l2_state_table -> l2_state.csv ->
paper table paged_kv_l2_state, on a small ceilings frame and on paged_kv_fixture's
synthetic raw data with dirty rows added the way a run since harness.l2_state writes them."""
import copy
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from raw_fixture import timed
from paged_kv_fixture import REPO, synthetic_raw

from tma_study.harness import l2_state
from tma_study.studies.paged_kv import STUDY
from tma_study.studies.paged_kv.aggregate import (
    L2_STATE_COLUMNS,
    SAME_BYTES_COPY,
    SAME_BYTES_COPY_DIRTY_L2,
    aggregate,
    l2_state_table,
)
from tma_study.studies.paged_kv.tables import L2_STATE_NOT_MEASURED, write_tables

MiB = 1 << 20
DIRTY_EXTRA_US = 4.0        # the synthetic write-back of the flush's dirty lines, per sample


def copy_row(ceiling: str, size: int, time_us: float, samples: int) -> dict:
    return {"ceiling": ceiling, "bytes_moved": size, **timed(time_us, samples), "gbps": size / (time_us * 1e3)}


def small_ceilings() -> pd.DataFrame:
    """16 and 64 MiB in both states; 32 MiB clean only, 128 MiB dirty only; other ceilings around."""
    return pd.DataFrame([
        copy_row("d2d_copy", 2048 * MiB, 506.0, 10),
        copy_row(SAME_BYTES_COPY, 64 * MiB, 17.0, 560), copy_row(SAME_BYTES_COPY_DIRTY_L2, 64 * MiB, 20.4, 320),
        copy_row(SAME_BYTES_COPY, 16 * MiB, 8.0, 900), copy_row(SAME_BYTES_COPY_DIRTY_L2, 16 * MiB, 10.0, 600),
        copy_row(SAME_BYTES_COPY, 32 * MiB, 11.0, 800), copy_row(SAME_BYTES_COPY_DIRTY_L2, 128 * MiB, 36.0, 144),
        {"ceiling": "torch_sdpa_contiguous", "shape": "llama3_8b", "batch": 32, "gbps": 3000.0,
         "time_us_median": 100.0},
    ])


def test_the_table_pairs_each_size_timed_in_both_states():
    table = l2_state_table(small_ceilings())
    assert list(table.columns) == L2_STATE_COLUMNS
    assert table.bytes_moved.tolist() == [16 * MiB, 64 * MiB]       # sorted; one-state sizes left out
    small, large = table.itertuples()
    assert (small.clean_time_us, small.dirty_time_us) == (8.0, 10.0)
    assert np.isclose(small.dirty_over_clean_time, 1.25) and np.isclose(small.dirty_extra_us, 2.0)
    assert np.isclose(large.dirty_over_clean_time, 1.2) and np.isclose(large.dirty_extra_us, 3.4)
    assert np.isclose(small.clean_gbps, 16 * MiB / 8e3) and np.isclose(small.dirty_gbps, 16 * MiB / 10e3)
    assert (small.clean_samples, small.dirty_samples, large.clean_samples, large.dirty_samples) == (900, 600, 560, 320)


def test_data_without_dirty_rows_give_an_empty_table_with_its_columns():
    old = small_ceilings().query("ceiling != @SAME_BYTES_COPY_DIRTY_L2").drop(columns="samples")
    table = l2_state_table(old)
    assert table.empty and list(table.columns) == L2_STATE_COLUMNS
    assert l2_state_table(old.query("ceiling != @SAME_BYTES_COPY")).empty   # before the same-bytes copy too


def with_dirty_rows(raw: Path) -> Path:
    """A dirty copy DIRTY_EXTRA_US slower beside every same-bytes copy but the largest (so that
    one size is in a single state), samples recorded as measure.py does."""
    ceilings = pd.read_csv(raw / "ceilings.csv")
    same = ceilings[ceilings.ceiling == SAME_BYTES_COPY]
    ceilings.loc[same.index, "samples"] = 500
    dirty = [copy_row(SAME_BYTES_COPY_DIRTY_L2, int(r.bytes_moved), r.time_us_median + DIRTY_EXTRA_US, 300)
             for r in same.itertuples() if r.bytes_moved < same.bytes_moved.max()]
    pd.concat([ceilings, pd.DataFrame(dirty)], ignore_index=True).to_csv(raw / "ceilings.csv", index=False)
    return raw


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """{"old": raw folder without dirty rows (nor the L2 state in its provenance), "new": the
    same with them, in the clean state as a run since harness.l2_state records it}."""
    root = tmp_path_factory.mktemp("paged_kv_l2_state")
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["studies"]["paged_kv"]
    old = synthetic_raw(root / "old", copy.deepcopy(config))
    new = with_dirty_rows(Path(shutil.copytree(old, root / "new")))
    provenance = {**json.loads((old / "provenance.json").read_text()),
                  "l2_before_each_sample": l2_state.DESCRIPTIONS["clean"]}
    (new / "provenance.json").write_text(json.dumps(provenance))
    for raw in (old, new):
        aggregate(raw, raw / "derived")
        write_tables(raw / "derived", json.loads((raw / "provenance.json").read_text()), raw / "tables")
    return {"old": old, "new": new}


def test_the_study_declares_the_derived_file_and_the_table():
    assert "l2_state.csv" in STUDY.derived_files and "paged_kv_l2_state" in STUDY.tables


def test_aggregate_writes_l2_state_csv(runs):
    table = pd.read_csv(runs["new"] / "derived" / "l2_state.csv")
    ceilings = pd.read_csv(runs["new"] / "ceilings.csv")
    sizes = sorted(ceilings.loc[ceilings.ceiling == SAME_BYTES_COPY, "bytes_moved"])
    assert list(table.columns) == L2_STATE_COLUMNS and table.bytes_moved.tolist() == sizes[:-1]
    assert np.allclose(table.dirty_extra_us, DIRTY_EXTRA_US)
    assert np.allclose(table.dirty_over_clean_time, 1 + DIRTY_EXTRA_US / table.clean_time_us)
    assert set(table.clean_samples) == {500} and set(table.dirty_samples) == {300}
    old = pd.read_csv(runs["old"] / "derived" / "l2_state.csv")
    assert old.empty and list(old.columns) == L2_STATE_COLUMNS


def test_the_table_shows_sizes_rates_ratio_and_extra_time(runs):
    md = (runs["new"] / "tables" / "paged_kv_l2_state.md").read_text()
    tex = (runs["new"] / "tables" / "paged_kv_l2_state.tex").read_text()
    assert "| bytes moved (MB) | clean GB/s | dirty GB/s | time dirty/clean | dirty - clean (us) |" in md
    # 16 MiB: the synthetic copy's 3600 GB/s clean (4.66 us), 4 us more dirty
    assert "| 16.8 | 3600 | 1937 | 1.86 | 4.0 |" in md
    assert "\n| 4295.0 |" not in md                    # the largest size was timed clean only
    assert md.count("\n| ") == 2 + 8                    # header, rule and the 8 sizes in both states
    assert "nvbench's memset flush alone" in md and "write-back of the flush's dirty lines" in md
    assert "not measured" not in md and "not clean" not in md
    assert r"\label{tab:paged_kv_l2_state}" in tex and r"16.8 & 3600 & 1937 & 1.86 & 4.0 \\" in tex
    assert "synthetic test data" in tex


def test_old_data_say_not_measured_in_one_row(runs):
    md = (runs["old"] / "tables" / "paged_kv_l2_state.md").read_text()
    assert md.count("\n| ") == 3                        # header, rule, one row
    assert f"| {L2_STATE_NOT_MEASURED} | n/a | n/a | n/a | n/a |" in md
    assert "measured before the harness recorded the L2 state" in md.splitlines()[0]     # the caption
    assert "write-back" not in md


def test_a_run_whose_own_state_was_dirty_says_so(runs, tmp_path):
    provenance = {**json.loads((runs["new"] / "provenance.json").read_text()),
                  "l2_before_each_sample": l2_state.DESCRIPTIONS["dirty"]}
    write_tables(runs["new"] / "derived", provenance, tmp_path)
    caption = (tmp_path / "paged_kv_l2_state.md").read_text().splitlines()[0]
    assert "this run's own state, not clean: dirty: nvbench's memset flush alone" in caption


def test_the_macros_give_the_ablation_and_none_for_older_data():
    from tma_study.studies.paged_kv.macros import _l2_state
    out = _l2_state(l2_state_table(small_ceilings()))
    assert out["pagedKvLtwoStateSizes"] == "2"
    assert out["pagedKvLtwoStateExtraMinUs"] == "2.0" and out["pagedKvLtwoStateExtraMaxUs"] == "3.4"
    assert out["pagedKvLtwoStateRatioMax"] == "1.25"                 # the 16 MiB copy
    assert out["pagedKvLtwoStateRatioMaxMb"] == "17" and out["pagedKvLtwoStateRatioLargest"] == "1.20"
    assert out["pagedKvLtwoStateSmallestMb"] == "16.8" and out["pagedKvLtwoStateLargestMb"] == "67"
    assert _l2_state(l2_state_table(small_ceilings()[lambda f: f.ceiling != SAME_BYTES_COPY_DIRTY_L2])) == {}


def test_the_points_under_the_bar_are_named_and_absent_when_every_point_meets_it():
    from tma_study.studies.paged_kv.macros import _missed
    rows = [{"shape": shape, "dtype": dtype, "seqlen_q": q, "bar_applies": True, "best_load_path": "tma",
             "fraction_of_d2d_copy": fraction}
            for shape, dtype, q, fraction in (("mqa_8x256", "e4m3", 4, 0.61), ("mqa_8x256", "e4m3", 1, 0.80),
                                              ("llama3_70b", "bf16", 1, 0.69))]
    decode = pd.DataFrame(rows)
    assert _missed(decode) == {"pagedKvDecodeBarMissedList":
                               "llama3_70b (bf16, 1 query token) and mqa_8x256 (e4m3, 4 query tokens)"}
    decode.loc[2, "bar_applies"] = False                             # llama3_70b: outside the bar's scope
    assert _missed(decode)["pagedKvDecodeBarMissedList"] == "mqa_8x256 (e4m3, 4 query tokens)"
    decode.fraction_of_d2d_copy = 0.9
    assert _missed(decode) == {}


def test_every_l2_state_macro_the_section_uses_is_generated_from_such_a_run(runs):
    import re

    from tma_study.studies.paged_kv.macros import macros
    section = "".join((REPO / "paper" / "sections" / folder / "paged_kv.tex").read_text()      # body and appendix
                      for folder in ("studies", "appendix"))
    used = set(re.findall(r"\\(pagedKvLtwoState[A-Za-z]+)", section))
    found = macros(runs["new"] / "derived", json.loads((runs["new"] / "provenance.json").read_text()))
    assert used and used <= set(found), sorted(used - set(found))
    assert not any(name.startswith("pagedKvLtwoState") for name in macros(
        runs["old"] / "derived", json.loads((runs["old"] / "provenance.json").read_text())))
