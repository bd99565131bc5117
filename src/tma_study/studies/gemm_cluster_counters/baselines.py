"""The counters' rule beside its trivial baselines (``rule_baselines.csv``; tma_study.rule_scores).

Cases: every timed cluster comparison of the gemm_cluster run (its fair verdict: win, or not faster)
of a family whose 1x1 was counted. Policies:

- ``counters``: the registered rule (a cluster wins where its family's 1x1 is L2-request bound: tag
  lookups at TAG_BOUND_PCT or more, tensor pipe at TENSOR_IDLE_PCT or less). Its thresholds were
  chosen looking at these counters, so its score is an in-sample one;
- ``counters_cross_validated``: the two thresholds chosen on the other sizes' verdicts (the pair that
  names most of them right; of equals, the one predicting fewest wins), each size predicted with
  the thresholds chosen without it;
- baselines: clusters never win, always a cluster, the majority class.

Scored per size and over every size.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tma_study.rule_scores import COLUMNS, MAJORITY, constant, leave_one_group_out, majority_pick, picks_right, score

WIN, NOT_FASTER = "win", "not faster"
EVERY_SIZE = "every size"                       # aggregate.EVERY_SIZE


def _fit(scored: pd.DataFrame):
    """The (tag, tensor) thresholds that name most training verdicts right (fewest predicted wins of equals)."""
    tags = np.r_[np.inf, np.sort(scored.tag_pct.unique())[::-1]]
    tensors = np.sort(scored.tensor_pct.unique())

    def fit(train: pd.Series) -> tuple[float, float]:
        rows = scored[train]
        best, best_right = (np.inf, -np.inf), -1
        for tag in tags:
            for tensor in tensors:
                right = int((((rows.tag_pct >= tag) & (rows.tensor_pct <= tensor)) == rows.gemm_win).sum())
                if right > best_right:
                    best, best_right = (tag, tensor), right
        return best
    return fit


def _apply(scored: pd.DataFrame):
    def apply(thresholds: tuple[float, float], held: pd.Series) -> pd.Series:
        tag, tensor = thresholds
        win = (scored.tag_pct >= tag) & (scored.tensor_pct <= tensor)
        return pd.Series(np.where(win, WIN, NOT_FASTER), index=scored.index)
    return apply


def rule_baselines(bound: dict, scored: pd.DataFrame | None) -> pd.DataFrame:
    """rule_baselines.csv (module docstring); no rows where the gemm_cluster run is not beside this one."""
    columns = ["rule", "scope", "threshold_from", *COLUMNS]
    if scored is None or scored.empty:
        return pd.DataFrame(columns=columns)
    truth = pd.Series(np.where(scored.gemm_win, WIN, NOT_FASTER), index=scored.index)
    registered = pd.Series(np.where(scored.predicted_win, WIN, NOT_FASTER), index=scored.index)
    fitted = leave_one_group_out(scored["size"], _fit(scored), _apply(scored))
    rows = []
    for name, picks, source in (("counters", registered, "these counters (in sample)"),
                                ("counters_cross_validated", fitted, "leave one size out")):
        for scope in [*(str(s) for s in sorted(scored["size"].unique())), EVERY_SIZE]:
            mask = (scored["size"].astype(str) == scope) if scope != EVERY_SIZE else pd.Series(True, index=scored.index)
            outcome = truth[mask]
            policies = {"rule": picks[mask], "clusters_never_win": constant(NOT_FASTER, outcome),
                        "always_cluster": constant(WIN, outcome), MAJORITY: majority_pick(outcome)}
            rows += score(picks_right(outcome, policies), "rule", {"rule": name, "scope": scope, "threshold_from": source})
    return pd.DataFrame(rows, columns=columns)
