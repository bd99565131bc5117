"""Each multicast variant at its best ring, and multicast against the own-copy variants at the
same shape and tile: the comparison the load-only sweep (aggregate.py) and the compute sweep
(compute.py) both make."""
from __future__ import annotations

import numpy as np
import pandas as pd

SHAPE = ["pattern", "working_set", "cluster_x", "cluster_y"]
GROUP = [*SHAPE, "variant", "tile_bytes"]
KNOBS = ["stages", "ctas_per_sm", "consumer_threads", "release", "grid_ctas", "clusters", "max_active_clusters",
         "busy_cta_share"]
MIN_TOLERANCE = 0.01          # two medians closer than 1 % (or their spreads) are a tie
ALTERNATIVES = ("no_cluster", "cluster")



def best_configurations(stream: pd.DataFrame, group: list[str] = GROUP) -> pd.DataFrame:
    stream = stream.assign(relative_iqr=stream.time_us_iqr / stream.time_us_median)
    best = stream.loc[stream.groupby(group)["time_us_median"].idxmin()]
    columns = [*group, *KNOBS, "steps_total", "stage_bytes", "bytes_delivered", "bytes_requested",
               "time_us_median", "relative_iqr", "delivered_gbps", "requested_gbps", "sm_clock_mhz_mean"]
    return best[columns].sort_values(group).reset_index(drop=True)


def _status(ratio: float, tolerance: float) -> str:
    if ratio > 1 + tolerance:
        return "win"
    return "tie" if ratio >= 1 - tolerance else "loss"


def speedups(best: pd.DataFrame, shape: list[str] = SHAPE) -> pd.DataFrame:
    """Multicast against each alternative at the same shape and tile (same work per launch)."""
    wide = best.pivot_table(index=[*shape, "tile_bytes"], columns="variant",
                            values=["time_us_median", "relative_iqr", "delivered_gbps"])
    rows = []
    for index, r in wide.iterrows():
        if "multicast" not in r["time_us_median"] or pd.isna(r["time_us_median"]["multicast"]):
            continue
        row = dict(zip([*shape, "tile_bytes"], index))
        t, spread = r["time_us_median"], r["relative_iqr"]
        for variant in ("multicast", *ALTERNATIVES):
            row[f"{variant}_time_us"] = t.get(variant, np.nan)
            row[f"{variant}_gbps"] = r["delivered_gbps"].get(variant, np.nan)
        for alt in ALTERNATIVES:
            ratio = t[alt] / t["multicast"]
            row[f"speedup_over_{alt}"] = ratio
            row[f"status_vs_{alt}"] = _status(ratio, max(MIN_TOLERANCE, spread[alt] + spread["multicast"]))
        best_alt = min(ALTERNATIVES, key=lambda a: t[a])
        row["best_alternative"] = best_alt
        row["speedup_over_best_alternative"] = t[best_alt] / t["multicast"]
        row["status"] = row[f"status_vs_{best_alt}"]
        rows.append(row)
    return pd.DataFrame(rows)
