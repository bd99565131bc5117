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

from tma_study.report.figures import finish, inputs

derived, provenance, pdf = inputs("gemm", globals().get("snakemake"))
speedup = pd.read_csv(derived / "speedup.csv")
gains = pd.read_csv(derived / "multicast.csv")
status = pd.read_csv(derived / "status.csv")
ARCHES = ("sm90", "sm100")
DTYPE_COLOURS = {"bf16": "#1f77b4", "fp8_e4m3": "#2ca02c"}
FAMILY_MARKERS = {"square": "s", "llama3_8b": "o", "llama3_70b": "^"}
measured = [a for a in ARCHES if "arch" in speedup.columns and (speedup.arch == a).any()]
missing = [a for a in ARCHES if a not in measured]

# %%
fig, axes = plt.subplots(len(measured), 2, figsize=(11, 3.8 * len(measured)), squeeze=False)
for row, arch in enumerate(measured):
    left, right = axes[row]
    best = speedup[(speedup.arch == arch) & (speedup.compared == "best")]
    gflop = 2 * best.m * best.n * best.k / 1e9
    for (dtype, family), group in best.groupby(["dtype", "family"]):
        left.scatter(gflop[group.index], group.speedup, color=DTYPE_COLOURS.get(dtype, "#7f7f7f"),
                     marker=FAMILY_MARKERS.get(family, "x"), s=28, alpha=0.85, label=f"{dtype}, {family}")
    left.axhline(1, color="#555555", linewidth=0.8)
    left.set_xscale("log")
    left.set_xlabel("problem size (GFLOP, 2·M·N·K)")
    left.set_ylabel("best TMA / best cp.async TFLOP/s")
    left.set_title(f"{arch}: TMA vs cp.async mainloop, each at its best variant", fontsize=10)
    left.set_ylim(top=1.35 * best.speedup.max())        # room for the legend above the points
    left.legend(fontsize=7, ncol=2, loc="upper center")
    g = gains[gains.arch == arch] if "arch" in gains.columns else gains.iloc[0:0]
    g = g[g.gain.notna()]
    clusters = sorted(g.cluster.unique(), key=lambda c: tuple(int(v) for v in c.split("x"))) if len(g) else []
    dtypes = sorted(g.dtype.unique()) if len(g) else []
    for i, cluster in enumerate(clusters):
        for j, dtype in enumerate(dtypes):
            values = g[(g.cluster == cluster) & (g.dtype == dtype)].gain
            x = i + (j - (len(dtypes) - 1) / 2) * 0.3
            right.scatter([x] * len(values), values, s=6, alpha=0.4, color=DTYPE_COLOURS.get(dtype, "#7f7f7f"),
                          label=dtype if i == 0 else None)
            right.plot([x - 0.12, x + 0.12], [values.median()] * 2, color="black")
    right.set_xticks(range(len(clusters)), clusters)
    right.axhline(1, color="#555555", linewidth=0.8)
    right.set_xlabel("cluster shape (CTAs along M x N)")
    right.set_ylabel("TFLOP/s over the same variant at 1x1")
    right.set_title(f"{arch}: multicast gain (bar: median)", fontsize=10)
    right.legend(fontsize=7)
if missing:
    reasons = status[status.arch.isin(missing) & (status.status != "measured")].status if "arch" in status else []
    why = reasons.iloc[0] if len(reasons) else "not measured"
    fig.suptitle(f"{', '.join(missing)}: {why}", fontsize=9)
finish(fig, provenance, pdf)
