# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Multicast scaling with cluster size (1-D: every CTA needs every tile)
#
# Delivered bandwidth (bytes landing in the shared memory of all CTAs per second) of each
# variant at its own best ring (stages x CTAs per SM), by cluster size, one panel per tile
# size and operand location. `no_cluster`: each CTA loads its own copy with TMA (the copies
# after the first hit L2); `cluster`: the same binary under a cluster launch (what scheduling
# alone costs); `multicast`: one slice per CTA, delivered to all. The grey line is the
# cluster-size-1 baseline. Other runs of the sweep found beside this one under `results/`
# (another GPU, a repeat) are overlaid as thin dashed lines in the same colours. Not shown: a
# consumer doing real work (the consumers here only checksum), and clusters whose CTAs read
# different data.

# %%
import matplotlib.pyplot as plt
import pandas as pd

from matplotlib.lines import Line2D

from tma_study.report.figures import (
    PAGE_IN,
    PALETTE,
    run_style,
    finish,
    inputs_and_runs,
    legend_band,
    overlay_style,
    runs_handles,
)
from tma_study.report.tables import human_bytes

derived, provenance, pdf, runs = inputs_and_runs("multicast", globals().get("snakemake"))


def one_dimensional(folder):
    best = pd.read_csv(folder / "best.csv")
    return best[best.pattern == "1d"]


best = one_dimensional(derived)
others = [one_dimensional(folder) for _, folder, _ in runs]
STYLE = {"no_cluster": {"color": PALETTE["black"], "marker": "o", "label": "own copy, no cluster"},
         "cluster": {"color": PALETTE["orange"], "marker": "s", "label": "own copy, cluster launch"},
         "multicast": {"color": PALETTE["blue"], "marker": "^", "label": "TMA multicast"}}
BASELINE = {"color": "#999999", "linestyle": ":", "linewidth": 0.9}    # the same kernel, clusters of one

# %%
tiles = sorted(best.tile_bytes.unique())
sets = [w for w in ("hbm", "l2") if w in set(best.working_set)]
fig, axes = plt.subplots(len(sets), len(tiles), figsize=(PAGE_IN, 1.45 * len(sets) + 0.75), squeeze=False,
                         sharey=True)
for row, ws in zip(axes, sets):
    for ax, tile in zip(row, tiles):
        rows = best[(best.working_set == ws) & (best.tile_bytes == tile)]
        baseline = rows[(rows.cluster_y == 1)].delivered_gbps
        for variant, style in STYLE.items():
            line = rows[(rows.variant == variant) & (rows.cluster_y > 1)].sort_values("cluster_y")
            ax.plot(line.cluster_y, line.delivered_gbps / 1e3, **style)
            for index, other in enumerate(others):
                line = other[(other.working_set == ws) & (other.tile_bytes == tile) & (other.variant == variant)
                             & (other.cluster_y > 1)].sort_values("cluster_y")
                ax.plot(line.cluster_y, line.delivered_gbps / 1e3, **overlay_style(style, index))
        if len(baseline):
            ax.axhline(float(baseline.iloc[0]) / 1e3, **BASELINE)
        for index, other in enumerate(others):
            theirs = other[(other.working_set == ws) & (other.tile_bytes == tile) & (other.cluster_y == 1)]
            if len(theirs):
                ax.axhline(float(theirs.delivered_gbps.iloc[0]) / 1e3, **{**BASELINE, "linewidth": 0.6,
                                                                             **run_style(index)})
        ax.set_xscale("log", base=2)
        ax.set_xticks([2, 4, 8, 16])
        ax.set_xticklabels(["2", "4", "8", "16"])
        ax.set_title(f"{ws.upper()}, tile {human_bytes(tile)}")
        ax.grid(alpha=0.3)
    row[0].set_ylabel(f"{ws.upper()}: delivered TB/s")
for ax in axes[-1]:
    ax.set_xlabel("CTAs per cluster")
variants = [Line2D([], [], **style) for style in STYLE.values()] + [Line2D([], [], **BASELINE, label="clusters of one")]
rect = legend_band(fig, [(variants, 4, None), (runs_handles(derived.parent.parent.name, runs), 3, "runs")], stack=True)
finish(fig, provenance, pdf, rect=rect)
