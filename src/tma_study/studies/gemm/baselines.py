"""The gemm study's rules beside their trivial baselines (``rule_baselines.csv``; tma_study.rule_scores).

Each rule of ``rules.csv`` (predict.py) scored on its own cases with a bootstrap interval, beside
the baselines that ignore the case, on the same cases and resamples:

- ``crossover``: the crossover study's size rule picks TMA or cp.async for each decided same-schedule,
  same-tile 1x1 comparison (ties left out), with and without the ones whose TMA variant alone
  spills; baselines always TMA, always cp.async, the majority class. Its threshold comes from the
  crossover study, never from the GEMM.
- ``multicast``: the multicast study's 2-D verdict names each cluster variant's outcome against its
  1x1 variant (win, or not faster: tie or loss) where every CTA has a tile; baselines clusters never
  win, always a cluster, the majority class. Its verdicts come from the multicast study.
- ``multicast_l2``: the compute sweep's L2-read-rate boundary on the same comparisons.
- ``multicast_l2_cross_validated``: an L2-read-rate threshold per cluster shape chosen on the GEMM
  itself, each problem shape predicted with the thresholds chosen on the other shapes (leave one
  shape out), never on its own rows.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tma_study.rule_scores import (
    COLUMNS,
    MAJORITY,
    best_threshold,
    constant,
    leave_one_group_out,
    majority_pick,
    picks_right,
    score,
)

from .predict import busy_comparisons, crossover_prediction, l2_predictions, multicast_prediction, tma_spills_alone
from tma_study.gemm_lib.rows import MEASURED

WIN, NOT_FASTER = "win", "not faster"
FROM_STUDY, CROSS_VALIDATED = "another study (held out)", "leave one problem shape out"


def _cluster_picks(outcome: pd.Series, rule: pd.Series) -> dict[str, pd.Series]:
    return {"rule": rule, "clusters_never_win": constant(NOT_FASTER, outcome), "always_cluster": constant(WIN, outcome),
            MAJORITY: majority_pick(outcome)}


def crossover_scores(speedups: pd.DataFrame, verdicts: pd.DataFrame | None) -> list[dict]:
    same = speedups[speedups.compared != "best"] if len(speedups) else speedups
    if verdicts is None or verdicts.empty or same.empty:
        return []
    decided, spills = same.winner != "tie", tma_spills_alone(same)
    rows = []
    for ws in sorted(verdicts.working_set.unique()):
        predicted = pd.Series(crossover_prediction(same, verdicts, ws)[1], index=same.index)
        for scope, mask in (("decided", decided), ("decided without spills", decided & ~spills)):
            outcome = same.winner[mask]
            picks = {"rule": predicted[mask], "always_tma": constant("tma", outcome),
                     "always_cp_async": constant("cpasync", outcome), MAJORITY: majority_pick(outcome)}
            rows += score(picks_right(outcome, picks), "rule",
                          {"rule": "crossover", "working_set": ws, "scope": scope, "threshold_from": FROM_STUDY})
    return rows


def _binary(outcome: pd.Series) -> pd.Series:
    return pd.Series(np.where(outcome == "win", WIN, NOT_FASTER), index=outcome.index)


def multicast_scores(gains: pd.DataFrame, verdicts: pd.DataFrame | None) -> list[dict]:
    if verdicts is None or verdicts.empty or gains.empty or not (gains.get("status") == MEASURED).any():
        return []
    busy, outcome = busy_comparisons(gains)
    rows = []
    for ws in sorted(verdicts.working_set.unique()):
        predicted = multicast_prediction(busy, verdicts, ws)
        known = predicted.notna()
        truth = _binary(outcome[known])
        rule = pd.Series(np.where(predicted[known] == "win", WIN, NOT_FASTER), index=truth.index)
        rows += score(picks_right(truth, _cluster_picks(truth, rule)), "rule",
                      {"rule": "multicast", "working_set": ws, "scope": "every cluster", "threshold_from": FROM_STUDY})
    return rows


def _fit_thresholds(fraction: pd.Series, win: pd.Series, cluster: pd.Series):
    def fit(train: pd.Series) -> dict:
        return {c: best_threshold(fraction[train & (cluster == c)], win[train & (cluster == c)])
                for c in sorted(cluster.unique())}
    return fit


def l2_scores(gains: pd.DataFrame, boundary: pd.DataFrame | None) -> list[dict]:
    if boundary is None or boundary.empty or gains.empty or not (gains.get("status") == MEASURED).any():
        return []
    busy, outcome, fraction, predicted_win = l2_predictions(gains, boundary)
    truth = _binary(outcome)
    label = {"rule": "multicast_l2", "working_set": "compute sweep", "scope": "every cluster",
             "threshold_from": FROM_STUDY}
    rule = pd.Series(np.where(predicted_win, WIN, NOT_FASTER), index=truth.index)
    rows = score(picks_right(truth, _cluster_picks(truth, rule)), "rule", label)
    fit = _fit_thresholds(fraction, truth == WIN, busy.cluster)

    def apply(thresholds: dict, held: pd.Series) -> pd.Series:
        limit = busy.cluster.map(thresholds).astype(float)
        return pd.Series(np.where(fraction >= limit, WIN, NOT_FASTER), index=busy.index)
    fitted = leave_one_group_out(busy["shape"], fit, apply)
    rows += score(picks_right(truth, _cluster_picks(truth, fitted)), "rule",
                  {**label, "rule": "multicast_l2_cross_validated", "working_set": "GEMM (L2 read rate)",
                   "threshold_from": CROSS_VALIDATED})
    return rows


def rule_baselines(speedups: pd.DataFrame, crossover: pd.DataFrame | None, gains: pd.DataFrame | None,
                   multicast: pd.DataFrame | None, boundary: pd.DataFrame | None) -> pd.DataFrame:
    """rule_baselines.csv: one row per rule, operand location, scope and policy (module docstring)."""
    gains = gains if gains is not None else pd.DataFrame()
    rows = crossover_scores(speedups, crossover) + multicast_scores(gains, multicast) + l2_scores(gains, boundary)
    return pd.DataFrame(rows, columns=["rule", "working_set", "scope", "threshold_from", *COLUMNS])
