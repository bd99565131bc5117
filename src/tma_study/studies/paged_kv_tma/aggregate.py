"""Aggregate the paged_kv_tma probe (derived/*.csv).

Ceilings, from the same run's ceilings.csv: the *read ceiling* is the pure-read stream's best
rate (over its buffers and CTAs-per-SM counts); the *same-bytes read* is its
best rate over a buffer as large as the point's K/V (a transfer of that size, launch and ramp
included); the copy is the device-to-device copy's rate (read + write bytes per second).

- ``producers.csv``: every configuration: its rate (``gbps``: K/V bytes read per second), as a
  fraction of the read ceiling, of the same-bytes read and of the copy, and against the best
  cp.async configuration of the same point and page size (``over_cp_async``: that
  configuration's time over this one's; above 1 is faster), with ``same_launch_as_cp_async``:
  whether it ran at that configuration's residency and split count.
- ``points.csv``: per decode point: the best cp.async rate and the best rate of each TMA shape
  (``best_tma_{box}_gbps``, over page sizes), the best TMA shape and its ratio to cp.async
  (``tma_over_cp_async``; ``chunk_over_cp_async`` for the chunk boxes, the paged_kv sweep's below a tile; ``tile_over_chunk``:
  FlashAttention-3's shape against the sweep's), the best cp.async kernel's producer warps and KV
  splits (``best_cp_async_producer_warps``, ``best_cp_async_num_splits``; ``best_tma_num_splits``),
  the best gather at one producer warp, the TMA kernels' own width (``one_warp_cp_async_gbps``) and
  TMA's best against it (``tma_over_one_warp_cp_async``), the better
  path's rate as a fraction of the read ceiling and of the copy, the read ceiling over the copy
  (``read_over_copy``) and the point's roofline: bytes / read ceiling (``memory_time_us``)
  against flops / the dtype's dense tensor peak (``math_time_us``: config/gpu_specs.yaml, the
  published H200 rate), ``bound`` (memory or math), the bound's K/V rate (``bound_gbps``: bytes
  / the larger time) and the better path's fraction of it (``fraction_of_bound``).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import yaml
from tma_kernels.paged_kv import tma_boxes

from tma_study.atomic import atomic_write_text
from tma_study.config import REPO_ROOT

TMA_BOXES = tuple(tma_boxes.TMA_BOXES)         # every load shape, in the record's order
TENSOR_PEAK_KEY = {"bf16": "bf16_dense_tflops", "e4m3": "fp8_dense_tflops"}
GPU_SPECS = REPO_ROOT / "config" / "gpu_specs.yaml"
REFERENCE_GPU = "h200"
POINT = ["point", "shape", "dtype", "seqlen_q", "batch", "context_tokens"]


def tensor_peaks_tflops(device_name: str | None = None) -> dict[str, float]:
    """dtype -> the published dense tensor-core rate (TFLOP/s) of the GPU named ``device_name`` (as
    its provenance records it) in config/gpu_specs.yaml; the reference GPU's where none matches."""
    from tma_study.paper.projection import spec_key
    specs = yaml.safe_load(GPU_SPECS.read_text())["gpus"]
    spec = specs[spec_key(device_name, specs, REFERENCE_GPU)]
    return {dtype: float(spec[key]) for dtype, key in TENSOR_PEAK_KEY.items()}


def read_ceilings(ceilings: pd.DataFrame) -> tuple[float, dict[int, float], float]:
    """(read ceiling GB/s: the read stream's best, {bytes: best same-bytes read GB/s}, copy GB/s)."""
    ok = ceilings[ceilings.timing_status == "ok"]
    reads = ok[ok.ceiling == "read_stream"]
    by_bytes = reads.groupby("bytes_moved").gbps.max()
    copy = ok[ok.ceiling == "d2d_copy"].gbps
    copy_gbps = float(copy.max()) if len(copy) else float("nan")
    return float(by_bytes.max()), {int(b): float(g) for b, g in by_bytes.items()}, copy_gbps


def producers_table(attention: pd.DataFrame, ceilings: pd.DataFrame) -> pd.DataFrame:
    read, same_bytes, copy = read_ceilings(ceilings)
    rows = attention[attention.timing_status == "ok"].copy()
    rows["fraction_of_read_ceiling"] = rows.gbps / read
    rows["fraction_of_same_bytes_read"] = rows.gbps / rows.bytes_moved.map(same_bytes)
    rows["fraction_of_d2d_copy"] = rows.gbps / copy
    cp = rows[rows.load_path == "cp_async"]
    best_cp = cp.loc[cp.groupby(["point", "page_size"]).time_us_median.idxmin()].set_index(["point", "page_size"])
    reference = best_cp.reindex(pd.MultiIndex.from_frame(rows[["point", "page_size"]]))
    rows["cp_async_time_us"] = reference.time_us_median.to_numpy()
    rows["over_cp_async"] = rows.cp_async_time_us / rows.time_us_median
    rows["same_launch_as_cp_async"] = ((reference.resident_ctas_per_sm.to_numpy() == rows.resident_ctas_per_sm)
                                       & (reference.num_splits.to_numpy() == rows.num_splits))
    keep = [*POINT, "page_size", "load_path", "tma_box", "producer", "producer_warps", "score_layout", "stages",
            "block_n", "registers", "resident_ctas_per_sm", "num_splits", "time_us_median", "time_us_q1",
            "time_us_q3", "gbps", "fraction_of_read_ceiling", "fraction_of_same_bytes_read", "fraction_of_d2d_copy",
            "cp_async_time_us", "over_cp_async", "same_launch_as_cp_async"]
    return rows[keep].sort_values([*POINT[:1], "page_size", "load_path", "producer"]).reset_index(drop=True)


def points_table(producers: pd.DataFrame, attention: pd.DataFrame, ceilings: pd.DataFrame,
                 device_name: str | None = None) -> pd.DataFrame:
    read, _, copy = read_ceilings(ceilings)
    peaks = tensor_peaks_tflops(device_name)
    work = attention.groupby("point")[["bytes_moved", "flops"]].first()
    rows = []
    for key, cell in producers.groupby(POINT, sort=True):
        row = dict(zip(POINT, key))
        cp = cell[cell.load_path == "cp_async"]
        tma = cell[cell.load_path == "tma"]
        row["best_cp_async_gbps"] = cp.gbps.max()
        if len(cp):     # the gather's best kernel: its producer warps and KV splits
            best_cp = cp.loc[cp.gbps.idxmax()]
            row["best_cp_async_producer_warps"] = int(best_cp.producer_warps)
            row["best_cp_async_num_splits"] = int(best_cp.num_splits)
        # the gather with one producer warp, the TMA kernels' own producer (the same residency and splits)
        row["one_warp_cp_async_gbps"] = cp[cp.producer_warps == 1].gbps.max()
        for box in TMA_BOXES:
            row[f"best_tma_{box}_gbps"] = tma[tma.tma_box == box].gbps.max()
        top = tma.loc[tma.gbps.idxmax()] if len(tma) else None
        row["best_tma_box"] = top.tma_box if top is not None else "none"
        row["best_tma_gbps"] = tma.gbps.max()
        row["best_tma_num_splits"] = int(top.num_splits) if top is not None else None
        row["tma_over_cp_async"] = row["best_tma_gbps"] / row["best_cp_async_gbps"]
        row["tma_over_one_warp_cp_async"] = row["best_tma_gbps"] / row["one_warp_cp_async_gbps"]
        row["chunk_over_cp_async"] = row["best_tma_chunk_gbps"] / row["best_cp_async_gbps"]
        row["tile_over_chunk"] = row["best_tma_tile_gbps"] / row["best_tma_chunk_gbps"]
        row["best_gbps"] = cell.gbps.max()
        row["best_load_path"] = cell.loc[cell.gbps.idxmax()].load_path
        row.update({"read_ceiling_gbps": read, "d2d_copy_gbps": copy, "read_over_copy": read / copy,
                    "fraction_of_read_ceiling": row["best_gbps"] / read,
                    "fraction_of_d2d_copy": row["best_gbps"] / copy})
        kv_bytes, flops = (float(v) for v in work.loc[row["point"]])
        memory_us = kv_bytes / (read * 1e3)
        math_us = flops / (peaks[row["dtype"]] * 1e6)
        bound_us = max(memory_us, math_us)
        row.update({"kv_bytes": int(kv_bytes), "flops": int(flops), "flops_per_kv_byte": flops / kv_bytes,
                    "tensor_peak_tflops": peaks[row["dtype"]], "memory_time_us": memory_us, "math_time_us": math_us,
                    "bound": "memory" if memory_us >= math_us else "math", "bound_gbps": kv_bytes / (bound_us * 1e3),
                    "fraction_of_bound": row["best_gbps"] / (kv_bytes / (bound_us * 1e3))})
        rows.append(row)
    return pd.DataFrame(rows)


def aggregate(raw_dir: Path, derived_dir: Path, repeat_dir: Path | None = None) -> None:
    from tma_study.harness import raw_data

    from . import STUDY
    raw = raw_data.load(STUDY, Path(raw_dir))            # checked before anything is written
    derived_dir = Path(derived_dir)
    derived_dir.mkdir(parents=True, exist_ok=True)
    attention, ceilings = raw["attention.csv"], raw["ceilings.csv"]
    producers = producers_table(attention, ceilings)
    atomic_write_text(derived_dir / "producers.csv", producers.to_csv(index=False))
    device = raw.provenance.get("gpu", {}).get("name")
    atomic_write_text(derived_dir / "points.csv",
                      points_table(producers, attention, ceilings, device).to_csv(index=False))
