"""What the figure notebooks draw, checked on the synthetic crossover data: every label that
is drawn can be seen, and no part of a figure covers another."""

import runpy
from pathlib import Path
from types import SimpleNamespace

import matplotlib
import pytest
from matplotlib.text import Annotation

from tma_study.report import figures
from tma_study.studies.crossover.aggregate import aggregate

from crossover_fixture import write_realistic_raw_folder

matplotlib.use("Agg")
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def study_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("crossover")
    aggregate(write_realistic_raw_folder(folder / "raw"), folder / "derived")
    return folder


@pytest.fixture
def render(study_folder, monkeypatch):
    """Run notebooks/<name>.py as Snakemake would; return its laid-out figure (nothing saved)."""
    def run(name: str):
        drawn = []
        lay_out = figures.finish
        monkeypatch.setattr(figures, "finish", lambda fig, provenance, pdf, **layout: (
            lay_out(fig, provenance, None, **layout), drawn.append(fig)))
        snakemake = SimpleNamespace(params=SimpleNamespace(derived=str(study_folder / "derived")),
                                    input=SimpleNamespace(provenance=str(study_folder / "raw" / "provenance.json")),
                                    output=SimpleNamespace(pdf=str(study_folder / f"{name}.pdf")))
        runpy.run_path(str(REPO / "notebooks" / f"{name}.py"), init_globals={"snakemake": snakemake})
        (fig,) = drawn
        fig.canvas.draw()
        return fig
    return run


@pytest.mark.parametrize("name", ["crossover_bandwidth", "crossover_map", "crossover_latency"])
def test_every_figure_names_its_source_run(render, name):
    texts = [t.get_text() for t in render(name).texts]
    assert any("synthetic test data" in t and "132 SMs" in t for t in texts)


def test_bandwidth_ceilings_are_named_in_the_legend_not_over_the_data(render):
    fig = render("crossover_bandwidth")
    assert not [child for ax in fig.axes for child in ax.get_children() if isinstance(child, Annotation)]
    named = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    assert "d2d copy (ceiling)" in named and "read stream (ceiling)" in named, named


def test_map_colour_bar_covers_no_panel(render):
    fig = render("crossover_map")
    colour_bar = next(ax for ax in fig.axes if ax.get_label() == "<colorbar>")
    panels = [ax for ax in fig.axes if ax is not colour_bar]
    assert len(panels) == 4         # against cp.async and plain loads, from HBM and L2
    for panel in panels:
        assert not colour_bar.get_position().overlaps(panel.get_position()), (
            f"colour bar {colour_bar.get_position()} overlaps panel {panel.get_title()!r} {panel.get_position()}")


def test_map_compares_tma_with_each_alternative_apart(render):
    """Each panel is TMA against one mechanism, cp.async or plain loads (the same-engine bulk copy,
    within 3 % of TMA everywhere, is crossover_bandwidth's), never 'the best alternative'."""
    titles = [ax.get_title() for ax in render("crossover_map").axes if ax.get_title()]
    for alternative in ("cp.async", "plain loads"):
        assert sum(alternative in title for title in titles) == 2, titles
    assert not any("best alternative" in title or "bulk copy" in title for title in titles)


def test_every_other_run_gets_a_style_of_its_own():
    """A fourth (or twentieth) run overlaid never reuses another's dash pattern or marker."""
    dashes = [str(figures.run_style(i)["linestyle"]) for i in range(20)]
    markers = [str(figures.overlay_marker_style("white", i)["marker"]) for i in range(20)]
    assert len(set(dashes)) == 20 and len(set(markers)) == 20


def test_the_runs_legend_sits_off_the_data():
    """Placed beside the axes, the legend of the runs covers no point of any panel."""
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2)
    for ax in axes:
        ax.plot(range(10), range(10))
    runs = [(f"h200-run-{i}", Path("."), {"gpu": {"name": "NVIDIA H200"}}) for i in range(5)]
    figures.runs_legend(axes[-1], "h200", runs)
    fig.tight_layout()
    fig.canvas.draw()
    (legend,) = {lg for lg in axes[-1].findobj(matplotlib.legend.Legend) if lg.get_title().get_text() == "runs"}
    box = legend.get_window_extent()
    assert all(not box.overlaps(ax.bbox) for ax in axes)
    plt.close(fig)
