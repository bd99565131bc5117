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
# as large). Above 1: multicast is faster. The shaded band is the 1 % tie tolerance. Not
# shown: a tensor-core consumer; the GEMM study measures real CUTLASS mainloops.

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from tma_study.report.figures import finish, inputs
from tma_study.report.tables import human_bytes

derived, provenance, pdf = inputs("multicast", globals().get("snakemake"))
speedup = pd.read_csv(derived / "speedup.csv")
speedup = speedup[speedup.pattern == "2d"]

# %%
sets = [w for w in ("hbm", "l2") if w in set(speedup.working_set)]
shapes = sorted({(x, y) for x, y in zip(speedup.cluster_x, speedup.cluster_y)}, key=lambda s: (s[0] * s[1], s))
tiles = sorted(speedup.tile_bytes.unique())
fig, axes = plt.subplots(1, len(sets), figsize=(5.5 * len(sets), 3.4), squeeze=False, sharey=True)
width = 0.8 / len(tiles)
for ax, ws in zip(axes[0], sets):
    for i, tile in enumerate(tiles):
        values = []
        for x, y in shapes:
            match = speedup[(speedup.working_set == ws) & (speedup.cluster_x == x) & (speedup.cluster_y == y)
                            & (speedup.tile_bytes == tile)]
            values.append(float(match.speedup_over_best_alternative.iloc[0]) if len(match) else np.nan)
        ax.bar(np.arange(len(shapes)) + i * width, values, width, label=f"tile {human_bytes(tile)}")
    ax.axhspan(0.99, 1.01, color="#dddddd", zorder=0)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(np.arange(len(shapes)) + width * (len(tiles) - 1) / 2)
    ax.set_xticklabels([f"{x}x{y}" for x, y in shapes])
    ax.set_xlabel("cluster shape (x: B shared, y: A shared)")
    ax.set_title(f"operands in {ws.upper()}")
    ax.grid(alpha=0.3, axis="y")
axes[0][0].set_ylabel("multicast speedup over the better alternative")
axes[0][0].legend(fontsize=8)
finish(fig, provenance, pdf)
