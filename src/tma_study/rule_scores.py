"""A rule's agreement with measured outcomes beside its trivial baselines, with bootstrap intervals.

A rule names an outcome for each case (TMA or cp.async; a cluster wins or is not faster). Each
trivial baseline names one outcome for every case (always TMA, always cp.async, clusters never
win, always a cluster), and the majority class names the set's most common outcome (chosen on the
cases themselves, so a ceiling for any rule that ignores the case). A policy is *right* on a case
where it names the outcome (the caller says how ties count). Per policy: the share right and its
bootstrap interval (``tma_study.bootstrap``: cases resampled); for the rule, its share over the
best baseline's (the baseline right most often), on the same resamples, with that interval. A rule
is **predictive** only where that interval lies above 0: it beats the best baseline by more than the
interval. ``agrees_with_best_baseline``: the share of cases on which the rule and that baseline are
right or wrong together (1: the rule is the baseline, on these cases).

A threshold chosen on data is scored **cross-validated** (``leave_one_group_out``): each group of
cases (a problem size) is predicted with the threshold chosen on the other groups, never on its own.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from .bootstrap import CONFIDENCE, interval, resamples

RULE, BASELINE, MAJORITY = "rule", "baseline", "majority_class"
COLUMNS = ["policy", "role", "cases", "right", "share", "share_low", "share_high", "best_baseline",
           "over_best_baseline", "agrees_with_best_baseline", "over_best_low", "over_best_high", "predictive"]


def majority_pick(outcome: pd.Series, tie: str | None = None) -> pd.Series:
    """The most common decided outcome (not ``tie``) for every case (equal counts: the first in
    sorted order)."""
    counts = outcome[outcome != tie].value_counts() if tie is not None else outcome.value_counts()
    top = sorted(counts[counts == counts.max()].index)[0] if len(counts) else None
    return pd.Series(top, index=outcome.index)


def score(right: dict[str, np.ndarray], rule: str, label: dict) -> list[dict]:
    """One row per policy of ``right`` (name -> 0/1 per case, the same cases): the rule's, each
    baseline's and the majority class's share right with its interval; on the rule's row, its margin
    over the best baseline (paired) and whether it is predictive."""
    n = len(right[rule])
    if n == 0:
        return [{**label, "policy": rule, "role": RULE, "cases": 0}]
    index = resamples(n)
    shares = {name: np.asarray(values, float)[index].mean(axis=1) for name, values in right.items()}
    baselines = [name for name in right if name != rule]
    best = max(baselines, key=lambda name: float(np.mean(right[name])))     # first of equals: the order given
    rows = []
    for name, values in right.items():
        low, high = interval(shares[name])
        role = RULE if name == rule else MAJORITY if name == MAJORITY else BASELINE
        row = {**label, "policy": name, "role": role, "cases": n, "right": int(np.sum(values)),
               "share": float(np.mean(values)), "share_low": low, "share_high": high}
        if name == rule:
            d_low, d_high = interval(shares[rule] - shares[best])
            row.update({"best_baseline": best, "over_best_baseline": float(np.mean(values) - np.mean(right[best])),
                        "agrees_with_best_baseline": float(np.mean(np.asarray(values) == np.asarray(right[best]))),
                        "over_best_low": d_low, "over_best_high": d_high, "predictive": bool(d_low > 0)})
        rows.append(row)
    return rows


def picks_right(outcome: pd.Series, picks: dict[str, pd.Series], tie: str | None = None) -> dict[str, np.ndarray]:
    """Each policy's 0/1 right per case: its pick equals the outcome, or the outcome is ``tie``."""
    tied = (outcome == tie).to_numpy() if tie is not None else np.zeros(len(outcome), bool)
    return {name: ((pick.to_numpy() == outcome.to_numpy()) | tied).astype(int) for name, pick in picks.items()}


def leave_one_group_out(groups: pd.Series, fit: Callable[[pd.Series], object],
                        apply: Callable[[object, pd.Series], pd.Series]) -> pd.Series:
    """Predictions for every case, each group's from ``fit`` on the other groups' cases (masks)."""
    out = pd.Series(index=groups.index, dtype=object)
    for group in sorted(groups.unique(), key=str):
        held = groups == group
        out[held] = apply(fit(~held), held)[held]
    return out


def best_threshold(rate: pd.Series, win: pd.Series) -> float:
    """The threshold on ``rate`` (win at or above it) that names most of ``win`` right: a midpoint
    between two distinct rates, below the lowest, or +inf (never win); of equals, the highest."""
    keep = rate.notna().to_numpy()
    values, wins = rate.to_numpy(float)[keep], win.to_numpy(bool)[keep]
    order = np.argsort(-values, kind="stable")
    values, wins = values[order], wins[order]
    # admitting the k highest rates (k = 0 .. n): right = wins among them + non-wins among the rest
    right = int((~wins).sum()) + np.r_[0, np.cumsum(np.where(wins, 1, -1))]
    cut = np.r_[True, values[1:] != values[:-1], True]            # k where a threshold fits between rates
    below = np.r_[values, values[-1] - 1 if len(values) else 0.0]
    candidates = np.r_[np.inf, (values[:-1] + values[1:]) / 2, below[-1]] if len(values) else np.array([np.inf])
    right = np.where(cut[: len(right)], right, -1)
    return float(candidates[int(np.argmax(right))])


def constant(value: str, like: pd.Series) -> pd.Series:
    """A trivial baseline: ``value`` for every case of ``like``."""
    return pd.Series(value, index=like.index)


def table(scores: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The paper's view of a rule_baselines.csv: per rule and scope (``keys``), each policy's share
    right [interval] and, on the rule's row, its margin over the best baseline and the verdict."""
    rows = []
    for r in scores.itertuples():
        if not getattr(r, "cases", 0):
            continue
        row = {k: getattr(r, k) for k in keys}
        row.update({"policy": r.policy, "right": f"{int(r.right)} of {int(r.cases)}",
                    "share right [95 %]": f"{100 * r.share:.1f} [{100 * r.share_low:.1f}, {100 * r.share_high:.1f}]"})
        predictive = r.role == RULE and bool(r.predictive)
        row["over best baseline [95 %]"] = (
            f"{100 * r.over_best_baseline:+.1f} [{100 * r.over_best_low:+.1f}, {100 * r.over_best_high:+.1f}] "
            f"({r.best_baseline})" if r.role == RULE else "")
        row["predictive"] = ("yes" if predictive else "no") if r.role == RULE else ""
        rows.append(row)
    return pd.DataFrame(rows)


def macros(scores: pd.DataFrame, prefix: str, **where) -> dict[str, str]:
    """The paper's numbers for one rule's row of a rule_baselines.csv (``where``: its rule, scope, ...):
    ``<prefix>Percent``, ``...Low``, ``...High``, the best baseline's (``<prefix>BaselinePercent``, ``Low``,
    ``High``, ``Name``), the margin over it in points (``<prefix>OverPoints``, ``Low``, ``High``),
    ``<prefix>Cases``, ``<prefix>Verdict`` (predictive | not predictive) and ``<prefix>Confidence`` (95 %). {} where there is no such row."""
    from tma_study.report.numbers import number
    if "role" not in scores:
        return {}
    rows = scores[scores.role == RULE]
    for column, value in where.items():
        rows = rows[rows[column] == value]
    if rows.empty:
        return {}
    r = rows.iloc[0]
    same = (scores.policy == r.best_baseline) & (scores.rule == r.rule)
    for column in ("working_set", "scope"):
        if column in scores:
            same &= scores[column] == r[column]
    best = scores[same].iloc[0]
    pct = lambda v: number(100 * v, 1)                                 # noqa: E731
    return {f"{prefix}Percent": pct(r.share), f"{prefix}Low": pct(r.share_low), f"{prefix}High": pct(r.share_high),
            f"{prefix}BaselinePercent": pct(best.share), f"{prefix}BaselineLow": pct(best.share_low),
            f"{prefix}BaselineHigh": pct(best.share_high), f"{prefix}BaselineName": best.policy.replace("_", " "),
            f"{prefix}OverPoints": pct(r.over_best_baseline), f"{prefix}OverLow": pct(r.over_best_low),
            f"{prefix}OverHigh": pct(r.over_best_high), f"{prefix}Cases": number(r.cases),
            f"{prefix}Verdict": "predictive" if r.predictive else "not predictive",
            f"{prefix}Confidence": f"{100 * CONFIDENCE:.0f} %"}
