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
# Left: per shape, the best TMA variant's TFLOP/s over the best cp.async variant's (any
# schedule and tile; TMA also any cluster), and the same ratio with the TMA variant held to
# the cp.async variant's schedule and tile at a 1x1 cluster (no multicast). Right: each
# cluster shape's TFLOP/s over the same TMA variant at 1x1, per shape. SM100 panels say
# "not measured" where the data were taken on a GPU without SM100. Crosses: same-configuration
# pairs whose TMA variant spills registers and its cp.async partner does not (they time the
# spills, not the load path); the title counts the candidates nvbench could not measure.

# %%
import matplotlib.pyplot as plt
import pandas as pd

from tma_study.report.figures import finish, inputs

derived, provenance, pdf = inputs("gemm", globals().get("snakemake"))
speedup = pd.read_csv(derived / "speedup.csv")
gains = pd.read_csv(derived / "multicast.csv")
status = pd.read_csv(derived / "status.csv")
arches = ["sm90", "sm100"]

# %%
fig, axes = plt.subplots(len(arches), 2, figsize=(11, 3.4 * len(arches)), squeeze=False)
for row, arch in enumerate(arches):
    left, right = axes[row]
    have = "arch" in speedup.columns and (speedup.arch == arch).any()
    if not have:
        reasons = status[(status.arch == arch) & (status.status != "measured")].status if "arch" in status else []
        why = reasons.iloc[0] if len(reasons) else "not measured"
        for ax in (left, right):
            ax.text(0.5, 0.5, f"{arch}: {why}", ha="center", va="center", wrap=True, transform=ax.transAxes)
            ax.set_xticks([])
            ax.set_yticks([])
        continue
    rows = speedup[speedup.arch == arch].sort_values(["family", "m", "n", "k"])
    order = rows.drop_duplicates("shape")["shape"].tolist()      # one x position per shape, every series
    spills = pd.Series(False, index=rows.index)
    if "tma_spill_store_bytes" in rows.columns:   # the TMA variant spills registers, its cp.async partner does not
        spills = (rows.tma_spill_store_bytes.fillna(0) > 0) & (rows.cpasync_spill_store_bytes.fillna(0) == 0)
    kind = rows.compared.where(rows.compared == "best", "same").where(~spills, "spills")
    labels = {"best": "best vs best", "same": "same schedule+tile, 1x1", "spills": "same, 1x1, TMA variant spills"}
    for (dtype, which), group in rows.groupby(["dtype", kind]):
        x = [order.index(shape) for shape in group["shape"]]
        best_line = which == "best"
        left.plot(x, group.speedup, marker={"best": "o", "same": ".", "spills": "x"}[which],
                  linestyle="-" if best_line else "", label=f"{dtype}, {labels[which]}", alpha=1 if best_line else 0.5)
    left.axhline(1, color="#555555", linewidth=0.8)
    left.set_ylabel("TMA / cp.async TFLOP/s")
    left.set_xlabel("shape (square, then LLM projections by model, M)")
    best = rows[rows.compared == "best"]
    unmeasured = (f" (not measured: TMA {int(best.tma_not_measured.sum())}/{int(best.tma_candidates.sum())}, "
                  f"cp.async {int(best.cpasync_not_measured.sum())}/{int(best.cpasync_candidates.sum())} candidates)"
                  if "tma_not_measured" in best.columns else "")
    left.set_title(f"{arch}: TMA vs cp.async mainloop{unmeasured}", fontsize=9)
    left.legend(fontsize=7)
    g = gains[gains.arch == arch] if "arch" in gains.columns else gains.iloc[0:0]
    clusters = sorted(g.cluster.unique()) if len(g) else []
    for i, cluster in enumerate(clusters):
        values = g[g.cluster == cluster].gain
        right.scatter([i] * len(values), values, s=8, alpha=0.5)
        right.plot([i - 0.3, i + 0.3], [values.median()] * 2, color="black")
    right.set_xticks(range(len(clusters)), clusters)
    right.axhline(1, color="#555555", linewidth=0.8)
    right.set_xlabel("cluster (CTAs along M x N)")
    right.set_ylabel("TFLOP/s over 1x1 (bar: median)")
    right.set_title(f"{arch}: TMA multicast gain")
finish(fig, provenance, pdf)
