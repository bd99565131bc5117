# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # The raw cost of distributed shared memory
#
# Left: latency of one dependent 4-byte load (one thread, clock64, median of repeats) from
# the CTA's own shared memory (`ld.shared`, and through the cluster window) and from another
# CTA's (`ld.shared::cluster`), by cluster size. Right: read bandwidth when every CTA streams
# a partner's shared memory with 128-bit loads (best over CTAs per SM and threads): the ring
# (CTA r reads r+1 mod n) and, where measured, the pair (CTA r reads r xor 1), with the local
# `LDS.128` rate for scale. Other runs found beside this one under `results/` are
# drawn as black-edged markers over the bars (left) and thin dashed lines (right). Not shown:
# contention patterns other than the ring and the pair (e.g. all CTAs reading one CTA, which
# the DSM pull broadcast does).

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from tma_study.studies.dsm.aggregate import with_pattern
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from tma_study.report.figures import (
    PAGE_IN,
    PALETTE,
    run_style,
    SERIES_COLOURS,
    finish,
    inputs_and_runs,
    legend_band,
    overlay_marker_style,
    overlay_style,
    runs_handles,
)

derived, provenance, pdf, runs = inputs_and_runs("dsm", globals().get("snakemake"))
latency = pd.read_csv(derived / "latency.csv")
bandwidth = with_pattern(pd.read_csv(derived / "bandwidth.csv"))
others = [(pd.read_csv(folder / "latency.csv"), with_pattern(pd.read_csv(folder / "bandwidth.csv")))
          for _, folder, _ in runs]
PATTERN_STYLES = {"ring": {"color": PALETTE["blue"], "marker": "o", "label": "ring (r+1 mod n), ld.shared::cluster.v4"},
                  "pair": {"color": PALETTE["orange"], "marker": "s", "label": "pair (r xor 1), ld.shared::cluster.v4"}}
LOCAL = {"color": "#555555", "linestyle": ":", "label": "own, LDS.128"}
HATCHES = ("", "////", "....", "xxxx")


def cycles(latency, target, sizes):
    """Median cycles per dependent load per cluster size (NaN: not measured); 'last': CTA n-1."""
    values = []
    for n in sizes:
        rows = latency[latency.cluster_size == n]
        want = str(n - 1) if target == "last" else target
        match = rows[rows.target.astype(str) == want]
        values.append(float(match.cycles_per_hop_median.iloc[0]) if len(match) else np.nan)
    return values

# %%
fig, (left, right) = plt.subplots(1, 2, figsize=(PAGE_IN, 3.0))
sizes = sorted(latency.cluster_size.unique())
targets = [("local_lds", "own, ld.shared"), ("0", "own, ld.shared::cluster"), ("1", "CTA 1"), ("last", "CTA n-1")]
width = 0.8 / len(targets)
for i, (target, label) in enumerate(targets):
    positions = np.arange(len(sizes)) + i * width
    bars = left.bar(positions, cycles(latency, target, sizes), width, color=SERIES_COLOURS[i], hatch=HATCHES[i],
                    edgecolor="white", linewidth=0.3, label=label)
    for index, (their_latency, _) in enumerate(others):
        left.plot(positions, cycles(their_latency, target, sizes),
                  **overlay_marker_style(bars.patches[0].get_facecolor(), index))
left.set_xticks(np.arange(len(sizes)) + width * (len(targets) - 1) / 2)
left.set_xticklabels([str(n) for n in sizes])
left.set_xlabel("CTAs per cluster")
left.set_ylabel("SM cycles per dependent load")
left.grid(alpha=0.3, axis="y")

remote = bandwidth[bandwidth.path == "remote"].sort_values("cluster_size")
for pattern, style in PATTERN_STYLES.items():
    rows = remote[remote.pattern == pattern]
    if len(rows):
        right.plot(rows.cluster_size, rows.gbps / 1e3, **style)
local = bandwidth[bandwidth.path == "local"]
if len(local):
    right.axhline(float(local.gbps.max()) / 1e3, **LOCAL)
for index, (_, their_bandwidth) in enumerate(others):
    for pattern, style in PATTERN_STYLES.items():
        theirs = their_bandwidth[(their_bandwidth.path == "remote") & (their_bandwidth.pattern == pattern)]
        if len(theirs):
            theirs = theirs.sort_values("cluster_size")
            right.plot(theirs.cluster_size, theirs.gbps / 1e3, **overlay_style(style, index))
    theirs = their_bandwidth[their_bandwidth.path == "local"]
    if len(theirs):
        right.axhline(float(theirs.gbps.max()) / 1e3, color=LOCAL["color"], linewidth=0.8,
                      **run_style(index))
right.set_xscale("log", base=2)
cluster_sizes = sorted(remote.cluster_size.unique())
right.set_xticks(cluster_sizes)
right.set_xticklabels([str(n) for n in cluster_sizes])
right.set_yscale("log")
right.set_xlabel("CTAs per cluster")
right.set_ylabel("aggregate TB/s")
right.grid(alpha=0.3, which="both")
targets_handles = [Patch(facecolor=SERIES_COLOURS[i], hatch=HATCHES[i], edgecolor="white", label=label)
                   for i, (_, label) in enumerate(targets)]
pattern_handles = [Line2D([], [], **style) for style in PATTERN_STYLES.values()] + [Line2D([], [], **LOCAL)]
rect = legend_band(fig, [(targets_handles, 2, "latency: the load's target"), (pattern_handles, 1, "bandwidth"),
                         (runs_handles(derived.parent.parent.name, runs, markers=True), 1, "runs (bars: markers)")])
finish(fig, provenance, pdf, rect=rect)
