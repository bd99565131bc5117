"""GPU-side helpers the cluster studies (``multicast``, ``dsm``) share: operands with their
tensor maps and tile checks, the persistent grid for a cluster shape, and launches.

Imported only by the measure step and the GPU tests (it imports numba.cuda).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from tma_kernels import launch as launch_mod

from tma_study.harness.buffers import ChecksumOutputs, fresh_rng, poison  # noqa: F401  re-exported

from . import reference

ELEMENT_BYTES = 4
ROW_ELEMENTS = 64                       # kernels/multicast/ring.py: 256-byte tensor rows


class Operand:
    """A device buffer of random uint32 (rows of 256 B), its tensor maps and tile checks."""

    def __init__(self, name: str, nbytes: int):
        from numba import cuda
        self.name, self.nbytes = name, nbytes
        self.device = cuda.device_array(nbytes // ELEMENT_BYTES, np.uint32)
        self.generation = None
        self._maps: dict[int, object] = {}

    def ensure_fresh(self, generation) -> None:
        """New random contents whenever a new group of configurations starts."""
        if generation == self.generation:
            return
        self.words = np.frombuffer(fresh_rng().bytes(self.nbytes), dtype=np.uint32)
        self.device.copy_to_device(self.words)
        self._checks: dict[tuple[int, int, int], np.ndarray] = {}
        self.generation = generation

    def checks(self, tile_bytes: int, vector_offset: int = 0, work_rounds: int = 0) -> np.ndarray:
        """Per-tile checks of the words (churned ``work_rounds`` times: the compute consumer)."""
        key = (tile_bytes, vector_offset, work_rounds)
        if key not in self._checks:
            self._checks[key] = reference.tile_checks(reference.churned(self.words, work_rounds), tile_bytes,
                                                      vector_offset)
        return self._checks[key]

    def tiles(self, tile_bytes: int) -> int:
        return self.nbytes // tile_bytes

    def tensor_map(self, box_rows: int) -> int:
        """Address of a tensor map over the buffer as rows of 64 uint32, box 64 x box_rows."""
        if box_rows not in self._maps:
            from tma_kernels import tensor_map
            rows = self.nbytes // (ROW_ELEMENTS * ELEMENT_BYTES)
            spec = tensor_map.tiled_2d(self.device, np.uint32, rows=rows, cols=ROW_ELEMENTS,
                                       row_stride_bytes=ROW_ELEMENTS * ELEMENT_BYTES,
                                       box_rows=box_rows, box_cols=ROW_ELEMENTS)
            self._maps[box_rows] = tensor_map.to_device(tensor_map.encode(spec), spec)
        return self._maps[box_rows].address


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
