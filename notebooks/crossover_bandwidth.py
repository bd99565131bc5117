# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Crossover: streaming bandwidth against transfer size
#
# Each mechanism's best configuration (over stages, CTAs per SM, threads, ring bytes and
# issuing lanes) at each transfer size, streaming from HBM (left) and from L2 (right),
# against the ceilings measured in the same run. Other runs of the sweep found beside this
# one under `results/` (another GPU, a repeat) are overlaid as thin dashed lines in the same
# colours. Not shown: the spread of each point (see `best.csv`, `time_us_iqr`) and
# configurations that were not the best.

# %%
import matplotlib.pyplot as plt
import pandas as pd

from tma_study.report.figures import (
    MECHANISM_STYLE,
    finish,
    inputs_and_runs,
    overlay_style,
    runs_legend,
    size_axis,
)

derived, provenance, pdf, runs = inputs_and_runs("crossover", globals().get("snakemake"))


def best_of_all_rings(folder):
    best = pd.read_csv(folder / "best.csv")
    return best[(best.ring_bytes_per_sm == 0) & (best.access_order == "scattered")]


best = best_of_all_rings(derived)
ceilings = pd.read_csv(derived / "ceilings.csv")
others = [best_of_all_rings(folder) for _, folder, _ in runs]

# %%
working_sets = [ws for ws in ("hbm", "l2") if ws in set(best.working_set)]
fig, axes = plt.subplots(1, len(working_sets), figsize=(5.2 * len(working_sets), 3.8), squeeze=False)
for ax, ws in zip(axes[0], working_sets):
    for mechanism, style in MECHANISM_STYLE.items():
        rows = best[(best.working_set == ws) & (best.mechanism == mechanism)].sort_values("bytes_per_transfer")
        if len(rows):
            ax.plot(rows.bytes_per_transfer, rows.gbps, **style)
        for index, other in enumerate(others):
            rows = other[(other.working_set == ws) & (other.mechanism == mechanism)].sort_values("bytes_per_transfer")
            ax.plot(rows.bytes_per_transfer, rows.gbps, **overlay_style(style, index))
    # (ceiling, line style, label position along the axis): the two labels at opposite ends
    for name, line, x, align in (("d2d_copy", ":", 0, "left"), ("read_stream", "--", 1, "right")):
        ceiling = ceilings[(ceilings.ceiling == name) & (ceilings.working_set == ws)]
        if len(ceiling):
            value = float(ceiling.gbps.iloc[0])
            ax.axhline(value, color="black", linestyle=line, linewidth=0.8)
            ax.annotate(f"{name.replace('_', ' ')} {value:.0f}", (x, value), xycoords=("axes fraction", "data"),
                        fontsize=7, ha=align, xytext=(3 if x == 0 else -3, 2), textcoords="offset points")
    size_axis(ax, sorted(best.bytes_per_transfer.unique()))
    ax.set_ylabel("GB/s (bytes read / median time)")
    ax.set_title(f"working set: {ws.upper()}")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
runs_legend(axes[0][-1], derived.parent.parent.name, runs)
axes[0][0].legend(fontsize=8, loc="lower right")
finish(fig, provenance, pdf)
