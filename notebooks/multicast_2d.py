# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # The GEMM-like 2-D pattern: A shared along the cluster's y, B along x
#
# Speedup of TMA multicast over each alternative (time of the alternative / time of
# multicast, each at its own best ring) by cluster shape and tile size (A tile; the B tile is
# as large). Above 1: multicast is faster. The shaded band is the 1 % tie tolerance. Other
# runs of the sweep found beside this one under `results/` are drawn as black-edged markers
# over the bars, filled in the bars' colours, one marker shape per run. Not shown: a tensor-core
# consumer; the GEMM study measures real CUTLASS mainloops.

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from matplotlib.patches import Patch

from tma_study.report.figures import (
    PAGE_IN,
    SERIES_COLOURS,
    finish,
    inputs_and_runs,
    legend_band,
    overlay_marker_style,
    runs_handles,
)
from tma_study.report.tables import human_bytes

derived, provenance, pdf, runs = inputs_and_runs("multicast", globals().get("snakemake"))


def two_dimensional(folder):
    speedup = pd.read_csv(folder / "speedup.csv")
    return speedup[speedup.pattern == "2d"]


def speedups(frame, ws, tile, shapes):
    """Multicast's speedup over the better alternative per cluster shape (NaN: not measured)."""
    values = []
    for x, y in shapes:
        match = frame[(frame.working_set == ws) & (frame.cluster_x == x) & (frame.cluster_y == y)
                      & (frame.tile_bytes == tile)]
        values.append(float(match.speedup_over_best_alternative.iloc[0]) if len(match) else np.nan)
    return values


speedup = two_dimensional(derived)
others = [two_dimensional(folder) for _, folder, _ in runs]

# %%
HATCHES = ("", "////", "....", "xxxx", "\\\\\\\\")    # a pattern per tile size besides its colour
sets = [w for w in ("hbm", "l2") if w in set(speedup.working_set)]
shapes = sorted({(x, y) for x, y in zip(speedup.cluster_x, speedup.cluster_y)}, key=lambda s: (s[0] * s[1], s))
tiles = sorted(speedup.tile_bytes.unique())
fig, axes = plt.subplots(1, len(sets), figsize=(PAGE_IN * 0.8, 2.9), squeeze=False, sharey=True)
width = 0.8 / len(tiles)
for ax, ws in zip(axes[0], sets):
    for i, tile in enumerate(tiles):
        positions = np.arange(len(shapes)) + i * width
        bars = ax.bar(positions, speedups(speedup, ws, tile, shapes), width, color=SERIES_COLOURS[i],
                      hatch=HATCHES[i % len(HATCHES)], edgecolor="white", linewidth=0.3)
        for index, other in enumerate(others):
            ax.plot(positions, speedups(other, ws, tile, shapes),
                    **overlay_marker_style(bars.patches[0].get_facecolor(), index))
    ax.axhspan(0.99, 1.01, color="#dddddd", zorder=0)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(np.arange(len(shapes)) + width * (len(tiles) - 1) / 2)
    ax.set_xticklabels([f"{x}x{y}" for x, y in shapes])
    ax.set_xlabel("cluster shape (x: B shared, y: A shared)")
    ax.set_title(f"operands in {ws.upper()}")
    ax.grid(alpha=0.3, axis="y")
axes[0][0].set_ylabel("multicast speedup\n(vs the better own-copy variant)")
tile_handles = [Patch(facecolor=SERIES_COLOURS[i], hatch=HATCHES[i % len(HATCHES)], edgecolor="white",
                      label=f"tile {human_bytes(tile)}") for i, tile in enumerate(tiles)]
rect = legend_band(fig, [(tile_handles, len(tiles), None),
                         (runs_handles(derived.parent.parent.name, runs, markers=True), 3, "runs")], stack=True)
finish(fig, provenance, pdf, rect=rect)
