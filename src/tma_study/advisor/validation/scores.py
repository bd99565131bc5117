"""The advisor and the trivial baselines scored on a case table, with bootstrap intervals.

Each policy picks one of a case's two measured mechanisms (TMA or its alternative):

- ``advisor``: its choice, or of the two measured mechanisms the one it ranks faster;
- ``always_tma``, ``always_alternative`` (cp.async, or plain loads where that was the alternative);
- ``transfer_size_only``: TMA from the crossover study's crossover size at the case's level
  (unknown: HBM's), the alternative below it;
- ``fa3_rule``: FlashAttention-3's paged-KV dispatch, where the case records it;
- ``majority_class``: the mechanism that won most of the set's decided cases (chosen on the
  cases themselves: a ceiling for any rule that ignores the operand).

A pick **wins** where it is the case's winner, **ties** where the case is a tie (its ratio's 95 %
interval contains 1), **loses** otherwise; its **regret** is its time over the faster one's,
minus 1. Shares and mean regret carry a bootstrap 95 % interval (cases resampled); the advisor
beats a baseline where the interval of the paired difference (the same resamples) excludes 0.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tma_study.bootstrap import BOOTSTRAP_RESAMPLES, CONFIDENCE, SEED  # noqa: F401 (the advisor's settings)
from tma_study.bootstrap import interval as _interval
from tma_study.bootstrap import resamples as _resamples

from .cases import TIE, TMA

BASELINES = ("always_tma", "always_alternative", "transfer_size_only", "fa3_rule", "majority_class")
POLICIES = ("advisor", *BASELINES)
ALTERNATIVE_PICK = "alternative"


def outcomes(cases: pd.DataFrame, pick: pd.Series) -> pd.DataFrame:
    """Per case: the pick (tma | alternative), win/tie/loss, regret; NaN where the policy has no pick."""
    picked_tma = pick == TMA
    t_pick = np.where(picked_tma, cases.tma_time_us, cases.alternative_time_us)
    regret = t_pick / np.minimum(cases.tma_time_us, cases.alternative_time_us) - 1.0
    won = np.where(picked_tma, cases.winner == TMA, (cases.winner != TMA) & (cases.winner != TIE))
    result = np.where(cases.winner == TIE, "tie", np.where(won, "win", "loss"))
    applicable = pick.notna()
    return pd.DataFrame({"result": np.where(applicable, result, None),
                         "regret": np.where(applicable, regret, np.nan)}, index=cases.index)


def score(cases: pd.DataFrame, picks: pd.DataFrame, label: dict) -> tuple[list[dict], list[dict]]:
    """(one row per policy, one row per baseline compared with the advisor) for ``cases``."""
    rows, per_policy = [], {}
    index = _resamples(len(cases))
    for policy in POLICIES:
        out = outcomes(cases, picks[policy])
        applicable = out.result.notna().to_numpy()
        loss = (out.result == "loss").to_numpy(float)
        regret = out.regret.fillna(0.0).to_numpy()
        n = int(applicable.sum())
        if n == 0:
            rows.append({**label, "policy": policy, "cases": 0})
            continue
        per_policy[policy] = (loss, regret, applicable)
        counts = out.result.value_counts()
        weights = applicable[index]
        loss_share = (loss[index] * weights).sum(1) / np.maximum(weights.sum(1), 1)
        mean_regret = (regret[index] * weights).sum(1) / np.maximum(weights.sum(1), 1)
        rows.append({**label, "policy": policy, "cases": n, "wins": int(counts.get("win", 0)),
                     "ties": int(counts.get("tie", 0)), "losses": int(counts.get("loss", 0)),
                     "share_not_worse": 1 - loss[applicable].mean(),
                     "share_not_worse_low": 1 - _interval(loss_share)[1],
                     "share_not_worse_high": 1 - _interval(loss_share)[0],
                     "mean_regret": regret[applicable].mean(), "mean_regret_low": _interval(mean_regret)[0],
                     "mean_regret_high": _interval(mean_regret)[1], "max_regret": regret[applicable].max()})
    return rows, _compare(per_policy, index, label)


def _compare(per_policy: dict, index: np.ndarray, label: dict) -> list[dict]:
    """The advisor against each baseline on the cases both apply to (paired resamples)."""
    if "advisor" not in per_policy:
        return []
    a_loss, a_regret, a_ok = per_policy["advisor"]
    out = []
    for baseline in BASELINES:
        if baseline not in per_policy:
            continue
        b_loss, b_regret, b_ok = per_policy[baseline]
        both = (a_ok & b_ok).astype(float)[index]
        count = np.maximum(both.sum(1), 1)
        fewer_losses = ((b_loss - a_loss)[index] * both).sum(1) / count
        less_regret = ((b_regret - a_regret)[index] * both).sum(1) / count
        mask = a_ok & b_ok
        low, high = _interval(fewer_losses)
        r_low, r_high = _interval(less_regret)
        out.append({**label, "baseline": baseline, "cases": int(mask.sum()),
                    "fewer_losses_share": float((b_loss - a_loss)[mask].mean()), "fewer_losses_low": low,
                    "fewer_losses_high": high, "less_regret": float((b_regret - a_regret)[mask].mean()),
                    "less_regret_low": r_low, "less_regret_high": r_high,
                    "advisor_beats_it": bool(low > 0 or r_low > 0),
                    "it_beats_advisor": bool(high < 0 or r_high < 0)})
    return out


def majority_pick(cases: pd.DataFrame) -> pd.Series:
    decided = cases.winner[cases.winner != TIE]
    top = decided.value_counts().idxmax() if len(decided) else TMA
    return pd.Series(TMA if top == TMA else ALTERNATIVE_PICK, index=cases.index)


def transfer_size_pick(cases: pd.DataFrame, crossover: pd.DataFrame) -> pd.Series:
    """TMA from the crossover size of the case's level (best ring) against its alternative."""
    table = crossover[crossover.ring_bytes_per_sm == 0].set_index(["working_set", "alternative"])
    picks = []
    for case in cases.itertuples():
        level = case.level if case.level in ("hbm", "l2") else "hbm"
        row = table.loc[(level, case.alternative)]
        size = _transfer_size(case)
        if bool(row.tma_never_loses):
            picks.append(TMA)
        elif np.isnan(row.crossover_bytes):
            picks.append(ALTERNATIVE_PICK)
        else:
            picks.append(TMA if size >= row.crossover_bytes else ALTERNATIVE_PICK)
    return pd.Series(picks, index=cases.index)


def _transfer_size(case) -> float:
    if isinstance(case.box_dims, str) and case.box_dims:
        return float(np.prod([int(v) for v in case.box_dims.split("x")]) * case.element_bytes)
    if not np.isnan(case.row_bytes):
        return float(case.row_bytes)
    return float(case.bytes_per_transfer)
