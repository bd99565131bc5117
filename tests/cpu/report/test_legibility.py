"""A figure is legible in print or it is not saved (tma_study.report.legibility, run by
figures.finish): drawn no wider than the page, text of 7 pt or more inside the figure, no legend over
data or over another legend, µs written µs; and what finish saves embeds TrueType fonts, never Type 3."""
import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from tma_study.report import figures, legibility  # noqa: E402

PROVENANCE = {"gpu": {"name": "NVIDIA H200", "sm_count": 132}, "finished_utc": "2026-12-04T00:00:00Z",
              "source_sha256": "0123456789abcdef"}


def figure(width=figures.COLUMN_IN, legend_loc="lower right"):
    fig, ax = plt.subplots(figsize=(width, 2.0))
    ax.plot([0, 1, 2, 3], [0, 1, 2, 3], marker="o", label="diagonal")
    ax.set_xlabel("bytes per transfer")
    if legend_loc:
        ax.legend(loc=legend_loc)
    fig.tight_layout()
    return fig, ax


def test_a_legible_figure_passes():
    fig, ax = figure(legend_loc="upper left")
    ax.set_ylim(-0.5, 8)                        # the legend sits above the line, over no point
    assert legibility.problems(fig) == []


@pytest.mark.parametrize("spoil, problem", [
    (lambda fig, ax: ax.set_title("tiny", fontsize=5), "at 5.0 pt"),
    (lambda fig, ax: ax.set_ylabel("time (us)"), "'us'"),
    (lambda fig, ax: fig.set_size_inches(9, 2), "9.00 in wide"),
    (lambda fig, ax: ax.legend(loc="center"), "lies over data"),
    (lambda fig, ax: fig.legend(handles=ax.get_lines(), loc="center"), "lies over data"),
    (lambda fig, ax: ax.add_artist(ax.legend(loc="upper left", title="first"))
     or ax.legend(handles=ax.get_lines(), loc="upper left", title="second"), "overlaps legend"),
    (lambda fig, ax: fig.text(0.98, 0.5, "a note that runs past the edge"), "runs off the figure"),
])
def test_each_problem_is_named(spoil, problem):
    fig, ax = figure(legend_loc=None)
    spoil(fig, ax)
    found = legibility.problems(fig)
    assert any(problem in p for p in found), found
    with pytest.raises(legibility.FigureError):
        legibility.check(fig)


def test_a_legend_over_bars_is_named():
    fig, ax = plt.subplots(figsize=(figures.COLUMN_IN, 2.0))
    ax.bar([0, 1, 2], [3, 3, 3], label="bars")
    ax.legend(loc="center")
    assert any("lies over data" in p for p in legibility.problems(fig))


def test_finish_saves_truetype_fonts_and_a_legend_band_keeps_clear_of_the_data(tmp_path):
    fig, ax = figure(legend_loc=None)
    rect = figures.legend_band(fig, [(ax.get_lines(), 1, None), (figures.runs_handles("ref", []), 2, "runs")])
    figures.finish(fig, PROVENANCE, tmp_path / "figure.pdf", rect=rect)
    data = (tmp_path / "figure.pdf").read_bytes()
    assert b"/Type3" not in data and b"/FontFile2" in data, "fonts embedded as TrueType (pdf.fonttype 42)"
    assert (tmp_path / "figure.png").is_file()


def test_finish_refuses_an_illegible_figure(tmp_path):
    fig, ax = figure(legend_loc="center")
    with pytest.raises(legibility.FigureError, match="lies over data"):
        figures.finish(fig, PROVENANCE, tmp_path / "figure.pdf")
    assert not (tmp_path / "figure.pdf").exists()
