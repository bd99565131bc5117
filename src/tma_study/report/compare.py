"""Rows of a "what moved between runs" table, shared by the studies' ``compare`` entry points.

A comparison table has one row per headline quantity, one column per run (the reference
first) and a ``moved`` column naming the runs whose value differs from the reference. Two
kinds of quantity: a verdict (a word or phrase, e.g. which primitive wins; it moved when the
phrase differs) and a number (it moved when it changed by more than a relative tolerance).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

NOT_MEASURED = "not measured"


@dataclass(frozen=True)
class Verdict:
    """What a run concluded (compared between runs) and a detail shown beside it (not compared)."""

    verdict: str
    detail: str = ""

    def text(self) -> str:
        return f"{self.verdict} ({self.detail})" if self.detail else self.verdict


def run_labels(derived_dirs: dict[str, Path], reference: str) -> list[str]:
    """The reference first, then the other runs in name order."""
    if reference not in derived_dirs:
        raise ValueError(f"reference run {reference!r} is not among the runs given: {sorted(derived_dirs)}")
    return [reference, *sorted(label for label in derived_dirs if label != reference)]


def _moved(labels: list[str], measured: dict, differs: Callable[[str], bool]) -> str:
    """'no', the runs that moved, or which runs hold a quantity the reference lacks."""
    if measured.get(labels[0]) is None:
        return "not in the reference; measured in " + ", ".join(
            label for label in labels[1:] if measured.get(label) is not None)
    moved = [label for label in labels[1:] if measured.get(label) is not None and differs(label)]
    return ", ".join(moved) or "no"


def verdict_row(quantity: str, verdicts: dict[str, Verdict | None], labels: list[str]) -> dict:
    """One row: each run's verdict; moved where the verdict (not the detail) differs."""
    cells = {label: verdicts[label].text() if verdicts.get(label) else NOT_MEASURED for label in labels}
    reference = verdicts.get(labels[0])
    moved = _moved(labels, verdicts, lambda label: verdicts[label].verdict != reference.verdict)
    return {"quantity": quantity, **cells, "moved": moved}


def value_row(quantity: str, values: dict[str, float | None], labels: list[str],
              form: Callable[[float], str], moved_relative: float) -> dict:
    """One row: each run's number, the others with their change from the reference in %;
    moved where that change exceeds ``moved_relative`` (e.g. 0.02 for 2 %). None or NaN: not
    measured in that run."""
    values = {label: None if value is None or pd.isna(value) else float(value) for label, value in values.items()}
    reference = values.get(labels[0])
    cells = {labels[0]: NOT_MEASURED if reference is None else form(reference)}
    for label in labels[1:]:
        value = values.get(label)
        if value is None:
            cells[label] = NOT_MEASURED
        elif reference is None or reference == 0:
            cells[label] = form(value)
        else:
            cells[label] = f"{form(value)} ({100 * (value / reference - 1):+.1f} %)"
    moved = _moved(labels, values, lambda label: reference == 0 and values[label] != 0
                   or reference != 0 and abs(values[label] / reference - 1) > moved_relative)
    return {"quantity": quantity, **cells, "moved": moved}


def only_the_reference(study: str, labels: list[str]) -> list[dict] | None:
    """The table's one row when no other run is present (None when there are others): with
    nothing to compare, a table repeating the reference's own numbers would say nothing."""
    if len(labels) > 1:
        return None
    # Short: a LaTeX column does not wrap; the caption says where other runs come from.
    return [{"quantity": f"other runs of {study}", labels[0]: "none present beside this run",
             "moved": "nothing to compare"}]
