"""The committed reference data, aggregated into a temporary results/<label>/ folder, for
the paper-tier tests (macros, rules of thumb, README table) to read real derived numbers."""
from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from tma_study.studies import discover

REPO = Path(__file__).resolve().parents[2]
CONFIG = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
REFERENCE = CONFIG["reference_gpu"]


def configured_studies() -> dict:
    known = discover()
    return {name: known[name] for name in CONFIG["studies"]}


def aggregated_reference(destination: Path, studies: dict | None = None) -> Path:
    """destination/<label>/<study>/{raw, derived/} for every configured study with data."""
    results = destination / REFERENCE
    for name, study in (studies or configured_studies()).items():
        raw = REPO / "results" / REFERENCE / name
        if not raw.is_dir():
            continue
        shutil.copytree(raw, results / name, ignore=shutil.ignore_patterns("derived"))
        repeat = REPO / "results" / f"{REFERENCE}-rerun" / name
        study.entry("aggregate")(results / name, results / name / "derived", repeat if repeat.is_dir() else None)
    return results
