"""Ties decided by a bootstrap interval of the per-round gain (measurement.md: "ties by intervals").

For each comparison of gains.csv, default and fair: the per-round gain (the base's time over the
variant's, both timed in the same round) resampled over the rounds (tma_study.bootstrap, one seed),
the 95 % interval of its median, and the verdict it gives: a tie where the interval contains 1 or
lies within the gemm study's TIE_TOLERANCE of it, else a win or a loss. The verdicts of gains.csv
(``*_verdict``: the median against the larger of TIE_TOLERANCE and the rounds' relative IQR) stay
beside them, as the claims registered on them read them.
"""
from __future__ import annotations

import pandas as pd

from tma_study.bootstrap import interval_verdict, median_ratio_interval
from tma_study.gemm_lib.rows import TIE_TOLERANCE

PAIRS = {"fair": (("variant", "best_swizzle", "best_raster_order"), ("sibling", "one_best_swizzle",
                                                                       "one_best_raster_order")),
         "default": (("variant", None, None), ("sibling", None, None))}


def _key(row, names, size, default_order) -> tuple:
    variant, swizzle, raster = names
    if swizzle is None:
        return (getattr(row, variant), size, *default_order)
    return (getattr(row, variant), size, int(getattr(row, swizzle)), getattr(row, raster))


def with_intervals(gain_rows: pd.DataFrame, times: pd.Series, default_order: tuple) -> pd.DataFrame:
    """``gain_rows`` with ``{fair,default}_gain_low``, ``..._gain_high`` and ``..._verdict_interval``."""
    out = gain_rows.copy()
    for prefix, (mine_names, base_names) in PAIRS.items():
        if f"{prefix}_gain" not in out:
            continue
        lows, highs, verdicts = [], [], []
        for r in out.itertuples():
            if pd.isna(getattr(r, f"{prefix}_gain")):
                lows.append(float("nan")), highs.append(float("nan")), verdicts.append("")
                continue
            base = times.loc[_key(r, base_names, r.size, default_order)]
            mine = times.loc[_key(r, mine_names, r.size, default_order)]
            paired = pd.concat([base, mine], axis=1, keys=["base", "mine"]).dropna()
            _, low, high = median_ratio_interval(paired.base.to_numpy(), paired.mine.to_numpy())
            lows.append(low), highs.append(high), verdicts.append(interval_verdict(low, high, TIE_TOLERANCE))
        out[f"{prefix}_gain_low"], out[f"{prefix}_gain_high"] = lows, highs
        out[f"{prefix}_verdict_interval"] = verdicts
    return out
