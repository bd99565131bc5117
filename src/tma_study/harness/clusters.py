"""Cluster launching and persistent grids, for every study that launches clusters (``multicast``,
``dsm``): as many whole clusters as the CTA slots hold (no more than can be resident at once) and
a launch closure that runs a kernel over that grid as a cluster launch or a plain one.

Imported only by the measure step and the GPU tests (it imports the kernels' launch module).
"""
from __future__ import annotations

from dataclasses import dataclass

from tma_kernels import launch as launch_mod


@dataclass(frozen=True)
class Grid:
    """A persistent grid: ``clusters`` groups of ``cluster_size`` CTAs."""

    clusters: int
    cluster_size: int
    max_active_clusters: int | None     # occupancy API (cluster launches only)
    cta_slots: int                      # ctas_per_sm x SMs: what a cluster-free launch fills

    @property
    def ctas(self) -> int:
        return self.clusters * self.cluster_size

    @property
    def busy_share(self) -> float:
        """Share of the CTA slots the grid occupies (1.0: every SM as busy as without clusters)."""
        return self.ctas / self.cta_slots


def persistent_grid(kernel, cluster_size: int, clustered: bool, threads: int, dynamic_shared_bytes: int,
                    ctas_per_sm: int, sm_count: int) -> Grid:
    """As many whole groups as the CTA slots hold; for a cluster launch, no more than can be
    resident at once (so no cluster waits for another to finish)."""
    slots = ctas_per_sm * sm_count
    clusters = slots // cluster_size
    active = None
    if clustered:
        active = launch_mod.max_active_clusters(kernel, cluster_size, threads, dynamic_shared_bytes)
        clusters = min(clusters, active)
    if clusters < 1:
        raise RuntimeError(f"no cluster of {cluster_size} CTAs x {dynamic_shared_bytes} B of shared memory "
                           f"can be resident (max active clusters {active})")
    return Grid(clusters, cluster_size, active, slots)


def launcher(kernel, grid: Grid, clustered: bool, threads: int, dynamic_shared_bytes: int, args):
    """launch(stream): the kernel over ``grid``, as a cluster launch or a plain one."""
    if clustered:
        def launch(stream):
            launch_mod.launch_cluster(kernel, grid.clusters, grid.cluster_size, threads,
                                      dynamic_shared_bytes, *args, stream=stream)
    else:
        launch_mod.set_max_dynamic_shared_bytes(kernel, dynamic_shared_bytes)

        def launch(stream):
            kernel[grid.ctas, threads, stream, dynamic_shared_bytes](*args)
    return launch
