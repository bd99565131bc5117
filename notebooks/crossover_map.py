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
# the same transfer size and ring bytes per SM (> 1: TMA is faster), from HBM (top) and L2
# (bottom). Left: against cp.async; right: against plain 128-bit loads. (The 1-D bulk copy, the
# same engine without a tensor map, is within 3 % of TMA everywhere: crossover_bandwidth.) Where a repeat run of the sweep
# exists (`results/<label>-rerun/`), a cell is outlined when its ratio there differs by more
# than 5 % or crosses 1 (the winner changes by more than 1 % either way).

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import TwoSlopeNorm
from matplotlib.patches import Rectangle

from tma_study.report.figures import PAGE_IN, finish, inputs_and_runs
from tma_study.report.tables import human_bytes

MOVED = 0.05     # outline a cell when the repeat run's ratio differs by more than this (relative)
TIE = 0.01       # ... or when the two runs' ratios lie on either side of [1 - TIE, 1 + TIE]
ALTERNATIVES = {"cp_async": "TMA / cp.async", "plain_loads": "TMA / plain loads"}   # bulk copy: within 3 %
DARK = 0.6       # a cell this far from 1 on the colour scale gets white text
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
fig = plt.figure(figsize=(PAGE_IN, 1.35 * len(working_sets) + 0.75))
grid_spec = fig.add_gridspec(len(working_sets), len(ALTERNATIVES) + 1, width_ratios=[1] * len(ALTERNATIVES) + [0.035])
norm = TwoSlopeNorm(vcenter=1.0, vmin=0.25, vmax=2.0)
for row, ws in enumerate(working_sets):
    for col, (alternative, title) in enumerate(ALTERNATIVES.items()):
        ax = fig.add_subplot(grid_spec[row, col])
        mine = ratios(best, ws, alternative)
        sizes = sorted({size for _, size in mine})
        rings = sorted({ring for ring, _ in mine})
        grid = np.full((len(rings), len(sizes)), np.nan)
        for (ring, size), value in mine.items():
            i, j = rings.index(ring), sizes.index(size)
            grid[i, j] = value
            shade = abs(norm(value) - 0.5) * 2
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7,
                    color="white" if shade > DARK else "black")
            for other in repeat_best:
                theirs = ratios(other, ws, alternative).get((ring, size), np.nan)
                crossed = min(theirs, value) < 1 - TIE and max(theirs, value) > 1 + TIE
                if np.isfinite(theirs) and (abs(theirs / value - 1) > MOVED or crossed):
                    ax.add_patch(Rectangle((j - 0.47, i - 0.47), 0.94, 0.94, fill=False, edgecolor="black", linewidth=1.2))
        image = ax.imshow(grid, cmap="RdBu", norm=norm, aspect="auto", origin="lower")
        ax.set_xticks(range(len(sizes)), [human_bytes(s).replace(" ", "") for s in sizes], rotation=60)
        ax.set_yticks(range(len(rings)), [human_bytes(r).replace(" ", "") for r in rings] if col == 0 else [])
        if row == len(working_sets) - 1:
            ax.set_xlabel("bytes per transfer")
        if col == 0:
            ax.set_ylabel(f"{LEVELS[ws]}: ring per SM")
        ax.set_title(f"{title}, {LEVELS[ws]}")
colour_axis = fig.add_subplot(grid_spec[:, -1], label="<colorbar>")
fig.colorbar(image, cax=colour_axis).set_label("TMA GB/s over the alternative's")
if repeats:
    fig.suptitle("outlined: the ratio moved by more than 5 % or crossed 1 in " + ", ".join(l for l, _ in repeats))
finish(fig, provenance, pdf)
