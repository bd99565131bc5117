"""Raw data checked against its study's schema before any analysis reads it.

``load(study, raw_dir)`` reads ``provenance.json`` (harness.provenance.read, its own schema)
and every raw file of the study, each only where it is safe to read and, where provenance seals
them, only as sealed (harness.seal), and checks each against ``raw_schema.yaml`` (harness.raw_schema):
the file ends with a whole line; columns are those declared, each of its type, in its range,
among its allowed values; the key identifies one row; times are present exactly on rows whose
``timing_status`` is ok; derived columns equal their formula; the rows counted as
configurations add up to provenance's ``configurations``. The first problem stops it with one
message naming the file, the row (and its line) and the column. Analysis reads the frames it
returns, so nothing is read twice or read unchecked.
"""
from __future__ import annotations

import io
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from . import provenance as provenance_mod
from . import raw_schema, seal
from .raw_schema import OK, FileSchema
from .seal import shown  # noqa: F401  (raw_data's API: how a path is shown)

RELATIVE_TOLERANCE = 1e-6     # derived columns: written from the same numbers, so far closer
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class RawDataError(ValueError):
    """Raw data that fail their schema; the message names file, row and column."""


@dataclass(frozen=True)
class RawData:
    """A study's checked raw data: {file name: frame} and its provenance record."""

    frames: dict[str, pd.DataFrame]
    provenance: dict

    def __getitem__(self, name: str) -> pd.DataFrame:
        return self.frames[name]


def timed_ok(frame: pd.DataFrame) -> pd.Series:
    """True for the rows whose timing is ok (every row of a file without ``timing_status``)."""
    if "timing_status" not in frame.columns:
        return pd.Series(True, index=frame.index)
    return frame["timing_status"].astype(object).eq(OK)


def ok_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of a timed raw file whose timing is ok: what derived data are made of."""
    return frame[timed_ok(frame)]


class _Problems:
    """The first problem found (file, row, column, what), and how many more there were."""

    def __init__(self, path: Path):
        self.path, self.first, self.more = path, None, 0

    def add(self, text: str, row: int | None = None, column: str | None = None) -> None:
        if self.first is not None:
            self.more += 1
            return
        where = [shown(self.path)]
        if row is not None:
            where.append(f"row {row + 1} (line {row + 2})")
        if column is not None:
            where.append(f"column {column}")
        self.first = ", ".join(where) + ": " + text

    def raise_if_any(self, schema_file: Path) -> None:
        if self.first is not None:
            more = f" (and {self.more} more problem{'s' if self.more > 1 else ''})" if self.more else ""
            raise RawDataError(f"{self.first}{more}; raw data must follow {shown(schema_file)}")


def _read_raw(path: Path, boundary: Path) -> bytes:
    """A raw file's bytes (seal.read_checked: no link out of results/, no device, bounded)."""
    try:
        return seal.read_checked(path, seal.MAX_RAW_FILE_BYTES, boundary)
    except FileNotFoundError:
        raise RawDataError(f"{shown(path)}: missing (the study's raw files: measure writes them)") from None
    except OSError as error:
        raise RawDataError(f"{shown(path)}: cannot be read: {error.strerror}") from None


def _parse_csv(path: Path, data: bytes) -> pd.DataFrame:
    if not data.strip():
        raise RawDataError(f"{shown(path)}: empty file, not even a header line")
    if not data.endswith(b"\n"):
        last_line = data.count(b"\n") + 1
        raise RawDataError(f"{shown(path)}, line {last_line}: the file ends in the middle of a line "
                           "(cut short?)")
    try:
        return pd.read_csv(io.BytesIO(data))
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as error:
        raise RawDataError(f"{shown(path)}: not a readable CSV file: {str(error).strip()}") from None


def _value(value) -> str:
    """A cell as a message shows it: numbers plainly, text quoted."""
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value)).lower()
    if isinstance(value, (int, float, np.integer, np.floating)):
        return f"{value:g}" if isinstance(value, (float, np.floating)) else str(int(value))
    return repr(str(value))


def _first(mask: pd.Series) -> int | None:
    """Position (0-based data row) of the first True of ``mask``, or None."""
    hits = np.flatnonzero(mask.to_numpy(dtype=bool, na_value=False))
    return int(hits[0]) if len(hits) else None


def _check_type(values: pd.Series, spec: dict, problems: _Problems, column: str) -> pd.Series | None:
    """``values`` as numbers for integer/number columns (None where the type is wrong)."""
    kind = spec["type"]
    present = values.notna()
    if kind in ("integer", "number"):
        numeric = pd.to_numeric(values, errors="coerce") if not pd.api.types.is_numeric_dtype(values) \
            else values.astype("float64")
        if pd.api.types.is_bool_dtype(values):
            problems.add(f"true/false where a {kind} ({spec['unit']}) belongs", _first(present), column)
            return None
        bad = _first(present & numeric.isna())
        if bad is not None:
            problems.add(f"{_value(values.iloc[bad])} is not a {kind} ({spec['unit']})", bad, column)
            return None
        finite = numeric.isna() | np.isfinite(numeric)
        if (row := _first(~finite)) is not None:
            problems.add(f"{numeric.iloc[row]} is not a finite {kind}", row, column)
            return None
        if kind == "integer" and (row := _first(numeric.notna() & (numeric != np.floor(numeric)))) is not None:
            problems.add(f"{numeric.iloc[row]} is not an integer ({spec['unit']})", row, column)
            return None
        return numeric
    if kind == "boolean":
        text = values.astype(object).map(lambda v: str(v).lower() if v == v and v is not None else v)
        if (row := _first(present & ~text.isin(["true", "false"]))) is not None:
            problems.add(f"{_value(values.iloc[row])} is not true or false", row, column)
    return None


def _check_column(frame: pd.DataFrame, column: str, spec: dict, ok: pd.Series, problems: _Problems) -> None:
    values = frame[column]
    null = spec.get("null", "never")
    empty = values.isna()
    if null == "never" and (row := _first(empty)) is not None:
        problems.add("empty; a value is required", row, column)
        return
    if null == "when not timed" and (row := _first(empty & ok)) is not None:
        problems.add("empty on a row whose timing_status is ok", row, column)
        return
    numeric = _check_type(values, spec, problems, column)
    if numeric is not None:
        unit = spec["unit"]
        for bound, fails, says in (("min", lambda v, b: v < b, "below the smallest allowed"),
                                   ("above", lambda v, b: v <= b, "not above"),
                                   ("max", lambda v, b: v > b, "above the largest allowed")):
            if bound in spec and (row := _first(numeric.notna() & fails(numeric, spec[bound]))) is not None:
                problems.add(f"{numeric.iloc[row]:g} is {says} {spec[bound]:g} ({unit})", row, column)
    if "values" in spec:
        if numeric is not None:
            allowed, compared = [float(v) for v in spec["values"]], numeric
        else:
            allowed = [str(v) for v in spec["values"]]
            compared = values.astype(object).map(lambda v: v if v != v or v is None else str(v))
        if (row := _first(values.notna() & ~compared.isin(allowed))) is not None:
            problems.add(f"{_value(values.iloc[row])} is not allowed; allowed: "
                         f"{', '.join(str(v) for v in spec['values'])}", row, column)
    if "pattern" in spec:
        pattern = re.compile(spec["pattern"])
        matches = values.astype(object).map(lambda v: v != v or v is None or bool(pattern.fullmatch(str(v))))
        if (row := _first(~matches.astype(bool))) is not None:
            problems.add(f"{_value(values.iloc[row])} does not match {spec['pattern']!r}", row, column)


def _names(expression: str, frame: pd.DataFrame) -> list[str]:
    return [n for n in dict.fromkeys(_NAME.findall(expression)) if n in frame.columns]


def _lacks(expression: str, frame: pd.DataFrame, schema: FileSchema) -> bool:
    """Does ``expression`` name an (optional) column of the schema that this file lacks?"""
    return any(n in schema.columns and n not in frame.columns for n in _NAME.findall(expression))


def _check_rules(frame: pd.DataFrame, schema: FileSchema, ok: pd.Series, problems: _Problems) -> None:
    for column, expression in schema.derived.items():
        if column not in frame.columns or _lacks(expression, frame, schema):
            continue
        expected = frame.eval(expression, engine="python").astype("float64")
        actual = frame[column].astype("float64")
        both = actual.notna() & expected.notna()
        off = both & ((actual - expected).abs() > RELATIVE_TOLERANCE * expected.abs() + 1e-12)
        if (row := _first(off)) is not None:
            problems.add(f"{actual.iloc[row]:g} is not {expression} = {expected.iloc[row]:g}", row, column)
        if (row := _first(actual.notna() & expected.isna())) is not None:
            problems.add(f"has a value where {expression} has none", row, column)
    for rule in schema.checks:
        if _lacks(rule["require"], frame, schema):
            continue                      # names an optional column this file lacks
        names = _names(rule["require"], frame)
        every = rule.get("rows") == "every row"
        rows = pd.Series(True, index=frame.index) if every else frame[names].notna().all(axis=1)
        if not rows.any():
            continue
        held = frame[rows].eval(rule["require"], engine="python").astype(bool)
        if (position := _first(~held)) is not None:
            row = int(np.flatnonzero(rows.to_numpy())[position])
            values = ", ".join(f"{n}={_value(frame[n].iloc[row])}" for n in names)
            problems.add(f"{rule['says']} ({values})", row, names[0] if len(names) == 1 else ", ".join(names))
    if schema.timed and "time_us_median" in frame.columns:
        if (row := _first(~ok & frame["time_us_median"].notna())) is not None:
            problems.add(f"a time on a row whose timing_status is {_value(frame['timing_status'].iloc[row])}: "
                         "only ok rows are timed", row, "time_us_median")


def _check_key(frame: pd.DataFrame, schema: FileSchema, problems: _Problems) -> None:
    key = [c for c in schema.key if c in frame.columns]    # an optional key column may be absent
    if not key:
        return
    repeated = frame.duplicated(key, keep=False)
    if repeated.any():
        rows = np.flatnonzero(repeated.to_numpy())
        first = frame.iloc[rows[0]][key]
        twin = next(int(r) for r in rows[1:] if frame.iloc[r][key].equals(first))
        shown_key = ", ".join(f"{c}={_value(v)}" for c, v in first.items())
        problems.add(f"the same configuration as row {rows[0] + 1} ({shown_key}): each configuration is one row",
                     twin, ", ".join(key))


def _check_parts(frame: pd.DataFrame, schema: FileSchema, problems: _Problems) -> None:
    """Columns that repeat a part of another (``part_of``: gemm's family is its shape's first part)."""
    for column, spec in schema.columns.items():
        part = spec.get("part_of")
        if part is None or column not in frame.columns or part["column"] not in frame.columns:
            continue
        whole = frame[part["column"]].astype(str)
        expected = whole.str.split(part["separator"], regex=False).str[part["index"]]
        if (row := _first(frame[column].astype(str) != expected)) is not None:
            problems.add(f"{_value(frame[column].iloc[row])} is not part {part['index'] + 1} of {part['column']} "
                         f"{_value(whole.iloc[row])} (parts separated by {part['separator']!r})", row, column)


def check_frame(frame: pd.DataFrame, schema: FileSchema, path: Path, schema_file: Path) -> None:
    """Raise RawDataError for the first way ``frame`` (read from ``path``) fails ``schema``."""
    problems = _Problems(path)
    missing = [c for c, s in schema.columns.items() if c not in frame.columns and not s.get("optional")]
    if missing:
        problems.add(f"missing column(s) {missing}")
    unknown = [c for c in frame.columns if c not in schema.columns]
    if unknown:
        problems.add(f"column(s) {unknown} are not in the schema (a file of another study or version?)")
    if frame.empty:
        problems.add("a header and no rows: every raw file holds at least one measured row")
    problems.raise_if_any(schema_file)
    ok = timed_ok(frame)
    for column, spec in schema.columns.items():
        if column in frame.columns:
            _check_column(frame, column, spec, ok, problems)
    problems.raise_if_any(schema_file)      # rules assume typed columns
    _check_key(frame, schema, problems)
    _check_parts(frame, schema, problems)
    _check_rules(frame, schema, ok, problems)
    problems.raise_if_any(schema_file)


def _check_gpu_columns(frame: pd.DataFrame, schema: FileSchema, provenance: dict, path: Path,
                       schema_file: Path) -> None:
    """Columns that name the GPU a row was measured on (``names_gpu``) name provenance's GPU."""
    problems, gpu = _Problems(path), provenance["gpu"]["name"]
    for column, spec in schema.columns.items():
        if spec.get("names_gpu") and column in frame.columns:
            if (row := _first(frame[column].astype(str) != gpu)) is not None:
                problems.add(f"{_value(frame[column].iloc[row])} is not the GPU provenance.json names ({gpu!r}): "
                             "one run, one GPU", row, column)
    problems.raise_if_any(schema_file)


def counted_configurations(frame: pd.DataFrame, schema: FileSchema) -> int:
    if schema.configurations == "every row":
        return len(frame)
    if schema.configurations == "timed rows":
        return int(frame["timing_status"].notna().sum()) if "timing_status" in frame.columns else len(frame)
    return 0


def _check_count(frames: dict, schema, provenance: dict, raw_dir: Path) -> None:
    counted = {name: counted_configurations(frames[name], f) for name, f in schema.files.items()
               if f.configurations and name in frames}      # a file runs before it existed lack counts none
    total = sum(counted.values())
    if counted and total != provenance["configurations"]:
        parts = " + ".join(f"{name} {n} ({schema.files[name].configurations})" for name, n in counted.items())
        raise RawDataError(
            f"{shown(raw_dir / 'provenance.json')}, key configurations: says {provenance['configurations']} "
            f"configurations were measured, the raw files hold {parts} = {total} (rows lost, cut or "
            f"added?); raw data must follow {shown(schema.path)}")


def load(study, raw_dir: Path, require_seal: bool = False) -> RawData:
    """The study's raw data in ``raw_dir`` and its provenance, every file checked: read safely
    (harness.seal.read_checked), compared with its seal before any is parsed (a seal present must
    hold; ``require_seal``: data without one are refused), then against its schema."""
    raw_dir = Path(raw_dir)
    schema = raw_schema.load(study)
    provenance = provenance_mod.read(raw_dir / "provenance.json", study=study.name)
    boundary = seal.boundary_of(raw_dir)
    # the study's raw files, kernels.csv and optional files where the run recorded them
    present = [name for name in schema.files if name in study.raw_files or os.path.lexists(raw_dir / name)
               or name in (provenance.get(seal.SEAL_KEY) or {})]
    contents = {name: _read_raw(raw_dir / name, boundary) for name in present}
    seal.verify(provenance, contents, raw_dir, required=require_seal)
    frames = {}
    for name, data in contents.items():
        frames[name] = _parse_csv(raw_dir / name, data)
        check_frame(frames[name], schema.files[name], raw_dir / name, schema.path)
        _check_gpu_columns(frames[name], schema.files[name], provenance, raw_dir / name, schema.path)
    _check_count(frames, schema, provenance, raw_dir)
    return RawData(frames, provenance)
