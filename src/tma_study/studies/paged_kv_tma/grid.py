"""The paged_kv_tma probe: paged-KV decode points of the paged_kv study, each timed with the
cp.async gather and with every TMA load shape (tma_kernels.paged_kv.tma_boxes), everything else
fixed per point (consumer, K/V ring stages, page size, launch bounds), so the load path and the
shape of its loads are the only difference.

A point names a shape of ``shapes``, a dtype, the query tokens (1 or 4) and the consumer and
stage count to run it with; every point runs at ``batch`` sequences of ``context`` tokens and at
each page size of ``page_sizes`` that the path (and the TMA shape) can load. Each configuration
is a paged_kv ``SweepConfig`` (the kernel, its split rule, its check and its timed problem are the
paged_kv study's) plus the TMA shape ``tma_box`` ("" for cp.async).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from tma_study.studies.paged_kv.grid import Phase, Shape, SweepConfig

DECODE_MIN_KV_TILE_BYTES = 8192     # as the paged_kv sweep's decode_min_kv_tile_bytes (tile rows)
CP_ASYNC = "cp_async"


@dataclass(frozen=True)
class ProbeConfig:
    """One timed configuration: the paged_kv configuration and, on the TMA path, its load shape."""

    sweep: SweepConfig
    tma_box: str                    # tma_boxes.TMA_BOXES name; "" on the cp.async path
    min_ctas_per_sm: int            # launch bounds (1: none), the same for both paths of a point

    def variant(self):
        v = self.sweep.variant()
        return dataclasses.replace(v, min_ctas_per_sm=self.min_ctas_per_sm,
                                   **({"tma_box": self.tma_box} if self.tma_box else {}))

    @property
    def producer(self) -> str:
        """'cp_async p1' / 'cp_async p4' / 'tma chunk' ...: the load path and its one knob."""
        if self.sweep.load_path == CP_ASYNC:
            return f"cp_async p{self.sweep.producer_warps}"
        return f"tma {self.tma_box}"

    @property
    def point(self) -> str:
        """'llama3_70b/bf16/q4': the decode point."""
        return f"{self.sweep.shape.name}/{self.sweep.dtype}/q{self.sweep.phase.seqlen_q}"

    @property
    def key(self) -> str:
        return f"{self.sweep.key}/m{self.min_ctas_per_sm}" + (f"/box_{self.tma_box}" if self.tma_box else "")

    def columns(self) -> dict:
        s = self.sweep
        return {"point": self.point, "shape": s.shape.name, "q_heads": s.shape.q_heads,
                "kv_heads": s.shape.kv_heads, "head_dim": s.shape.head_dim, "dtype": s.dtype,
                "batch": s.phase.batch, "seqlen_q": s.phase.seqlen_q, "context_tokens": s.phase.context,
                "page_size": s.page_size, "load_path": s.load_path,
                "tma_box": self.tma_box or "none", "producer": self.producer,
                "producer_warps": self.variant().producer_warps, "block_n": s.block_n,
                "score_layout": s.score_layout, "stages": s.stages,
                "launch_min_ctas_per_sm": self.min_ctas_per_sm}


def _shape(study: dict, name: str) -> Shape:
    s = study["shapes"][name]
    return Shape(name, s["q_heads"], s["kv_heads"], s["head_dim"])


def probe_configs(study: dict) -> list[ProbeConfig]:
    """Every configuration, point by point, page by page: cp.async (each producer-warp count)
    first, then each TMA shape that can load the page."""
    from tma_kernels.paged_kv.tma_boxes import page_size_problem
    configs = []
    for point in study["points"]:
        phase = Phase("decode", study["batch"], point["seqlen_q"], study["context"])
        shape = _shape(study, point["shape"])
        bounds = point.get("min_ctas_per_sm", 1)
        for page in study["page_sizes"]:
            def sweep(path, warps, page=page):
                return SweepConfig(shape, point["dtype"], phase, page, path, point["stages"], warps,
                                   DECODE_MIN_KV_TILE_BYTES, point["consumer"])
            configs += [ProbeConfig(sweep(CP_ASYNC, warps), "", bounds) for warps in study["cp_async_producer_warps"]]
            for box in study["tma_boxes"]:
                config = ProbeConfig(sweep("tma", 1), box, bounds)
                if page_size_problem(config.variant(), page) is None:
                    configs.append(config)
    return configs


def check_config(study: dict, expand: bool = False) -> list[str]:
    """Rules the schema cannot state: each point's shape exists, its heads divide, its consumer
    runs at its dtype (and, ``expand``, every variant builds), the context holds whole pages."""
    from tma_kernels.paged_kv.layouts import LAYOUTS
    messages = []
    for i, point in enumerate(study["points"]):
        where = f"config key 'studies.paged_kv_tma.points[{i}]'"
        if point["shape"] not in study["shapes"]:
            messages.append(f"{where}: shape {point['shape']!r} is not among studies.paged_kv_tma.shapes "
                            f"{sorted(study['shapes'])}")
            continue
        s = study["shapes"][point["shape"]]
        if s["q_heads"] % s["kv_heads"]:
            messages.append(f"{where}: q_heads {s['q_heads']} is not a multiple of kv_heads {s['kv_heads']}")
        if point["dtype"] not in LAYOUTS[point["consumer"]].dtypes:
            messages.append(f"{where}: consumer {point['consumer']} runs at {LAYOUTS[point['consumer']].dtypes}, "
                            f"not {point['dtype']}")
    for page in study["page_sizes"]:
        if study["context"] % page:
            messages.append(f"config key 'studies.paged_kv_tma.page_sizes': context {study['context']} is not a "
                            f"multiple of page size {page}")
    if messages or not expand:
        return messages
    try:
        for config in probe_configs(study):
            config.variant()
    except ValueError as error:
        return [f"config key 'studies.paged_kv_tma.points': {error}"]
    return []
