# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # GEMM: fraction of cuBLAS per shape, best variant of each load mechanism
#
# TFLOP/s of the best TMA and the best cp.async variant on each shape over cuBLAS
# (torch.matmul / torch._scaled_mm) measured in the same run. The dashed line is the issue's
# bar (95 %) for the best SM90 TMA variant at 8192^3 bf16. "Best" is over the variants that
# were measured: where nvbench kept no sample (every one throttled) a variant is missing, and
# where cuBLAS itself was not measured the shape has no point (derived/cublas.csv says why).
# x: the problem's size in GFLOP (2·M·N·K); marker fill: the problem family (filled: Llama-3
# projections, hollow: square problems).

# %%
import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.lines import Line2D

from tma_study.report.figures import PAGE_IN, PALETTE, finish, inputs, legend_band

derived, provenance, pdf = inputs("gemm", globals().get("snakemake"))
cublas = pd.read_csv(derived / "cublas.csv")
bar = pd.read_csv(derived / "bar.csv")
style = {"tma": {"color": PALETTE["blue"], "marker": "o"}, "cpasync": {"color": PALETTE["vermillion"], "marker": "^"},
         "mixed": {"color": PALETTE["black"], "marker": "s"}}
LOAD_LABELS = {"tma": "TMA", "cpasync": "cp.async", "mixed": "TMA A, cp.async B"}

# %%
panels = sorted(set(zip(cublas.arch, cublas.dtype))) if "arch" in cublas.columns else []
fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(PAGE_IN, 3.2), squeeze=False, sharey=True)
if not panels:
    axes[0][0].text(0.5, 0.5, str(cublas.status.iloc[0]), ha="center", va="center", transform=axes[0][0].transAxes)
loads = []
for ax, (arch, dtype) in zip(axes[0], panels):
    rows = cublas[(cublas.arch == arch) & (cublas.dtype == dtype)].copy()
    rows["gflop"] = 2 * rows.m * rows.n * rows.k / 1e9
    for (load, square), group in rows.groupby(["load", rows.family == "square"]):
        look = style.get(load, {})
        loads.append(load)
        ax.scatter(group.gflop, 100 * group.fraction_of_cublas, s=12, marker=look.get("marker", "o"),
                   facecolors="none" if square else look.get("color"), edgecolors=look.get("color"), linewidths=0.8)
    ax.set_xscale("log")
    ax.axhline(100, color="#555555", linewidth=0.8)
    ax.axhline(95, color="#555555", linewidth=0.8, linestyle="--")
    ax.set_ylabel("% of cuBLAS TFLOP/s" if ax is axes[0][0] else "")
    ax.set_xlabel("problem size (GFLOP, 2·M·N·K)")
    ax.set_title(f"{arch} {dtype}")
notes = []
if bar.status.iloc[0] == "measured":
    r = bar.iloc[0]
    measured = (f"; best of {int(r.tma_measured)} of {int(r.tma_candidates)} TMA candidates measured"
                if "tma_candidates" in bar.columns and r.tma_not_measured else "")
    notes.append(f"8192^3 bf16: {100 * r.fraction_of_cublas:.1f} % of cuBLAS{measured}; dashed: 95 %")
notes += [f"{arch}: {why}" for arch, why in (provenance.get("not_measured_arches") or {}).items()]
handles = [Line2D([], [], linestyle="none", color=style[load]["color"], marker=style[load]["marker"],
                  label=LOAD_LABELS.get(load, load)) for load in style if load in loads]
handles += [Line2D([], [], linestyle="none", marker="o", color="#555555", label="Llama-3 projections"),
            Line2D([], [], linestyle="none", marker="o", color="#555555", markerfacecolor="none", label="square")]
rect = legend_band(fig, [(handles, len(handles), "\n".join(notes) or None)])
finish(fig, provenance, pdf, rect=rect)
