"""The main job's first job: every run analysis will read, checked before any output is written.

``check_runs`` takes (study, results/<label>/<study>/) pairs and checks each run as the analysis
would read it: its raw files as sealed by its provenance.json (harness.seal), which names the GPU
of its folder and a commit of this repository (harness.provenance_checks), each file following
its study's schema (harness.raw_data). The first problem stops it with one message naming the
file, row and column. Runs are checked in ``workers`` forked processes, the largest first.

workflow/rules/checks.smk runs it as the rule ``check_raw_data``, whose report every job that
reads raw data waits for; the report names each run and the digest of its sealed files.
"""
from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

from . import provenance_checks, raw_data, seal

_RUNS: list = []        # (study, folder) pairs of the current check, shared with forked workers


def check_run(study, folder: Path, root: Path) -> str:
    """One run of ``study`` checked (raw_data.load with the seal required, and the commit its
    record names); the report's line for it."""
    raw = raw_data.load(study, folder, require_seal=True)
    provenance_checks.check_commit(raw.provenance, root, str(Path(folder) / "provenance.json"))
    digests = ", ".join(f"{name} {entry['sha256'][:12]}"
                        for name, entry in sorted(raw.provenance[seal.SEAL_KEY].items()))
    return f"{folder}: {study.name}, {raw.provenance['configurations']} configurations, sealed: {digests}"


def _check(index: int, root: str) -> str:
    study, folder = _RUNS[index]
    return check_run(study, Path(folder), Path(root))


def _size(folder: Path) -> int:
    return sum(entry.stat().st_size for entry in os.scandir(folder) if entry.is_file())


def check_runs(runs: list[tuple], root: Path, workers: int = 1) -> list[str]:
    """The report's lines for ``runs`` ((Study, folder) pairs), in their order; raises the first
    refusal (RawDataError, SealError, ProvenanceError, ProvenanceCheckError, RawSchemaError...)."""
    _RUNS[:] = runs
    if workers <= 1 or len(runs) <= 1:
        return [_check(i, str(root)) for i in range(len(runs))]
    largest_first = sorted(range(len(runs)), key=lambda i: -_size(Path(runs[i][1])))
    # fork: the workers share this process's imports (pandas, the schemas) instead of repeating them
    with multiprocessing.get_context("fork").Pool(min(workers, len(runs))) as pool:
        lines = pool.starmap(_check, [(i, str(root)) for i in largest_first], chunksize=1)
    ordered = dict(zip(largest_first, lines))
    return [ordered[i] for i in range(len(runs))]
