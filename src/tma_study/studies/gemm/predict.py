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
- multicast_l2: the multicast study's compute sweep boundary (its ``compute_boundary.csv``): at
  each cluster shape, multicast wins from an own-copy L2 read rate of ``win_from_l2_read_fraction``
  of the L2 read ceiling the sweep measured. A GEMM variant's own-copy L2 read rate is what its
  1x1 variant reads: TFLOP/s x bytes per FLOP, (tile M + tile N) x element bytes / (2 tile M tile N)
  (every CTA reads an A and a B tile per K step). Predicted: win at or above the boundary, not
  faster below it (or where the sweep saw no win at that shape). Scored win vs not-faster on the
  same comparisons as the multicast rule; each wrong prediction is counted by what else differs:
  the two variants' SM clocks (power state) and grids of at most two waves of tiles.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from tma_study.harness import raw_data
from tma_study.studies.crossover import STUDY as CROSSOVER_STUDY
from tma_study.studies.crossover import aggregate as crossover_aggregate
from tma_study.studies.multicast import STUDY as MULTICAST_STUDY
from tma_study.studies.multicast import comparison as multicast_comparison
from tma_study.studies.multicast import compute as multicast_compute

from tma_study.gemm_lib.rows import BYTES_PER_ELEMENT, MEASURED, NOT_MEASURED_TEXT
from tma_study.gemm_lib.verdicts import gemm_verdict as _gemm_verdict
from tma_study.gemm_lib.verdicts import multicast_prediction

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
    table = multicast_comparison.speedups(multicast_comparison.best_configurations(stream))
    return table[table.pattern == "2d"]


def multicast_boundary(multicast_raw: Path) -> pd.DataFrame | None:
    """The multicast study's compute-sweep boundary per cluster shape (its compute_boundary.csv),
    or None where its raw data have no compute sweep."""
    if not (multicast_raw / "stream.csv").exists():
        return None
    compute = raw_data.load(MULTICAST_STUDY, multicast_raw).frames.get("compute.csv")
    if compute is None:
        return None
    table = multicast_compute.boundary(multicast_compute.compute_speedups(raw_data.ok_rows(compute)))
    return table if "win_from_l2_read_fraction" in table.columns else None


def gemm_l2_read_gbps(gains: pd.DataFrame) -> pd.Series:
    """Own-copy L2 read rate of each comparison's 1x1 variant: TFLOP/s x bytes per FLOP."""
    tile = gains.tile.str.split("x", expand=True).astype(int)
    tile_m, tile_n = tile[0], tile[1]
    bytes_per_flop = gains.dtype.map(BYTES_PER_ELEMENT) * (tile_m + tile_n) / (2 * tile_m * tile_n)
    return gains.tflops_1x1 * 1e3 * bytes_per_flop                # TFLOP/s x B/FLOP = TB/s; in GB/s


def best_threshold_agreement(rate: pd.Series, win: pd.Series) -> int:
    """The most comparisons any single threshold on ``rate`` (win at or above it) gets right: the
    ceiling of every rule of this form, whatever the microbenchmark's boundary."""
    order = np.argsort(-rate.to_numpy(), kind="stable")
    wins = win.to_numpy()[order]
    # threshold just above the k-th highest rate: the k highest predicted wins
    right = [int((~wins).sum())] + list(np.cumsum(np.where(wins, 1, -1)) + int((~wins).sum()))
    distinct = np.r_[True, np.diff(rate.to_numpy()[order]) != 0][1:].tolist() + [True]     # no split of equal rates
    return max(r for r, ok in zip(right, [True, *distinct]) if ok)


def busy_comparisons(gains: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series]:
    """(the measured cluster comparisons where every CTA has a tile, their win/tie/loss verdicts)."""
    busy = gains[(gains.status == MEASURED) & ~gains.cluster_exceeds_tiles.astype(bool)]
    return busy, _gemm_verdict(busy.gain, busy.spread)


def l2_predictions(gains: pd.DataFrame, boundary: pd.DataFrame):
    """(busy comparisons, their verdicts, each one's 1x1 L2 read rate over the sweep's L2 read ceiling,
    the boundary's predicted win) for the multicast_l2 rule."""
    busy, outcome = busy_comparisons(gains)
    fraction = gemm_l2_read_gbps(busy) / float(boundary.l2_read_ceiling_gbps.iloc[0])
    start = boundary.set_index(["cluster_x", "cluster_y"]).win_from_l2_read_fraction
    threshold = pd.Series([start.get((r.cluster_m, r.cluster_n), np.nan) for r in busy.itertuples()], index=busy.index)
    return busy, outcome, fraction, threshold.notna() & (fraction >= threshold)


def score_multicast_l2(gains: pd.DataFrame, boundary: pd.DataFrame | None, sm_count: int) -> list[dict]:
    if boundary is None or boundary.empty:
        return [{"rule": "multicast_l2", "status": NOT_MEASURED_TEXT + ": the multicast study's raw data have no "
                                                                       "compute sweep (compute.csv)"}]
    if gains.empty or "status" not in gains or not (gains.status == MEASURED).any():
        return [{"rule": "multicast_l2", "status": NOT_MEASURED_TEXT + ": no TMA cluster variant was compared "
                                                                       "with its 1x1 variant"}]
    busy, outcome, fraction, predicted_win = l2_predictions(gains, boundary)
    ceiling = float(boundary.l2_read_ceiling_gbps.iloc[0])
    gemm_win = outcome == "win"
    right = predicted_win == gemm_win
    tiles = np.ceil(busy.m / busy.tile.str.split("x").str[0].astype(int)) \
        * np.ceil(busy.n / busy.tile.str.split("x").str[1].astype(int))
    few_waves = tiles <= 2 * sm_count
    clocks = busy.clocks_differ.astype(bool) if "clocks_differ" in busy else pd.Series(False, index=busy.index)
    rows = []
    for scope in [EVERY_CLUSTER, *sorted(busy.cluster.unique())]:
        mask = (busy.cluster == scope) if scope != EVERY_CLUSTER else pd.Series(True, index=busy.index)
        wrong = mask & ~right
        at = boundary[(boundary.cluster_x == int(scope[0])) & (boundary.cluster_y == int(scope[-1]))] \
            if scope != EVERY_CLUSTER else boundary.iloc[0:0]
        rows.append({
            "rule": "multicast_l2", "status": MEASURED, "working_set": "compute sweep", "scope": scope,
            "comparisons": int(mask.sum()), "predicted_wins": int((mask & predicted_win).sum()),
            "gemm_wins": int((mask & gemm_win).sum()), "gemm_ties": int((mask & (outcome == "tie")).sum()),
            "gemm_losses": int((mask & (outcome == "loss")).sum()),
            "agree": int((mask & right).sum()), "fraction_agree": _fraction(int((mask & right).sum()), int(mask.sum())),
            "l2_read_ceiling_gbps": ceiling,
            "win_from_l2_read_fraction": float(at.win_from_l2_read_fraction.iloc[0]) if len(at) else np.nan,
            "median_l2_read_fraction": float(fraction[mask].median()),
            "wrong_gemm_wins_below": int((wrong & gemm_win).sum()),
            "wrong_predicted_wins": int((wrong & predicted_win).sum()),
            "wrong_where_clocks_differ": int((wrong & clocks).sum()),
            "wrong_in_two_waves_or_fewer": int((wrong & few_waves).sum()),
            "wrong_unexplained": int((wrong & ~clocks & ~few_waves).sum()),
            "fraction_wrong_explained": _fraction(int((wrong & (clocks | few_waves)).sum()), int(wrong.sum())),
            # the ceiling of any L2-read-rate threshold per cluster shape, chosen on the GEMM data themselves
            "best_threshold_fraction_agree": _fraction(
                sum(best_threshold_agreement(fraction[mask & (busy.cluster == c)], gemm_win[mask & (busy.cluster == c)])
                    for c in busy.cluster[mask].unique()), int(mask.sum())),
            "fraction_agree_same_clocks_over_two_waves": _fraction(int((mask & right & ~clocks & ~few_waves).sum()),
                                                                   int((mask & ~clocks & ~few_waves).sum()))})
    return rows


def _fraction(part: int, whole: int) -> float:
    return float(part / whole) if whole else np.nan


def tma_spills_alone(same: pd.DataFrame) -> pd.Series:
    """Comparisons whose TMA variant spills registers while its cp.async partner does not."""
    return (same.get("tma_spill_store_bytes", pd.Series(0, index=same.index)).fillna(0) > 0) \
        & (same.get("cpasync_spill_store_bytes", pd.Series(0, index=same.index)).fillna(0) == 0)


def crossover_prediction(same: pd.DataFrame, verdicts: pd.DataFrame, ws: str) -> tuple[float, np.ndarray]:
    """(the crossover size at ``ws``, the rule's pick per comparison: tma from it, else cpasync)."""
    tile_m = same.tile.str.split("x").str[0].astype(int)
    tile_k = same.tile.str.split("x").str[2].astype(int)
    transfer = tile_m * tile_k * same.dtype.map(BYTES_PER_ELEMENT)
    threshold = verdicts[verdicts.working_set == ws].iloc[0].crossover_bytes
    return threshold, np.where(np.isnan(threshold), "cpasync", np.where(transfer >= threshold, "tma", "cpasync"))


def score_crossover(speedups: pd.DataFrame, verdicts: pd.DataFrame | None) -> list[dict]:
    same = speedups[speedups.compared != "best"] if len(speedups) else speedups
    if verdicts is None or verdicts.empty:
        return [{"rule": "crossover", "status": NOT_MEASURED_TEXT + ": no crossover raw data beside this run"}]
    if same.empty:
        return [{"rule": "crossover", "status": NOT_MEASURED_TEXT + ": no TMA/cp.async pair was measured"}]
    spills = tma_spills_alone(same)
    rows = []
    for ws in verdicts.working_set.unique():
        threshold, predicted = crossover_prediction(same, verdicts, ws)
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


def score_multicast(gains: pd.DataFrame, verdicts: pd.DataFrame | None, multicast_raw: Path) -> list[dict]:
    if verdicts is None or verdicts.empty:
        return [{"rule": "multicast", "status": NOT_MEASURED_TEXT + f": the multicast study has no 2-D data at "
                                                                    f"{multicast_raw}"}]
    if gains.empty or "status" not in gains or not (gains.status == MEASURED).any():
        return [{"rule": "multicast", "status": NOT_MEASURED_TEXT + ": no TMA cluster variant was compared with "
                                                                    "its 1x1 variant"}]
    compared = gains[gains.status == MEASURED]
    gains = gains[gains.arch.isin(compared.arch.unique())]      # an architecture not run here says so elsewhere
    busy, outcome = busy_comparisons(compared)
    rows = []
    for ws in sorted(verdicts.working_set.unique()):
        predicted = multicast_prediction(busy, verdicts, ws)
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
          multicast: pd.DataFrame | None = None, multicast_raw: Path | None = None,
          boundary: pd.DataFrame | None = None, sm_count: int = 132) -> pd.DataFrame:
    """How often the crossover and multicast studies' rules name the GEMM winner (one row per
    rule, operand location and scope)."""
    gains = gains if gains is not None else pd.DataFrame()
    rows = score_crossover(speedups, crossover)
    rows += score_multicast(gains, multicast,
                            Path(multicast_raw) if multicast_raw else Path("results/<label>/multicast"))
    rows += score_multicast_l2(gains, boundary, sm_count)
    return pd.DataFrame(rows)
