# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # The advisor's decision map: which mechanism loads a streaming operand, by transfer size and bytes in flight
#
# For a contiguous operand read once per transfer by a load-only consumer (cluster of one), the
# frozen advisor's choice at each transfer size and bytes in flight per SM, from HBM (top) and
# L2 (bottom), predicted from the crossover study's tables. Colour: the choice; hatching: a
# predicted tie with the mechanism named in the cell (within the tie tolerance in some run of the
# evidence; all such ties here are with cp.async); number: how many percent slower the fastest
# other mechanism is predicted to be; dashed outline: outside the measured range (an extrapolation);
# light grey: a transfer larger than the bytes in flight, which no pipeline can hold.

# %%
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.patches import Patch, Rectangle  # noqa: E402

from tma_study.config import REPO_ROOT  # noqa: E402
from tma_study.harness.provenance import read as read_provenance  # noqa: E402
from tma_study.report.figures import COLUMN_IN, finish, legend_band  # noqa: E402
from tma_study.report.tables import human_bytes  # noqa: E402

snakemake = globals().get("snakemake")
if snakemake is not None:
    derived, pdf = Path(snakemake.params.derived), Path(snakemake.output.pdf)
    provenance = read_provenance(Path(snakemake.input.provenance), study="crossover")
else:
    derived, pdf = REPO_ROOT / "results" / "h200" / "advisor" / "derived", None
    provenance = read_provenance(REPO_ROOT / "results" / "h200" / "crossover" / "provenance.json", study="crossover")

# Okabe-Ito colours (distinguishable with every common colour-vision deficiency)
COLOURS = {"tma": "#0072B2", "bulk_copy": "#56B4E9", "cp_async": "#E69F00", "plain_loads": "#999999"}
NAMES = {"tma": "TMA", "bulk_copy": "bulk copy", "cp_async": "cp.async", "plain_loads": "plain loads"}
LEVELS = {"hbm": "from HBM", "l2": "from L2"}

table = pd.read_csv(derived / "decision_map.csv")

# %%
sizes = sorted(table.bytes_per_transfer.unique())
flights = sorted(table.bytes_in_flight_per_sm.unique())
fig, axes = plt.subplots(2, 1, figsize=(COLUMN_IN, 4.3), sharex=True)
for ax, (level, title) in zip(axes, LEVELS.items()):
    rows = table[table.level == level]
    for r in rows.itertuples():
        x, y = sizes.index(r.bytes_per_transfer), flights.index(r.bytes_in_flight_per_sm)
        if r.bytes_per_transfer > r.bytes_in_flight_per_sm:      # a transfer larger than the ring: no kernel
            ax.add_patch(Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor="#f2f2f2", edgecolor="white", linewidth=0.5))
            continue
        tied = [m for m in str(r.tied).split() if m != r.choice and m != "bulk_copy"]
        ax.add_patch(Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor=COLOURS[r.choice],
                               hatch="////" if tied else None, edgecolor="white", linewidth=0.5))
        if not r.inside_measured_range:
            ax.add_patch(Rectangle((x - 0.42, y - 0.42), 0.84, 0.84, fill=False, edgecolor="black",
                                   linewidth=0.8, linestyle=(0, (2, 1.5))))
        if not tied and np.isfinite(r.fastest_other_over_choice):
            ax.text(x, y, f"{100 * (r.fastest_other_over_choice - 1):.0f}", ha="center", va="center", fontsize=7,
                    color="white" if r.choice == "tma" else "black")
    ax.set_xlim(-0.5, len(sizes) - 0.5)
    ax.set_ylim(-0.5, len(flights) - 0.5)
    ax.set_xticks(range(len(sizes)), [human_bytes(s).replace(" ", "") for s in sizes], rotation=60)
    ax.set_yticks(range(len(flights)), [human_bytes(f).replace(" ", "") for f in flights])
    ax.set_ylabel("in flight per SM")
    ax.set_title(title)
axes[-1].set_xlabel("bytes per transfer")
handles = [Patch(facecolor=COLOURS[m], label=NAMES[m]) for m in COLOURS if m in set(table.choice)]
handles += [Patch(facecolor="white", edgecolor="black", hatch="////", label="tied with cp.async"),
            Patch(fill=False, edgecolor="black", linestyle=(0, (2, 1.5)), label="extrapolated"),
            Patch(facecolor="#f2f2f2", label="transfer larger than the ring")]
rect = legend_band(fig, [(handles, 2, None)])
finish(fig, provenance, pdf, rect=rect)
