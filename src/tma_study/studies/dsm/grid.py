"""The dsm sweep: broadcast variants x cluster size x tile x ring, plus the microbenchmarks.

Broadcast variants (one tile to every CTA of a 1-D cluster of n):
  multicast   TMA multicast from global memory: the ``multicast`` study's kernel, shape (1, n)
  dsm_pull    the leader loads with TMA; the others read its shared memory (ld.shared::cluster)
  dsm_push    the leader loads with TMA, then bulk-copies the tile into each peer's shared memory
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from tma_study.harness.cluster_ring import (
    MAX_BOX_ROWS,
    RING_ALIGN_BYTES,
    ROW_BYTES,
    WARP,
    shared_memory_fits,
)

VARIANTS = ("multicast", "dsm_pull", "dsm_push")


@dataclass(frozen=True)
class BroadcastConfig:
    variant: str
    cluster_size: int
    tile_bytes: int
    stages: int
    ctas_per_sm: int
    consumer_threads: int
    working_set: str
    working_set_bytes: int
    unique_bytes_per_launch: int

    @property
    def threads_per_cta(self) -> int:
        """Consumers + a producer warp (+ the relay warp of the DSM rings)."""
        return self.consumer_threads + WARP * (1 if self.variant == "multicast" else 2)

    @property
    def dynamic_shared_bytes(self) -> int:
        return self.stages * self.tile_bytes + RING_ALIGN_BYTES

    @property
    def steps_total(self) -> int:
        return max(1, self.unique_bytes_per_launch // self.tile_bytes)

    @property
    def key(self) -> str:
        return (f"{self.variant}/n{self.cluster_size}/{self.working_set}/T{self.tile_bytes}/s{self.stages}"
                f"/c{self.ctas_per_sm}/t{self.consumer_threads}")

    def columns(self) -> dict:
        return {**asdict(self), "steps_total": self.steps_total, "threads_per_cta": self.threads_per_cta,
                "dynamic_shared_bytes": self.dynamic_shared_bytes}


def fits(config: BroadcastConfig, smem_per_sm_bytes: int) -> bool:
    """Shared memory fits, the tile is at most one TMA box (256 rows), and a multicast slice is
    a whole number of rows."""
    rows = config.tile_bytes // ROW_BYTES
    whole_slices = config.variant != "multicast" or rows % config.cluster_size == 0
    return (whole_slices and rows <= MAX_BOX_ROWS
            and shared_memory_fits(config.dynamic_shared_bytes, config.ctas_per_sm, smem_per_sm_bytes))


def broadcast_configs(study: dict, smem_per_sm_bytes: int) -> list[BroadcastConfig]:
    configs = []
    for name, ws in study["working_sets"].items():
        for n in study["cluster_sizes"]:
            for variant in study["variants"]:
                for tile in study["tile_bytes"]:
                    for stages in study["stages"]:
                        for ctas in study["ctas_per_sm"]:
                            for consumers in study["consumer_threads"]:
                                config = BroadcastConfig(variant, n, tile, stages, ctas, consumers, name,
                                                         ws["bytes"], ws["unique_bytes_per_launch"])
                                if fits(config, smem_per_sm_bytes):
                                    configs.append(config)
    return configs
