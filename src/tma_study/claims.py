"""The paper's claims, each checked against the derived data the pipeline wrote.

Each study states its claims in ``config/claims/<study>.yaml`` (one file per study, so a new
study adds a file and edits nothing central), validated against
``workflow/schemas/claims.schema.yaml``. A claim names its statement, its study, the figure
or table it rests on, and one check: a query over one derived CSV of the study, never code::

    check:
      file: derived/peaks.csv                            # results/<label>/<study>/derived/peaks.csv
      where: {working_set: hbm, mechanism: tma_tile}     # equal; [a, b]: one of; {">=": 1024}: compare
      column: fraction_of_d2d_copy
      reduce: one          # one (exactly one row, default) | all | any | min | max | median
      op: ">="             # == != < <= > >=
      value: 0.95
      tolerance: 0.005     # absolute slack granted to the claim (numbers only)
      if_missing: "..."    # NOT MEASURED with this reason when no row or column matches
      relative_to:         # optional: check column / the same column of partner rows instead
        where: {mechanism: cp_async}          # the partner rows: 'where' with these keys replaced
        on: [working_set, bytes_per_transfer] # columns pairing each row with its partner

The outcome of each claim is PASS, FAIL or NOT MEASURED (with the reason: the study's data
are absent, the claim needs another GPU architecture, or ``if_missing`` applied), with the
numbers observed and the threshold, in ``results/<label>/claims.tsv`` and ``claims.md``.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field
from pathlib import Path

import jsonschema
import pandas as pd
import yaml

from .config import REPO_ROOT, SCHEMA_DIR, key_path
from .harness.atomic import atomic_write_text
from .harness.provenance import read as read_provenance

CLAIMS_DIR = REPO_ROOT / "config" / "claims"
SCHEMA = SCHEMA_DIR / "claims.schema.yaml"
PASS, FAIL, NOT_MEASURED = "PASS", "FAIL", "NOT MEASURED"
TSV_COLUMNS = ["id", "status", "reason", "observed", "threshold", "study", "figure", "statement"]
OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
       ">=": operator.ge}
REDUCTIONS = {"min": min, "max": max, "median": lambda values: float(pd.Series(values).median())}
MAX_LISTED_ROWS = 8


class ClaimsError(ValueError):
    """A claims file is invalid; the message names the file, each claim id and key."""


class _NotFound(LookupError):
    """The data hold no row or column the check asks for."""


@dataclass(frozen=True)
class Claim:
    id: str
    statement: str
    study: str
    figure: str
    check: dict
    needs: str | None = None
    source: str = ""            # the claims file, for messages


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


# ---------------------------------------------------------------------------- loading, validation

def _key_path(path) -> str:
    return key_path(path) or "<file>"


def _schema_messages(data, source: str) -> list[str]:
    validator = jsonschema.Draft202012Validator(yaml.safe_load(SCHEMA.read_text()))
    messages = []
    for error in validator.iter_errors(data):
        path = list(error.absolute_path)
        where = f"{source}: key '{_key_path(path)}'"
        if len(path) >= 2 and path[0] == "claims" and isinstance(path[1], int):
            claim = data["claims"][path[1]]
            claim_id = claim.get("id") if isinstance(claim, dict) else None
            name = f"claim {claim_id!r}" if claim_id else f"claim #{path[1] + 1} (no id)"
            where = f"{source}: {name} key '{_key_path(path[2:])}'"
        allowed = error.schema.get("description") if isinstance(error.schema, dict) else None
        detail = error.message
        if error.validator == "enum":
            detail = f"{error.instance!r} is not allowed; allowed: {', '.join(map(str, error.validator_value))}"
        elif allowed and error.validator not in ("required", "additionalProperties"):
            detail += f" (allowed: {allowed})"
        messages.append(f"{where}: {detail}")
    return sorted(set(messages))


def _semantic_messages(claim: Claim, studies: dict | None) -> list[str]:
    """What the schema cannot say: the file's study, the figure, operators that fit the value."""
    at = f"{claim.source}: claim {claim.id!r}"
    messages = []
    stem = Path(claim.source).stem
    if claim.study != stem:
        messages.append(f"{at} key 'study': {claim.study!r} differs from the file's study {stem!r} "
                        f"(claims of study S live in config/claims/S.yaml)")
    study = (studies or {}).get(claim.study)
    if study is not None:
        known = (*study.figures, *study.tables, f"{study.name}_kernels")
        if claim.figure not in known:
            messages.append(f"{at} key 'figure': {claim.figure!r} is not a figure or table of study "
                            f"{study.name!r}; allowed: {', '.join(known)}")
        derived = claim.check["file"].removeprefix("derived/")
        if derived not in study.derived_files:
            messages.append(f"{at} key 'check.file': {claim.check['file']!r} is not written by study "
                            f"{study.name!r}; allowed: {', '.join('derived/' + f for f in study.derived_files)}")
    value, op = claim.check["value"], claim.check["op"]
    if not _is_number(value) and op not in ("==", "!="):
        messages.append(f"{at} key 'check.op': {op!r} needs a number; with {value!r} allowed: ==, !=")
    if not _is_number(value) and "tolerance" in claim.check:
        messages.append(f"{at} key 'check.tolerance': a tolerance needs a number value, not {value!r}")
    return messages


def parse_file(path: Path, studies: dict | None = None) -> list[Claim]:
    """The claims of one file, validated; raises ClaimsError naming every problem."""
    path = Path(path)
    source = str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ClaimsError(f"{source} is not valid YAML: {exc}") from None
    messages = _schema_messages(data, source)
    if messages:
        raise ClaimsError("invalid claims:\n  " + "\n  ".join(messages))
    claims = [Claim(id=c["id"], statement=c["statement"], study=c["study"], figure=c["figure"],
                    check=c["check"], needs=c.get("needs"), source=source) for c in data["claims"]]
    messages = [m for claim in claims for m in _semantic_messages(claim, studies)]
    if messages:
        raise ClaimsError("invalid claims:\n  " + "\n  ".join(messages))
    return claims


def load_claims(directory: Path = CLAIMS_DIR, studies: dict | None = None) -> list[Claim]:
    """Every claim of every ``<study>.yaml`` in ``directory``; ids are unique across files."""
    claims = [c for path in sorted(Path(directory).glob("*.yaml")) for c in parse_file(path, studies)]
    seen: dict[str, str] = {}
    messages = []
    for claim in claims:
        if claim.id in seen:
            messages.append(f"{claim.source}: claim {claim.id!r} key 'id': already used in {seen[claim.id]}")
        seen.setdefault(claim.id, claim.source)
    if messages:
        raise ClaimsError("invalid claims:\n  " + "\n  ".join(messages))
    return claims


# ---------------------------------------------------------------------------- evaluation

def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _as_bool(cell):
    if isinstance(cell, (bool,)) or type(cell).__name__ == "bool_":
        return bool(cell)
    return {"true": True, "false": False}.get(str(cell).strip().lower())


def _as_float(cell) -> float:
    try:
        return float(cell)
    except (TypeError, ValueError):
        return math.nan


def _equal_mask(series: pd.Series, value) -> pd.Series:
    if isinstance(value, bool):
        return series.map(_as_bool) == value
    if _is_number(value):
        return pd.to_numeric(series, errors="coerce") == value
    return series.astype(str) == value


def _row_mask(frame: pd.DataFrame, column: str, condition, file: str) -> pd.Series:
    if column not in frame.columns:
        raise _NotFound(f"{file} has no column {column!r} (columns: {', '.join(frame.columns)})")
    series = frame[column]
    if isinstance(condition, dict):
        mask = pd.Series(True, index=frame.index)
        for op, value in condition.items():
            mask &= series.map(lambda cell, op=op, value=value: _passes(cell, op, value, 0.0))
        return mask
    if isinstance(condition, list):
        return pd.concat([_equal_mask(series, v) for v in condition], axis=1).any(axis=1)
    return _equal_mask(series, condition)


def _passes(observed, op: str, value, tolerance: float) -> bool:
    """``observed op value``, with ``tolerance`` granted in the claim's favour."""
    if isinstance(value, bool):
        cell = _as_bool(observed)
        return cell is not None and OPS[op](cell, value)
    if not _is_number(value):
        return OPS[op](str(observed), value)
    cell = _as_float(observed)
    if math.isnan(cell):
        return False
    if op in (">", ">="):
        return OPS[op](cell, value - tolerance)
    if op in ("<", "<="):
        return OPS[op](cell, value + tolerance)
    close = abs(cell - value) <= tolerance
    return close if op == "==" else not close


def format_value(value) -> str:
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return str(bool(value))
    if _is_number(value) or type(value).__module__ == "numpy":
        number = float(value)
        if math.isnan(number):
            return "missing (NaN)"
        return str(int(number)) if number.is_integer() and abs(number) < 1e15 else f"{number:.4g}"
    return str(value)


def threshold_text(check: dict) -> str:
    reduce = check.get("reduce", "one")
    subject = {"one": check["column"], "all": f"every {check['column']}", "any": f"some {check['column']}",
               }.get(reduce, f"{reduce}({check['column']})")
    if "relative_to" in check:
        partner = ", ".join(f"{k}={v}" for k, v in check["relative_to"]["where"].items())
        subject += f" / {check['column']} of [{partner}]"
    text = f"{subject} {check['op']} {format_value(check['value'])}"
    if check.get("tolerance"):
        text += f" (tolerance {format_value(check['tolerance'])})"
    return text


def _row_names(rows: pd.DataFrame, where: dict) -> list[str]:
    """Name each matching row by the where-columns that vary between them."""
    varying = [c for c in where if c in rows.columns and rows[c].nunique() > 1]
    if not varying:
        return [""] * len(rows)
    return [", ".join(f"{c}={format_value(r[c])}" for c in varying) + ": " for _, r in rows.iterrows()]


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


def evaluate(claim: Claim, results_dir: Path) -> Outcome:
    """PASS, FAIL or NOT MEASURED for one claim against ``results/<label>/``."""
    results_dir = Path(results_dir)
    check = claim.check
    threshold = threshold_text(check)
    reason = _needs_reason(claim, results_dir)
    if reason:
        return Outcome(claim, NOT_MEASURED, reason, threshold=threshold)
    study_dir = results_dir / claim.study
    if not study_dir.is_dir():
        return Outcome(claim, NOT_MEASURED, f"no {study_dir}/: not measured", threshold=threshold)
    path = study_dir / check["file"]
    if not path.is_file():
        return Outcome(claim, NOT_MEASURED, f"{path} does not exist: the analysis of study {claim.study!r} "
                       "has not run", threshold=threshold)
    frame = pd.read_csv(path)
    where = check.get("where", {})
    try:
        rows = _select(frame, where, check)
        if "relative_to" in check:
            rows = _ratios(frame, rows, check)
    except _NotFound as missing:
        if "if_missing" in check:
            return Outcome(claim, NOT_MEASURED, f"not measured: {check['if_missing']}", threshold=threshold)
        return Outcome(claim, FAIL, str(missing), threshold=threshold)
    return _judge(claim, rows, threshold)


def _select(frame: pd.DataFrame, where: dict, check: dict) -> pd.DataFrame:
    mask = pd.Series(True, index=frame.index)
    for column, condition in where.items():
        mask &= _row_mask(frame, column, condition, check["file"])
    if check["column"] not in frame.columns:
        raise _NotFound(f"{check['file']} has no column {check['column']!r} (columns: {', '.join(frame.columns)})")
    if not mask.any():
        raise _NotFound(f"no row of {check['file']} matches {where}")
    return frame[mask]


def _ratios(frame: pd.DataFrame, rows: pd.DataFrame, check: dict) -> pd.DataFrame:
    """``rows`` with ``column`` replaced by its ratio to the partner row's value."""
    relative = check["relative_to"]
    column, on = check["column"], relative["on"]
    partners = _select(frame, {**check.get("where", {}), **relative["where"]}, check)
    for key in on:
        if key not in frame.columns:
            raise _NotFound(f"{check['file']} has no column {key!r} to pair rows on")
    if partners.duplicated(on).any():
        raise _NotFound(f"several partner rows {relative['where']} share the same {on}; add keys to 'on'")
    paired = rows.merge(partners[on + [column]], on=on, how="left", suffixes=("", "_partner"))
    if paired[f"{column}_partner"].isna().any():
        raise _NotFound(f"some rows have no partner {relative['where']} with the same {on}")
    numerator = pd.to_numeric(paired[column], errors="coerce")
    return paired.assign(**{column: numerator / pd.to_numeric(paired[f"{column}_partner"], errors="coerce")})


def _judge(claim: Claim, rows: pd.DataFrame, threshold: str) -> Outcome:
    check = claim.check
    reduce, op, value = check.get("reduce", "one"), check["op"], check["value"]
    tolerance = float(check.get("tolerance", 0.0))
    values = list(rows[check["column"]])
    keys = [*check.get("where", {}), *check.get("relative_to", {}).get("on", [])]
    names = _row_names(rows, dict.fromkeys(keys))
    listed = "; ".join(f"{n}{format_value(v)}" for n, v in zip(names, values[:MAX_LISTED_ROWS]))
    if len(values) > MAX_LISTED_ROWS:
        listed += f"; ... ({len(values)} rows)"
    if reduce == "one":
        if len(values) != 1:
            return Outcome(claim, FAIL, f"{len(values)} rows of {check['file']} match {check.get('where', {})}; "
                           "the check needs exactly one (narrow 'where' or set 'reduce')", listed, threshold)
        ok = _passes(values[0], op, value, tolerance)
        return Outcome(claim, PASS if ok else FAIL,
                       f"observed {format_value(values[0])} {'meets' if ok else 'misses'} {threshold}",
                       listed, threshold)
    if reduce in ("all", "any"):
        passing = [_passes(v, op, value, tolerance) for v in values]
        ok = all(passing) if reduce == "all" else any(passing)
        return Outcome(claim, PASS if ok else FAIL, f"{sum(passing)} of {len(values)} matching rows pass",
                       listed, threshold)
    numbers = [_as_float(v) for v in values]
    if any(math.isnan(n) for n in numbers):
        return Outcome(claim, FAIL, f"a matching value of {check['column']!r} is missing (NaN)", listed, threshold)
    reduced = REDUCTIONS[reduce](numbers)
    ok = _passes(reduced, op, value, tolerance)
    return Outcome(claim, PASS if ok else FAIL,
                   f"{reduce} of {len(values)} rows is {format_value(reduced)}, "
                   f"{'meets' if ok else 'misses'} {threshold}", f"{reduce} {format_value(reduced)} of {listed}",
                   threshold)


def check_all(claims: list[Claim], results_dir: Path) -> list[Outcome]:
    return [evaluate(claim, results_dir) for claim in claims]


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


def write_reports(outcomes: list[Outcome], out_dir: Path) -> tuple[Path, Path]:
    """``claims.tsv`` (one row per claim) and ``claims.md`` (to read) in ``out_dir``."""
    out_dir = Path(out_dir)
    frame = outcomes_frame(outcomes).map(_cell)
    tsv, md = out_dir / "claims.tsv", out_dir / "claims.md"
    atomic_write_text(tsv, frame.to_csv(sep="\t", index=False))
    atomic_write_text(md, to_markdown(outcomes, str(out_dir)))
    return tsv, md


def read_outcomes(tsv: Path) -> pd.DataFrame:
    return pd.read_csv(tsv, sep="\t", dtype=str, keep_default_na=False)


# ---------------------------------------------------------------------------- captions

def claims_of_figure(figure: str, claims: list[Claim]) -> list[Claim]:
    return [c for c in claims if c.figure == figure]


def figure_caption(figure: str, title: str, claims: list[Claim]) -> str:
    """One line: the figure's title and the claims resting on it (for Snakemake's report)."""
    ids = [c.id for c in claims_of_figure(figure, claims)]
    rests = f"Claims resting on it: {', '.join(ids)}." if ids else "No claim rests on it."
    return f"{title.rstrip('.')}. {rests}"


def notebook_title(notebook: Path) -> str:
    """The first Markdown heading of a jupytext notebook (``# # Title``)."""
    for line in Path(notebook).read_text().splitlines():
        if line.startswith("# # "):
            return line[4:].strip()
    return Path(notebook).stem
