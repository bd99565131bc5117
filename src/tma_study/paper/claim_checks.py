"""One check of a claim against one derived CSV: row selection, ratios to partner rows, the
reduction, the threshold with its tolerance and its margin. ``tma_study.paper.claims`` combines the
checks of a claim (and the runs it is checked in) into PASS, FAIL or NOT MEASURED.

A check's ``tolerance`` is slack granted to the claim; its ``margin`` is room demanded of the
data: with ``margin: 0.03`` and ``>= 0.95`` the observed value must reach 0.95 * 1.03, so a
claim passes only where it would survive the run-to-run spread its statement quotes (``== 0``
within a tolerance: the margin is a share of the tolerance).
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from tma_study.harness.runs import by_file_version

PASS, FAIL, NOT_MEASURED = "PASS", "FAIL", "NOT MEASURED"
OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
       ">=": operator.ge}
REDUCTIONS = {"min": min, "max": max, "median": lambda values: float(pd.Series(values).median())}
MAX_LISTED_ROWS = 8


class NotFound(LookupError):
    """The data hold no row or column the check asks for."""


@dataclass(frozen=True)
class Verdict:
    """The outcome of one check in one run."""
    status: str
    reason: str
    observed: str = ""


def is_number(value) -> bool:
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
    if is_number(value):
        return pd.to_numeric(series, errors="coerce") == value
    return series.astype(str) == value


def _row_mask(frame: pd.DataFrame, column: str, condition, file: str) -> pd.Series:
    if column not in frame.columns:
        raise NotFound(f"{file} has no column {column!r} (columns: {', '.join(frame.columns)})")
    series = frame[column]
    if isinstance(condition, dict):
        mask = pd.Series(True, index=frame.index)
        for op, value in condition.items():
            mask &= series.map(lambda cell, op=op, value=value: passes(cell, op, value))
        return mask
    if isinstance(condition, list):
        return pd.concat([_equal_mask(series, v) for v in condition], axis=1).any(axis=1)
    return _equal_mask(series, condition)


def effective_threshold(check: dict) -> tuple[object, float]:
    """(value, tolerance) after the margin: a bound moved against the data, or a narrower tolerance
    (narrowed by the margin's share of the value, or by ``spread``, the deviation's movement between
    runs of the sweep that tma_study.paper.claims sets, where that is larger)."""
    value, tolerance = check["value"], float(check.get("tolerance", 0.0))
    margin = float(check.get("margin", 0.0))
    if not (margin or check.get("spread")) or not is_number(value):
        return value, tolerance
    if check["op"] in (">", ">="):
        return value + margin * abs(value), tolerance
    if check["op"] in ("<", "<="):
        return value - margin * abs(value), tolerance
    return value, tolerance - max(margin * margin_scale(check), float(check.get("spread", 0.0)))


def margin_scale(check: dict) -> float:
    """What a margin (and a spread between runs) is a share of: the threshold's value, or the
    tolerance of a check that asks a number to equal 0 within it."""
    value = abs(float(check["value"]))
    return value if value or check["op"] != "==" else float(check.get("tolerance", 0.0))


def passes(observed, op: str, value, tolerance: float = 0.0) -> bool:
    """``observed op value``, with ``tolerance`` granted in the claim's favour."""
    if isinstance(value, bool):
        cell = _as_bool(observed)
        return cell is not None and OPS[op](cell, value)
    if not is_number(value):
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
    if is_number(value) or type(value).__module__ == "numpy":
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
    if check.get("margin") or check.get("spread"):
        value, tolerance = effective_threshold(check)
        cleared = (f"within {format_value(round(tolerance, 6))}" if check["op"] == "=="
                   else f"{check['op']} {format_value(round(value, 6))}")
        room = (f"a margin of {format_value(round(100 * check['margin'], 3))} %" if check.get("margin") else "")
        if check.get("spread", 0.0) > float(check.get("margin", 0.0)) * margin_scale(check):
            room = f"the spread {format_value(round(check['spread'], 6))}"
        text += f" with {room} ({cleared})"
    return text


def _row_names(rows: pd.DataFrame, keys: list[str]) -> list[str]:
    """Name each matching row by the where-columns that vary between them."""
    varying = [c for c in dict.fromkeys(keys) if c in rows.columns and rows[c].nunique() > 1]
    if not varying:
        return [""] * len(rows)
    return [", ".join(f"{c}={format_value(r[c])}" for c in varying) + ": " for _, r in rows.iterrows()]


def select(frame: pd.DataFrame, where: dict, check: dict) -> pd.DataFrame:
    mask = pd.Series(True, index=frame.index)
    for column, condition in where.items():
        mask &= _row_mask(frame, column, condition, check["file"])
    if check["column"] not in frame.columns:
        raise NotFound(f"{check['file']} has no column {check['column']!r} (columns: {', '.join(frame.columns)})")
    if not mask.any():
        raise NotFound(f"no row of {check['file']} matches {where}")
    return frame[mask]


def ratios(frame: pd.DataFrame, rows: pd.DataFrame, check: dict) -> pd.DataFrame:
    """``rows`` with ``column`` replaced by its ratio to the partner row's value."""
    relative = check["relative_to"]
    column, on = check["column"], relative["on"]
    partners = select(frame, {**check.get("where", {}), **relative["where"]}, check)
    for key in on:
        if key not in frame.columns:
            raise NotFound(f"{check['file']} has no column {key!r} to pair rows on")
    if partners.duplicated(on).any():
        raise NotFound(f"several partner rows {relative['where']} share the same {on}; add keys to 'on'")
    paired = rows.merge(partners[on + [column]], on=on, how="left", suffixes=("", "_partner"))
    if paired[f"{column}_partner"].isna().any():
        raise NotFound(f"some rows have no partner {relative['where']} with the same {on}")
    numerator = pd.to_numeric(paired[column], errors="coerce")
    return paired.assign(**{column: numerator / pd.to_numeric(paired[f"{column}_partner"], errors="coerce")})


def judge(rows: pd.DataFrame, check: dict) -> Verdict:
    """PASS or FAIL of the selected rows against the check's threshold (margin applied)."""
    reduce, op = check.get("reduce", "one"), check["op"]
    value, tolerance = effective_threshold(check)
    threshold = threshold_text(check)
    values = list(rows[check["column"]])
    names = _row_names(rows, [*check.get("where", {}), *check.get("relative_to", {}).get("on", [])])
    listed = "; ".join(f"{n}{format_value(v)}" for n, v in zip(names, values[:MAX_LISTED_ROWS]))
    if len(values) > MAX_LISTED_ROWS:
        listed += f"; ... ({len(values)} rows)"
    if reduce == "one":
        if len(values) != 1:
            return Verdict(FAIL, f"{len(values)} rows of {check['file']} match {check.get('where', {})}; "
                           "the check needs exactly one (narrow 'where' or set 'reduce')", listed)
        ok = passes(values[0], op, value, tolerance)
        return Verdict(PASS if ok else FAIL, f"observed {format_value(values[0])} "
                       f"{'meets' if ok else 'misses'} {threshold}", listed)
    if reduce in ("all", "any"):
        passing = [passes(v, op, value, tolerance) for v in values]
        ok = all(passing) if reduce == "all" else any(passing)
        return Verdict(PASS if ok else FAIL, f"{sum(passing)} of {len(values)} matching rows pass {threshold}",
                       listed)
    numbers = [_as_float(v) for v in values]
    if any(math.isnan(n) for n in numbers):
        return Verdict(FAIL, f"a matching value of {check['column']!r} is missing (NaN)", listed)
    reduced = REDUCTIONS[reduce](numbers)
    ok = passes(reduced, op, value, tolerance)
    return Verdict(PASS if ok else FAIL, f"{reduce} of {len(values)} rows is {format_value(reduced)}, "
                   f"{'meets' if ok else 'misses'} {threshold}", f"{reduce} {format_value(reduced)} of {listed}")


def matched_rows(check: dict, study_dir: Path) -> pd.DataFrame | Verdict:
    """The rows of ``study_dir/<check.file>`` the check judges (ratios where it asks for them),
    or the Verdict saying why there are none."""
    path = Path(study_dir) / check["file"]
    if not path.is_file():
        return Verdict(NOT_MEASURED, f"{path} does not exist: the analysis has not run")
    frame = read_table(path)
    try:
        rows = select(frame, check.get("where", {}), check)
        return ratios(frame, rows, check) if "relative_to" in check else rows
    except NotFound as missing:
        if "if_missing" in check:
            return Verdict(NOT_MEASURED, f"not measured: {check['if_missing']}")
        return Verdict(FAIL, str(missing))


_parsed_csv = by_file_version(pd.read_csv)


def read_table(path: Path) -> pd.DataFrame:
    """A derived CSV (parsed once per version of the file), as a copy free to change."""
    return _parsed_csv(path).copy()


def run_check(check: dict, study_dir: Path) -> Verdict:
    """One check against ``study_dir/<check.file>``: PASS, FAIL or NOT MEASURED."""
    rows = matched_rows(check, study_dir)
    return rows if isinstance(rows, Verdict) else judge(rows, check)


def is_bound(check: dict) -> bool:
    """Whether the check bounds a number from one side (a spread moves its threshold)."""
    value = check["value"]
    return check["op"] in ("<", "<=", ">", ">=") and is_number(value) and not isinstance(value, bool) and value != 0


def is_tolerance(check: dict) -> bool:
    """Whether the check asks a number to equal a value within a tolerance (a spread narrows it)."""
    value = check["value"]
    return (check["op"] == "==" and is_number(value) and not isinstance(value, bool)
            and float(check.get("tolerance", 0.0)) > 0)


def critical_value(check: dict, study_dir: Path) -> float | None:
    """The number a check stands or falls on in ``study_dir``. A bound: the reduced value, or with
    reduce 'all' the row nearest the bound ('any': the farthest). A tolerance: the distance from the
    value, of the reduced value or of the row farthest from it ('any': the nearest). None for other
    checks or where no row matches."""
    if not (is_bound(check) or is_tolerance(check)):
        return None
    rows = matched_rows(check, study_dir)
    if isinstance(rows, Verdict):
        return None
    numbers = [n for n in (_as_float(v) for v in rows[check["column"]]) if not math.isnan(n)]
    reduce = check.get("reduce", "one")
    if not numbers or (reduce == "one" and len(numbers) != 1):
        return None
    if is_tolerance(check):
        value = float(check["value"])
        if reduce in REDUCTIONS:
            return abs(REDUCTIONS[reduce](numbers) - value)
        distances = [abs(n - value) for n in numbers]
        return min(distances) if reduce == "any" else max(distances)
    lower_bound = check["op"] in (">", ">=")
    if reduce in REDUCTIONS:
        return REDUCTIONS[reduce](numbers)
    if reduce == "any":
        return max(numbers) if lower_bound else min(numbers)
    return min(numbers) if lower_bound else max(numbers)      # one, all
