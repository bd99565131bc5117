"""What moved between runs, for a study without a comparison of its own: the numbers its claims
stand on (the default ``compare`` entry point of a study declaration).

One row per check of each of the study's claims (``config/claims/<study>.yaml``): a numeric
check's critical value in every run (the number it stands or falls on:
``claim_checks.critical_value``), which moved when it changed by more than ``MOVED_RELATIVE``; a
check of words or flags (a winner, a bound that is a verdict) says whether it holds in each run.
A claim whose thresholds hold for the reference GPU alone is marked.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.config import REPO_ROOT

from .compare import Verdict, only_the_reference, run_labels, value_row, verdict_row

MOVED_RELATIVE = 0.02     # the margin most claims state for the spread between instances
CLAIMS_DIR = REPO_ROOT / "config" / "claims"


def _format(value: float) -> str:
    from tma_study.paper.claim_checks import format_value
    return format_value(round(value, 4))


def _quantity(claim, index: int, check: dict) -> str:
    from tma_study.paper.claim_checks import threshold_text
    which = f" (check {index + 1})" if len(claim.checks) > 1 else ""
    specific = " [thresholds set for the reference GPU]" if claim.reference_gpu_specific else ""
    subject = threshold_text({k: v for k, v in check.items() if k not in ("margin", "tolerance")})
    return f"{claim.id}{which}{specific}: {subject}"


def _check_row(claim, index: int, check: dict, study_dirs: dict[str, Path], labels: list[str]) -> dict:
    from tma_study.paper.claim_checks import critical_value, run_check
    values = {label: critical_value(check, study_dirs[label]) for label in labels}
    quantity = _quantity(claim, index, check)
    if values[labels[0]] is not None:
        return value_row(quantity, values, labels, _format, MOVED_RELATIVE)
    verdicts = {}
    for label in labels:
        status = run_check(check, study_dirs[label]).status
        verdicts[label] = Verdict({"PASS": "holds", "FAIL": "fails"}.get(status, status.lower()))
    return verdict_row(quantity, verdicts, labels)


def compare_runs(derived_dirs: dict[str, Path], reference: str) -> pd.DataFrame:
    """One row per check of the study's claims, one column per run (the reference first), 'moved'."""
    from tma_study.paper.claim_files import parse_file
    labels = run_labels(derived_dirs, reference)
    study = Path(derived_dirs[reference]).parent.name
    alone = only_the_reference(study, labels)
    if alone is not None:
        return pd.DataFrame(alone, columns=["quantity", *labels, "moved"])
    study_dirs = {label: Path(folder).parent for label, folder in derived_dirs.items()}
    claims_file = CLAIMS_DIR / f"{study}.yaml"
    if not claims_file.is_file():       # a study whose findings other studies' claims state
        return pd.DataFrame([{"quantity": f"claims of {study}", **{label: "none stated" for label in labels},
                              "moved": f"nothing to compare (no config/claims/{study}.yaml)"}],
                            columns=["quantity", *labels, "moved"])
    rows = [_check_row(claim, index, check, study_dirs, labels)
            for claim in parse_file(claims_file) for index, check in enumerate(claim.checks)]
    return pd.DataFrame(rows, columns=["quantity", *labels, "moved"])
