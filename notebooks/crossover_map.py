# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Crossover map: where TMA wins, by transfer size and bytes in flight
#
# Colour: best TMA tensor-tile bandwidth over the best of the other three mechanisms at the
# same transfer size and ring bytes per SM (> 1: TMA is faster). The text in each cell names
# the fastest alternative. Where other runs of the sweep exist beside this one under
# `results/`, a cell is outlined when another run's ratio differs by more than 5 % or falls on
# the other side of 1 (the winner changed). Not shown: ties within the measured spread are
# not marked here (`crossover.csv` brackets the crossover with them).

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import TwoSlopeNorm
from matplotlib.patches import Rectangle

from tma_study.report.figures import finish, inputs_and_runs
from tma_study.report.tables import human_bytes

MOVED = 0.05     # outline a cell when another run's ratio differs by more than this (relative)

derived, provenance, pdf, runs = inputs_and_runs("crossover", globals().get("snakemake"))


def per_ring(folder):
    best = pd.read_csv(folder / "best.csv")
    return best[(best.ring_bytes_per_sm > 0) & (best.access_order == "scattered")]


def ratio_and_rival(cell):
    """TMA GB/s over the best other mechanism's in one (ring, size) cell, and that mechanism."""
    tma = cell[cell.mechanism == "tma_tile"]
    others = cell[cell.mechanism != "tma_tile"]
    if not len(tma) or not len(others):
        return np.nan, None
    rival = others.loc[others.gbps.idxmax()]
    return float(tma.gbps.iloc[0]) / rival.gbps, rival.mechanism


best = per_ring(derived)
others = [per_ring(folder) for _, folder, _ in runs]

# %%
working_sets = [ws for ws in ("hbm", "l2") if ws in set(best.working_set)]
fig, axes = plt.subplots(1, len(working_sets), figsize=(5.5 * len(working_sets), 3.2), squeeze=False)
norm = TwoSlopeNorm(vcenter=1.0, vmin=0.25, vmax=2.0)
for ax, ws in zip(axes[0], working_sets):
    rows = best[best.working_set == ws]
    sizes = sorted(rows.bytes_per_transfer.unique())
    rings = sorted(rows.ring_bytes_per_sm.unique())
    ratio = np.full((len(rings), len(sizes)), np.nan)
    for i, ring in enumerate(rings):
        for j, size in enumerate(sizes):
            cell = rows[(rows.ring_bytes_per_sm == ring) & (rows.bytes_per_transfer == size)]
            ratio[i, j], rival = ratio_and_rival(cell)
            if rival is None:
                continue
            ax.text(j, i, f"{ratio[i, j]:.2f}\n{rival.replace('_', ' ')}", ha="center", va="center", fontsize=6)
            for other in others:
                theirs, _ = ratio_and_rival(other[(other.working_set == ws) & (other.ring_bytes_per_sm == ring)
                                                  & (other.bytes_per_transfer == size)])
                if np.isfinite(theirs) and (abs(theirs / ratio[i, j] - 1) > MOVED
                                            or (theirs > 1) != (ratio[i, j] > 1)):
                    ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="black",
                                           linewidth=1.5))
                    break
    image = ax.imshow(ratio, cmap="RdBu", norm=norm, aspect="auto", origin="lower")
    ax.set_xticks(range(len(sizes)), [human_bytes(s).replace(" ", "") for s in sizes], rotation=45)
    ax.set_yticks(range(len(rings)), [human_bytes(r) for r in rings])
    ax.set_xlabel("bytes per transfer")
    ax.set_ylabel("ring bytes per SM")
    ax.set_title(f"TMA / best alternative, {ws.upper()}")
    if runs:
        ax.set_title(f"TMA / best alternative, {ws.upper()}\noutlined: moved in "
                     + ", ".join(label for label, _, _ in runs), fontsize=9)
fig.colorbar(image, ax=axes[0][-1], shrink=0.9, label="TMA GB/s / best other GB/s")
finish(fig, provenance, pdf)
