# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Paged-KV decode against a roofline
#
# The decode points in the bar's scope (contexts of at least 8K tokens, batches of at least 32):
# the better path's K/V read rate (at its best page size, stages and producer warps) against the
# point's flops per K/V byte. Grey line: the same run's device-to-device copy; dashed: 70 % of
# it, the bar. Each point's roofline bound (`decode.csv`: the copy rate, or where lower
# the K/V rate at which its flops run at the best prefill TFLOP/s of its shape and dtype in the
# same run) is the short bar above it, joined by a thin line. Points of one flops-per-byte value are
# drawn side by side, a small offset apart, so that none hides another. Shaded, per dtype: where the
# prefill rates of that dtype's shapes would put the bound. The prefill rate is what these
# mma.sync kernels are seen to reach, not a hardware peak. What it does not show: the load path
# of each point (the `paged_kv_decode` table names it), and points outside the bar's scope.

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from tma_study.report.figures import PAGE_IN, PALETTE, SERIES_MARKERS, finish, inputs
from tma_study.studies.paged_kv.aggregate import DECODE_BAR_FRACTION as BAR_FRACTION
from tma_study.studies.paged_kv.facts import bar_points

derived, provenance, pdf = inputs("paged_kv", globals().get("snakemake"))
decode = pd.read_csv(derived / "decode.csv")
DTYPE_COLOR = {"bf16": PALETTE["blue"], "e4m3": PALETTE["orange"]}
SHAPE_MARKERS = SERIES_MARKERS
DODGE = 0.15     # log2 offset between neighbouring points of one flops-per-byte value

points = bar_points(decode)
has_roofline = "bound_gbps" in decode.columns

# %%
fig, (ax, key) = plt.subplots(1, 2, figsize=(PAGE_IN, 3.2), gridspec_kw={"width_ratios": [1, 0.36]})
key.set_axis_off()
if points.empty or not has_roofline:
    ax.text(0.5, 0.5, "not measured" if points.empty else "data predate the roofline columns",
            ha="center", va="center", transform=ax.transAxes)
else:
    copy_tbps = float(points.d2d_copy_gbps.max()) / 1e3
    x_low = float(points.flops_per_kv_byte.min()) / 2
    x_high = float(points.flops_per_kv_byte.max()) * 2
    grid = np.geomspace(x_low, x_high, 200)
    for dtype, rows in points.groupby("dtype", sort=True):
        tflops = rows.prefill_tflops.dropna()
        if len(tflops):          # TFLOP/s / (flop/B) = TB/s
            ax.fill_between(grid, np.minimum(copy_tbps, tflops.min() / grid),
                            np.minimum(copy_tbps, tflops.max() / grid), color=DTYPE_COLOR[dtype],
                            alpha=0.12, linewidth=0)
    ax.axhline(copy_tbps, color="#999999")
    ax.axhline(BAR_FRACTION * copy_tbps, color="#999999", linestyle="--")
    shapes = sorted(points["shape"].unique())
    marker = {shape: SHAPE_MARKERS[i % len(SHAPE_MARKERS)] for i, shape in enumerate(shapes)}
    points = points.sort_values(["flops_per_kv_byte", "dtype", "shape"]).reset_index(drop=True)
    x_value = points.flops_per_kv_byte.round(3)
    rank, count = x_value.groupby(x_value).cumcount(), x_value.map(x_value.value_counts())
    for index, row in enumerate(points.itertuples()):
        color = DTYPE_COLOR[row.dtype]
        x = row.flops_per_kv_byte * 2 ** (DODGE * (rank[index] - (count[index] - 1) / 2))
        measured, bound = row.best_gbps / 1e3, row.bound_gbps / 1e3
        ax.plot([x, x], [measured, bound], color=color, linewidth=0.6, alpha=0.6)
        ax.plot(x, bound, marker="_", markersize=9, color=color)
        ax.plot(x, measured, marker=marker[row.shape], linestyle="none", color=color,
                markerfacecolor=color if row.fraction_of_d2d_copy >= BAR_FRACTION else "white")
    ax.set_xscale("log", base=2)
    ticks = sorted(points.flops_per_kv_byte.round().unique())
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{t:g}" for t in ticks])
    ax.set_xlim(x_low, x_high)
    ax.set_ylim(0.5 * copy_tbps, copy_tbps * 1.12)
    handles = [Line2D([], [], color="#999999", label="D2D copy (same run)"),
               Line2D([], [], color="#999999", linestyle="--", label=f"{BAR_FRACTION:.0%} of copy (bar)"),
               Line2D([], [], color="#555555", marker="_", markersize=9, linestyle="none",
                      label="roofline bound"),
               Line2D([], [], color="#555555", marker="o", markerfacecolor="white", linestyle="none",
                      label="below the bar (hollow)")]
    handles += [Line2D([], [], color=DTYPE_COLOR[d], linewidth=6, alpha=0.3, label=f"{d}: prefill-rate range")
                for d in sorted(points["dtype"].unique())]
    handles += [Line2D([], [], color="#555555", marker=marker[s], linestyle="none", label=s) for s in shapes]
    key.legend(handles=handles, loc="upper left", frameon=False)
ax.set_xlabel("flops per K/V byte")
ax.set_ylabel("K/V read TB/s")
ax.set_title("decode, contexts >= 8K, batches >= 32: the better path and its roofline")
ax.grid(alpha=0.3)
finish(fig, provenance, pdf)
