"""What moved between runs of the multicast study (entry point ``compare``).

Given each run's derived folder (``{label: derived_dir}``) and which label is the reference,
two rows per (pattern, working set, cluster shape) found in any run: the break-even verdict
(from which tile multicast is never slower than the better own-copy variant; it moved when the
verdict differs) and multicast's largest speedup over the better alternative (it moved when it
changed by more than ``MOVED_RELATIVE``).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.report.compare import (
    Verdict,
    only_the_reference,
    run_labels,
    value_row,
    verdict_row,
)

from .tables import break_even_verdict

SHAPE = ["pattern", "working_set", "cluster_x", "cluster_y"]
MOVED_RELATIVE = 0.02   # ties within 1 % already count as "not slower"; a speedup moving 2 % is news


def _by_shape(derived_dir: Path) -> dict[tuple, pd.Series]:
    frame = pd.read_csv(Path(derived_dir) / "break_even.csv")
    return {tuple(row[c] for c in SHAPE): row for _, row in frame.iterrows()}


def _quantity(shape: tuple, what: str) -> str:
    pattern, working_set, x, y = shape
    return f"{pattern.upper()}, {working_set.upper()}, cluster {x}x{y}: {what}"


def compare_runs(derived_dirs: dict[str, Path], reference: str) -> pd.DataFrame:
    """One row per quantity, one column per run (the reference first), and 'moved'."""
    labels = run_labels(derived_dirs, reference)
    alone = only_the_reference("multicast", labels)
    if alone is not None:
        return pd.DataFrame(alone, columns=["quantity", *labels, "moved"])
    runs = {label: _by_shape(derived_dirs[label]) for label in labels}
    shapes = sorted({shape for run in runs.values() for shape in run},
                    key=lambda s: (s[0], s[1], s[2] * s[3], s[2], s[3]))
    verdicts = [verdict_row(_quantity(shape, "multicast not slower than the better alternative"),
                            {label: Verdict(break_even_verdict(runs[label][shape])) if shape in runs[label] else None
                             for label in labels}, labels)
                for shape in shapes]
    speedups = [value_row(_quantity(shape, "largest speedup over the better alternative"),
                          {label: runs[label][shape].max_speedup if shape in runs[label] else None for label in labels},
                          labels, lambda v: f"{v:.2f}x", MOVED_RELATIVE)
                for shape in shapes]
    return pd.DataFrame(verdicts + speedups, columns=["quantity", *labels, "moved"])
