# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Paged-KV attention: TMA over cp.async K/V loads, by page size
#
# One panel per point of the page-size sweep (decode with 1 or 4 query tokens, causal
# prefill), one line per model shape and dtype: cp.async time / TMA time at each page size
# where both paths run (> 1: TMA is faster), each path at its own best K/V ring stages and
# producer warps (paged_kv_tuning table). Filled markers: FlashAttention-3's rule would pick TMA for that
# call; hollow: it would gather with cp.async. The TMA path needs pages of at least 16 tokens
# (cp.async also runs at 1 and 8; see paged_kv_speedup table). The batch and context scaling
# points, measured at one page size, are in paged_kv_scaling.

# %%
import matplotlib.pyplot as plt
import pandas as pd

from tma_study.report.figures import finish, inputs

derived, provenance, pdf = inputs("paged_kv", globals().get("snakemake"))
speedup = pd.read_csv(derived / "speedup.csv")
speedup = speedup[speedup.page_sweep.astype(bool)].dropna(subset=["tma_speedup"])
POINT = ["phase", "seqlen_q", "batch", "context_tokens"]

# %%
points = speedup[POINT].drop_duplicates().sort_values(POINT)
fig, axes = plt.subplots(1, len(points), figsize=(4.2 * len(points), 3.4), squeeze=False, sharey=True)
for ax, (phase, seqlen_q, batch, context) in zip(axes[0], points.itertuples(index=False)):
    panel = speedup[(speedup.phase == phase) & (speedup.seqlen_q == seqlen_q) & (speedup.batch == batch)
                    & (speedup.context_tokens == context)]
    for (shape, dtype), line in panel.groupby(["shape", "dtype"], sort=True):
        line = line.sort_values("page_size")
        drawn = ax.plot(line.page_size, line.tma_speedup, marker="o", markerfacecolor="none",
                        linestyle="-" if dtype == "bf16" else "--", label=f"{shape} {dtype}")[0]
        chosen = line[line.fa3_load_path == "tma"]
        ax.plot(chosen.page_size, chosen.tma_speedup, marker="o", linestyle="none",
                color=drawn.get_color())
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("page size (tokens)")
    ax.set_title(f"{phase}, {seqlen_q} query tokens, batch {batch}, context {context}", fontsize=9)
axes[0][0].set_ylabel("cp.async time / TMA time")
axes[0][-1].legend(fontsize=6, loc="best")
finish(fig, provenance, pdf)
