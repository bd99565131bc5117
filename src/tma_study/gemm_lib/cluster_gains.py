"""A cluster variant's gains over its 1x1 sibling, round by round, at the default and best tile
orders (pure; pandas): what the gemm_cluster study derives from its samples (its
``configurations.csv`` and ``gains.csv``) and the gemm_cluster_counters study reads beside its
counters (the best order it profiles, the fair gain and verdict it scores its rule against).

A *gain* of configuration X over configuration B of the same shape is B's time over X's, taken
round by round (both ran in the same round, so in the same power state): the median of the
per-round gains, its *spread* their interquartile range over their median, and its verdict a
``win`` above 1 + tolerance, a ``loss`` below 1 - tolerance, else a ``tie``, with tolerance = the
larger of TIE_TOLERANCE and the spread. A variant's *best order* is its tile order (swizzle,
raster order) with the highest median TFLOP/s over the rounds (ties: smaller swizzle, then config
order); the *default order* is swizzle 1 with the heuristic raster order (DEFAULT_ORDER, CUTLASS's
default and the gemm study's).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .cluster_configs import DEFAULT_ORDER
from .rows import BYTES_PER_ELEMENT, TIE_TOLERANCE
from .verdicts import gemm_verdict as _gemm_verdict

SHAPE = ["dtype", "size"]
VARIANT = SHAPE + ["family", "mainloop", "tile", "cluster", "variant"]
ORDER = ["swizzle", "raster_order"]
ONE_BY_ONE = "1x1"
RAW_ORDER = {"heuristic": 0, "along_m": 1, "along_n": 2}


def _quartiles(values: pd.Series, prefix: str) -> dict:
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return {f"{prefix}_median": median, f"{prefix}_q1": q1, f"{prefix}_q3": q3, f"{prefix}_relative_iqr": (q3 - q1) / median}


def configurations(samples: pd.DataFrame) -> pd.DataFrame:
    """Per (shape, variant, tile order): medians over the rounds, and whether it is the variant's best order."""
    rows = []
    for key, group in samples.groupby(VARIANT + ORDER, sort=False):
        rows.append({**dict(zip(VARIANT + ORDER, key)), "rounds": len(group), "launches": int(group.launches.max()),
                     **_quartiles(group.time_us, "time_us"), "tflops_median": group.tflops.median(),
                     "sm_clock_mhz_median": group.sm_clock_mhz_mean.median(),
                     "power_w_median": group.power_w_mean.median(), "temperature_c_max": group.temperature_c.max(),
                     "power_capped_fraction": float(group.power_capped.astype(bool).mean()),
                     "is_default_order": (int(key[-2]), key[-1]) == DEFAULT_ORDER})
    out = pd.DataFrame(rows)
    out["raster_rank"] = out.raster_order.map(RAW_ORDER)
    out = out.sort_values(SHAPE + ["family", "cluster", "swizzle", "raster_rank"]).reset_index(drop=True)
    best = out.sort_values(["time_us_median", "swizzle", "raster_rank"]).groupby(VARIANT, sort=False).head(1).index
    out["is_best_order"] = out.index.isin(best)
    return out.drop(columns="raster_rank")


def per_round(samples: pd.DataFrame) -> pd.Series:
    """time_us indexed by (variant, size, swizzle, raster_order, round)."""
    return samples.set_index(["variant", "size", "swizzle", "raster_order", "round"]).time_us.sort_index()


def gain(times: pd.Series, mine: tuple, base: tuple) -> dict:
    """Round-by-round gain of configuration ``mine`` over ``base`` ((variant, size, swizzle, raster)):
    base time / mine time in each round both ran, its median, quartiles, spread and verdict."""
    ratio = (times.loc[base] / times.loc[mine]).dropna()
    if ratio.empty:
        return {"gain": np.nan, "gain_q1": np.nan, "gain_q3": np.nan, "spread": np.nan, "tolerance": np.nan,
                "verdict": "", "rounds_paired": 0}
    q = _quartiles(ratio, "gain")
    spread = q["gain_relative_iqr"]
    return {"gain": q["gain_median"], "gain_q1": q["gain_q1"], "gain_q3": q["gain_q3"], "spread": spread,
            "tolerance": max(TIE_TOLERANCE, spread),
            "verdict": _gemm_verdict(pd.Series([q["gain_median"]]), pd.Series([spread])).iloc[0],
            "rounds_paired": len(ratio)}


def prefixed(values: dict, prefix: str) -> dict:
    return {(f"{prefix}_gain" if k == "gain" else f"{prefix}_{k}"): v for k, v in values.items()}


def best_and_default(configs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(best, default) configuration row of each (shape, variant), indexed by (variant, size)."""
    best = configs[configs.is_best_order].set_index(["variant", "size"])
    default = configs[configs.is_default_order].set_index(["variant", "size"])
    return best, default


def siblings(configs: pd.DataFrame) -> pd.DataFrame:
    """(cluster variant, its 1x1 sibling, size) of every cluster variant whose sibling was timed."""
    variants = configs.drop_duplicates(["variant", "size"])
    ones = variants[variants.cluster == ONE_BY_ONE].set_index(SHAPE + ["family"]).variant
    pairs = variants[variants.cluster != ONE_BY_ONE].copy()
    pairs["sibling"] = [ones.get((r.dtype, r.size, r.family)) for r in pairs.itertuples()]
    return pairs[pairs.sibling.notna()]


def _cluster_exceeds_tiles(size: int, tile: str, cluster: str) -> bool:
    tile_m, tile_n, _ = map(int, tile.split("x"))
    cluster_m, cluster_n = map(int, cluster.split("x"))
    return bool(np.ceil(size / tile_m) < cluster_m or np.ceil(size / tile_n) < cluster_n)


def gains(samples: pd.DataFrame, configs: pd.DataFrame) -> pd.DataFrame:
    """Per (shape, cluster variant): default_gain, fair_gain, one_order_gain, cluster_order_gain."""
    times, (best, default) = per_round(samples), best_and_default(configs)
    rows = []
    for p in siblings(configs).itertuples():
        cluster_m, cluster_n = map(int, p.cluster.split("x"))
        tile_m, _, tile_k = map(int, p.tile.split("x"))
        mine_best, one_best = best.loc[(p.variant, p.size)], best.loc[(p.sibling, p.size)]
        mb = (p.variant, p.size, int(mine_best.swizzle), mine_best.raster_order)
        ob = (p.sibling, p.size, int(one_best.swizzle), one_best.raster_order)
        md, od = (p.variant, p.size, *DEFAULT_ORDER), (p.sibling, p.size, *DEFAULT_ORDER)
        have_default = (p.variant, p.size) in default.index and (p.sibling, p.size) in default.index
        row = {**{k: getattr(p, k) for k in VARIANT}, "sibling": p.sibling, "cluster_m": cluster_m,
               "cluster_n": cluster_n, "a_tile_bytes": tile_m * tile_k * BYTES_PER_ELEMENT[p.dtype],
               "cluster_exceeds_tiles": _cluster_exceeds_tiles(p.size, p.tile, p.cluster),
               "best_swizzle": int(mine_best.swizzle), "best_raster_order": mine_best.raster_order,
               "one_best_swizzle": int(one_best.swizzle), "one_best_raster_order": one_best.raster_order,
               "best_tflops": mine_best.tflops_median, "one_best_tflops": one_best.tflops_median,
               "clock_ratio_best": mine_best.sm_clock_mhz_median / one_best.sm_clock_mhz_median,
               **prefixed(gain(times, mb, ob), "fair")}
        if have_default:
            row.update({"default_tflops": default.loc[(p.variant, p.size)].tflops_median,
                        "one_default_tflops": default.loc[(p.sibling, p.size)].tflops_median,
                        "clock_ratio_default": (default.loc[(p.variant, p.size)].sm_clock_mhz_median
                                                / default.loc[(p.sibling, p.size)].sm_clock_mhz_median),
                        **prefixed(gain(times, md, od), "default"),
                        **prefixed(gain(times, ob, od), "one_order"),
                        **prefixed(gain(times, mb, md), "cluster_order")})
        rows.append(row)
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    if "default_gain" in out:
        # the share of the default comparison's gain that the fair one loses, where there was a gain to lose
        excess = out.default_gain - 1
        share = 1 - (out.fair_gain - 1) / excess
        out["order_share_of_gain"] = share.where(out.default_verdict == "win")
    return out.sort_values(SHAPE + ["family", "cluster"]).reset_index(drop=True)
