"""Do the microbenchmark studies' rules predict the GEMM winners? (``rules.csv`` of the gemm study)

Each rule is taken from the other study's own analysis of its own raw data beside this run
(``results/<label>/<study>/``), computed by that study's aggregate functions, so it is the
same table the other study writes to its ``derived/`` folder. Nothing here types a threshold:

- crossover: a TMA copy of the GEMM's A tile (tile M x tile K elements) at least the crossover
  transfer size -> TMA wins, else cp.async (the crossover study's ``crossover.csv``, cp.async
  alternative, best ring). Scored on the same-configuration (1x1) TMA vs cp.async comparisons;
  ties count as neither right nor wrong. Comparisons whose TMA variant spills registers (ptxas,
  kernels.csv) while its cp.async partner does not are counted apart: they time the spills.
- multicast: the 2-D (GEMM-like: A shared along the cluster's N, B along its M) pattern's verdict
  for multicast against own copies without a cluster launch (the multicast study's
  ``speedup.csv``: win, tie or loss within its own tolerance), at the GEMM's cluster shape
  (multicast x = GEMM M, y = GEMM N) and A tile bytes, per operand location (HBM, L2). Scored on
  each TMA cluster variant's gain over the same variant at 1x1 (win, tie or loss within
  TIE_TOLERANCE or the runs' spread). Comparisons where the cluster exceeds the problem's tile
  grid are left out (CTAs without a tile: the multicast pattern has none) and counted.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from tma_study.harness import raw_data
from tma_study.studies.crossover import STUDY as CROSSOVER_STUDY
from tma_study.studies.crossover import aggregate as crossover_aggregate
from tma_study.studies.multicast import STUDY as MULTICAST_STUDY
from tma_study.studies.multicast import aggregate as multicast_aggregate

from .rows import BYTES_PER_ELEMENT, MEASURED, NOT_MEASURED_TEXT, TIE_TOLERANCE

EVERY_CLUSTER = "every cluster"


def crossover_verdicts(crossover_raw: Path) -> pd.DataFrame | None:
    """The crossover study's TMA-vs-cp.async crossovers (HBM and L2, best ring), or None."""
    if not (crossover_raw / "stream.csv").exists():
        return None
    raw = raw_data.load(CROSSOVER_STUDY, crossover_raw)
    ceilings = crossover_aggregate.best_ceilings(raw_data.ok_rows(raw["ceilings.csv"]))
    table = crossover_aggregate.crossovers(crossover_aggregate.best_configurations(
        raw_data.ok_rows(raw["stream.csv"]), ceilings, raw.provenance["gpu"].get("sm_count")))
    return table[(table.alternative == "cp_async") & (table.ring_bytes_per_sm == crossover_aggregate.ANY_RING)]


def multicast_verdicts(multicast_raw: Path) -> pd.DataFrame | None:
    """The multicast study's 2-D pattern verdicts (its speedup.csv rows), or None without its data."""
    if not (multicast_raw / "stream.csv").exists():
        return None
    return multicast_stream_verdicts(raw_data.ok_rows(raw_data.load(MULTICAST_STUDY, multicast_raw)["stream.csv"]))


def multicast_stream_verdicts(stream: pd.DataFrame) -> pd.DataFrame:
    """The 2-D pattern verdicts of the multicast study's (checked, timed) stream rows."""
    table = multicast_aggregate.speedups(multicast_aggregate.best_configurations(stream))
    return table[table.pattern == "2d"]


def _fraction(part: int, whole: int) -> float:
    return float(part / whole) if whole else np.nan


def score_crossover(speedups: pd.DataFrame, verdicts: pd.DataFrame | None) -> list[dict]:
    same = speedups[speedups.compared != "best"] if len(speedups) else speedups
    if verdicts is None or verdicts.empty:
        return [{"rule": "crossover", "status": NOT_MEASURED_TEXT + ": no crossover raw data beside this run"}]
    if same.empty:
        return [{"rule": "crossover", "status": NOT_MEASURED_TEXT + ": no TMA/cp.async pair was measured"}]
    tile_m = same.tile.str.split("x").str[0].astype(int)
    tile_k = same.tile.str.split("x").str[2].astype(int)
    transfer = tile_m * tile_k * same.dtype.map(BYTES_PER_ELEMENT)
    spills = (same.get("tma_spill_store_bytes", pd.Series(0, index=same.index)).fillna(0) > 0) \
        & (same.get("cpasync_spill_store_bytes", pd.Series(0, index=same.index)).fillna(0) == 0)
    rows = []
    for ws in verdicts.working_set.unique():
        threshold = verdicts[verdicts.working_set == ws].iloc[0].crossover_bytes
        predicted = np.where(np.isnan(threshold), "cpasync", np.where(transfer >= threshold, "tma", "cpasync"))
        decided = same.winner != "tie"
        right = (predicted == same.winner) & decided
        clean = decided & ~spills
        rows.append({"rule": "crossover", "status": MEASURED, "working_set": ws, "scope": "same schedule and tile, 1x1",
                     "crossover_bytes": threshold, "comparisons": len(same), "ties": int((~decided).sum()),
                     "predicted_right": int(right.sum()), "predicted_wrong": int((decided & ~right).sum()),
                     "fraction_right_of_decided": _fraction(int(right.sum()), int(decided.sum())),
                     "tma_spills": int(spills.sum()), "wrong_where_tma_spills": int((decided & ~right & spills).sum()),
                     "decided_without_spills": int(clean.sum()),
                     "fraction_right_without_spills": _fraction(int((right & clean).sum()), int(clean.sum()))})
    return rows


def _gemm_verdict(gain: pd.Series, spread: pd.Series) -> pd.Series:
    tolerance = np.maximum(TIE_TOLERANCE, spread.fillna(0))
    return pd.Series(np.where(gain > 1 + tolerance, "win", np.where(gain < 1 - tolerance, "loss", "tie")),
                     index=gain.index)


def score_multicast(gains: pd.DataFrame, verdicts: pd.DataFrame | None, multicast_raw: Path) -> list[dict]:
    if verdicts is None or verdicts.empty:
        return [{"rule": "multicast", "status": NOT_MEASURED_TEXT + f": the multicast study has no 2-D data at "
                                                                    f"{multicast_raw}"}]
    if gains.empty or "status" not in gains or not (gains.status == MEASURED).any():
        return [{"rule": "multicast", "status": NOT_MEASURED_TEXT + ": no TMA cluster variant was compared with "
                                                                    "its 1x1 variant"}]
    compared = gains[gains.status == MEASURED]
    gains = gains[gains.arch.isin(compared.arch.unique())]      # an architecture not run here says so elsewhere
    busy = compared[~compared.cluster_exceeds_tiles.astype(bool)]
    outcome = _gemm_verdict(busy.gain, busy.spread)
    rows = []
    for ws in sorted(verdicts.working_set.unique()):
        table = verdicts[verdicts.working_set == ws].set_index(["cluster_x", "cluster_y", "tile_bytes"])
        predicted = pd.Series([table.status_vs_no_cluster.get((r.cluster_m, r.cluster_n, r.a_tile_bytes), np.nan)
                               for r in busy.itertuples()], index=busy.index)
        for scope in [EVERY_CLUSTER, *sorted(busy.cluster.unique())]:
            mask = (busy.cluster == scope) if scope != EVERY_CLUSTER else pd.Series(True, index=busy.index)
            known = mask & predicted.notna()
            p, g = predicted[known], outcome[known]
            not_faster = p != "win"
            in_scope = gains if scope == EVERY_CLUSTER else gains[gains.cluster == scope]
            rows.append({
                "rule": "multicast", "status": MEASURED, "working_set": ws, "scope": scope,
                "comparisons": int(known.sum()),
                "predicted_wins": int((p == "win").sum()), "predicted_ties": int((p == "tie").sum()),
                "predicted_losses": int((p == "loss").sum()),
                "gemm_wins": int((g == "win").sum()), "gemm_ties": int((g == "tie").sum()),
                "gemm_losses": int((g == "loss").sum()),
                "agree": int((p == g).sum()), "fraction_agree": _fraction(int((p == g).sum()), int(known.sum())),
                "not_faster_predicted": int(not_faster.sum()),
                "not_faster_held": int((not_faster & (g != "win")).sum()),
                "fraction_not_faster_held": _fraction(int((not_faster & (g != "win")).sum()), int(not_faster.sum())),
                "median_gain": float(busy.gain[known].median()) if known.any() else np.nan,
                "left_out_idle_ctas": int((in_scope.status == MEASURED).sum() - mask.sum()) if scope != EVERY_CLUSTER
                else int(len(compared) - len(busy)),
                "left_out_not_measured": int((in_scope.status != MEASURED).sum()),
                "left_out_no_verdict_at_tile": int((mask & predicted.isna()).sum())})
    return rows


def rules(speedups: pd.DataFrame, crossover: pd.DataFrame | None, gains: pd.DataFrame | None = None,
          multicast: pd.DataFrame | None = None, multicast_raw: Path | None = None) -> pd.DataFrame:
    """How often the crossover and multicast studies' rules name the GEMM winner (one row per
    rule, operand location and scope)."""
    rows = score_crossover(speedups, crossover)
    rows += score_multicast(gains if gains is not None else pd.DataFrame(), multicast,
                            Path(multicast_raw) if multicast_raw else Path("results/<label>/multicast"))
    return pd.DataFrame(rows)
