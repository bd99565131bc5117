"""What every figure notebook shares: finding its inputs, one look, saving PDF + PNG.

The look is the paper's: figures drawn at the width they print (``COLUMN_IN`` for a column,
``PAGE_IN`` across the page), text of 7 pt or more, TrueType fonts embedded in the PDF (Type 3
fonts are refused by IEEE's PDF checks), the Okabe-Ito palette (distinct for colour-blind readers)
with a marker per series. ``finish`` refuses a figure that would be unreadable in print
(``tma_study.report.legibility``).
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from cycler import cycler  # noqa: E402

from tma_study.config import REPO_ROOT  # noqa: E402
from tma_study.harness import l2_state  # noqa: E402
from tma_study.harness.provenance import read as read_provenance  # noqa: E402
from tma_study.report import legibility  # noqa: E402
from tma_study.report.legibility import COLUMN_IN, PAGE_IN  # noqa: E402,F401
from tma_study.report.tables import human_bytes, source_line  # noqa: E402

# Okabe & Ito's palette: every pair tells apart for the common colour-vision deficiencies.
PALETTE = {"blue": "#0072B2", "orange": "#E69F00", "green": "#009E73", "vermillion": "#D55E00",
           "purple": "#CC79A7", "sky": "#56B4E9", "yellow": "#F0E442", "black": "#000000", "grey": "#7F7F7F"}
SERIES_COLOURS = [PALETTE[c] for c in ("blue", "orange", "green", "vermillion", "purple", "sky", "black")]
SERIES_MARKERS = ["o", "s", "^", "D", "v", "P", "X"]
plt.rcParams.update({
    "pdf.fonttype": 42, "ps.fonttype": 42,        # TrueType, never Type 3
    "font.size": 7.5, "axes.titlesize": 8, "axes.labelsize": 7.5, "xtick.labelsize": 7, "ytick.labelsize": 7,
    "legend.fontsize": 7, "legend.title_fontsize": 7, "figure.titlesize": 8,
    "axes.prop_cycle": cycler(color=SERIES_COLOURS), "lines.linewidth": 1.2, "lines.markersize": 4,
    "axes.linewidth": 0.6, "grid.linewidth": 0.4, "legend.framealpha": 0.9, "legend.borderaxespad": 0.3,
})

MECHANISM_STYLE = {  # one colour and marker per mechanism, the same in every figure
    "tma_tile": {"label": "TMA tensor tile", "color": PALETTE["blue"], "marker": "o"},
    "bulk_copy": {"label": "bulk copy (1-D)", "color": PALETTE["sky"], "marker": "s", "linestyle": "--",
                  "markersize": 3},  # dashed and smaller: it often lies right on top of TMA
    "cp_async": {"label": "cp.async 16 B", "color": PALETTE["vermillion"], "marker": "^"},
    "plain_loads": {"label": "plain LDG.128", "color": PALETTE["black"], "marker": "v"},
}
LEGEND_ROW_IN = 0.15           # one row of 7 pt legend text (and its marker)
EDGE_IN = 3 / 72                # the source line's distance from the figure's edges
SOURCE_LINE_IN = 8.5 / 72 + EDGE_IN      # the source line under every figure
DEFAULT_GPU = "h200"


def inputs(study: str, snakemake=None) -> tuple[Path, dict, Path]:
    """(derived folder, provenance, output PDF path) from Snakemake, or the reference data."""
    if snakemake is not None:
        return (Path(snakemake.params.derived), read_provenance(Path(snakemake.input.provenance), study=study),
                Path(snakemake.output.pdf))
    results = REPO_ROOT / "results" / DEFAULT_GPU / study
    return results / "derived", read_provenance(results / "provenance.json", study=study), None


def size_axis(ax, sizes) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes)
    ax.set_xticklabels([human_bytes(s).replace(" ", "") for s in sizes], rotation=45)
    ax.set_xlabel("bytes per transfer")


def finish(fig, provenance: dict, pdf: Path | None, rect: tuple | None = None) -> None:
    """Caption the source run under the figure, check that it is legible in print and write PDF
    and PNG (when run by Snakemake); ``rect``: the area tight_layout fills (leave room for a
    legend below the panels; None: all of it above the source line)."""
    source = source_line(provenance).replace("NVIDIA ", "")        # short enough for a column figure
    width, height = fig.get_size_inches()
    fig.text(EDGE_IN / width, EDGE_IN / height, source, fontsize=7, color="#555555", ha="left", va="bottom")
    if fig.get_layout_engine() is None:
        bottom = SOURCE_LINE_IN / height      # one line of 7 pt text for the source line
        for _ in range(2):          # twice: the first pass moves tick labels the second one accounts for
            fig.tight_layout(rect=rect or (0, bottom, 1, 1), pad=0.3)
    legibility.check(fig)
    if pdf is not None:
        pdf.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(pdf, metadata={"CreationDate": None})  # no timestamp: the same data, the same bytes
        fig.savefig(pdf.with_suffix(".png"), dpi=150)
    plt.close(fig)


# ---------------------------------------------------------------- other runs, overlaid

# One dash pattern per other run, never repeated: these, then patterns of growing dash length.
RUN_DASHES = ((1, 1.5), (4, 2), (4, 1.5, 1, 1.5), (8, 2), (4, 1.5, 1, 1.5, 1, 1.5), (1, 3.5), (8, 2, 2, 2),
              (2, 1))
OVERLAY = {"linewidth": 1.0, "alpha": 0.6, "markersize": 3, "markerfacecolor": "none"}


def run_style(run_index: int) -> dict:
    """The line style of the other run number ``run_index`` (0, 1, ...): distinct for every run."""
    if run_index < len(RUN_DASHES):
        return {"linestyle": (0, RUN_DASHES[run_index])}
    return {"linestyle": (0, (run_index - len(RUN_DASHES) + 10, 1.5, 1, 1.5, 1, 1.5, 1, 1.5))}


def other_runs(study: str, snakemake=None, label: str = DEFAULT_GPU) -> list[tuple[str, Path, dict]]:
    """(label, derived folder, provenance) of every other run of ``study`` to overlay.

    Under Snakemake: the ``others`` input of the figure rule (derived files of the other
    results/<label>/ folders); by hand: every results/<label>/<study>/derived/ but ``label``'s.
    """
    if snakemake is not None:
        folders = sorted({Path(f).parent for f in getattr(snakemake.input, "others", [])})
    else:
        folders = sorted(p for p in (REPO_ROOT / "results").glob(f"*/{study}/derived")
                         if p.parent.parent.name != label)
    return [(folder.parent.parent.name, folder, read_provenance(folder.parent / "provenance.json", study=study))
            for folder in folders]


def inputs_and_runs(study: str, snakemake=None) -> tuple[Path, dict, Path, list[tuple[str, Path, dict]]]:
    """:func:`inputs` plus :func:`other_runs`: every other run of ``study`` to overlay."""
    derived, provenance, pdf = inputs(study, snakemake)
    return derived, provenance, pdf, other_runs(study, snakemake, derived.parent.parent.name)


def run_label(label: str, provenance: dict) -> str:
    """'h200-rerun (H200)'; a run timed after nvbench's flush alone says 'dirty L2' (l2_state)."""
    dirty = ", dirty L2" if l2_state.describe(provenance).startswith("dirty") else ""
    gpu = str(provenance.get("gpu", {}).get("name", "unknown GPU")).removeprefix("NVIDIA ")
    return f"{label} ({gpu}{dirty})"


def overlay_style(style: dict, run_index: int) -> dict:
    """A mechanism's style for another run: same colour and marker, thin, the run's dash pattern."""
    base = {k: v for k, v in style.items() if k not in ("label", "linestyle", "markersize")}
    return {**base, **OVERLAY, **run_style(run_index)}


RUN_MARKERS = ("D", "X", "P", "*", "h", "<", ">", "8")   # other runs over bars: then polygons of more sides
OVERLAY_MARKER = {"linestyle": "none", "markersize": 5, "markeredgecolor": "black", "markeredgewidth": 0.8}


def overlay_marker_style(color, run_index: int) -> dict:
    """Another run's value drawn over a bar of this run: filled with the bar's colour, edged in
    black (so it shows inside its own bar too), one marker shape per run."""
    marker = RUN_MARKERS[run_index] if run_index < len(RUN_MARKERS) else (run_index - len(RUN_MARKERS) + 9, 0, 0)
    return {**OVERLAY_MARKER, "markerfacecolor": color, "marker": marker}


def runs_handles(this_run: str, runs: list[tuple[str, Path, dict]], markers: bool = False) -> list:
    """Legend handles naming the runs by line style, or by marker over bars when ``markers``
    (none when no other run is overlaid)."""
    if not runs:
        return []
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    if markers:
        handles = [Patch(color="#999999", label=f"{this_run} (this run): bars")]
        return handles + [Line2D([], [], **overlay_marker_style("white", i), label=run_label(label, provenance))
                          for i, (label, _, provenance) in enumerate(runs)]
    handles = [Line2D([], [], color="black", linewidth=1.5, label=f"{this_run} (this run)")]
    return handles + [Line2D([], [], color="black", **{**OVERLAY, **run_style(i)},
                             label=run_label(label, provenance)) for i, (label, _, provenance) in enumerate(runs)]


def runs_legend(ax, this_run: str, runs: list[tuple[str, Path, dict]], markers: bool = False,
                **where) -> None:
    """A second legend naming the runs (see runs_handles), outside the axes to the right of ``ax``
    (off the data; ``finish``'s tight layout makes room), unless ``where`` places it (loc=...,
    bbox_to_anchor=...). The paper's figures put it in the band under their panels (legend_band)."""
    handles = runs_handles(this_run, runs, markers)
    if not handles:
        return
    outside = {"loc": "upper left", "bbox_to_anchor": (1.02, 1.0), "borderaxespad": 0.0}
    legend = ax.legend(handles=handles, title="runs", **(where or outside))
    ax.add_artist(legend)           # kept when the notebook gives ax a legend of its own
    legend.set_clip_on(False)       # else add_artist clips it to ax and the tight layout leaves it out




def legend_band(fig, legends: list[tuple[list, int, str | None]], stack: bool = False) -> tuple:
    """Figure legends in a band under the panels, above the source line, so that no legend lies
    over data: side by side (the first at the left, the last at the right), or centred one above
    the other when ``stack``; ``legends``: (handles, columns, title) each (empty handles: left out).
    Returns the rect that ``finish`` lays the panels out in."""
    legends = [legend for legend in legends if legend[0]]
    height = fig.get_size_inches()[1]
    rows = [-(-len(handles) // columns) + (0 if title is None else title.count("\n") + 1)
            for handles, columns, title in legends]
    band = SOURCE_LINE_IN + (sum(rows) if stack else max(rows or [0])) * LEGEND_ROW_IN + 0.06 * max(1, len(rows) * stack)
    top = band
    for index, ((handles, columns, title), height_rows) in enumerate(zip(legends, rows)):
        if stack:
            side, x = "upper center", 0.5
        else:
            side, x = (("upper left", 0.005) if index == 0 and len(legends) > 1 else
                       ("upper right", 0.995) if index == len(legends) - 1 and len(legends) > 1 else
                       ("upper center", (index + 0.5) / len(legends)))
        fig.legend(handles=handles, ncol=columns, title=title, loc=side, frameon=False, bbox_to_anchor=(x, top / height),
                   columnspacing=1.0, handlelength=1.8, handletextpad=0.4, borderpad=0.1, borderaxespad=0.0)
        if stack:
            top -= height_rows * LEGEND_ROW_IN + 0.06
    return (0, band / height, 1, 1)
