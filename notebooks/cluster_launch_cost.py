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

from tma_study.report.figures import finish, inputs

derived, provenance, pdf = inputs("cluster_launch", globals().get("snakemake"))
launch = pd.read_csv(derived / "launch.csv")
clustered = launch[launch.launch == "cluster"]
longest = int(launch.spin_ns.max())


def setting_label(ctas, smem, fit):
    return f"{ctas}/SM, {smem / 1024:.1f} KiB ({fit} fit)"


# %%
fig, (left, middle, right) = plt.subplots(1, 3, figsize=(12, 3.6))
settings = clustered.groupby(["ctas_per_sm", "dynamic_shared_bytes", "ctas_per_sm_fit"], sort=False)
for (ctas, smem, fit), rows in settings:
    label = setting_label(ctas, smem, fit)
    empty = rows[rows.spin_ns == 0].sort_values("cluster_size")
    spun = rows[rows.spin_ns == longest].sort_values("cluster_size")
    line, = left.plot(empty.cluster_size, empty.overhead_us, marker="o", label=label)
    middle.plot(spun.cluster_size, spun.slowdown, marker="o", color=line.get_color(), label=label)
    right.plot(spun.cluster_size, spun.sms_idle, marker="o", color=line.get_color(), label=label)
sizes = sorted(clustered.cluster_size.unique())
for ax in (left, middle, right):
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes)
    ax.set_xticklabels([str(n) for n in sizes])
    ax.set_xlabel("CTAs per cluster")
    ax.grid(alpha=0.3)
left.axhline(0, color="#7f7f7f", linewidth=0.8)
left.set_ylabel("empty kernel: extra us over no cluster")
middle.axhline(1, color="#7f7f7f", linewidth=0.8)
middle.set_ylabel(f"{longest / 1e3:.0f} us spin: time / no cluster")
right.set_ylabel(f"{longest / 1e3:.0f} us spin: SMs without a CTA")
left.legend(fontsize=7, title="occupancy setting", title_fontsize=7)
finish(fig, provenance, pdf)
