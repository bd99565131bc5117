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


def best_of_all_rings(folder):
    best = pd.read_csv(folder / "best.csv")
    return best[(best.ring_bytes_per_sm == 0) & (best.access_order == "scattered")]


best = best_of_all_rings(derived)
ceilings = pd.read_csv(derived / "ceilings.csv")
others = [best_of_all_rings(folder) for _, folder, _ in runs]

# %%
CEILINGS = {"d2d_copy": ":", "read_stream": "--"}     # ceiling -> line style (values: ceilings.csv)
working_sets = [ws for ws in ("hbm", "l2") if ws in set(best.working_set)]
fig, axes = plt.subplots(1, len(working_sets), figsize=(PAGE_IN, 2.9), squeeze=False)
for ax, ws in zip(axes[0], working_sets):
    for mechanism, style in MECHANISM_STYLE.items():
        rows = best[(best.working_set == ws) & (best.mechanism == mechanism)].sort_values("bytes_per_transfer")
        if len(rows):
            ax.plot(rows.bytes_per_transfer, rows.gbps, **style)
        for index, other in enumerate(others):
            rows = other[(other.working_set == ws) & (other.mechanism == mechanism)].sort_values("bytes_per_transfer")
            ax.plot(rows.bytes_per_transfer, rows.gbps, **overlay_style(style, index))
    for name, line in CEILINGS.items():
        ceiling = ceilings[(ceilings.ceiling == name) & (ceilings.working_set == ws)]
        if len(ceiling):
            ax.axhline(float(ceiling.gbps.iloc[0]), color="black", linestyle=line, linewidth=0.8)
    size_axis(ax, sorted(best.bytes_per_transfer.unique()))
    ax.set_ylabel("GB/s (bytes read / median time)" if ws == working_sets[0] else "")
    ax.set_title(f"working set: {ws.upper()}")
    ax.set_ylim(0, 1.08 * max(float(ceilings[ceilings.working_set == ws].gbps.max()),
                              float(best[best.working_set == ws].gbps.max())))
    ax.grid(alpha=0.3)
mechanisms = [Line2D([], [], **style) for style in MECHANISM_STYLE.values()]
mechanisms += [Line2D([], [], color="black", linestyle=line, linewidth=0.8, label=name.replace("_", " ") + " (ceiling)")
               for name, line in CEILINGS.items()]
rect = legend_band(fig, [(mechanisms, 3, None), (runs_handles(derived.parent.parent.name, runs), 2, "runs")])
finish(fig, provenance, pdf, rect=rect)
