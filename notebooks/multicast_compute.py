# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Multicast when the consumer computes, and when every cluster reads the same tiles
#
# The GEMM-like 2-D pattern with a consumer that churns every loaded word `work_rounds` times
# (dependent IMADs). Left: multicast's speedup over the better own-copy variant against the
# consumer's time per stage over the load time per stage (derived compute.csv). Right: the same
# speedups against the own copies' L2 read rate as a fraction of the highest L2 read rate the
# sweep reached: multicast divides L2 reads, so it should pay where own copies read L2 fastest.
# Operands in HBM (top) and L2 (bottom). Every point is one (cluster shape, tile, work rounds,
# tile order) configuration, drawn as a point: the points have no order to join. One colour and
# marker per cluster shape; filled: each cluster its own tiles (spread), open: every cluster the
# same tiles (shared). Shaded band: 1 % ties.

# %%
import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.lines import Line2D

from tma_study.report.figures import PAGE_IN, SERIES_COLOURS, SERIES_MARKERS, finish, inputs, legend_band

derived, provenance, pdf = inputs("multicast", globals().get("snakemake"))
compute = pd.read_csv(derived / "compute.csv")
LEVELS = {"hbm": "HBM", "l2": "L2"}
X_AXES = (("consumer_to_load", "consumer time / load time per stage"),
          ("l2_read_fraction", "own copies' L2 read rate / L2 read ceiling"))

# %%
levels = [ws for ws in LEVELS if ws in set(compute.working_set)] or ["hbm"]
fig, axes = plt.subplots(len(levels), 2, figsize=(PAGE_IN, 1.7 * len(levels) + 0.7), sharey=True, squeeze=False)
handles = []
if "l2_read_fraction" not in compute.columns:
    for ax in axes.flat:
        ax.text(0.5, 0.5, str(compute.status.iloc[0]), ha="center", va="center", wrap=True, transform=ax.transAxes)
        ax.set_axis_off()
else:
    shapes = sorted({(x, y) for x, y in zip(compute.cluster_x, compute.cluster_y)}, key=lambda s: (s[0] * s[1], s))
    look = {shape: (SERIES_COLOURS[i], SERIES_MARKERS[i]) for i, shape in enumerate(shapes)}
    for row, ws in zip(axes, levels):
        for ax, (column, label) in zip(row, X_AXES):
            for (x, y, order), rows in compute[compute.working_set == ws].groupby(["cluster_x", "cluster_y", "tile_order"]):
                colour, marker = look[(x, y)]
                ax.scatter(rows[column], rows.speedup_over_best_alternative, s=12, marker=marker, linewidths=0.8,
                           edgecolors=colour, facecolors=colour if order == "spread" else "none")
            ax.axhspan(0.99, 1.01, color="#dddddd", zorder=0)
            ax.axhline(1.0, color="black", linewidth=0.8)
            ax.set_xlabel(label if ws == levels[-1] else "")
            ax.set_title(f"operands in {LEVELS[ws]}")
            ax.grid(alpha=0.3)
        row[0].set_xscale("symlog", linthresh=0.1)
        row[0].set_xlim(left=-0.02)
        row[0].set_ylabel("multicast speedup")
    handles = [Line2D([], [], linestyle="none", marker=look[s][1], color=look[s][0], label=f"cluster {s[0]}x{s[1]}")
               for s in shapes]
    handles += [Line2D([], [], linestyle="none", marker="o", color="#555555", label="each cluster its own tiles"),
                Line2D([], [], linestyle="none", marker="o", color="#555555", markerfacecolor="none",
                       label="every cluster the same tiles")]
rect = legend_band(fig, [(handles, 5, None)])
finish(fig, provenance, pdf, rect=rect)
