# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Crossover map: where TMA beats cp.async and plain loads, by transfer size and bytes in flight
#
# Colour and number: best TMA tensor-tile bandwidth over the best bandwidth of one alternative at
# the same transfer size and ring bytes per SM (> 1: TMA is faster), from HBM (left) and L2
# (right). Top: against cp.async; middle: against plain 128-bit loads. Bottom, apart: against a
# 1-D bulk copy, the same copy engine without a tensor map. Where a repeat run of the sweep
# exists (`results/<label>-rerun/`), a cell is outlined when its ratio there differs by more
# than 5 % or crosses 1 (the winner changes by more than 1 % either way).

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import TwoSlopeNorm
from matplotlib.patches import Rectangle

from tma_study.report.figures import finish, inputs_and_runs
from tma_study.report.tables import human_bytes

MOVED = 0.05     # outline a cell when the repeat run's ratio differs by more than this (relative)
TIE = 0.01       # ... or when the two runs' ratios lie on either side of [1 - TIE, 1 + TIE]
ALTERNATIVES = {"cp_async": "TMA / cp.async", "plain_loads": "TMA / plain loads",
                "bulk_copy": "TMA / bulk copy (same engine)"}
LEVELS = {"hbm": "HBM", "l2": "L2"}

derived, provenance, pdf, runs = inputs_and_runs("crossover", globals().get("snakemake"))
repeats = [(label, folder) for label, folder, _ in runs if label.endswith("-rerun")]


def per_ring(folder):
    best = pd.read_csv(folder / "best.csv")
    return best[(best.ring_bytes_per_sm > 0) & (best.access_order == "scattered")]


def ratios(best, ws, alternative):
    """{(ring, size): TMA GB/s over the alternative's} in one working set."""
    rows = best[best.working_set == ws].pivot_table(index=["ring_bytes_per_sm", "bytes_per_transfer"],
                                                    columns="mechanism", values="gbps")
    if "tma_tile" not in rows or alternative not in rows:
        return {}
    return (rows.tma_tile / rows[alternative]).dropna().to_dict()


best = per_ring(derived)
repeat_best = [per_ring(folder) for _, folder in repeats]

# %%
working_sets = [ws for ws in LEVELS if ws in set(best.working_set)]
fig = plt.figure(figsize=(3.6 * len(working_sets) + 0.6, 7.6))
grid_spec = fig.add_gridspec(len(ALTERNATIVES), len(working_sets) + 1, width_ratios=[1] * len(working_sets) + [0.04])
axes = [[fig.add_subplot(grid_spec[r, c]) for c in range(len(working_sets))] for r in range(len(ALTERNATIVES))]
norm = TwoSlopeNorm(vcenter=1.0, vmin=0.25, vmax=2.0)
for row, (alternative, title) in enumerate(ALTERNATIVES.items()):
    for col, ws in enumerate(working_sets):
        ax = axes[row][col]
        mine = ratios(best, ws, alternative)
        sizes = sorted({size for _, size in mine})
        rings = sorted({ring for ring, _ in mine})
        grid = np.full((len(rings), len(sizes)), np.nan)
        for (ring, size), value in mine.items():
            i, j = rings.index(ring), sizes.index(size)
            grid[i, j] = value
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=6.5)
            for other in repeat_best:
                theirs = ratios(other, ws, alternative).get((ring, size), np.nan)
                crossed = min(theirs, value) < 1 - TIE and max(theirs, value) > 1 + TIE
                if np.isfinite(theirs) and (abs(theirs / value - 1) > MOVED or crossed):
                    ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=1.5))
        image = ax.imshow(grid, cmap="RdBu", norm=norm, aspect="auto", origin="lower")
        ax.set_xticks(range(len(sizes)), [human_bytes(s).replace(" ", "") for s in sizes], rotation=45, fontsize=7)
        ax.set_yticks(range(len(rings)), [human_bytes(r).replace(" ", "") for r in rings], fontsize=7)
        ax.set_xlabel("bytes per transfer", fontsize=8)
        ax.set_ylabel("ring bytes per SM", fontsize=8)
        ax.set_title(f"{title}, {LEVELS[ws]}", fontsize=8.5)
colour_axis = fig.add_subplot(grid_spec[:, -1], label="<colorbar>")
fig.colorbar(image, cax=colour_axis).set_label("TMA GB/s over the alternative's GB/s", fontsize=8)
if repeats:
    fig.suptitle("outlined: the ratio moved by more than 5 % or crossed 1 in " + ", ".join(l for l, _ in repeats),
                 fontsize=8)
finish(fig, provenance, pdf)
