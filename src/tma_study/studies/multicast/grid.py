"""The multicast sweep: every (pattern, cluster shape, variant, tile, ring, working set).

Variants (kernels/multicast/ring.py):
  no_cluster   no cluster launch; each CTA loads its own copy of every tile with TMA (the
               CTAs sharing a tile read it from L2 after the first)
  cluster      the same binary under a cluster launch of the same shape: isolates what
               cluster scheduling alone costs
  multicast    TMA multicast: each CTA issues one slice, delivered to every CTA sharing it
Cluster shape 1x1 has only ``no_cluster`` (the baseline every shape is compared with).

A configuration is kept only if it can run as declared: a multicast slice is a whole number
of 256-byte rows, and ``ctas_per_sm`` CTAs fit the SM's shared memory.
"""
from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, replace

from tma_study.harness.cluster_ring import (  # noqa: F401  (the ring's geometry, re-exported)
    MAX_BOX_ROWS,
    MAX_SHARED_PER_CTA_BYTES,
    RESERVED_SHARED_PER_CTA_BYTES,
    RING_ALIGN_BYTES,
    ROW_BYTES,
    STATIC_SHARED_BYTES,
    WARP,
    shared_memory_fits,
)

VARIANTS = ("no_cluster", "cluster", "multicast")


@dataclass(frozen=True)
class ClusterConfig:
    pattern: str              # "1d": all CTAs share A; "2d": A along y, B along x (CUTLASS)
    variant: str
    cluster_x: int
    cluster_y: int
    tile_bytes: int           # A tile; the 2-D pattern's B tile has the same size
    stages: int
    ctas_per_sm: int
    consumer_threads: int
    working_set: str
    working_set_bytes: int    # per operand
    unique_bytes_per_launch: int   # A bytes one launch reads (before sharing)
    release: str = "warp"     # consumers release a stage per warp or once per CTA (kernels/multicast/ring.py)

    @property
    def cluster_size(self) -> int:
        return self.cluster_x * self.cluster_y

    @property
    def b_tile_bytes(self) -> int:
        return self.tile_bytes if self.pattern == "2d" else 0

    @property
    def stage_bytes(self) -> int:
        return self.tile_bytes + self.b_tile_bytes

    @property
    def threads_per_cta(self) -> int:
        return self.consumer_threads + WARP

    @property
    def dynamic_shared_bytes(self) -> int:
        return self.stages * self.stage_bytes + RING_ALIGN_BYTES

    @property
    def steps_total(self) -> int:
        """Cluster steps per launch: every CTA row reads unique_bytes_per_launch of A once."""
        return max(1, self.unique_bytes_per_launch // (self.tile_bytes * self.cluster_x))

    @property
    def key(self) -> str:
        return (f"{self.pattern}/{self.variant}/{self.cluster_x}x{self.cluster_y}/{self.working_set}"
                f"/T{self.tile_bytes}/s{self.stages}/c{self.ctas_per_sm}/t{self.consumer_threads}/r{self.release}")

    def columns(self) -> dict:
        return {**asdict(self), "cluster_size": self.cluster_size, "b_tile_bytes": self.b_tile_bytes,
                "stage_bytes": self.stage_bytes, "steps_total": self.steps_total,
                "threads_per_cta": self.threads_per_cta, "dynamic_shared_bytes": self.dynamic_shared_bytes}


def fits(config: ClusterConfig, smem_per_sm_bytes: int) -> bool:
    return shared_memory_fits(config.dynamic_shared_bytes, config.ctas_per_sm, smem_per_sm_bytes)


def slices_whole(config: ClusterConfig) -> bool:
    """Each multicast slice is a whole number of rows (and every box at most 256 rows)."""
    rows = config.tile_bytes // ROW_BYTES
    if rows > MAX_BOX_ROWS or config.tile_bytes % ROW_BYTES:
        return False
    if config.variant != "multicast":
        return True
    return rows % config.cluster_y == 0 and (config.pattern == "1d" or rows % config.cluster_x == 0)


def _shapes(study: dict, pattern: str) -> list[tuple[int, int]]:
    if pattern == "1d":
        return [(1, n) for n in study["cluster_sizes"]]
    return [tuple(shape) for shape in study["cluster_shapes_2d"]]


def _ctas_choices(requested, base: ClusterConfig, smem_per_sm_bytes) -> list[ClusterConfig]:
    """``base`` at each requested CTAs-per-SM count that fits; where none does, at the most that
    fit (a ring too big for two CTAs per SM still runs, with one)."""
    fitting = [replace(base, ctas_per_sm=c) for c in requested]
    fitting = [c for c in fitting if fits(c, smem_per_sm_bytes)]
    if fitting:
        return fitting
    fallback = [replace(base, ctas_per_sm=c) for c in range(max(requested) - 1, 0, -1)]
    return [c for c in fallback if fits(c, smem_per_sm_bytes)][:1]


def cluster_configs(study: dict, smem_per_sm_bytes: int, patterns=("1d", "2d")) -> list[ClusterConfig]:
    configs = []
    tiles_key = {"1d": "tile_bytes", "2d": "tile_bytes_2d"}
    for pattern in patterns:
        shapes = _shapes(study, pattern)
        if (1, 1) not in shapes:
            shapes = [(1, 1), *shapes]
        for name, ws in study["working_sets"].items():
            for cluster_x, cluster_y in shapes:
                variants = ("no_cluster",) if cluster_x * cluster_y == 1 else study["variants"]
                for variant, tile, stages, consumers, release in itertools.product(
                        variants, study[tiles_key[pattern]], study["stages"], study["consumer_threads"],
                        study["releases"]):
                    base = ClusterConfig(pattern, variant, cluster_x, cluster_y, tile, stages, 1, consumers,
                                         name, ws["bytes"], ws["unique_bytes_per_launch"], release)
                    configs += [c for c in _ctas_choices(study["ctas_per_sm"], base, smem_per_sm_bytes)
                                if slices_whole(c)]
    return configs


TILE_ORDERS = ("spread", "shared")     # kernels/multicast/ring.py: same_tiles = 0 or 1


@dataclass(frozen=True)
class ComputeConfig(ClusterConfig):
    """A 2-D (GEMM-like) configuration of the compute sweep: the ring's consumer churns every
    loaded word ``work_rounds`` times (dependent IMADs) before its checksum, and ``tile_order``
    says whether each cluster reads its own tiles (``spread``, as the load-only sweep) or every
    cluster reads the same tile sequence at once (``shared``: own copies all read the same L2 lines)."""

    work_rounds: int = 0
    tile_order: str = "spread"

    @property
    def key(self) -> str:
        return f"compute/{super().key}/w{self.work_rounds}/o{self.tile_order}"

    @property
    def same_tiles(self) -> int:
        return int(self.tile_order == "shared")

    @property
    def words_per_stage(self) -> int:
        return self.stage_bytes // 4

    def columns(self) -> dict:
        return {**super().columns(), "words_per_stage": self.words_per_stage,
                "imads_per_stage": self.words_per_stage * self.work_rounds}


def compute_configs(study: dict, smem_per_sm_bytes: int) -> list[ComputeConfig]:
    """The compute sweep (``study["compute"]``; empty without it): every working set, tile order,
    work rounds, 2-D cluster shape (and the 1x1 baseline), variant and A tile that fits."""
    sweep = study.get("compute")
    if not sweep:
        return []
    shapes = [tuple(shape) for shape in sweep["cluster_shapes_2d"]]
    if (1, 1) not in shapes:
        shapes = [(1, 1), *shapes]
    configs = []
    for name, ws in sweep["working_sets"].items():
        for order, rounds, (cluster_x, cluster_y) in itertools.product(sweep["tile_orders"], sweep["work_rounds"],
                                                                       shapes):
            variants = ("no_cluster",) if cluster_x * cluster_y == 1 else study["variants"]
            for variant, tile, stages, consumers in itertools.product(
                    variants, sweep["tile_bytes_2d"], sweep["stages"], sweep["consumer_threads"]):
                base = ComputeConfig("2d", variant, cluster_x, cluster_y, tile, stages, 1, consumers, name,
                                     ws["bytes"], ws["unique_bytes_per_launch"], "warp", rounds, order)
                configs += [c for c in _ctas_choices(sweep["ctas_per_sm"], base, smem_per_sm_bytes)
                            if slices_whole(c)]
    return configs
