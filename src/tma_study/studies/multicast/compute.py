"""The multicast study's compute sweep, analysed (CPU only): derived ``compute.csv`` and
``compute_boundary.csv``.

Raw ``compute.csv`` (grid.ComputeConfig): the GEMM-like 2-D pattern with a consumer that
churns every loaded word ``work_rounds`` times, every cluster reading its own tiles (``spread``)
or all clusters the same tile sequence (``shared``). Per (working set, tile order, work rounds,
cluster shape, tile), multicast is compared with the better own-copy variant as in the load-only
sweep (comparison.speedups), and each row carries the two quantities a kernel author can compute
for their own kernel:

- ``consumer_to_load``: the consumer's time per stage over the load time per stage. Load time =
  the 1x1 own-copy ring's time per stage with no work (work_rounds 0); consumer time = the
  stage's IMADs at the SM's IMAD rate, measured by the 1x1 ring at the largest work_rounds
  (where the consumer, not the load, sets the pace) at the same working set, order and tile.
- ``l2_read_fraction``: the better own-copy variant's L2 read rate (own copies read every
  delivered byte from L2: its requested GB/s) over ``l2_read_ceiling_gbps``, the highest L2 read
  rate any own-copy configuration of the sweep reached.

``compute_boundary.csv``, per cluster shape: the smallest ``l2_read_fraction`` from which
multicast never loses and wins at least once (over working sets, orders, tiles and work rounds),
and the range of ``consumer_to_load`` over its wins: the boundary the gemm study's rule uses
(gemm/predict.py).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .comparison import best_configurations, speedups

NOT_MEASURED = "not measured: no compute sweep in this run (compute.csv absent)"
REGIME = ["working_set", "tile_order", "work_rounds"]
SHAPE = [*REGIME, "cluster_x", "cluster_y"]
GROUP = [*SHAPE, "variant", "tile_bytes"]
BASE = ["working_set", "tile_order", "tile_bytes"]          # where the 1x1 ring's rates are taken
OWN_COPIES = ("no_cluster", "cluster")


def _not_measured() -> pd.DataFrame:
    return pd.DataFrame({"status": [NOT_MEASURED]})


def stage_rates(best: pd.DataFrame) -> pd.DataFrame:
    """Per (working set, order, tile): the 1x1 ring's load time per stage (work_rounds 0) and its
    IMADs per ns at the largest work_rounds."""
    base = best[(best.variant == "no_cluster") & (best.cluster_x == 1) & (best.cluster_y == 1)]
    rows = []
    for key, group in base.groupby(BASE):
        idle, busy = group[group.work_rounds == 0], group.loc[group.work_rounds.idxmax()]
        rows.append({**dict(zip(BASE, key)),
                     "load_ns_per_stage": float(idle.stage_time_ns.iloc[0]) if len(idle) else np.nan,
                     "imads_per_ns": (busy.stage_bytes / 4 * busy.work_rounds / busy.stage_time_ns
                                      if busy.work_rounds > 0 else np.nan)})
    return pd.DataFrame(rows, columns=[*BASE, "load_ns_per_stage", "imads_per_ns"])


def compute_speedups(rows: pd.DataFrame | None) -> pd.DataFrame:
    """Derived compute.csv from the raw compute rows whose timing is ok (None: not measured)."""
    if rows is None or rows.empty:
        return _not_measured()
    best = best_configurations(rows, GROUP)
    best["stage_time_ns"] = best.time_us_median * 1e3 * best.clusters / best.steps_total
    table = speedups(best, SHAPE)
    if table.empty:
        return _not_measured()
    table = table.rename(columns={"status": "multicast_status"})      # win / tie / loss vs the better own copy
    own = best[best.variant.isin(OWN_COPIES)]
    ceiling = float(own.requested_gbps.max())
    alternative = best.set_index([*SHAPE, "tile_bytes", "variant"])
    table["own_copy_l2_read_gbps"] = [alternative.requested_gbps[(*r[[*SHAPE, "tile_bytes"]], r.best_alternative)]
                                      for _, r in table.iterrows()]
    table["l2_read_ceiling_gbps"] = ceiling
    table["l2_read_fraction"] = table.own_copy_l2_read_gbps / ceiling
    table = table.merge(stage_rates(best), on=BASE, how="left")
    stage_bytes = table.tile_bytes * 2                         # A and B tiles of equal size
    table["consumer_ns_per_stage"] = stage_bytes / 4 * table.work_rounds / table.imads_per_ns
    table["consumer_to_load"] = table.consumer_ns_per_stage / table.load_ns_per_stage
    table["cluster_size"] = table.cluster_x * table.cluster_y
    table.insert(0, "status", "measured")
    return table


def boundary(compute: pd.DataFrame) -> pd.DataFrame:
    """Per cluster shape: from which L2 read fraction multicast never loses and wins (derived
    compute_boundary.csv); a not-measured compute.csv gives a not-measured row."""
    if "l2_read_fraction" not in compute.columns:
        return _not_measured()
    rows = []
    for (x, y), group in compute.groupby(["cluster_x", "cluster_y"]):
        group = group.sort_values("l2_read_fraction")
        fractions = group.l2_read_fraction.to_numpy()
        verdict = group.multicast_status.to_numpy()
        wins = group[group.multicast_status == "win"]
        start = next((i for i in range(len(fractions)) if (verdict[i:] != "loss").all() and (verdict[i:] == "win").any()),
                     None)
        rows.append({"status": "measured", "cluster_x": x, "cluster_y": y, "cluster_size": x * y,
                     "rows": len(group), "wins": len(wins), "losses": int((group.multicast_status == "loss").sum()),
                     "max_speedup": float(group.speedup_over_best_alternative.max()),
                     "has_boundary": start is not None,
                     "win_from_l2_read_fraction": float(fractions[start]) if start is not None else np.nan,
                     "below_it_l2_read_fraction": float(fractions[start - 1]) if start else np.nan,
                     "wins_min_consumer_to_load": float(wins.consumer_to_load.min()) if len(wins) else np.nan,
                     "wins_max_consumer_to_load": float(wins.consumer_to_load.max()) if len(wins) else np.nan,
                     "l2_read_ceiling_gbps": float(group.l2_read_ceiling_gbps.iloc[0])})
    return pd.DataFrame(rows)
