"""Every claim judged again on the runs of other GPU models in results/ (your own GPU's run).

``claims_by_run.tsv`` judges each claim on the other instances of the reference GPU; this module
does the same for every run in ``results/<label>/<study>/`` whose provenance names another GPU
model: each claim is evaluated on that run's data as if it were the reference (its own rows,
spreads from the other runs of that GPU model). A claim whose thresholds hold for the reference
GPU alone (``reference_gpu_specific`` in its claims file: an absolute time, size or count that
moves with the SM count, the bandwidth, the L2 or the tensor rate) is marked, so a FAIL there
reads as a number that moved with the hardware, not as a refutation.

Written beside claims.tsv: ``claims_by_gpu.tsv`` (id, study, the reason where reference-specific,
one status column per other-GPU run, headed ``<label> (<GPU name>)``) and, where such runs
exist, a section appended to claims.md.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.atomic import atomic_write_text
from tma_study.harness.provenance import read as read_provenance

from .claim_checks import FAIL, NOT_MEASURED, PASS
from .claims import Claim, evaluate

BY_GPU_FILE = "claims_by_gpu.tsv"
SPECIFIC_COLUMN = "reference_gpu_specific"


def _gpu_name(study_dir: Path) -> str | None:
    provenance = Path(study_dir) / "provenance.json"
    return read_provenance(provenance).get("gpu", {}).get("name") if provenance.is_file() else None


def other_gpu_runs(results_dir: Path, study: str) -> list[tuple[str, str]]:
    """(label, GPU name) of every results/<label>/<study>/ measured on another GPU model than
    results_dir's own run of ``study``."""
    results_dir = Path(results_dir)
    mine = _gpu_name(results_dir / study)
    runs = []
    for provenance in sorted(results_dir.parent.glob(f"*/{study}/provenance.json")):
        label, name = provenance.parent.parent.name, _gpu_name(provenance.parent)
        if label != results_dir.name and mine is not None and name not in (None, mine):
            runs.append((label, name))
    return runs


def judge(claims: list[Claim], results_dir: Path, study_dirs: dict | None = None) -> pd.DataFrame:
    """One row per claim: id, study, why it is reference-specific ("" where not), and its status
    on each other-GPU run ("" where that run does not hold the claim's study)."""
    results_dir = Path(results_dir)
    rows, columns, runs = [], {}, {}
    for claim in claims:
        row = {"id": claim.id, "study": claim.study, SPECIFIC_COLUMN: claim.reference_gpu_specific or ""}
        if claim.study not in (study_dirs or {}):
            if claim.study not in runs:
                runs[claim.study] = other_gpu_runs(results_dir, claim.study)
            for label, gpu in runs[claim.study]:
                column = columns.setdefault(label, f"{label} ({gpu})")
                row[column] = evaluate(claim, results_dir.parent / label, study_dirs).status
        rows.append(row)
    return pd.DataFrame(rows, columns=["id", "study", SPECIFIC_COLUMN, *sorted(columns.values())]).fillna("")


def markdown_section(frame: pd.DataFrame) -> str:
    """claims.md's section on other GPUs ("" where no other GPU's run is present)."""
    runs = list(frame.columns[3:])
    if not runs:
        return ""
    counts = "; ".join(f"{run}: " + ", ".join(f"{(frame[run] == s).sum()} {s}" for s in (PASS, FAIL, NOT_MEASURED))
                       for run in runs)
    lines = ["", "## Judged on runs of other GPU models", "",
             f"Each claim judged again on the data of another GPU model under `results/` ({counts}). "
             "A claim marked *reference GPU* holds thresholds set for the reference GPU alone (why: its "
             "threshold above); where it fails elsewhere, the number moved with the hardware.", "",
             "| claim | " + " | ".join(runs) + " |", "| --- | " + " | ".join("---" for _ in runs) + " |"]
    for row in frame.to_dict("records"):
        marker = " (*reference GPU*)" if row[SPECIFIC_COLUMN] else ""
        lines.append(f"| `{row['id']}`{marker} | " + " | ".join(row[run] or "--" for run in runs) + " |")
    return "\n".join(lines) + "\n"


def write(claims: list[Claim], results_dir: Path, study_dirs: dict | None = None) -> Path:
    """claims_by_gpu.tsv beside claims.tsv, and the section of claims.md where other GPUs ran."""
    results_dir = Path(results_dir)
    frame = judge(claims, results_dir, study_dirs)
    target = results_dir / BY_GPU_FILE
    atomic_write_text(target, frame.to_csv(sep="\t", index=False))
    section = markdown_section(frame)
    if section:
        md = results_dir / "claims.md"
        atomic_write_text(md, md.read_text() + section)
    return target
