# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # GEMM: TMA over cp.async mainloops, and what multicast adds
#
# Left: per problem, the best TMA variant's TFLOP/s over the best cp.async variant's (any
# schedule and tile; TMA also any cluster), against the problem's size in GFLOP (2·M·N·K);
# colour: input type, marker: problem family (square, Llama-3 8B and 70B projections at
# M = 16 to 8192 tokens). Right: each cluster shape's TFLOP/s over the same TMA variant at 1x1,
# per problem and variant, by input type (bar: median). Only architectures with data are drawn;
# the title names those without (the SM100 variants need a B200).

# %%
import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.lines import Line2D

from tma_study.report.figures import PAGE_IN, PALETTE, finish, inputs, legend_band

derived, provenance, pdf = inputs("gemm", globals().get("snakemake"))
speedup = pd.read_csv(derived / "speedup.csv")
gains = pd.read_csv(derived / "multicast.csv")
status = pd.read_csv(derived / "status.csv")
ARCHES = ("sm90", "sm100")
DTYPE_COLOURS = {"bf16": PALETTE["blue"], "fp8_e4m3": PALETTE["orange"]}
FAMILY_MARKERS = {"square": "s", "llama3_8b": "o", "llama3_70b": "^"}
measured = [a for a in ARCHES if "arch" in speedup.columns and (speedup.arch == a).any()]
missing = [a for a in ARCHES if a not in measured]

# %%
fig, axes = plt.subplots(len(measured), 2, figsize=(PAGE_IN, 2.3 * len(measured) + 0.7), squeeze=False)
for row, arch in enumerate(measured):
    left, right = axes[row]
    best = speedup[(speedup.arch == arch) & (speedup.compared == "best")]
    gflop = 2 * best.m * best.n * best.k / 1e9
    for (dtype, family), group in best.groupby(["dtype", "family"]):
        left.scatter(gflop[group.index], group.speedup, color=DTYPE_COLOURS.get(dtype, "#7f7f7f"),
                     marker=FAMILY_MARKERS.get(family, "x"), s=14, alpha=0.85)
    left.axhline(1, color="#555555", linewidth=0.8)
    left.set_xscale("log")
    left.set_xlabel("problem size (GFLOP, 2·M·N·K)")
    left.set_ylabel("best TMA / best cp.async")
    left.set_title(f"{arch}: TMA vs cp.async mainloop, each at its best")
    g = gains[gains.arch == arch] if "arch" in gains.columns else gains.iloc[0:0]
    g = g[g.gain.notna()]
    clusters = sorted(g.cluster.unique(), key=lambda c: tuple(int(v) for v in c.split("x"))) if len(g) else []
    dtypes = sorted(g.dtype.unique()) if len(g) else []
    for i, cluster in enumerate(clusters):
        for j, dtype in enumerate(dtypes):
            values = g[(g.cluster == cluster) & (g.dtype == dtype)].gain
            x = i + (j - (len(dtypes) - 1) / 2) * 0.3
            right.scatter([x] * len(values), values, s=4, alpha=0.4, color=DTYPE_COLOURS.get(dtype, "#7f7f7f"))
            right.plot([x - 0.12, x + 0.12], [values.median()] * 2, color="black")
    right.set_xticks(range(len(clusters)), clusters)
    right.axhline(1, color="#555555", linewidth=0.8)
    right.set_xlabel("cluster shape (CTAs along M x N)")
    right.set_ylabel("over the same variant at 1x1")
    right.set_title(f"{arch}: cluster gain at the default tile order")
handles = [Line2D([], [], linestyle="none", marker="o", color=colour, label=dtype) for dtype, colour in DTYPE_COLOURS.items()]
handles += [Line2D([], [], linestyle="none", marker=marker, color="#555555", label=family)
            for family, marker in FAMILY_MARKERS.items()]
handles += [Line2D([], [], color="black", label="median")]
title = None
if missing:
    reasons = status[status.arch.isin(missing) & (status.status != "measured")].status if "arch" in status else []
    title = f"{', '.join(missing)}: {reasons.iloc[0] if len(reasons) else 'not measured'}"
rect = legend_band(fig, [(handles, len(handles), title)])
finish(fig, provenance, pdf, rect=rect)
