"""The paged_kv_tma study's numbers for the paper's text (entry point ``macros``).

Names: ``pagedKvTma<What>`` over the run, and per decode point
``pagedKvTma<What><Shape><Dtype>Q<tokens>`` (digits spelled out by ``camel``), e.g.
``pagedKvTmaTmaOverCpAsyncLlamathreeSevenzerobBfonesixQfour``.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.report.numbers import camel, number, percent, ratio

def point_words(point: str) -> tuple[str, ...]:
    """'llama3_70b/bf16/q4' -> the words of its macro names (camel spells the digits)."""
    return tuple(point.split("/"))


def macros(derived_dir: Path, provenance: dict) -> dict[str, str]:
    points = pd.read_csv(Path(derived_dir) / "points.csv")
    producers = pd.read_csv(Path(derived_dir) / "producers.csv")
    out = {camel("paged kv tma", "configurations"): number(provenance.get("configurations", float("nan"))),
           camel("paged kv tma", "points"): number(len(points)),
           camel("paged kv tma", "read ceiling gbps"): number(points.read_ceiling_gbps.iloc[0]),
           camel("paged kv tma", "copy gbps"): number(points.d2d_copy_gbps.iloc[0]),
           camel("paged kv tma", "read over copy"): ratio(points.read_over_copy.iloc[0]),
           camel("paged kv tma", "tma over cp async min"): ratio(points.tma_over_cp_async.min()),
           camel("paged kv tma", "tma over cp async max"): ratio(points.tma_over_cp_async.max()),
           camel("paged kv tma", "chunk over cp async min"): ratio(points.chunk_over_cp_async.min()),
           camel("paged kv tma", "tile over chunk max"): ratio(points.tile_over_chunk.max()),
           camel("paged kv tma", "tma faster points"): number(int((points.tma_over_cp_async > 1).sum())),
           camel("paged kv tma", "memory bound points"): number(int((points.bound == "memory").sum())),
           camel("paged kv tma", "read fraction min"): percent(points.fraction_of_read_ceiling.min()),
           camel("paged kv tma", "read fraction max"): percent(points.fraction_of_read_ceiling.max()),
           camel("paged kv tma", "same launch configurations"):
               number(int(producers.same_launch_as_cp_async.astype(str).str.lower().eq("true").sum()))}
    if "tma_over_one_warp_cp_async" in points:      # the one-warp gather, TMA's own producer width
        wider = points[points.tma_over_cp_async < 1]
        out |= {camel("paged kv tma", "tma over one warp min"): ratio(points.tma_over_one_warp_cp_async.min()),
                camel("paged kv tma", "tma over one warp max"): ratio(points.tma_over_one_warp_cp_async.max()),
                camel("paged kv tma", "slower points"): number(len(wider)),
                camel("paged kv tma", "slower points four warps"):
                    number(int((wider.best_cp_async_producer_warps > 1).sum()))}
    for r in points.itertuples():
        words = point_words(r.point)
        if "tma_over_one_warp_cp_async" in points:
            out |= {camel("paged kv tma", "tma over one warp", *words): ratio(r.tma_over_one_warp_cp_async),
                    camel("paged kv tma", "cp async warps", *words): number(r.best_cp_async_producer_warps),
                    camel("paged kv tma", "cp async splits", *words): number(r.best_cp_async_num_splits),
                    camel("paged kv tma", "tma splits", *words): number(r.best_tma_num_splits)}
        out[camel("paged kv tma", "tma over cp async", *words)] = ratio(r.tma_over_cp_async)
        out[camel("paged kv tma", "chunk over cp async", *words)] = ratio(r.chunk_over_cp_async)
        out[camel("paged kv tma", "best box", *words)] = r.best_tma_box.replace("_", " ")
        out[camel("paged kv tma", "read percent", *words)] = percent(r.fraction_of_read_ceiling)
        out[camel("paged kv tma", "bound percent", *words)] = percent(r.fraction_of_bound)
    return out
