"""What every figure notebook shares: finding its inputs, one look, saving PDF + PNG."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from tma_study.config import REPO_ROOT  # noqa: E402
from tma_study.harness import l2_state  # noqa: E402
from tma_study.harness.provenance import read as read_provenance  # noqa: E402
from tma_study.report.tables import human_bytes, source_line  # noqa: E402

MECHANISM_STYLE = {  # one colour and marker per mechanism, the same in every figure
    "tma_tile": {"label": "TMA tensor tile", "color": "#1f77b4", "marker": "o"},
    "bulk_copy": {"label": "bulk copy (1-D)", "color": "#17becf", "marker": "s", "linestyle": "--",
                  "markersize": 4},  # dashed and smaller: it often lies right on top of TMA
    "cp_async": {"label": "cp.async 16 B", "color": "#d62728", "marker": "^"},
    "plain_loads": {"label": "plain LDG.128", "color": "#7f7f7f", "marker": "v"},
}
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


def finish(fig, provenance: dict, pdf: Path | None, rect: tuple = (0, 0.03, 1, 1)) -> None:
    """Caption the source run under the figure and write PDF and PNG (when run by Snakemake);
    ``rect``: the area tight_layout fills (leave room for a legend below the panels)."""
    fig.text(0.01, 0.005, source_line(provenance), fontsize=7, color="#555555", ha="left", va="bottom")
    fig.tight_layout(rect=rect)
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
    """'h200-rerun (NVIDIA H200)'; a run timed after nvbench's flush alone says so (l2_state)."""
    dirty = ", L2 dirty after nvbench's flush" if l2_state.describe(provenance).startswith("dirty") else ""
    return f"{label} ({provenance.get('gpu', {}).get('name', 'unknown GPU')}{dirty})"


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


def runs_legend(ax, this_run: str, runs: list[tuple[str, Path, dict]], markers: bool = False,
                **where) -> None:
    """A second legend naming the runs by line style, or by marker over bars when ``markers``
    (only when other runs are overlaid), outside the axes to the right of ``ax`` (off the data;
    ``finish``'s tight layout makes room), unless ``where`` places it (loc=..., bbox_to_anchor=...)."""
    if not runs:
        return
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    if markers:
        handles = [Patch(color="#999999", label=f"{this_run} (this run): bars")]
        handles += [Line2D([], [], **overlay_marker_style("white", i), label=run_label(label, provenance))
                    for i, (label, _, provenance) in enumerate(runs)]
    else:
        handles = [Line2D([], [], color="black", linewidth=1.5, label=f"{this_run} (this run)")]
        handles += [Line2D([], [], color="black", **{**OVERLAY, **run_style(i)},
                           label=run_label(label, provenance)) for i, (label, _, provenance) in enumerate(runs)]
    outside = {"loc": "upper left", "bbox_to_anchor": (1.02, 1.0), "borderaxespad": 0.0}
    legend = ax.legend(handles=handles, fontsize=7, title="runs", title_fontsize=7, **(where or outside))
    ax.add_artist(legend)           # kept when the notebook gives ax a legend of its own
    legend.set_clip_on(False)       # else add_artist clips it to ax and the tight layout leaves it out
