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
# SM, by tile size; one panel per cluster size, operand streamed from HBM (top) or resident
# in L2 (bottom). DSM variants: CTA 0 loads the tile with TMA; the others read it from CTA 0's
# shared memory (pull) or CTA 0 bulk-copies it into theirs (push). Other runs of the sweep
# found beside this one under `results/` (another GPU, a repeat) are overlaid as thin dashed
# lines in the same colours. Not shown: a DSM design where every CTA loads a slice and the
# slices are exchanged (an all-gather).

# %%
import matplotlib.pyplot as plt
import pandas as pd

from tma_study.report.figures import (
    finish,
    inputs_and_runs,
    overlay_style,
    runs_legend,
    size_axis,
)

derived, provenance, pdf, runs = inputs_and_runs("dsm", globals().get("snakemake"))
best = pd.read_csv(derived / "best.csv")
others = [pd.read_csv(folder / "best.csv") for _, folder, _ in runs]
STYLE = {"multicast": {"color": "#1f77b4", "marker": "^", "label": "TMA multicast"},
         "dsm_pull": {"color": "#2ca02c", "marker": "o", "label": "DSM pull (ld.shared::cluster)"},
         "dsm_push": {"color": "#d62728", "marker": "s", "label": "DSM push (bulk copy to peers)"}}

# %%
sizes = sorted(best.cluster_size.unique())
sets = [w for w in ("hbm", "l2") if w in set(best.working_set)]
fig, axes = plt.subplots(len(sets), len(sizes), figsize=(3.0 * len(sizes), 2.9 * len(sets)), squeeze=False,
                         sharey=True)
for row, ws in zip(axes, sets):
    for ax, n in zip(row, sizes):
        for variant, style in STYLE.items():
            line = best[(best.working_set == ws) & (best.cluster_size == n) & (best.variant == variant)]
            line = line.sort_values("tile_bytes")
            ax.plot(line.tile_bytes, line.gbps / 1e3, **style)
            for index, other in enumerate(others):
                line = other[(other.working_set == ws) & (other.cluster_size == n) & (other.variant == variant)]
                line = line.sort_values("tile_bytes")
                ax.plot(line.tile_bytes, line.gbps / 1e3, **overlay_style(style, index))
        size_axis(ax, sorted(best.tile_bytes.unique()))
        ax.set_xlabel("tile bytes")
        ax.set_title(f"{ws.upper()}, cluster of {n}", fontsize=9)
        ax.grid(alpha=0.3)
    row[0].set_ylabel("delivered TB/s")
axes[0][0].legend(fontsize=7)
runs_legend(axes[-1][-1], derived.parent.parent.name, runs)
finish(fig, provenance, pdf)
