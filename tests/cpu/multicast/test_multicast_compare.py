"""CPU: what moved between runs of the multicast study (its ``compare`` entry point and
comparison table), and the other runs overlaid on its figures, on small synthetic derived data
of two runs (helpers/cluster_compare_fixture.py)."""
from pathlib import Path

import pytest
from cluster_compare_fixture import multicast_run, overlaid, render, run_legends

from tma_study.paper.generated import write_comparison
from tma_study.pipeline import Layout
from tma_study.studies import discover

STUDIES = discover()
LOSES_SMALL = {4096: 120.0, 65536: 80.0}     # multicast: slower at 4 KiB, 1.25x at 64 KiB
WINS_ALWAYS = {4096: 90.0, 65536: 70.0}      # multicast: never slower, 1.43x at 64 KiB


def compare(dirs: dict, reference: str = "ref"):
    return STUDIES["multicast"].entry("compare")(dirs, reference).set_index("quantity")


def test_the_study_declares_a_comparison_table():
    layout = Layout({"multicast": STUDIES["multicast"]}, "ref")
    assert layout.comparison_files("multicast") == ["paper/tables/multicast_comparison.tex",
                                                    "paper/tables/multicast_comparison.md"]


def test_multicast_break_even_that_moved_is_named(tmp_path):
    dirs = {"ref": multicast_run(tmp_path, "ref", LOSES_SMALL), "other": multicast_run(tmp_path, "other", WINS_ALWAYS)}
    table = compare(dirs)
    assert list(table.columns) == ["ref", "other", "moved"]
    verdict = table.loc["1D, HBM, cluster 1x4: multicast not slower than the better alternative"]
    assert verdict.ref == "4 KiB < tile <= 64 KiB" and verdict.other == "never slower (from 4 KiB)"
    assert verdict.moved == "other"
    speedup = table.loc["1D, HBM, cluster 1x4: largest speedup over the better alternative"]
    assert speedup.ref == "1.25x" and speedup.other == f"1.43x ({100 * (100 / 70 / 1.25 - 1):+.1f} %)"
    assert speedup.moved == "other"
    # the 2-D shape (64 KiB only) never loses in either run: its verdict did not move
    assert table.loc["2D, HBM, cluster 2x2: multicast not slower than the better alternative"].moved == "no"


def test_multicast_same_numbers_move_nothing(tmp_path):
    dirs = {"ref": multicast_run(tmp_path, "ref", LOSES_SMALL), "again": multicast_run(tmp_path, "again", LOSES_SMALL)}
    assert set(compare(dirs).moved) == {"no"}


def test_multicast_speedup_within_two_percent_has_not_moved(tmp_path):
    close = {4096: 120.0, 65536: 81.0}          # 1.2346x against 1.25x: -1.2 %
    dirs = {"ref": multicast_run(tmp_path, "ref", LOSES_SMALL), "close": multicast_run(tmp_path, "close", close)}
    row = compare(dirs).loc["1D, HBM, cluster 1x4: largest speedup over the better alternative"]
    assert row.close.endswith("(-1.2 %)") and row.moved == "no"


def test_no_other_run_the_table_says_so(tmp_path):
    derived = multicast_run(tmp_path, "ref", LOSES_SMALL)
    table = compare({"ref": derived})
    assert len(table) == 1 and table.iloc[0].moved == "nothing to compare"
    assert table.iloc[0].ref.startswith("none present beside this run")
    write_comparison(STUDIES["multicast"], {"ref": derived}, "ref", tmp_path / "tables")
    text = (tmp_path / "tables" / "multicast_comparison.md").read_text()
    assert "Only the reference run is present" in text and "synthetic GPU" in text
    # the Markdown says so; the paper prints no empty table
    assert r"\begin{table}" not in (tmp_path / "tables" / "multicast_comparison.tex").read_text()


# ---------------------------------------------------------------- overlays on the figures

FIGURES = ["multicast_scaling", "multicast_2d"]


def make_runs(root: Path) -> tuple[Path, Path]:
    return multicast_run(root, "ref", LOSES_SMALL), multicast_run(root, "other", WINS_ALWAYS, gpu="Other GPU")


@pytest.mark.parametrize("name", FIGURES)
def test_no_other_run_no_overlay(tmp_path, monkeypatch, name):
    reference, _ = make_runs(tmp_path)
    fig = render(monkeypatch, name, reference, [])
    assert overlaid(fig) == 0 and run_legends(fig) == []


@pytest.mark.parametrize("name", FIGURES)
def test_other_runs_are_overlaid_and_named(tmp_path, monkeypatch, name):
    reference, other = make_runs(tmp_path)
    alone = render(monkeypatch, name, reference, [])
    fig = render(monkeypatch, name, reference, [other])
    assert overlaid(fig) > 0
    legends = run_legends(fig)     # dsm_primitives has one per panel (markers over bars, dashed lines)
    assert legends[:2] in (["ref (this run)", "other (Other GPU)"], ["ref (this run): bars", "other (Other GPU)"])
    # the reference is drawn as before: the same solid lines and bars, plus the overlay
    assert len(fig.axes[0].get_lines()) >= len(alone.axes[0].get_lines())
    assert len(fig.axes[0].patches) == len(alone.axes[0].patches)
