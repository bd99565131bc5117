"""The advisor's numbers in the paper's text (``\\advisor...`` macros), from its derived tables.

Each macro is declared once below: its name, the scores row it reads (set, family all, policy)
and the column, so a search for the macro's name finds its source.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.report.numbers import MacroError

from .. import frozen
from ..rules import TIE_TOLERANCE
from .scores import CONFIDENCE

LOSO, HELDOUT = "leave_one_study_out", "heldout"
SCORES = {   # macro -> (set, policy, column)
    "advisorLosoCases": (LOSO, "advisor", "cases"),
    "advisorLosoNotWorse": (LOSO, "advisor", "share_not_worse"),
    "advisorLosoNotWorseLow": (LOSO, "advisor", "share_not_worse_low"),
    "advisorLosoNotWorseHigh": (LOSO, "advisor", "share_not_worse_high"),
    "advisorLosoRegret": (LOSO, "advisor", "mean_regret"),
    "advisorLosoRegretHigh": (LOSO, "advisor", "mean_regret_high"),
    "advisorLosoAlwaysTmaNotWorse": (LOSO, "always_tma", "share_not_worse"),
    "advisorLosoAlwaysTmaRegret": (LOSO, "always_tma", "mean_regret"),
    "advisorLosoSizeOnlyNotWorse": (LOSO, "transfer_size_only", "share_not_worse"),
    "advisorLosoFaThreeCases": (LOSO, "fa3_rule", "cases"),
    "advisorLosoFaThreeNotWorse": (LOSO, "fa3_rule", "share_not_worse"),
    "advisorLosoFaThreeRegret": (LOSO, "fa3_rule", "mean_regret"),
    "advisorHeldoutCases": (HELDOUT, "advisor", "cases"),
    "advisorHeldoutNotWorse": (HELDOUT, "advisor", "share_not_worse"),
    "advisorHeldoutNotWorseLow": (HELDOUT, "advisor", "share_not_worse_low"),
    "advisorHeldoutNotWorseHigh": (HELDOUT, "advisor", "share_not_worse_high"),
    "advisorHeldoutRegret": (HELDOUT, "advisor", "mean_regret"),
    "advisorHeldoutRegretHigh": (HELDOUT, "advisor", "mean_regret_high"),
    "advisorHeldoutAlwaysTmaNotWorse": (HELDOUT, "always_tma", "share_not_worse"),
    "advisorHeldoutAlwaysTmaRegret": (HELDOUT, "always_tma", "mean_regret"),
    "advisorHeldoutAlwaysAlternativeNotWorse": (HELDOUT, "always_alternative", "share_not_worse"),
    "advisorHeldoutSizeOnlyNotWorse": (HELDOUT, "transfer_size_only", "share_not_worse"),
    "advisorHeldoutMajorityNotWorse": (HELDOUT, "majority_class", "share_not_worse"),
    "advisorHeldoutSizeOnlyRegret": (HELDOUT, "transfer_size_only", "mean_regret"),
    "advisorHeldoutFaThreeCases": (HELDOUT, "fa3_rule", "cases"),
    "advisorHeldoutFaThreeNotWorse": (HELDOUT, "fa3_rule", "share_not_worse"),
}
COMPARISONS = {   # macro -> (set, baseline, column of comparison.csv): points of cases or of time
    "advisorHeldoutVsSizeOnlyFewerLosses": (HELDOUT, "transfer_size_only", "fewer_losses_share"),
    "advisorHeldoutVsSizeOnlyFewerLossesLow": (HELDOUT, "transfer_size_only", "fewer_losses_low"),
    "advisorHeldoutVsSizeOnlyFewerLossesHigh": (HELDOUT, "transfer_size_only", "fewer_losses_high"),
    "advisorHeldoutVsSizeOnlyLessRegret": (HELDOUT, "transfer_size_only", "less_regret"),
    "advisorHeldoutVsSizeOnlyLessRegretLow": (HELDOUT, "transfer_size_only", "less_regret_low"),
    "advisorHeldoutVsSizeOnlyLessRegretHigh": (HELDOUT, "transfer_size_only", "less_regret_high"),
}
CATALOG = {"advisorCatalogEntries": "entries", "advisorCatalogAgree": "agree",
           "advisorCatalogAgreeOrTied": "agree_or_tied"}
PERCENT_COLUMNS = ("share_not_worse", "share_not_worse_low", "share_not_worse_high")
REGRET_COLUMNS = ("mean_regret", "mean_regret_high")


def _format(column: str, value) -> str:
    if column == "cases":
        return str(int(value))
    if column in PERCENT_COLUMNS:
        return f"{100 * value:.0f} %"
    return f"{100 * value:.1f} %"


def macros(derived: Path) -> dict[str, str]:
    """{name: LaTeX text}; the held-out set's only where its cases were measured."""
    derived = Path(derived)
    scores = pd.read_csv(derived / "scores.csv")
    version = frozen.current_version()
    out = {"advisorVersion": str(version["version"]), "advisorShaShort": version["sha256"][:12],
           "advisorRegistered": str(version["registered_utc"])[:10],
           "advisorTieTolerance": f"{100 * TIE_TOLERANCE:.0f} %", "advisorConfidence": f"{100 * CONFIDENCE:.0f} %"}
    overall = scores[scores.family == "all"] if len(scores) else scores
    for name, (which, policy, column) in SCORES.items():
        row = overall[(overall.set == which) & (overall.policy == policy)] if len(overall) else overall
        if row.empty or pd.isna(row.iloc[0].get(column)):
            if which == HELDOUT:
                continue
            raise MacroError(f"{derived}/scores.csv has no {column} for {which} / {policy} (macro {name})")
        out[name] = _format(column, row.iloc[0][column])
    comparison = pd.read_csv(derived / "comparison.csv") if (derived / "comparison.csv").stat().st_size > 1 else None
    for name, (which, baseline, column) in COMPARISONS.items():
        if comparison is None or comparison.empty:
            continue
        row = comparison[(comparison.set == which) & (comparison.family == "all") & (comparison.baseline == baseline)]
        if len(row):
            digits = 2 if "regret" in column else 1
            out[name] = f"{100 * row.iloc[0][column]:+.{digits}f}"
    agreement = pd.read_csv(derived / "catalog_agreement.csv").iloc[0]
    out.update({name: str(int(agreement[column])) for name, column in CATALOG.items()})
    return out
