"""The cluster_launch sweep: per occupancy setting (CTAs per SM the grid is sized for, and the
dynamic shared memory per CTA) and spin time, a cluster launch of each cluster size and a plain
(cluster-free) launch of as many CTAs.

The grid is ``ctas_per_sm`` x SMs CTAs, rounded down to whole clusters (132 SMs: clusters of 8
and 16 leave 4 or 8 CTAs out), and is *not* capped at the clusters that can be resident at
once: where fewer fit, the late clusters start when earlier ones finish, which the per-CTA
start times show as a second wave. A setting whose shared memory lets more CTAs than
``ctas_per_sm`` share an SM leaves the scheduler free to stack them.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

LAUNCHES = ("no_cluster", "cluster")
SMEM_PER_SM_BYTES = 233472              # H200 (every Hopper SXM part): shared memory per SM
MAX_SHARED_PER_CTA_BYTES = 232448       # opt-in limit per CTA
RESERVED_SHARED_PER_CTA_BYTES = 1024    # the driver reserves 1 KiB per CTA on sm_90
MAX_THREADS_PER_SM = 2048


@dataclass(frozen=True)
class LaunchPoint:
    launch: str                 # no_cluster (numba's own launch) | cluster (cuLaunchKernelEx with a cluster dim)
    cluster_size: int           # 1 for no_cluster
    grid_ctas: int
    ctas_per_sm: int            # what the grid is sized for (grid = ctas_per_sm x SMs, whole clusters)
    dynamic_shared_bytes: int
    spin_ns: int                # each CTA stays this long (0: an empty kernel)
    threads_per_cta: int

    @property
    def clusters(self) -> int:
        return self.grid_ctas // self.cluster_size

    @property
    def key(self) -> str:
        return (f"{self.launch}/n{self.cluster_size}/g{self.grid_ctas}/c{self.ctas_per_sm}"
                f"/smem{self.dynamic_shared_bytes}/spin{self.spin_ns}")

    def columns(self) -> dict:
        return {**asdict(self), "clusters": self.clusters}


def grid_ctas(cluster_size: int, ctas_per_sm: int, sm_count: int) -> int:
    """ctas_per_sm x SMs CTAs, rounded down to whole clusters."""
    return (ctas_per_sm * sm_count // cluster_size) * cluster_size


def launch_points(study: dict, sm_count: int) -> list[LaunchPoint]:
    """Every timed launch: per occupancy setting and spin, the plain launches first (one per
    distinct grid size the cluster launches use), then a cluster launch per cluster size."""
    points = []
    threads = study["threads_per_cta"]
    for setting in study["occupancy"]:
        ctas, smem = setting["ctas_per_sm"], setting["dynamic_shared_bytes"]
        grids = {n: grid_ctas(n, ctas, sm_count) for n in study["cluster_sizes"]}
        for spin in study["spin_ns"]:
            points += [LaunchPoint("no_cluster", 1, g, ctas, smem, spin, threads) for g in sorted(set(grids.values()))]
            points += [LaunchPoint("cluster", n, grids[n], ctas, smem, spin, threads) for n in study["cluster_sizes"]]
    return points


def fits_per_sm(dynamic_shared_bytes: int, threads_per_cta: int) -> int:
    """How many CTAs of this shape one SM holds (shared memory and threads; registers are few)."""
    by_smem = SMEM_PER_SM_BYTES // (dynamic_shared_bytes + RESERVED_SHARED_PER_CTA_BYTES)
    return min(by_smem, MAX_THREADS_PER_SM // threads_per_cta)


def check_config(section: dict, expand: bool = False) -> list[str]:
    """Rules the schema cannot state: each occupancy setting fits its CTAs per SM, and no
    setting is listed twice."""
    messages = []
    prefix = "config key 'studies.cluster_launch"
    seen = set()
    for i, setting in enumerate(section["occupancy"]):
        ctas, smem = setting["ctas_per_sm"], setting["dynamic_shared_bytes"]
        where = f"{prefix}.occupancy[{i}]'"
        if smem > MAX_SHARED_PER_CTA_BYTES:
            messages.append(f"{where}: dynamic_shared_bytes {smem} exceeds the {MAX_SHARED_PER_CTA_BYTES} B a CTA may use")
        elif fits_per_sm(smem, section["threads_per_cta"]) < ctas:
            messages.append(f"{where}: {ctas} CTAs per SM of {smem} B dynamic shared memory (+1 KiB reserved) and "
                            f"{section['threads_per_cta']} threads do not fit one SM ({SMEM_PER_SM_BYTES} B, "
                            f"{MAX_THREADS_PER_SM} threads)")
        if (ctas, smem) in seen:
            messages.append(f"{where}: the setting (ctas_per_sm {ctas}, dynamic_shared_bytes {smem}) is listed twice")
        seen.add((ctas, smem))
    return messages
