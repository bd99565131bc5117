# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Held-out Triton kernels: TMA's time over the pointer kernel's, by family and transfer size
#
# Each point is one case of the heldout study: the median of its pairs' TMA / pointer time ratios
# (below 1: TMA is faster) with the bootstrap 95 % interval, against the bytes one TMA box of
# the operand holds. Filled: the pointer loads compiled to cp.async; open: to plain loads.

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from tma_study.report.figures import PAGE_IN, PALETTE, finish, inputs, legend_band
from tma_study.report.tables import human_bytes

derived, provenance, pdf = inputs("heldout", globals().get("snakemake"))
cases = pd.read_csv(derived / "cases.csv")
TITLES = {"gemm": "GEMM: A, B tiles", "attention": "attention: K, V tiles",
          "paged_decode": "paged decode: K, V", "gather": "row gather: rows"}
ALTERNATIVES = {"cp_async": "cp.async", "plain_loads": "plain loads"}
RATIO_TICKS = (0.8, 0.9, 1.0, 1.2, 1.5, 2.0)
COLOURS = {"bf16": PALETTE["blue"], "fp8_e4m3": PALETTE["orange"]}


def box_bytes(row) -> float:
    if isinstance(row.box_dims, str) and row.box_dims:
        return float(np.prod([int(v) for v in row.box_dims.split("x")]) * row.element_bytes)
    return float(row.row_bytes)


cases["box_bytes"] = [box_bytes(r) for r in cases.itertuples()]

# %%
families = [f for f in TITLES if f in set(cases.family)]
fig, axes = plt.subplots(1, max(1, len(families)), figsize=(PAGE_IN, 2.8), sharey=True, squeeze=False)
for ax, family in zip(axes[0], families):
    rows = cases[cases.family == family]
    for dtype, group in rows.groupby("dtype"):
        for alternative, part in group.groupby("alternative"):
            jitter = np.exp(np.random.default_rng(0).uniform(-0.12, 0.12, len(part)))
            x = part.box_bytes * jitter
            ax.errorbar(x, part.ratio, yerr=[part.ratio - part.ratio_low, part.ratio_high - part.ratio],
                        fmt="o" if alternative == "cp_async" else "s", markersize=3.5, linewidth=0.7,
                        color=COLOURS[dtype], markerfacecolor=COLOURS[dtype] if alternative == "cp_async" else "white",
                        label=f"{dtype}, pointer loads: {ALTERNATIVES[alternative]}")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log", base=2)
    sizes = sorted(rows.box_bytes.unique())
    ax.set_xticks(sizes, [human_bytes(s).replace(" ", "") for s in sizes], rotation=60)
    ax.minorticks_off()
    ax.set_title(TITLES[family])
    ax.set_xlabel("bytes per TMA box")
axes[0][0].set_yscale("log")
low, high = cases.ratio_low.min(), cases.ratio_high.max()
ticks = [t for t in RATIO_TICKS if low / 1.05 <= t <= high * 1.05]
axes[0][0].set_yticks(ticks, [f"{t:g}" for t in ticks])
axes[0][0].yaxis.set_minor_formatter(plt.NullFormatter())
axes[0][0].set_ylabel("TMA time / pointer time")
handles, labels = {}, {}
for ax in axes[0]:
    for h, label in zip(*ax.get_legend_handles_labels()):
        handles.setdefault(label, h)
for label, handle in handles.items():
    handle.set_label(label)
rect = legend_band(fig, [(list(handles.values()), 2, None)])
finish(fig, provenance, pdf, rect=rect)
