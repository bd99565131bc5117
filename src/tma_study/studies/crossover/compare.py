"""What moved between runs of the crossover study (entry point ``compare``).

Given each run's derived folder (``{label: derived_dir}``) and which label is the reference,
one row per headline quantity: crossover sizes (TMA vs each alternative, best ring) and peak
bandwidth per mechanism and working set, each run's value, and whether it moved.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from .facts import MECHANISMS, WORKING_SETS, Facts, crossover_size, describe_crossover

MOVED_RELATIVE = 0.02     # a peak that changed by more than 2 % moved (runs agree within ~1 %)


def _crossover_rows(runs: dict[str, Facts], labels: list[str]) -> list[dict]:
    rows = []
    for ws in WORKING_SETS:
        for alternative in MECHANISMS[1:]:
            found = {label: facts.crossover_row(ws, alternative) for label, facts in runs.items()}
            if found[labels[0]] is None:
                continue
            sizes = {label: crossover_size(row) for label, row in found.items()}
            reference = sizes[labels[0]]
            moved = [label for label in labels[1:]
                     if found[label] is not None and not (sizes[label] == reference
                                                         or (pd.isna(sizes[label]) and pd.isna(reference)))]
            rows.append({"quantity": f"{ws.upper()}: TMA not slower than {alternative}",
                         **{label: describe_crossover(found[label]) for label in labels},
                         "moved": ", ".join(moved) or "no"})
    return rows


def _peak_rows(runs: dict[str, Facts], labels: list[str]) -> list[dict]:
    rows = []
    for ws in WORKING_SETS:
        for mechanism in MECHANISMS:
            peaks = {label: facts.peak(ws, mechanism) for label, facts in runs.items()}
            reference = peaks[labels[0]]
            if reference is None:
                continue
            cells, moved = {labels[0]: f"{reference.gbps:.0f}"}, []
            for label in labels[1:]:
                peak = peaks[label]
                if peak is None:
                    cells[label] = "not measured"
                    continue
                change = peak.gbps / reference.gbps - 1
                cells[label] = f"{peak.gbps:.0f} ({100 * change:+.1f} %)"
                if abs(change) > MOVED_RELATIVE:
                    moved.append(label)
            rows.append({"quantity": f"{ws.upper()}: peak GB/s of {mechanism}", **cells,
                         "moved": ", ".join(moved) or "no"})
    return rows


def compare_runs(derived_dirs: dict[str, Path], reference: str) -> pd.DataFrame:
    """One row per quantity, one column per run (the reference first), and 'moved'."""
    labels = [reference, *sorted(label for label in derived_dirs if label != reference)]
    runs = {label: Facts.load(derived_dirs[label]) for label in labels}
    return pd.DataFrame(_crossover_rows(runs, labels) + _peak_rows(runs, labels),
                        columns=["quantity", *labels, "moved"])
