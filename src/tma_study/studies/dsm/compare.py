"""What moved between runs of the dsm study (entry point ``compare``).

Given each run's derived folder (``{label: derived_dir}``) and which label is the reference,
one row per (working set, cluster size, tile) found in any run: the fastest broadcast
primitive (or the tie), which moved when the verdict differs; then the DSM primitives side by
side: latency per (cluster size, target) and read bandwidth per (path, cluster size), which
moved when they changed by more than ``MOVED_RELATIVE``.
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
from tma_study.report.tables import human_bytes

from .aggregate import with_pattern
from .tables import VARIANT_LABELS, bandwidth_path_label, latency_target_label

MOVED_RELATIVE = 0.02   # repeated latency and bandwidth runs agree far closer than 2 %


def _read(derived_dir: Path, name: str, key: list[str]) -> dict[tuple, pd.Series]:
    frame = pd.read_csv(Path(derived_dir) / name, dtype={"target": str} if "target" in key else None)
    if "pattern" in key:
        frame = with_pattern(frame)
    return {tuple(row[c] for c in key): row for _, row in frame.iterrows()}


def winner_verdict(row: pd.Series) -> Verdict:
    """The winner, or the two tied primitives (in a fixed order, so the same tie reads the same)."""
    if "runner_up" not in row or pd.isna(row.runner_up):
        return Verdict(VARIANT_LABELS[row.winner], "the only primitive measured")
    if row.tie:
        tied = sorted((row.winner, row.runner_up), key=list(VARIANT_LABELS).index)
        return Verdict("tie: " + " = ".join(VARIANT_LABELS[v] for v in tied), f"{row.margin:.2f}x")
    return Verdict(VARIANT_LABELS[row.winner], f"{row.margin:.2f}x over {VARIANT_LABELS[row.runner_up]}")


def _rows(runs: dict[str, dict], labels: list[str], row_of) -> list[dict]:
    """One row per key of any run: the reference's keys in its (sorted) file order, then any
    key only another run measured."""
    keys = []
    for label in labels:
        keys += [key for key in runs[label] if key not in keys]
    return [row_of(key, {label: runs[label].get(key) for label in labels}) for key in keys]


def compare_runs(derived_dirs: dict[str, Path], reference: str) -> pd.DataFrame:
    """One row per quantity, one column per run (the reference first), and 'moved'."""
    labels = run_labels(derived_dirs, reference)
    alone = only_the_reference("dsm", labels)
    if alone is not None:
        return pd.DataFrame(alone, columns=["quantity", *labels, "moved"])
    winners = {label: _read(derived_dirs[label], "winners.csv", ["working_set", "cluster_size", "tile_bytes"])
               for label in labels}
    latency = {label: _read(derived_dirs[label], "latency.csv", ["cluster_size", "target"]) for label in labels}
    bandwidth = {label: _read(derived_dirs[label], "bandwidth.csv", ["path", "pattern", "cluster_size"])
                 for label in labels}

    def winner_row(key, found):
        working_set, cluster_size, tile = key
        return verdict_row(f"{working_set.upper()}, cluster of {cluster_size}, tile {human_bytes(tile)}: "
                           "fastest broadcast",
                           {label: None if row is None else winner_verdict(row) for label, row in found.items()},
                           labels)

    def latency_row(key, found):
        cluster_size, target = key
        return value_row(f"latency, cluster of {cluster_size}, {latency_target_label(target)}: cycles per load",
                         {label: None if row is None else row.cycles_per_hop_median for label, row in found.items()},
                         labels, lambda v: f"{v:.0f}", MOVED_RELATIVE)

    def bandwidth_row(key, found):
        path, pattern, cluster_size = key
        return value_row(f"bandwidth, cluster of {cluster_size}, {bandwidth_path_label(path, pattern)}: GB/s",
                         {label: None if row is None else row.gbps for label, row in found.items()},
                         labels, lambda v: f"{v:.0f}", MOVED_RELATIVE)

    rows = _rows(winners, labels, winner_row)
    rows += _rows(latency, labels, latency_row)
    rows += _rows(bandwidth, labels, bandwidth_row)
    return pd.DataFrame(rows, columns=["quantity", *labels, "moved"])
