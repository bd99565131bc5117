# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Latency of one transfer, by size and mechanism
#
# A dependent chain (each transfer's address comes from the previous transfer's data), one
# CTA whose threads all produce (a warp for TMA-engine copies, 128 threads for cp.async and
# plain loads, which need threads to move bytes), timed with `clock64`: cold (L2 flushed,
# data from HBM) and warm (the same chunks again, from L2). Median over repeats; includes
# the wait and one `__syncthreads` per transfer, which every mechanism pays alike. Other runs
# found beside this one under `results/` are overlaid as thin dashed lines. Not shown:
# latency under load (the streaming figure is the loaded case).

# %%
import matplotlib.pyplot as plt
import pandas as pd

from matplotlib.lines import Line2D

from tma_study.report.figures import (
    MECHANISM_STYLE,
    PAGE_IN,
    finish,
    inputs_and_runs,
    legend_band,
    overlay_style,
    runs_handles,
    size_axis,
)

derived, provenance, pdf, runs = inputs_and_runs("crossover", globals().get("snakemake"))
latency = pd.read_csv(derived / "latency.csv")
others = [pd.read_csv(folder / "latency.csv") for _, folder, _ in runs]

# %%
levels = [lv for lv in ("hbm", "l2") if lv in set(latency.level)]
fig, axes = plt.subplots(1, len(levels), figsize=(PAGE_IN * 0.75, 2.9), squeeze=False, sharey=True)
for ax, level in zip(axes[0], levels):
    for mechanism, style in MECHANISM_STYLE.items():
        rows = latency[(latency.level == level) & (latency.mechanism == mechanism)].sort_values("bytes_per_transfer")
        if len(rows):
            ax.plot(rows.bytes_per_transfer, rows.ns_per_transfer_median, **style)
        for index, other in enumerate(others):
            rows = other[(other.level == level) & (other.mechanism == mechanism)].sort_values("bytes_per_transfer")
            ax.plot(rows.bytes_per_transfer, rows.ns_per_transfer_median, **overlay_style(style, index))
    size_axis(ax, sorted(latency.bytes_per_transfer.unique()))
    ax.set_yscale("log")
    ax.set_ylabel("ns per transfer (median)" if level == levels[0] else "")
    ax.set_title("cold: from HBM" if level == "hbm" else "warm: from L2")
    ax.grid(alpha=0.3, which="both")
mechanisms = [Line2D([], [], **style) for style in MECHANISM_STYLE.values()]
rect = legend_band(fig, [(mechanisms, 4, None), (runs_handles(derived.parent.parent.name, runs), 3, "runs")], stack=True)
finish(fig, provenance, pdf, rect=rect)
