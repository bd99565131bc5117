"""TMA against cp.async with the same producer (``matched.csv``, ``matched_summary.csv``).

speedup.csv compares each path at its own best knobs, and the cp.async gather has one knob TMA
lacks: how many warps gather (1 or 4; TMA's loads are issued by one thread of one warp). A
4-warp gather kernel is larger, fits fewer CTAs per SM, and so may launch with fewer KV splits
(splits.py: the split count follows the kernel's resident slots). To see how much of a
cp.async win is the load and how much is that knob, each cell here also times cp.async at one
producer warp, the TMA kernel's own shape:

- ``matched.csv``: per (point, page size) where both paths ran: TMA's best time (its load shape
  ``tma_box``, its splits), cp.async's best over every knob and its best at one producer warp
  (each with its producer warps, splits and resident CTAs per SM), and two ratios, cp.async
  time over TMA time: ``tma_speedup`` (best against best, as speedup.csv) and
  ``tma_speedup_one_warp`` (against the one-warp gather).
- ``matched_summary.csv``: per (phase, TMA load shape): cells; cp.async wins beyond the
  measured-winner rule's tolerance (``WIN``) and how many of those its best kernel gathered with
  more than one warp and launched with fewer splits than TMA's; the median and minimum of both
  ratios.
"""
from __future__ import annotations

import pandas as pd

WIN = 0.99          # cp.async "wins" a cell where TMA's speedup is below this (1 % faster)
MEASURED = "measured"


def with_tma_box(attention: pd.DataFrame) -> pd.DataFrame:
    """``attention`` with its ``tma_box`` column (grid.SweepConfig.tma_box); runs measured before
    the column existed loaded every page with a box per chunk ("chunk"; cp.async rows "none")."""
    if "tma_box" in attention.columns:
        return attention
    return attention.assign(tma_box=attention.load_path.map(lambda path: "chunk" if path == "tma" else "none"))


def _fastest(rows: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    timed = rows[rows.time_us_median.notna()]
    return timed.loc[timed.groupby(keys).time_us_median.idxmin()]


def matched_table(attention: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """One row per cell (``keys``: point and page size) with both paths timed."""
    shown = ["time_us_median", "producer_warps", "num_splits", "resident_ctas_per_sm", "score_layout", "stages"]
    tma = _fastest(attention[attention.load_path == "tma"], keys)[keys + shown + ["tma_box"]]
    gather = attention[attention.load_path == "cp_async"]
    best = _fastest(gather, keys)[keys + shown]
    one = _fastest(gather[gather.producer_warps == 1], keys)[keys + shown]
    table = (tma.add_prefix("tma_").rename(columns={f"tma_{k}": k for k in keys} | {"tma_tma_box": "tma_box"})
             .merge(best.add_prefix("cp_async_").rename(columns={f"cp_async_{k}": k for k in keys}), on=keys)
             .merge(one.add_prefix("cp_async_one_warp_").rename(columns={f"cp_async_one_warp_{k}": k for k in keys}),
                    on=keys, how="left"))
    table["tma_speedup"] = table.cp_async_time_us_median / table.tma_time_us_median
    table["tma_speedup_one_warp"] = table.cp_async_one_warp_time_us_median / table.tma_time_us_median
    return table.sort_values(keys).reset_index(drop=True)


def matched_summary(matched: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (phase, box), cells in matched.groupby(["phase", "tma_box"], sort=True):
        wins = cells[cells.tma_speedup < WIN]
        more_warps = wins[wins.cp_async_producer_warps > 1]
        rows.append({"phase": phase, "tma_box": box, "cells": len(cells), "cp_async_wins": len(wins),
                     "cp_async_wins_with_more_warps": len(more_warps),
                     "cp_async_wins_with_more_warps_and_fewer_splits": int(
                         (more_warps.cp_async_num_splits < more_warps.tma_num_splits).sum()),
                     "fraction_of_wins_with_more_warps": len(more_warps) / len(wins) if len(wins) else float("nan"),
                     "tma_speedup_median": cells.tma_speedup.median(), "tma_speedup_min": cells.tma_speedup.min(),
                     "tma_speedup_one_warp_median": cells.tma_speedup_one_warp.median(),
                     "tma_speedup_one_warp_min": cells.tma_speedup_one_warp.min()})
    return pd.DataFrame(rows)
