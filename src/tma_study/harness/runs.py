"""Runs of the same sweep: the other ``results/<label>/<study>/`` folders that measured what one
run measured (the same GPU model, study config and kernels), and reading a file once per version.

The claims' spreads between runs (``tma_study.paper.claims``) and the advisor's intervals
(``tma_study.advisor.evidence``) are taken over these runs.
"""
from __future__ import annotations

import functools
from pathlib import Path

import pandas as pd

from .provenance import read as read_provenance

KERNEL_IDENTITY = ("registers", "sass_instructions", "expected_sass")   # kernels.csv, beside the name


def by_file_version(read):
    """``read(path)`` done once per version of the file (its modification time and size): every
    claim is judged in every run of its sweep, and every spread reads the other runs' files again.
    What it returns is shared between calls: treat it as read-only."""
    cached = functools.lru_cache(maxsize=512)(lambda path, mtime_ns, size: read(path))

    def call(path):
        stat = Path(path).stat()
        return cached(str(path), stat.st_mtime_ns, stat.st_size)
    return call


def _same_sweep(config: dict, other: dict) -> bool:
    """Whether two runs' configs agree on every key both have, at any depth: a key only one of
    them has was added to the schema later, with the default the older run was measured with."""
    if isinstance(config, dict) and isinstance(other, dict):
        return all(_same_sweep(config[k], other[k]) for k in set(config) & set(other))
    return config == other


def _kernels(study_dir: Path) -> frozenset[tuple] | None:
    """What identifies the kernels a run timed (kernels.csv: each kernel's name, registers and
    SASS instruction counts), or None where the run recorded none."""
    path = Path(study_dir) / "kernels.csv"
    return _kernel_rows(path) if path.is_file() else None


@by_file_version
def _kernel_rows(path: str) -> frozenset[tuple]:
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    columns = [frame.columns[0], *(c for c in KERNEL_IDENTITY if c in frame.columns)]
    return frozenset(map(tuple, frame[columns].to_numpy()))


_read_provenance = by_file_version(lambda path: read_provenance(Path(path)))   # shared: read-only


def _same_kernels(one: Path, other: Path) -> bool:
    """Whether two runs timed the same kernels (True where either recorded none: nothing to tell)."""
    mine, theirs = _kernels(one), _kernels(other)
    return mine is None or theirs is None or mine == theirs


def same_sweep_runs(study_dir: Path) -> list[Path]:
    """The other results/<label>/<study>/ folders that hold the same sweep as ``study_dir``,
    measured on the same GPU model with the same kernels (a run of the same configuration with
    another version of the kernels measures the code's change, not the instance's): another
    instance's run, or a repeat on the same one."""
    study_dir = Path(study_dir)
    provenance = study_dir / "provenance.json"
    if not provenance.is_file():
        return []
    mine = _read_provenance(provenance)
    runs = []
    for other in sorted(study_dir.parent.parent.glob(f"*/{study_dir.name}/provenance.json")):
        if other.parent.resolve() == study_dir.resolve():
            continue
        theirs = _read_provenance(other)
        if (theirs["gpu"].get("name") == mine["gpu"].get("name")
                and _same_sweep(mine.get("config", {}), theirs.get("config", {}))
                and _same_kernels(study_dir, other.parent)):
            runs.append(other.parent)
    return runs
