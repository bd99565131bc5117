"""CPU: what moved between runs of the multicast and dsm studies (their ``compare`` entry
points and comparison tables), and the other runs overlaid on their figures, on small
synthetic derived data of two runs (tests/cpu/cluster_compare_fixture.py)."""
import runpy
from pathlib import Path
from types import SimpleNamespace

import matplotlib
import pytest
from cluster_compare_fixture import dsm_run, multicast_run

from tma_study.paper import write_comparison
from tma_study.pipeline import Layout
from tma_study.report import figures
from tma_study.studies import discover

matplotlib.use("Agg")
REPO = Path(__file__).resolve().parents[2]
STUDIES = discover()
LOSES_SMALL = {4096: 120.0, 65536: 80.0}     # multicast: slower at 4 KiB, 1.25x at 64 KiB
WINS_ALWAYS = {4096: 90.0, 65536: 70.0}      # multicast: never slower, 1.43x at 64 KiB
MULTICAST_WINS = {"multicast": 100.0, "dsm_pull": 150.0, "dsm_push": 300.0}
PULL_WINS = {"multicast": 150.0, "dsm_pull": 100.0, "dsm_push": 300.0}


def compare(study: str, dirs: dict, reference: str = "ref"):
    return STUDIES[study].entry("compare")(dirs, reference).set_index("quantity")


def test_both_studies_declare_a_comparison_table():
    layout = Layout({name: STUDIES[name] for name in ("multicast", "dsm")}, "ref")
    assert layout.comparison_files("multicast") == ["paper/tables/multicast_comparison.tex",
                                                    "paper/tables/multicast_comparison.md"]
    assert layout.comparison_files("dsm") == ["paper/tables/dsm_comparison.tex", "paper/tables/dsm_comparison.md"]


# ---------------------------------------------------------------- multicast

def test_multicast_break_even_that_moved_is_named(tmp_path):
    dirs = {"ref": multicast_run(tmp_path, "ref", LOSES_SMALL), "other": multicast_run(tmp_path, "other", WINS_ALWAYS)}
    table = compare("multicast", dirs)
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
    assert set(compare("multicast", dirs).moved) == {"no"}


def test_multicast_speedup_within_two_percent_has_not_moved(tmp_path):
    close = {4096: 120.0, 65536: 81.0}          # 1.2346x against 1.25x: -1.2 %
    dirs = {"ref": multicast_run(tmp_path, "ref", LOSES_SMALL), "close": multicast_run(tmp_path, "close", close)}
    row = compare("multicast", dirs).loc["1D, HBM, cluster 1x4: largest speedup over the better alternative"]
    assert row.close.endswith("(-1.2 %)") and row.moved == "no"


# ---------------------------------------------------------------- dsm

def test_dsm_winner_that_changed_is_named_and_primitives_sit_side_by_side(tmp_path):
    dirs = {"ref": dsm_run(tmp_path, "ref", MULTICAST_WINS),
            "other": dsm_run(tmp_path, "other", PULL_WINS, remote_cycles=210.0, remote_gbps=3030.0)}
    table = compare("dsm", dirs)
    winner = table.loc["HBM, cluster of 4, tile 16 KiB: fastest broadcast"]
    assert winner.ref == "TMA multicast (1.50x over DSM pull)"
    assert winner.other == "DSM pull (1.50x over TMA multicast)" and winner.moved == "other"
    remote = table.loc["latency, cluster of 4, CTA 3, ld.shared::cluster: cycles per load"]
    assert (remote.ref, remote.other, remote.moved) == ("200", "210 (+5.0 %)", "other")
    local = table.loc["latency, cluster of 2, own smem, ld.shared: cycles per load"]
    assert local.moved == "no"
    bandwidth = table.loc["bandwidth, cluster of 2, neighbour's smem, 128-bit ld.shared::cluster: GB/s"]
    assert (bandwidth.other, bandwidth.moved) == ("3030 (+1.0 %)", "no")


def test_dsm_the_same_tie_reads_the_same_whichever_primitive_came_first(tmp_path):
    tie_a = {"multicast": 100.0, "dsm_pull": 100.5, "dsm_push": 300.0}
    tie_b = {"multicast": 100.5, "dsm_pull": 100.0, "dsm_push": 300.0}
    dirs = {"ref": dsm_run(tmp_path, "ref", tie_a), "swapped": dsm_run(tmp_path, "swapped", tie_b)}
    row = compare("dsm", dirs).loc["HBM, cluster of 2, tile 16 KiB: fastest broadcast"]
    assert row.ref.startswith("tie: TMA multicast = DSM pull") and row.swapped.startswith("tie: TMA multicast = DSM pull")
    assert row.moved == "no"


def test_a_quantity_only_another_run_measured_is_shown(tmp_path):
    reference = dsm_run(tmp_path, "ref", MULTICAST_WINS)
    other = dsm_run(tmp_path, "other", MULTICAST_WINS)
    (reference / "latency.csv").write_text("\n".join((reference / "latency.csv").read_text().splitlines()[:-1]) + "\n")
    row = compare("dsm", {"ref": reference, "other": other}).loc[
        "latency, cluster of 4, CTA 3, ld.shared::cluster: cycles per load"]
    assert row.ref == "not measured" and row.moved == "not in the reference; measured in other"


def test_an_unknown_reference_is_named(tmp_path):
    with pytest.raises(ValueError, match="reference run 'h100'"):
        STUDIES["dsm"].entry("compare")({"ref": dsm_run(tmp_path, "ref", MULTICAST_WINS)}, "h100")


# ---------------------------------------------------------------- no other run

@pytest.mark.parametrize("study,make", [("multicast", lambda root: multicast_run(root, "ref", LOSES_SMALL)),
                                        ("dsm", lambda root: dsm_run(root, "ref", MULTICAST_WINS))])
def test_no_other_run_the_table_says_so(tmp_path, study, make):
    derived = make(tmp_path)
    table = compare(study, {"ref": derived})
    assert len(table) == 1 and table.iloc[0].moved == "nothing to compare"
    assert table.iloc[0].ref.startswith("none present beside this run")
    write_comparison(STUDIES[study], {"ref": derived}, "ref", tmp_path / "tables")
    text = (tmp_path / "tables" / f"{study}_comparison.md").read_text()
    assert "Only the reference run is present" in text and "synthetic GPU" in text
    # the Markdown says so; the paper prints no empty table
    assert r"\begin{table}" not in (tmp_path / "tables" / f"{study}_comparison.tex").read_text()


# ---------------------------------------------------------------- overlays on the figures

def render(monkeypatch, name: str, derived: Path, others: list[Path]):
    """Run notebooks/<name>.py as Snakemake would (``others``: other runs' derived folders)."""
    drawn = []
    lay_out = figures.finish
    monkeypatch.setattr(figures, "finish", lambda fig, provenance, pdf: (lay_out(fig, provenance, None),
                                                                      drawn.append(fig)))
    snakemake = SimpleNamespace(
        params=SimpleNamespace(derived=str(derived)),
        input=SimpleNamespace(provenance=str(derived.parent / "provenance.json"),
                              others=[str(f) for folder in others for f in sorted(folder.glob("*.csv"))]),
        output=SimpleNamespace(pdf=str(derived.parent / f"{name}.pdf")))
    runpy.run_path(str(REPO / "notebooks" / f"{name}.py"), init_globals={"snakemake": snakemake})
    (fig,) = drawn
    fig.canvas.draw()
    return fig


def overlaid(fig) -> int:
    """Artists drawn in another run's style: thin translucent lines or black-edged run markers."""
    count = 0
    for ax in fig.axes:
        for line in ax.get_lines():
            if line.get_alpha() == figures.OVERLAY["alpha"] or line.get_marker() in figures.RUN_MARKERS:
                count += 1
    return count


def run_legends(fig) -> list[str]:
    return [text.get_text() for ax in fig.axes for legend in ax.findobj(matplotlib.legend.Legend)
            if legend.get_title().get_text() == "runs" for text in legend.get_texts()]


FIGURES = [("multicast_scaling", "multicast"), ("multicast_2d", "multicast"),
           ("dsm_broadcast", "dsm"), ("dsm_primitives", "dsm")]


def make_runs(root: Path, study: str) -> tuple[Path, Path]:
    if study == "multicast":
        return multicast_run(root, "ref", LOSES_SMALL), multicast_run(root, "other", WINS_ALWAYS, gpu="Other GPU")
    return dsm_run(root, "ref", MULTICAST_WINS), dsm_run(root, "other", PULL_WINS, 210.0, 2500.0, gpu="Other GPU")


@pytest.mark.parametrize("name,study", FIGURES)
def test_no_other_run_no_overlay(tmp_path, monkeypatch, name, study):
    reference, _ = make_runs(tmp_path, study)
    fig = render(monkeypatch, name, reference, [])
    assert overlaid(fig) == 0 and run_legends(fig) == []


@pytest.mark.parametrize("name,study", FIGURES)
def test_other_runs_are_overlaid_and_named(tmp_path, monkeypatch, name, study):
    reference, other = make_runs(tmp_path, study)
    alone = render(monkeypatch, name, reference, [])
    fig = render(monkeypatch, name, reference, [other])
    assert overlaid(fig) > 0
    legends = run_legends(fig)     # dsm_primitives has one per panel (markers over bars, dashed lines)
    assert legends[:2] in (["ref (this run)", "other (Other GPU)"], ["ref (this run): bars", "other (Other GPU)"])
    # the reference is drawn as before: the same solid lines and bars, plus the overlay
    assert len(fig.axes[0].get_lines()) >= len(alone.axes[0].get_lines())
    assert len(fig.axes[0].patches) == len(alone.axes[0].patches)
