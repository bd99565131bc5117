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
# One colour per cluster shape; filled markers: each cluster its own tiles (spread), open: every
# cluster the same tiles (shared); circles HBM, squares L2 operands. Shaded band: 1 % ties.

# %%
import matplotlib.pyplot as plt
import pandas as pd

from tma_study.report.figures import finish, inputs_and_runs

derived, provenance, pdf, runs = inputs_and_runs("multicast", globals().get("snakemake"))
compute = pd.read_csv(derived / "compute.csv")
MARKERS = {"hbm": "o", "l2": "s"}

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 4.0), sharey=True)
if "l2_read_fraction" not in compute.columns:
    for ax in axes:
        ax.text(0.5, 0.5, str(compute.status.iloc[0]), ha="center", va="center", wrap=True, transform=ax.transAxes)
        ax.set_axis_off()
else:
    shapes = sorted({(x, y) for x, y in zip(compute.cluster_x, compute.cluster_y)}, key=lambda s: (s[0] * s[1], s))
    colours = dict(zip(shapes, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    for ax, column, label in ((axes[0], "consumer_to_load", "consumer time / load time per stage"),
                              (axes[1], "l2_read_fraction", "own copies' L2 read rate / L2 read ceiling")):
        for (x, y, ws, order), rows in compute.groupby(["cluster_x", "cluster_y", "working_set", "tile_order"]):
            rows = rows.sort_values(column)
            colour = colours[(x, y)]
            ax.plot(rows[column], rows.speedup_over_best_alternative, marker=MARKERS.get(ws, "o"), linewidth=0.8,
                    color=colour, markerfacecolor=colour if order == "spread" else "none", markersize=4,
                    label=f"{x}x{y}" if (ws, order) == ("hbm", "spread") else None)
        ax.axhspan(0.99, 1.01, color="#dddddd", zorder=0)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xlabel(label)
        ax.grid(alpha=0.3)
    axes[0].set_xscale("symlog", linthresh=0.1)
    axes[0].set_xlim(left=0)
    axes[0].set_ylabel("multicast speedup\n(vs the better own-copy variant)")
    axes[0].legend(title="cluster", fontsize=8, loc="best")
finish(fig, provenance, pdf)
