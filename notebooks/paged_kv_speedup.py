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
from matplotlib.lines import Line2D

from tma_study.report.figures import COLUMN_IN, SERIES_COLOURS, SERIES_MARKERS, finish, inputs, legend_band

derived, provenance, pdf = inputs("paged_kv", globals().get("snakemake"))
speedup = pd.read_csv(derived / "speedup.csv")
speedup = speedup[speedup.page_sweep.astype(bool)].dropna(subset=["tma_speedup"])
POINT = ["phase", "seqlen_q", "batch", "context_tokens"]
DTYPES = {"bf16": "-", "e4m3": "--"}

# %%
points = speedup[POINT].drop_duplicates().sort_values(POINT)
fig, axes = plt.subplots(len(points), 1, figsize=(COLUMN_IN, 1.25 * len(points) + 1.05), squeeze=False, sharex=True)
shapes = sorted(speedup["shape"].unique())
look = {shape: (SERIES_COLOURS[i], SERIES_MARKERS[i]) for i, shape in enumerate(shapes)}
for ax, (phase, seqlen_q, batch, context) in zip(axes[:, 0], points.itertuples(index=False)):
    panel = speedup[(speedup.phase == phase) & (speedup.seqlen_q == seqlen_q) & (speedup.batch == batch)
                    & (speedup.context_tokens == context)]
    for (shape, dtype), line in panel.groupby(["shape", "dtype"], sort=True):
        line = line.sort_values("page_size")
        colour, marker = look[shape]
        ax.plot(line.page_size, line.tma_speedup, marker=marker, markersize=3.5, markerfacecolor="none",
                color=colour, linestyle=DTYPES.get(dtype, ":"), linewidth=1.0)
        chosen = line[line.fa3_load_path == "tma"]
        ax.plot(chosen.page_size, chosen.tma_speedup, marker=marker, markersize=3.5, linestyle="none", color=colour)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log", base=2)
    pages = sorted(speedup.page_size.unique())
    ax.set_xticks(pages, [str(int(p)) for p in pages])
    ax.minorticks_off()
    tokens = f"{seqlen_q} query token{'s' if seqlen_q > 1 else ''}"
    ax.set_title(f"{phase}, {tokens}, batch {batch}, context {context}")
    ax.set_ylabel("cp.async / TMA time")
    ax.grid(alpha=0.3)
axes[-1][0].set_xlabel("page size (tokens)")
handles = [Line2D([], [], color=look[s][0], marker=look[s][1], markersize=3.5, label=s) for s in shapes]
handles += [Line2D([], [], color="#555555", linestyle="-", label="bf16"),
            Line2D([], [], color="#555555", linestyle="--", label="fp8 e4m3"),
            Line2D([], [], color="#555555", marker="o", linestyle="none", label="FA3's rule: TMA"),
            Line2D([], [], color="#555555", marker="o", markerfacecolor="none", linestyle="none",
                   label="FA3's rule: cp.async")]
rect = legend_band(fig, [(handles, 3, None)])
finish(fig, provenance, pdf, rect=rect)
