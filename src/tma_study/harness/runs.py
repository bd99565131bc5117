"""Runs of the same sweep: the other ``results/<label>/<study>/`` folders that measured what one
run measured (the same GPU model, study config and kernels), and reading a file once per version.

The claims' spreads between runs (``tma_study.paper.claims``) and the advisor's intervals
(``tma_study.advisor.evidence``) are taken over these runs.

A run is a results/<label>/<study>/ folder holding the study's raw files and provenance.json,
whose seal (harness.seal) names each raw file's sha256. Two folders whose raw files have the same
digests hold one run (a copied folder is not another instance: ``distinct``). A folder holding some
of a run's files but not all is named with the ones it lacks (``missing_files``), never silently
left out. ``content_digest`` is a parameter of every rule that reads a run, so new data rerun what
depends on them whatever the files' times say.
"""
from __future__ import annotations

import functools
import hashlib
import json
import shlex
from pathlib import Path

import pandas as pd

from . import seal
from .provenance import read as read_provenance

PROVENANCE = "provenance.json"

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
    instance's run, or a repeat on the same one; never a copy of one (the same sealed raw files)."""
    study_dir = Path(study_dir)
    provenance = study_dir / "provenance.json"
    if not provenance.is_file():
        return []
    mine = _read_provenance(provenance)
    others = [p.parent for p in sorted(study_dir.parent.parent.glob(f"*/{study_dir.name}/provenance.json"))
              if p.parent.resolve() != study_dir.resolve()]
    runs = []
    for other in distinct([study_dir, *others])[0][1:]:      # a copy of a run is not another run
        theirs = _read_provenance(other / PROVENANCE)
        if (theirs["gpu"].get("name") == mine["gpu"].get("name")
                and _same_sweep(mine.get("config", {}), theirs.get("config", {}))
                and _same_kernels(study_dir, other)):
            runs.append(other)
    return runs


# ------------------------------------------------------------ what a run folder holds

def run_files(study) -> tuple[str, ...]:
    """The files every run of ``study`` holds: its raw files and provenance.json."""
    return (*study.raw_files, PROVENANCE)


def missing_files(folder: Path, study) -> list[str]:
    """The run files ``folder`` lacks where it holds any of them (empty: a whole run, or none)."""
    names = run_files(study)
    missing = [name for name in names if not (Path(folder) / name).is_file()]
    return missing if len(missing) < len(names) else []


@functools.lru_cache(maxsize=None)
def _identity(path: str, modified_ns: int, size: int) -> tuple | None:
    try:
        record = json.loads(seal.read_checked(Path(path), seal.MAX_PROVENANCE_BYTES))
    except (OSError, ValueError):
        return None                         # unreadable: the startup's checks name it
    return seal.run_identity(record) if isinstance(record, dict) else None


def identity(folder: Path) -> tuple | None:
    """The sealed names and digests of a run's raw files (None where unsealed or unreadable)."""
    path = Path(folder) / PROVENANCE
    try:
        info = path.stat()
    except OSError:
        return None
    return _identity(str(path), info.st_mtime_ns, info.st_size)


def distinct(folders: list[Path]) -> tuple[list[Path], list[tuple[Path, Path]]]:
    """``folders`` without those holding the same run as an earlier one (same sealed digests),
    and (left out, the folder holding the same run) for each one left out."""
    kept, same, seen = [], [], {}
    for folder in folders:
        key = identity(folder)
        if key is not None and key in seen:
            same.append((folder, seen[key]))
            continue
        if key is not None:
            seen[key] = folder
        kept.append(folder)
    return kept, same


def _file_digest(path: Path) -> str:
    try:
        info = path.stat()
    except OSError:
        return "absent"
    return _cached_digest(str(path), info.st_mtime_ns, info.st_size)


@functools.lru_cache(maxsize=None)
def _cached_digest(path: str, modified_ns: int, size: int) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def content_digest(paths) -> str:
    """sha256 over the content of ``paths`` (files, in order; 'absent' for one not there yet):
    a rule's parameter, so a change of content reruns it. A provenance.json among them stands for
    the raw files it seals (the main job's first job checks the seals: harness.run_checks)."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(f"{path}\0{_file_digest(Path(path))}\0".encode())
    return digest.hexdigest()


def sealed_digest(paths) -> str:
    """A parameter of each rule reading raw data or provenance (``paths``: its files under
    results/<label>/<study>/): the digest of those runs' provenance.json, which seals their raw
    files (checked by the first job, checks.smk), so new data rerun the rule whatever the files' times say
    (a clock ahead, an unpacked archive). Snakemake compares parameters that do not derive from input."""
    runs = sorted({str(Path(f).parent) for f in paths if len(Path(f).parts) == 4 and str(f).startswith("results/")})
    return content_digest(f"{run}/provenance.json" for run in runs)


class Interpreter:
    """The interpreter the rules' jobs run with, quoted for the shell (``str``). An object, not a
    string, so that Snakemake's params trigger leaves it out: the same venv reached through
    another path (a link; the checkout's .venv beside a venv whose path holds spaces) reruns no
    job. What the data are is a parameter (``content_digest``); where the interpreter lies is not."""

    def __init__(self, path: str):
        self.path = path

    def __str__(self) -> str:
        return shlex.quote(self.path)

    def __format__(self, spec: str) -> str:          # the shell command formats {params.python}
        return format(str(self), spec)
