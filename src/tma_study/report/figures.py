"""What every figure notebook shares: finding its inputs, one look, saving PDF + PNG."""
from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from tma_study.config import REPO_ROOT  # noqa: E402
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
        return (Path(snakemake.params.derived), json.loads(Path(snakemake.input.provenance).read_text()),
                Path(snakemake.output.pdf))
    results = REPO_ROOT / "results" / DEFAULT_GPU / study
    return results / "derived", json.loads((results / "provenance.json").read_text()), None


def size_axis(ax, sizes) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes)
    ax.set_xticklabels([human_bytes(s).replace(" ", "") for s in sizes], rotation=45)
    ax.set_xlabel("bytes per transfer")


def finish(fig, provenance: dict, pdf: Path | None) -> None:
    """Caption the source run under the figure and write PDF and PNG (when run by Snakemake)."""
    fig.text(0.01, 0.005, source_line(provenance), fontsize=7, color="#555555", ha="left", va="bottom")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    if pdf is not None:
        pdf.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(pdf)
        fig.savefig(pdf.with_suffix(".png"), dpi=150)
    plt.close(fig)
