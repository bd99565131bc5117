# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Paged-KV attention: batch and context scaling of the TMA and cp.async K/V paths
#
# The scaling points (one model shape at one page size, see `scaling.csv`): decode K/V read
# rate of each path against the batch at a fixed context (left) and against the context at a
# fixed batch (middle); prefill TFLOP/s of each path per prefill point (right). Every path is
# drawn at its own best K/V ring stages and producer warps; the marker says which stage count
# won (circle 2, diamond 3, square 4); the producer-warp count that won is in the
# paged_kv_scaling table ("N st., M pw"). Grey line: the same run's device-to-device copy (read + write bytes
# per second); black dotted: torch `scaled_dot_product_attention` on a contiguous (unpaged)
# bf16 cache, where measured. Solid lines bf16, dashed e4m3 (half the bytes per token). Other
# runs found beside this one under `results/` are overlaid thin in the same colours.

# %%
import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.lines import Line2D

from matplotlib.patches import Patch

from tma_study.report.figures import (
    MECHANISM_STYLE,
    PAGE_IN,
    finish,
    inputs_and_runs,
    legend_band,
    overlay_marker_style,
    overlay_style,
    runs_handles,
)

derived, provenance, pdf, runs = inputs_and_runs("paged_kv", globals().get("snakemake"))
scaling = pd.read_csv(derived / "scaling.csv")
others = [pd.read_csv(folder / "scaling.csv") for _, folder, _ in runs]
PATHS = {"tma": {"color": MECHANISM_STYLE["tma_tile"]["color"], "label": "TMA"},
         "cp_async": {"color": MECHANISM_STYLE["cp_async"]["color"], "label": "cp.async gather"}}
DTYPE_LINE = {"bf16": "-", "e4m3": "--"}
STAGE_MARKER = {2: "o", 3: "D", 4: "s"}
PANELS = [("decode_batch", "batch", "batch (sequences)", "context_tokens", "context"),
          ("decode_context", "context_tokens", "context (tokens)", "batch", "batch")]


def measured(frame):
    return frame[frame.status == "measured"]


def draw_decode(ax, series, x, x_label, fixed, fixed_name):
    rows = measured(scaling[scaling.series == series])
    for (path, dtype, _, _), line in rows.groupby(["load_path", "dtype", fixed, "seqlen_q"], sort=True):
        line = line.sort_values(x)
        ax.plot(line[x], line.gbps / 1e3, color=PATHS[path]["color"], linestyle=DTYPE_LINE[dtype],
                label=f"{PATHS[path]['label']} {dtype}")
        for stages, at in line.groupby("stages"):
            ax.plot(at[x], at.gbps / 1e3, linestyle="none", marker=STAGE_MARKER[int(stages)],
                    color=PATHS[path]["color"])
        for index, other in enumerate(others):
            theirs = measured(other[(other.series == series) & (other.load_path == path)
                                    & (other.dtype == dtype)]).sort_values(x)
            ax.plot(theirs[x], theirs.gbps / 1e3, **overlay_style(
                {"color": PATHS[path]["color"], "marker": "o"}, index))
    ax.axhline(float(rows.d2d_copy_gbps.max()) / 1e3, color="#999999", label="D2D copy (same run)")
    sdpa = rows.drop_duplicates(x).dropna(subset=["torch_sdpa_gbps"]).sort_values(x)
    if len(sdpa):
        ax.plot(sdpa[x], sdpa.torch_sdpa_gbps / 1e3, color="black", linestyle=":", marker=".",
                label="torch SDPA, contiguous bf16")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(rows[x].unique()))
    ax.set_xticklabels([str(v) for v in sorted(rows[x].unique())])
    ax.set_xlabel(x_label)
    def values(column):
        return "/".join(str(v) for v in sorted(rows[column].unique()))
    ax.set_title(f"decode, {values('seqlen_q')} query token(s), {fixed_name} {values(fixed)}")
    ax.grid(alpha=0.3)


def draw_prefill(ax):
    rows = measured(scaling[scaling.series == "prefill"])
    points = rows[["batch", "seqlen_q", "context_tokens"]].drop_duplicates().sort_values(
        ["context_tokens", "seqlen_q", "batch"])
    bars = [(path, dtype) for path in PATHS for dtype in DTYPE_LINE if ((rows.load_path == path)
                                                                        & (rows.dtype == dtype)).any()]
    width = 0.8 / max(1, len(bars))
    for i, (path, dtype) in enumerate(bars):
        for j, point in enumerate(points.itertuples(index=False)):
            at = rows[(rows.load_path == path) & (rows.dtype == dtype) & (rows.batch == point.batch)
                      & (rows.seqlen_q == point.seqlen_q) & (rows.context_tokens == point.context_tokens)]
            if at.empty:
                continue
            x = j + (i - (len(bars) - 1) / 2) * width
            ax.bar(x, at.tflops.iloc[0], width, color=PATHS[path]["color"],
                   hatch="//" if dtype == "e4m3" else None, edgecolor="white",
                   label=f"{PATHS[path]['label']} {dtype}" if j == 0 else None)
            for index, other in enumerate(others):
                theirs = measured(other[(other.series == "prefill") & (other.load_path == path)
                                        & (other.dtype == dtype) & (other.batch == point.batch)
                                        & (other.seqlen_q == point.seqlen_q)
                                        & (other.context_tokens == point.context_tokens)])
                if len(theirs):
                    ax.plot(x, theirs.tflops.iloc[0], **overlay_marker_style(PATHS[path]["color"], index))
    ax.set_xticks(range(len(points)))
    ax.set_xticklabels([f"{p.batch}×{p.seqlen_q}\n{p.context_tokens}" for p in points.itertuples()])
    ax.set_xlabel("batch × query tokens, context")
    ax.set_ylabel("TFLOP/s")
    ax.set_title("causal prefill")
    ax.grid(alpha=0.3, axis="y")


# %%
present = [panel for panel in PANELS if (measured(scaling).series == panel[0]).any()]
has_prefill = (measured(scaling).series == "prefill").any()
count = max(1, len(present) + int(has_prefill))
fig, axes = plt.subplots(1, count, figsize=(PAGE_IN, 3.4), squeeze=False)
axes = list(axes[0])
if not present and not has_prefill:
    axes[0].set_axis_off()
    axes[0].text(0.5, 0.5, "not measured: no point was measured at a single page size",
                 ha="center", va="center", transform=axes[0].transAxes)
for ax, (series, x, x_label, fixed, fixed_name) in zip(axes, present):
    draw_decode(ax, series, x, x_label, fixed, fixed_name)
handles, bars = [], []
if present:
    axes[0].set_ylabel("K/V read rate (TB/s)")
    top = max(ax.get_ylim()[1] for ax in axes[:len(present)])
    for ax in axes[:len(present)]:
        ax.set_ylim(0, top)
    handles = axes[0].get_legend_handles_labels()[0]
    handles += [Line2D([], [], color="#555555", linestyle="none", marker=STAGE_MARKER[int(s)],
                       label=f"{int(s)} K/V stages won") for s in sorted(measured(scaling).stages.dropna().unique())]
if has_prefill:
    draw_prefill(axes[len(present)])
    bars = [Patch(facecolor=PATHS[path]["color"], hatch="//" if dtype == "e4m3" else None, edgecolor="white",
                  label=f"prefill: {PATHS[path]['label']} {dtype}") for path in PATHS for dtype in DTYPE_LINE]
shape = f"{scaling.iloc[0]['shape']}, {scaling.iloc[0].page_size}-token pages" if len(scaling) else None
rect = legend_band(fig, [(handles, 4, shape), (bars, 4, None),
                         (runs_handles(derived.parent.parent.name, runs, markers=has_prefill), 3, "runs")], stack=True)
finish(fig, provenance, pdf, rect=rect)
