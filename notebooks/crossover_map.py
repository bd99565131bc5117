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
# the fastest alternative. Not shown: ties within the measured spread are not marked here
# (`crossover.csv` brackets the crossover with them).

# %%
import numpy as np
import pandas as pd
import matplotlib.pyplot as plt
from matplotlib.colors import TwoSlopeNorm

from tma_study.report.figures import finish, inputs
from tma_study.report.tables import human_bytes

derived, provenance, pdf = inputs("crossover", globals().get("snakemake"))
best = pd.read_csv(derived / "best.csv")
best = best[(best.ring_bytes_per_sm > 0) & (best.access_order == "scattered")]

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
            tma = cell[cell.mechanism == "tma_tile"]
            others = cell[cell.mechanism != "tma_tile"]
            if len(tma) and len(others):
                rival = others.loc[others.gbps.idxmax()]
                ratio[i, j] = float(tma.gbps.iloc[0]) / rival.gbps
                ax.text(j, i, f"{ratio[i, j]:.2f}\n{rival.mechanism.replace('_', ' ')}", ha="center",
                        va="center", fontsize=6)
    image = ax.imshow(ratio, cmap="RdBu", norm=norm, aspect="auto", origin="lower")
    ax.set_xticks(range(len(sizes)), [human_bytes(s).replace(" ", "") for s in sizes], rotation=45)
    ax.set_yticks(range(len(rings)), [human_bytes(r) for r in rings])
    ax.set_xlabel("bytes per transfer")
    ax.set_ylabel("ring bytes per SM")
    ax.set_title(f"TMA / best alternative, {ws.upper()}")
fig.colorbar(image, ax=axes[0][-1], shrink=0.9, label="TMA GB/s / best other GB/s")
finish(fig, provenance, pdf)
