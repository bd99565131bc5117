"""A finding holds on every instance of its sweep (measurement.md, "Every instance").

``claims_by_run.tsv`` judges each claim again on every other run of its sweep. For each claim whose
status differs between runs, ``annotate`` adds what the runs show:

- ``range``: for each check whose verdict differs between runs, the number it stands on in each
  run (a bound's reduced value, or the rows that pass a row-by-row check), e.g.
  ``min(tma_over_cp_async) >= 0.93: 0.9437 (h200), 0.9517 (h200-rerun)``;
- ``restated_as``: the claims that restate it (the registry's ``restates``, the claim's ``instead``),
  each with whether it holds on every run. Such a claim is instance-dependent: it is stated from the
  reference run alone and must be restated by one that holds on every instance
  (tests/cpu/pipeline/test_pipeline_no_gpu.py checks it).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.harness.runs import same_sweep_runs

from . import claims_registry
from .claim_checks import PASS, critical_value, format_value, run_check, threshold_text

RANGE, RESTATED = "range across runs", "restated as"
ANNOTATIONS = (RANGE, RESTATED)


def _observed(check: dict, study_dir: Path) -> str:
    value = critical_value(check, study_dir)
    if value is not None:
        return format_value(value)
    verdict = run_check(check, study_dir)
    return verdict.reason.split(" matching rows pass")[0] if " matching rows pass" in verdict.reason else verdict.status


def check_ranges(claim, study_dirs: dict[str, Path]) -> str:
    """Each check of ``claim`` that stands on a number, or whose verdict differs between the runs,
    with what it observed in each run (``study_dirs``: label -> the run's study folder)."""
    parts = []
    first = next(iter(study_dirs.values()))
    for check in claim.checks:
        differs = len({run_check(check, d).status for d in study_dirs.values()}) > 1
        if differs or critical_value(check, first) is not None:
            observed = ", ".join(f"{_observed(check, d)} ({label})" for label, d in study_dirs.items())
            bare = {k: v for k, v in check.items() if k not in ("margin", "spread")}
            parts.append(f"{threshold_text(bare)}: {observed}")
    return "; ".join(parts)


def restatements(claims: list, entries: list[dict]) -> dict[str, list[str]]:
    """{claim id: the ids of the claims that restate it}."""
    out: dict[str, list[str]] = {}
    for entry in entries:
        if entry.get("restates"):
            out.setdefault(entry["restates"], []).append(entry["id"])
    for claim in claims:
        if claim.instead:
            out.setdefault(claim.id, []).append(claim.instead)
    return {k: list(dict.fromkeys(v)) for k, v in out.items()}


def holds_everywhere(row: dict, labels: list[str]) -> bool:
    statuses = [row[label] for label in labels if row.get(label)]
    return bool(statuses) and all(s == PASS for s in statuses)


def annotate(runs: pd.DataFrame, claims: list, reference: dict[str, str], results_dir: Path) -> pd.DataFrame:
    """``runs`` (claims.other_runs) with the RANGE and RESTATED columns for each claim whose status in
    another run differs from ``reference`` (id -> the reference run's status)."""
    results_dir = Path(results_dir)
    labels = [c for c in runs.columns if c not in ("id", "study", *ANNOTATIONS)]
    by_id = {c.id: c for c in claims}
    rows = {r["id"]: {**r, results_dir.name: reference.get(r["id"], "")} for r in runs.to_dict("records")}
    restated = restatements(claims, claims_registry.load())
    ranges, texts = [], []
    for row in runs.to_dict("records"):
        others = [row[label] for label in labels if row[label] in ("PASS", "FAIL")]
        differs = reference.get(row["id"]) in ("PASS", "FAIL") and any(s != reference[row["id"]] for s in others)
        if not differs:
            ranges.append(""), texts.append("")
            continue
        claim = by_id[row["id"]]
        dirs = {results_dir.name: results_dir / claim.study,
                **{run.parent.name: run for run in same_sweep_runs(results_dir / claim.study)}}
        ranges.append(check_ranges(claim, dirs))
        every = [results_dir.name, *labels]
        verdict = {True: "holds on every run", False: "does not hold on every run"}
        texts.append("; ".join(f"{new} ({verdict[holds_everywhere(rows.get(new, {}), every)]})"
                               for new in restated.get(row["id"], [])) or "not restated")
    return runs.assign(**{RANGE: ranges, RESTATED: texts})
