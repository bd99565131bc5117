# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # What a cluster launch costs by itself, and where its CTAs ran
#
# A near-empty kernel (every CTA records its SM, cluster and `%globaltimer`, then spins on the
# timer) launched as clusters of each size and without clusters over the same CTAs, one line per
# occupancy setting (CTAs per SM the grid is sized for, shared memory per CTA, how many fit an SM).
# Left: the empty kernel's extra time over the cluster-free launch. Middle: the time ratio when
# every CTA stays for the longest spin. Right: SMs that got no CTA in that launch. Not shown: the
# per-CTA start offsets (derived/placement.csv summarises them; raw ctas.csv holds them).

# %%
import matplotlib.pyplot as plt
import pandas as pd

from tma_study.report.figures import PAGE_IN, SERIES_COLOURS, SERIES_MARKERS, finish, inputs, legend_band

derived, provenance, pdf = inputs("cluster_launch", globals().get("snakemake"))
launch = pd.read_csv(derived / "launch.csv")
clustered = launch[launch.launch == "cluster"]
longest = int(launch.spin_ns.max())


def setting_label(ctas, smem, fit):
    return f"{ctas}/SM, {smem / 1024:.1f} KiB ({fit} fit)"


# %%
DODGE = 0.08     # log2 offset between the occupancy settings at one cluster size
fig, (left, middle, right) = plt.subplots(1, 3, figsize=(PAGE_IN, 2.7))
settings = clustered.groupby(["ctas_per_sm", "dynamic_shared_bytes", "ctas_per_sm_fit"], sort=False)
for index, ((ctas, smem, fit), rows) in enumerate(settings):
    look = {"color": SERIES_COLOURS[index % len(SERIES_COLOURS)], "marker": SERIES_MARKERS[index % len(SERIES_MARKERS)],
            "label": setting_label(ctas, smem, fit)}
    empty = rows[rows.spin_ns == 0].sort_values("cluster_size")
    spun = rows[rows.spin_ns == longest].sort_values("cluster_size")
    dodge = 2 ** (DODGE * (index - (settings.ngroups - 1) / 2))     # settings that coincide stay visible
    left.plot(empty.cluster_size * dodge, empty.overhead_us, **look)
    middle.plot(spun.cluster_size * dodge, spun.slowdown, **look)
    right.plot(spun.cluster_size * dodge, spun.sms_idle, **look)
sizes = sorted(clustered.cluster_size.unique())
for ax in (left, middle, right):
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes)
    ax.set_xticklabels([str(n) for n in sizes])
    ax.set_xlabel("CTAs per cluster")
    ax.grid(alpha=0.3)
left.axhline(0, color="#7f7f7f", linewidth=0.8)
left.set_ylabel("extra µs (empty kernel)")
middle.axhline(1, color="#7f7f7f", linewidth=0.8)
middle.set_ylabel(f"time / no cluster ({longest / 1e3:.0f} µs spin)")
right.set_ylabel(f"SMs without a CTA ({longest / 1e3:.0f} µs spin)")
rect = legend_band(fig, [(left.get_legend_handles_labels()[0], 4, "occupancy setting")])
finish(fig, provenance, pdf, rect=rect)
