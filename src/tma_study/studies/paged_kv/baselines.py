"""FlashAttention-3's dispatch rule beside the trivial baselines (``rule_baselines.csv``; tma_study.rule_scores).

Cases: every speedup.csv configuration where both load paths were measured. FA3's rule picks its
load path (fa3_load_path); baselines always TMA, always cp.async and the majority class (the
more common winner among the decided cases), and over every phase the majority class of each
phase (FA3's rule too picks by phase: decode or prefill). Every policy is right where its pick is the
measured winner, and on a tie (measured_winner: the two paths' IQRs overlap; the raw data keep
no samples to resample). FA3's rule is not fitted on these data: it is the library's own.
Scored over every phase and per phase.
"""
from __future__ import annotations

import pandas as pd

from tma_study.rule_scores import COLUMNS, MAJORITY, constant, majority_pick, picks_right, score

MEASURED = "measured"
EVERY_PHASE = "every phase"
PER_PHASE = "majority_class_per_phase"          # each phase's more common winner: FA3's rule also splits by phase


def rule_baselines(speedup: pd.DataFrame) -> pd.DataFrame:
    """rule_baselines.csv: one row per scope and policy (module docstring)."""
    columns = ["rule", "scope", "threshold_from", *COLUMNS]
    if "tma_status" not in speedup or "cp_async_status" not in speedup:
        return pd.DataFrame(columns=columns)
    both = speedup[(speedup.tma_status == MEASURED) & (speedup.cp_async_status == MEASURED)]
    rows = []
    for scope in [EVERY_PHASE, *sorted(both.phase.unique())]:
        cases = both if scope == EVERY_PHASE else both[both.phase == scope]
        outcome = cases.measured_winner
        picks = {"rule": cases.fa3_load_path, "always_tma": constant("tma", outcome),
                 "always_cp_async": constant("cp_async", outcome), MAJORITY: majority_pick(outcome, tie="tie")}
        if scope == EVERY_PHASE:
            picks[PER_PHASE] = pd.concat([majority_pick(g.measured_winner, tie="tie") for _, g in cases.groupby("phase")])
            picks[PER_PHASE] = picks[PER_PHASE].reindex(cases.index)
        rows += score(picks_right(outcome, picks, tie="tie"), "rule",
                      {"rule": "fa3", "scope": scope, "threshold_from": "FlashAttention-3's source (not fitted)"})
    return pd.DataFrame(rows, columns=columns)
