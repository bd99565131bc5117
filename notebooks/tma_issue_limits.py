# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # What one TMA transfer costs from issue to arrival, and how fast one SM issues them
#
# Left: one thread's pointer chase of 16-byte transfers over random chunks of each working set, SM
# cycles per hop (median), from L2 (solid) and right after an L2 flush (dashed), in four forms: a TMA
# tile load and a bulk copy (arm, issue, wait, read the next index from shared memory), a plain load
# whose word is the next index, and the minimal plain load whose words are the next address.
# Right: TMA-engine copies issued per SM per microsecond, one CTA per SM copying from an L2-resident
# working set with 128 KiB in flight, by issuing threads, one line per size (TMA tile loads solid,
# bulk copies dashed).

# %%
import matplotlib.pyplot as plt
import pandas as pd

from tma_study.report.figures import PAGE_IN, SERIES_COLOURS, SERIES_MARKERS, finish, inputs, legend_band

derived, provenance, pdf = inputs("tma_issue", globals().get("snakemake"))
chase = pd.read_csv(derived / "chase.csv")
rate = pd.read_csv(derived / "issue_rate.csv")
FORMS = {"tma_tile": "TMA tile", "bulk_copy": "bulk copy", "plain_indexed": "plain, indexed",
         "plain_minimal": "plain, minimal"}

# %%
fig, (left, right) = plt.subplots(1, 2, figsize=(PAGE_IN, 2.8))
for index, (form, label) in enumerate(FORMS.items()):
    look = {"color": SERIES_COLOURS[index], "marker": SERIES_MARKERS[index]}
    for level, style in (("l2", "-"), ("hbm", "--")):
        rows = chase[(chase.form == form) & (chase.level == level)].sort_values("working_set_bytes")
        left.plot(rows.working_set_bytes / 2**20, rows.cycles_per_hop_median, linestyle=style,
                  label=label if level == "l2" else None, **look)
sets = sorted(chase.working_set_bytes.unique())
left.set_xscale("log", base=2)
left.set_xticks([s / 2**20 for s in sets])
left.set_xticklabels([f"{s >> 20}" for s in sets])
left.set_xlabel("working set (MiB)")
left.set_ylabel("SM cycles per hop (16 B)")
left.grid(alpha=0.3)
sizes = sorted(rate.bytes_per_transfer.unique())
for index, size in enumerate(sizes):
    look = {"color": SERIES_COLOURS[index % len(SERIES_COLOURS)], "marker": SERIES_MARKERS[index % len(SERIES_MARKERS)]}
    for mechanism, style in (("tma_tile", "-"), ("bulk_copy", "--")):
        rows = rate[(rate.mechanism == mechanism) & (rate.bytes_per_transfer == size)].sort_values("issue_threads")
        right.plot(rows.issue_threads, rows.transfers_per_sm_per_us, linestyle=style,
                   label=f"{size} B" if mechanism == "tma_tile" else None, **look)
threads = sorted(rate.issue_threads.unique())
right.set_xscale("log", base=2)
right.set_xticks(threads)
right.set_xticklabels([str(t) for t in threads])
right.set_xlabel("issuing threads (one CTA per SM)")
right.set_ylabel("copies per SM per µs")
right.grid(alpha=0.3)
rect = legend_band(fig, [(left.get_legend_handles_labels()[0], 4, "chase form (solid L2, dashed HBM)"),
                         (right.get_legend_handles_labels()[0], 5, "copy size (solid TMA tile, dashed bulk)")])
finish(fig, provenance, pdf, rect=rect)
