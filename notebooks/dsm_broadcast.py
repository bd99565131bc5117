# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Which broadcast primitive? TMA multicast vs DSM pull vs DSM push
#
# Delivered bandwidth (bytes landing in all CTAs' shared memory per second) of each way to
# give every CTA of an n-CTA cluster the same tile, each at its own best stages and CTAs per
# SM, by tile size; one panel per cluster size (a column figure), operand streamed from HBM
# (solid, filled markers) or resident in L2 (dashed, open markers). DSM variants: CTA 0 loads
# the tile with TMA; the others read it from CTA 0's shared memory (pull) or CTA 0 bulk-copies
# it into theirs (push). Other runs of the sweep found beside this one under `results/` are
# overlaid as thin lines in the same colours (and compared in the dsm_comparison table). Not shown: a DSM design where every CTA loads a slice and the slices are
# exchanged (an all-gather).

# %%
import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.lines import Line2D

from tma_study.report.figures import (
    COLUMN_IN,
    PALETTE,
    finish,
    inputs_and_runs,
    legend_band,
    overlay_style,
    runs_handles,
    size_axis,
)

derived, provenance, pdf, runs = inputs_and_runs("dsm", globals().get("snakemake"))
best = pd.read_csv(derived / "best.csv")
others = [pd.read_csv(folder / "best.csv") for _, folder, _ in runs]
STYLE = {"multicast": {"color": PALETTE["blue"], "marker": "^", "label": "TMA multicast"},
         "dsm_pull": {"color": PALETTE["black"], "marker": "o", "label": "DSM pull (ld.shared::cluster)"},
         "dsm_push": {"color": PALETTE["orange"], "marker": "s", "label": "DSM push (bulk copy to peers)"}}
LEVELS = {"hbm": {"linestyle": "-"}, "l2": {"linestyle": "--", "markerfacecolor": "white"}}

# %%
sizes = sorted(best.cluster_size.unique())
columns = 2
grid_rows = -(-len(sizes) // columns)
legend_rows = 3 + (len(runs) + 2 if runs else 0)       # the legend band: 0.15 in a row
fig, axes = plt.subplots(grid_rows, columns, figsize=(COLUMN_IN, 1.45 * grid_rows + 0.65 + 0.15 * legend_rows),
                         squeeze=False, sharey=True, sharex=True)
for index, n in enumerate(sizes):
    ax = axes[index // columns][index % columns]
    for variant, style in STYLE.items():
        for ws, look in LEVELS.items():
            line = best[(best.working_set == ws) & (best.cluster_size == n) & (best.variant == variant)]
            line = line.sort_values("tile_bytes")
            ax.plot(line.tile_bytes, line.gbps / 1e3, **{**style, **look, "label": None, "markersize": 3.5})
            for run, other in enumerate(others):
                theirs = other[(other.working_set == ws) & (other.cluster_size == n) & (other.variant == variant)]
                theirs = theirs.sort_values("tile_bytes")
                ax.plot(theirs.tile_bytes, theirs.gbps / 1e3, **{**overlay_style(style, run), "markersize": 2})
    size_axis(ax, sorted(best.tile_bytes.unique()))
    ax.set_xlabel("tile bytes" if index // columns == grid_rows - 1 else "")
    ax.set_title(f"cluster of {n}")
    ax.grid(alpha=0.3)
    if index % columns == 0:
        ax.set_ylabel("delivered TB/s")
for ax in axes.flat[len(sizes):]:
    ax.set_visible(False)
handles = [Line2D([], [], **style) for style in STYLE.values()]
handles += [Line2D([], [], color="#555555", marker="o", label="HBM", **LEVELS["hbm"]),
            Line2D([], [], color="#555555", marker="o", label="L2", **LEVELS["l2"])]
rect = legend_band(fig, [(handles, 2, None), (runs_handles(derived.parent.parent.name, runs), 1, "runs")], stack=True)
finish(fig, provenance, pdf, rect=rect)
