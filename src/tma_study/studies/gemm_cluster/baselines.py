"""The multicast microbenchmark's verdict beside the trivial baselines on the gemm_cluster run
(``rule_baselines.csv``; tma_study.rule_scores).

Cases: the cluster comparisons of rule.csv (every CTA with a tile, a verdict at the cluster shape
and A tile), against each baseline order (default_order, best_order: the fair one). The rule
predicts a win where the microbenchmark's 2-D verdict is a win, else not faster; baselines:
clusters never win, always a cluster, the majority class. Its verdicts come from the multicast study.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tma_study.rule_scores import COLUMNS, MAJORITY, constant, majority_pick, picks_right, score
from tma_study.gemm_lib.verdicts import multicast_prediction

WIN, NOT_FASTER = "win", "not faster"


def rule_baselines(gain_rows: pd.DataFrame, verdicts: pd.DataFrame | None, baselines: dict) -> pd.DataFrame:
    """rule_baselines.csv: per baseline order and operand location, every cluster (module docstring)."""
    columns = ["rule", "baseline", "working_set", "scope", "threshold_from", *COLUMNS]
    if verdicts is None or verdicts.empty or gain_rows.empty:
        return pd.DataFrame(columns=columns)
    busy = gain_rows[~gain_rows.cluster_exceeds_tiles.astype(bool)]
    rows = []
    for baseline in baselines:
        column = "default" if baseline == "default_order" else "fair"
        compared = busy[busy[f"{column}_gain"].notna()] if f"{column}_gain" in busy else busy.iloc[0:0]
        for ws in sorted(verdicts.working_set.unique()):
            predicted = multicast_prediction(compared, verdicts, ws)
            known = predicted.notna()
            truth = pd.Series(np.where(compared[f"{column}_verdict"][known] == "win", WIN, NOT_FASTER),
                              index=compared.index[known])
            picks = {"rule": pd.Series(np.where(predicted[known] == "win", WIN, NOT_FASTER), index=truth.index),
                     "clusters_never_win": constant(NOT_FASTER, truth), "always_cluster": constant(WIN, truth),
                     MAJORITY: majority_pick(truth)}
            rows += score(picks_right(truth, picks), "rule",
                          {"rule": "multicast", "baseline": baseline, "working_set": ws, "scope": "every cluster",
                           "threshold_from": "another study (held out)"})
    return pd.DataFrame(rows, columns=columns)
