"""CPU: what moved between runs of the dsm study (its ``compare`` entry point and comparison
table), and the other runs overlaid on its figures, on small synthetic derived data of two runs
(helpers/cluster_compare_fixture.py)."""
from pathlib import Path

import pytest
from cluster_compare_fixture import dsm_run, overlaid, render, run_legends

from tma_study.paper.generated import write_comparison
from tma_study.pipeline import Layout
from tma_study.studies import discover

STUDIES = discover()
MULTICAST_WINS = {"multicast": 100.0, "dsm_pull": 150.0, "dsm_push": 300.0}
PULL_WINS = {"multicast": 150.0, "dsm_pull": 100.0, "dsm_push": 300.0}


def compare(dirs: dict, reference: str = "ref"):
    return STUDIES["dsm"].entry("compare")(dirs, reference).set_index("quantity")


def test_the_study_declares_a_comparison_table():
    layout = Layout({"dsm": STUDIES["dsm"]}, "ref")
    assert layout.comparison_files("dsm") == ["paper/tables/dsm_comparison.tex",
                                              "paper/tables/dsm_comparison.md"]


def test_dsm_winner_that_changed_is_named_and_primitives_sit_side_by_side(tmp_path):
    dirs = {"ref": dsm_run(tmp_path, "ref", MULTICAST_WINS),
            "other": dsm_run(tmp_path, "other", PULL_WINS, remote_cycles=210.0, remote_gbps=3030.0)}
    table = compare(dirs)
    winner = table.loc["HBM, cluster of 4, tile 16 KiB: fastest broadcast"]
    assert winner.ref == "TMA multicast (1.50x over DSM pull)"
    assert winner.other == "DSM pull (1.50x over TMA multicast)" and winner.moved == "other"
    remote = table.loc["latency, cluster of 4, CTA 3, ld.shared::cluster: cycles per load"]
    assert (remote.ref, remote.other, remote.moved) == ("200", "210 (+5.0 %)", "other")
    local = table.loc["latency, cluster of 2, own smem, ld.shared: cycles per load"]
    assert local.moved == "no"
    bandwidth = table.loc["bandwidth, cluster of 2, neighbour's smem (ring: CTA r+1 mod n), "
                          "128-bit ld.shared::cluster: GB/s"]
    assert (bandwidth.other, bandwidth.moved) == ("3030 (+1.0 %)", "no")


def test_dsm_the_same_tie_reads_the_same_whichever_primitive_came_first(tmp_path):
    tie_a = {"multicast": 100.0, "dsm_pull": 100.5, "dsm_push": 300.0}
    tie_b = {"multicast": 100.5, "dsm_pull": 100.0, "dsm_push": 300.0}
    dirs = {"ref": dsm_run(tmp_path, "ref", tie_a), "swapped": dsm_run(tmp_path, "swapped", tie_b)}
    row = compare(dirs).loc["HBM, cluster of 2, tile 16 KiB: fastest broadcast"]
    assert row.ref.startswith("tie: TMA multicast = DSM pull") and row.swapped.startswith("tie: TMA multicast = DSM pull")
    assert row.moved == "no"


def test_a_quantity_only_another_run_measured_is_shown(tmp_path):
    reference = dsm_run(tmp_path, "ref", MULTICAST_WINS)
    other = dsm_run(tmp_path, "other", MULTICAST_WINS)
    (reference / "latency.csv").write_text("\n".join((reference / "latency.csv").read_text().splitlines()[:-1]) + "\n")
    row = compare({"ref": reference, "other": other}).loc[
        "latency, cluster of 4, CTA 3, ld.shared::cluster: cycles per load"]
    assert row.ref == "not measured" and row.moved == "not in the reference; measured in other"


def test_an_unknown_reference_is_named(tmp_path):
    with pytest.raises(ValueError, match="reference run 'h100'"):
        STUDIES["dsm"].entry("compare")({"ref": dsm_run(tmp_path, "ref", MULTICAST_WINS)}, "h100")


def test_no_other_run_the_table_says_so(tmp_path):
    derived = dsm_run(tmp_path, "ref", MULTICAST_WINS)
    table = compare({"ref": derived})
    assert len(table) == 1 and table.iloc[0].moved == "nothing to compare"
    assert table.iloc[0].ref.startswith("none present beside this run")
    write_comparison(STUDIES["dsm"], {"ref": derived}, "ref", tmp_path / "tables")
    text = (tmp_path / "tables" / "dsm_comparison.md").read_text()
    assert "Only the reference run is present" in text and "synthetic GPU" in text
    # the Markdown says so; the paper prints no empty table
    assert r"\begin{table}" not in (tmp_path / "tables" / "dsm_comparison.tex").read_text()


# ---------------------------------------------------------------- overlays on the figures

FIGURES = ["dsm_broadcast", "dsm_primitives"]


def make_runs(root: Path) -> tuple[Path, Path]:
    return dsm_run(root, "ref", MULTICAST_WINS), dsm_run(root, "other", PULL_WINS, 210.0, 2500.0, gpu="Other GPU")


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
