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

# %%
import matplotlib.pyplot as plt
import pandas as pd

from tma_study.report.figures import finish, inputs

derived, provenance, pdf = inputs("gemm", globals().get("snakemake"))
cublas = pd.read_csv(derived / "cublas.csv")
bar = pd.read_csv(derived / "bar.csv")
style = {"tma": {"color": "#1f77b4", "marker": "o"}, "cpasync": {"color": "#d62728", "marker": "^"},
         "mixed": {"color": "#9467bd", "marker": "s"}}

# %%
panels = sorted(set(zip(cublas.arch, cublas.dtype))) if "arch" in cublas.columns else []
fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(5.5 * max(1, len(panels)), 3.6), squeeze=False)
if not panels:
    axes[0][0].text(0.5, 0.5, str(cublas.status.iloc[0]), ha="center", va="center", transform=axes[0][0].transAxes)
for ax, (arch, dtype) in zip(axes[0], panels):
    rows = cublas[(cublas.arch == arch) & (cublas.dtype == dtype)].copy()
    order = rows.drop_duplicates("shape").sort_values(["family", "m", "n", "k"])["shape"].tolist()
    for load, group in rows.groupby("load"):
        x = [order.index(s) for s in group["shape"]]
        ax.scatter(x, 100 * group.fraction_of_cublas, label=load, s=14, **style.get(load, {}))
    ax.axhline(100, color="#555555", linewidth=0.8)
    ax.axhline(95, color="#555555", linewidth=0.8, linestyle="--")
    ax.set_ylabel("% of cuBLAS TFLOP/s")
    ax.set_xlabel("shape (square, then LLM projections by model, M)")
    ax.set_title(f"{arch} {dtype}")
    ax.legend(fontsize=7)
if bar.status.iloc[0] == "measured":
    r = bar.iloc[0]
    measured = (f"; best of {int(r.tma_measured)} of {int(r.tma_candidates)} TMA candidates measured"
                if "tma_candidates" in bar.columns and r.tma_not_measured else "")
    axes[0][0].annotate(f"8192^3 bf16: {100 * r.fraction_of_cublas:.1f} % ({r.variant}{measured})", xy=(0.02, 0.03),
                        xycoords="axes fraction", fontsize=7)
missing = "; ".join(f"{arch}: {why}" for arch, why in (provenance.get("not_measured_arches") or {}).items())
if missing:
    axes[0][-1].text(0.98, 0.03, missing, ha="right", va="bottom", fontsize=7, transform=axes[0][-1].transAxes)
finish(fig, provenance, pdf)
