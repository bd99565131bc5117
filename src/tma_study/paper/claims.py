"""The paper's claims, each checked against the derived data the pipeline wrote.

Each study states its claims in ``config/claims/<study>.yaml`` (one file per study, so a new
study adds a file and edits nothing central), validated against
``workflow/schemas/claims.schema.yaml``. A claim names its statement, its study, the figure
or table it rests on, and its check: a query over one derived CSV of the study, never code,
or a list of such checks that must all hold (both bounds of a range, each size it names)::

    check:
      file: derived/peaks.csv                            # results/<label>/<study>/derived/peaks.csv
      where: {working_set: hbm, mechanism: tma_tile}     # equal; [a, b]: one of; {">=": 1024}: compare
      column: fraction_of_d2d_copy
      reduce: one          # one (exactly one row, default) | all | any | min | max | median
      op: ">="             # == != < <= > >=
      value: 0.95
      margin: 0.03         # the data must clear the threshold by 3 % of it (the run-to-run spread)
      in_repeat: true      # also checked in results/<label>-rerun/<study>/ where present
      tolerance: 0.005     # absolute slack granted to the claim (numbers only)
      if_missing: "..."    # NOT MEASURED with this reason when no row or column matches
      relative_to:         # optional: check column / the same column of partner rows instead
        where: {mechanism: cp_async}          # the partner rows: 'where' with these keys replaced
        on: [working_set, bytes_per_transfer] # columns pairing each row with its partner

The outcome of each claim is PASS, FAIL or NOT MEASURED (with the reason: the study's data
are absent, the claim needs another GPU architecture, or ``if_missing`` applied), with the
numbers observed and the threshold, in ``results/<label>/claims.tsv`` and ``claims.md``.
The catalog's claims read the catalog's derived tables (``build/catalog/derived/``), which
come from cited source lines, not from a GPU.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from tma_study.atomic import atomic_write_text
from tma_study.harness.provenance import read as read_provenance
from tma_study.harness.runs import same_sweep_runs

from .claim_checks import FAIL, NOT_MEASURED, PASS, Verdict, critical_value, format_value, is_tolerance, run_check
from .claim_checks import margin_scale, threshold_text
from .claim_files import CLAIMS_DIR, Claim, ClaimsError, load_claims, parse_file

RERUN_SUFFIX = "-rerun"                        # tma_study.pipeline.RERUN_SUFFIX
SPREAD_TEXT = "spread between runs of this sweep"
BY_RUN_FILE = "claims_by_run.tsv"             # each claim's status in every run of its sweep
REFERENCE_GPU_SPECIFIC = "set for the reference GPU"   # a claim's thresholds that hold for it alone
TSV_COLUMNS = ["id", "status", "reason", "observed", "threshold", "study", "figure", "statement"]
__all__ = ["PASS", "FAIL", "NOT_MEASURED", "CLAIMS_DIR", "Claim", "ClaimsError", "Outcome", "evaluate", "check_all",
           "format_value", "load_claims", "parse_file", "threshold_text"]


@dataclass(frozen=True)
class Outcome:
    claim: Claim
    status: str
    reason: str
    observed: str = ""
    threshold: str = field(default="")

    def row(self) -> dict:
        return {"id": self.claim.id, "status": self.status, "reason": self.reason, "observed": self.observed,
                "threshold": self.threshold, "study": self.claim.study, "figure": self.claim.figure,
                "statement": self.claim.statement}


# ---------------------------------------------------------------------------- evaluation

def _gpu_of(results_dir: Path, study: str):
    """(name, compute capability) of the GPU the label's data came from, or None."""
    candidates = [results_dir / study / "provenance.json", *sorted(results_dir.glob("*/provenance.json"))]
    for path in candidates:
        if path.is_file():
            gpu = read_provenance(path)["gpu"]
            if gpu.get("compute_capability"):
                return gpu.get("name", "unknown GPU"), tuple(gpu["compute_capability"])
    return None


def _needs_reason(claim: Claim, results_dir: Path) -> str | None:
    """Why the data cannot speak to a claim that needs another architecture, or None."""
    if claim.needs is None:
        return None
    digits = claim.needs.removeprefix("sm")
    major = int(digits[:-1])
    gpu = _gpu_of(results_dir, claim.study)
    if gpu is None:
        return f"not measured: needs an {claim.needs.upper()} GPU; no provenance in {results_dir}/ names the GPU"
    name, capability = gpu
    if capability[0] != major:
        return (f"not measured: needs an {claim.needs.upper()} GPU; {results_dir}/ comes from {name} "
                f"(sm_{capability[0]}{capability[1]})")
    return None


def repeat_dir(results_dir: Path) -> Path:
    """results/<label>-rerun/: the repeat run of the same sweep on the same GPU."""
    results_dir = Path(results_dir)
    return results_dir.parent / f"{results_dir.name}{RERUN_SUFFIX}"


def spread(check: dict, study_dir: Path, others: list[Path]) -> tuple[float, list[str]]:
    """(the largest difference of the check's critical value between this run and another run of
    the same sweep, in the column's units; the labels of the runs compared)."""
    mine = critical_value(check, study_dir)
    found = [(run.parent.name, critical_value(check, run)) for run in others] if mine is not None else []
    found = [(label, value) for label, value in found if value is not None]
    if not found:
        return 0.0, []
    return max(abs(value - mine) for _, value in found), [label for label, _ in found]


def _with_spread(check: dict, study_dir: Path, others: list[Path]) -> tuple[dict, str]:
    """The check made to clear its threshold by more than the spread between runs of the same
    sweep (where that exceeds its margin), and the text saying what was compared. The spread is
    stated as a share of the threshold's value (of the tolerance where the value is 0); a bound
    moves by it, a tolerance narrows by it."""
    difference, labels = spread(check, study_dir, others)
    if not labels:
        return check, ""
    scale, margin = margin_scale(check), float(check.get("margin", 0.0))
    share = difference / scale
    of = "" if check["value"] else " of the tolerance"
    text = f"{SPREAD_TEXT} {format_value(round(100 * share, 2))} %{of} ({', '.join(labels)})"
    if difference <= margin * scale:
        return check, text + ", within the claim's margin"
    cleared = text + ", larger than the claim's margin: cleared instead"
    return ({**check, "spread": difference} if is_tolerance(check) else {**check, "margin": share}), cleared


def _verdicts(claim: Claim, study_dir: Path, results_dir: Path) -> list[tuple[str, Verdict]]:
    """(run, verdict) for every check, in the reference run and, where asked, the repeat run.
    A bound must hold by more than the spread between the runs of the same sweep in results/."""
    verdicts, others = [], same_sweep_runs(study_dir)
    for check in claim.checks:
        judged, compared = _with_spread(check, study_dir, others)
        verdict = run_check(judged, study_dir)
        if compared:
            verdict = Verdict(verdict.status, f"{verdict.reason}; {compared}", verdict.observed)
        verdicts.append(("", verdict))
        if check.get("in_repeat"):
            repeat = repeat_dir(results_dir) / claim.study
            if (repeat / check["file"]).is_file():
                verdicts.append(("repeat run: ", run_check(check, repeat)))
            else:
                verdicts.append(("repeat run: ", Verdict(PASS, f"no {repeat}/{check['file']}: checked in the "
                                                         "reference run only")))
    return verdicts


def evaluate(claim: Claim, results_dir: Path, study_dirs: dict | None = None) -> Outcome:
    """PASS, FAIL or NOT MEASURED for one claim against ``results/<label>/``.

    ``study_dirs`` maps a study whose data do not come from a GPU (the catalog) to the folder
    holding its ``derived/``. A claim of several checks passes when every check passes.
    """
    results_dir = Path(results_dir)
    threshold = " and ".join(threshold_text(check) for check in claim.checks)
    if claim.reference_gpu_specific:
        threshold += f" ({REFERENCE_GPU_SPECIFIC}: {claim.reference_gpu_specific})"
    reason = _needs_reason(claim, results_dir)
    if reason:
        return Outcome(claim, NOT_MEASURED, reason, threshold=threshold)
    study_dir = Path((study_dirs or {}).get(claim.study, results_dir / claim.study))
    if not study_dir.is_dir():
        return Outcome(claim, NOT_MEASURED, f"no {study_dir}/: not measured", threshold=threshold)
    verdicts = _verdicts(claim, study_dir, results_dir)
    spreads = [part for _, v in verdicts for part in v.reason.split("; ") if part.startswith(SPREAD_TEXT)]
    if spreads:
        threshold += "; " + "; ".join(dict.fromkeys(spreads))
    statuses = [v.status for _, v in verdicts]
    status = FAIL if FAIL in statuses else NOT_MEASURED if NOT_MEASURED in statuses else PASS
    reason = "; ".join(f"{run}{v.reason}" for run, v in verdicts)
    observed = " | ".join(f"{run}{v.observed}" for run, v in verdicts if v.observed)
    if status == NOT_MEASURED:
        reason = "; ".join(v.reason for _, v in verdicts if v.status == NOT_MEASURED)
    return Outcome(claim, status, reason, observed, threshold)


def check_all(claims: list[Claim], results_dir: Path, study_dirs: dict | None = None) -> list[Outcome]:
    return [evaluate(claim, results_dir, study_dirs) for claim in claims]


def other_runs(claims: list[Claim], results_dir: Path, study_dirs: dict | None = None) -> pd.DataFrame:
    """Each claim's status in every other run of its study's sweep in results/ (another instance's
    data judged as if it were the reference: its own rows, the same spreads): one row per claim,
    ``id``, ``study`` and one column per other label, "" where that label holds no run of the
    claim's sweep. Claims on data that do not come from a GPU (``study_dirs``) have no other run."""
    results_dir = Path(results_dir)
    rows, labels = [], set()
    for claim in claims:
        row = {"id": claim.id, "study": claim.study}
        if claim.study not in (study_dirs or {}):
            for run in same_sweep_runs(results_dir / claim.study):
                row[run.parent.name] = evaluate(claim, run.parent, study_dirs).status
                labels.add(run.parent.name)
        rows.append(row)
    return pd.DataFrame(rows, columns=["id", "study", *sorted(labels)]).fillna("")


def run_agreement(by_run: pd.DataFrame) -> tuple[list[str], list[str]]:
    """(the claims judged PASS or FAIL in another run of their sweep, those of them whose status
    there differs from the reference's) of a ``claims_by_run.tsv`` frame (the reference's status in
    its third column). NOT MEASURED in another run (its data lack the file) judges nothing."""
    from .instances import ANNOTATIONS
    reference, others = by_run.columns[2], [c for c in by_run.columns[3:] if c not in ANNOTATIONS]
    checked, differing = [], []
    for row in by_run.to_dict("records"):
        statuses = [row[label] for label in others if row[label] in (PASS, FAIL)]
        if statuses and row[reference] in (PASS, FAIL):
            checked.append(row["id"])
            if any(status != row[reference] for status in statuses):
                differing.append(row["id"])
    return checked, differing


def failing(outcomes: list[Outcome]) -> list[str]:
    """The ids of the claims that FAIL, for ``--strict``."""
    return [o.claim.id for o in outcomes if o.status == FAIL]


# ---------------------------------------------------------------------------- reports

def _cell(text) -> str:
    return " ".join(str(text).split())


def outcomes_frame(outcomes: list[Outcome]) -> pd.DataFrame:
    return pd.DataFrame([o.row() for o in outcomes], columns=TSV_COLUMNS)


def summary_counts(outcomes) -> dict[str, int]:
    statuses = [o.status for o in outcomes]
    return {status: statuses.count(status) for status in (PASS, FAIL, NOT_MEASURED)}


def to_markdown(outcomes: list[Outcome], results_dir: str) -> str:
    counts = summary_counts(outcomes)
    lines = [f"# Claims checked against `{results_dir}/`", "",
             (f"{counts[PASS]} PASS, {counts[FAIL]} FAIL, {counts[NOT_MEASURED]} NOT MEASURED "
              f"of {len(outcomes)} claims (definitions: `config/claims/<study>.yaml`)."), "",
             "| claim | status | statement | observed | threshold | rests on | reason |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for o in outcomes:
        cells = [f"`{o.claim.id}`", f"**{o.status}**", o.claim.statement, o.observed, o.threshold,
                 o.claim.figure, o.reason]
        lines.append("| " + " | ".join(_cell(c).replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def write_reports(outcomes: list[Outcome], out_dir: Path, runs: pd.DataFrame | None = None) -> tuple[Path, Path]:
    """``claims.tsv`` (one row per claim) and ``claims.md`` (to read) in ``out_dir``, and with
    ``runs`` (``other_runs``) ``claims_by_run.tsv``: the reference's status beside the others'."""
    out_dir = Path(out_dir)
    frame = outcomes_frame(outcomes).map(_cell)
    tsv, md = out_dir / "claims.tsv", out_dir / "claims.md"
    atomic_write_text(tsv, frame.to_csv(sep="\t", index=False))
    atomic_write_text(md, to_markdown(outcomes, str(out_dir)))
    if runs is not None:
        by_run = runs.copy()
        by_run.insert(2, out_dir.name, [o.status for o in outcomes])
        atomic_write_text(out_dir / BY_RUN_FILE, by_run.to_csv(sep="\t", index=False))
    return tsv, md


def read_outcomes(tsv: Path) -> pd.DataFrame:
    return pd.read_csv(tsv, sep="\t", dtype=str, keep_default_na=False)


# ---------------------------------------------------------------------------- titles

def notebook_title(notebook: Path) -> str:
    """The first Markdown heading of a jupytext notebook (``# # Title``)."""
    for line in Path(notebook).read_text().splitlines():
        if line.startswith("# # "):
            return line[4:].strip()
    return Path(notebook).stem
