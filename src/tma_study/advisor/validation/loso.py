"""Leave one study out: the paged_kv and gemm studies' winners, as operands the advisor never saw.

Each case is one measured comparison of the study: TMA against cp.async, each at its best
configuration of the study's sweep (paged_kv: ``derived/speedup.csv``; gemm: the ``best`` rows
of ``derived/speedup.csv``). The interval of each time ratio comes from the raw rows' quartiles
(the studies keep no samples). The operand is the K/V tile (paged_kv) or the A/B tiles (gemm) of
the TMA variant's configuration, described as a kernel author would describe it:

- paged_kv: decode reads every K/V page once (``hbm``), prefill re-reads each page for every
  query tile (``l2``); a box of min(page size, the tile's rows) x head dim; in flight per SM:
  stages x the K and V tiles x resident CTAs; an MMA of (query rows per CTA) x tile x head dim.
- gemm: every tile is re-read by a row or column of CTAs (``l2``); a box of tile M x tile K; in
  flight per SM: CUTLASS's stages x the A and B tiles (one CTA per SM); an MMA of the CTA tile.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from .cases import QUARTILES, finish, quartile_interval

PAGED_KEYS = ["shape", "q_heads", "kv_heads", "head_dim", "dtype", "phase", "batch", "seqlen_q", "context_tokens",
              "page_size"]
ELEMENT_BYTES = {"bf16": 2, "e4m3": 1, "fp8_e4m3": 1}
MMA_DTYPE = {"bf16": "bf16", "e4m3": "fp8", "fp8_e4m3": "fp8"}


def _best_rows(attention: pd.DataFrame, chosen: pd.DataFrame, path: str) -> pd.DataFrame:
    """The raw row behind each chosen configuration of ``path`` (matched by keys and median)."""
    raw = attention[attention.load_path == path]
    merged = chosen[PAGED_KEYS + [f"{path}_time_us"]].merge(
        raw, left_on=PAGED_KEYS + [f"{path}_time_us"], right_on=PAGED_KEYS + ["time_us_median"], how="left")
    return merged.drop_duplicates(PAGED_KEYS).set_index(PAGED_KEYS)


def paged_kv_cases(study_dir: Path) -> pd.DataFrame:
    study_dir = Path(study_dir)
    speedup = pd.read_csv(study_dir / "derived" / "speedup.csv")
    both = speedup[(speedup.tma_status == "measured") & (speedup.cp_async_status == "measured")]
    attention = pd.read_csv(study_dir / "attention.csv")
    tma, cp = _best_rows(attention, both, "tma"), _best_rows(attention, both, "cp_async")
    rows = []
    for r in both.itertuples(index=False):
        key = tuple(getattr(r, k) for k in PAGED_KEYS)
        t, c = tma.loc[key], cp.loc[key]
        element = ELEMENT_BYTES[r.dtype]
        rows_per_tile = int(min(r.page_size, t.block_n))
        low, high = quartile_interval(r.tma_time_us, t.time_us_iqr, t.samples, r.cp_async_time_us,
                                      c.time_us_iqr, c.samples)
        rows.append({
            "set": "leave_one_study_out", "family": f"paged_kv {r.phase}",
            "case": f"{r.shape} {r.dtype} {r.phase} q{r.seqlen_q} b{r.batch} ctx{r.context_tokens} p{r.page_size}",
            "level": "hbm" if r.phase == "decode" else "l2", "shape": "box",
            "box_dims": f"{rows_per_tile}x{r.head_dim}", "element_bytes": element,
            "bytes_in_flight_per_sm": int(t.stages * 2 * t.block_n * r.head_dim * element * t.resident_ctas_per_sm),
            "pattern": "streaming", "cluster_sharing": 1, "consumer": "mma", "mma_dtype": MMA_DTYPE[r.dtype],
            "mma_tile": f"{int(t.rows_per_warp * t.consumer_warps)}x{int(t.block_n)}x{r.head_dim}",
            "alternative": "cp_async", "tma_time_us": r.tma_time_us, "alternative_time_us": r.cp_async_time_us,
            "ratio": r.tma_time_us / r.cp_async_time_us, "ratio_low": low, "ratio_high": high,
            "interval_method": QUARTILES, "fa3_load_path": r.fa3_load_path})
    return finish(pd.DataFrame(rows))


def gemm_cases(study_dir: Path) -> pd.DataFrame:
    study_dir = Path(study_dir)
    speedup = pd.read_csv(study_dir / "derived" / "speedup.csv")
    best = speedup[(speedup.compared == "best") & (speedup.arch == "sm90")]
    raw = pd.read_csv(study_dir / "gemm.csv").set_index(["variant", "shape"])
    kernels = pd.read_csv(study_dir / "kernels.csv").set_index("variant")
    rows = []
    for r in best.itertuples(index=False):
        t, c, k = raw.loc[(r.tma_variant, r.shape)], raw.loc[(r.cpasync_variant, r.shape)], kernels.loc[r.tma_variant]
        element = ELEMENT_BYTES[r.dtype]
        tile_m, tile_n, tile_k = int(k.tile_m), int(k.tile_n), int(k.tile_k)
        low, high = quartile_interval(t.time_us_median, t.time_us_iqr, t.samples, c.time_us_median,
                                      c.time_us_iqr, c.samples)
        rows.append({
            "set": "leave_one_study_out", "family": "gemm", "case": f"{r.dtype} {r.shape}",
            "level": "l2", "shape": "box", "box_dims": f"{tile_m}x{tile_k}", "element_bytes": element,
            "bytes_in_flight_per_sm": int(k.abi_stages * (tile_m + tile_n) * tile_k * element),
            "pattern": "streaming", "cluster_sharing": 1, "consumer": "mma", "mma_dtype": MMA_DTYPE[r.dtype],
            "mma_tile": f"{tile_m}x{tile_n}x{tile_k}", "alternative": "cp_async",
            "tma_time_us": t.time_us_median, "alternative_time_us": c.time_us_median,
            "ratio": t.time_us_median / c.time_us_median, "ratio_low": low, "ratio_high": high,
            "interval_method": QUARTILES, "fa3_load_path": ""})
    return finish(pd.DataFrame(rows))
