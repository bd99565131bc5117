"""A study's raw-data schema: ``src/tma_study/studies/<study>/raw_schema.yaml``.

Each study describes the files its measure step writes (columns, types, units, ranges, the
key that identifies a row, which rows ``provenance.json``'s ``configurations`` counts); the
file's own shape is checked by ``workflow/schemas/raw_data.schema.yaml``. A file marked
``timed`` also carries the columns every nvbench-timed row has (``TIMING_COLUMNS``, written by
``harness.timing.Timing.columns``), so no study repeats them. docs/raw_data.md has the keys.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .. import config as config_mod
from .timing import Timing

SCHEMA_FILE = "raw_schema.yaml"
META_SCHEMA = config_mod.SCHEMA_DIR / "raw_data.schema.yaml"
OK = "ok"
TIMING_STATUSES = (OK, Timing.NO_SAMPLE)

_TIME = {"type": "number", "unit": "us", "above": 0, "max": 1e8, "null": "when not timed"}
TIMING_COLUMNS = {
    "time_us_median": _TIME, "time_us_q1": _TIME, "time_us_q3": _TIME,
    "time_us_min": _TIME, "time_us_max": _TIME,
    "time_us_iqr": {**_TIME, "min": 0, "above": None},
    "time_relative_stdev": {"type": "number", "unit": "1", "min": 0, "max": 100, "null": "when not timed"},
    "samples": {"type": "integer", "unit": "count", "min": 0, "max": 1e9, "null": "when not timed"},
    "sm_clock_mhz_mean": {"type": "number", "unit": "MHz", "above": 0, "max": 5000, "null": "when not timed"},
    "timing_status": {"type": "string", "values": list(TIMING_STATUSES), "optional": True,
                      "absent": "runs measured before timing_status existed timed every row: each row is ok"},
}
TIMING_CHECKS = [
    {"require": "time_us_min <= time_us_q1 <= time_us_median <= time_us_q3 <= time_us_max",
     "says": "times are ordered: min <= q1 <= median <= q3 <= max"},
    {"require": "abs(time_us_iqr - (time_us_q3 - time_us_q1)) <= 1e-6 * time_us_q3",
     "says": "time_us_iqr is time_us_q3 - time_us_q1"},
]


# kernels.csv beside every study's raw data: the resources of the kernels the run timed
# (harness.kernel_builds.resource_row), for studies that do not describe it themselves
KERNELS_FILE = "kernels.csv"
KERNELS_SCHEMA = {
    "what": "one kernel the run timed: its resources and the SASS instructions checked (kernel_builds.resource_row)",
    "key": ["kernel"],
    "columns": {
        "kernel": {"type": "string"},
        "registers": {"type": "integer", "unit": "registers per thread", "min": 1, "max": 255},
        "shared_bytes_static": {"type": "integer", "unit": "bytes", "min": 0, "max": 262144},
        "stack_frame_bytes": {"type": "integer", "unit": "bytes", "min": 0, "max": 1048576},
        "spill_store_bytes": {"type": "integer", "unit": "bytes", "min": 0, "max": 1048576},
        "spill_load_bytes": {"type": "integer", "unit": "bytes", "min": 0, "max": 1048576},
        "sass_instructions": {"type": "integer", "unit": "instructions", "min": 1, "max": 100000000},
        "expected_sass": {"type": "string", "null": "allowed",
                          "pattern": r"\S+x[0-9]+( \S+x[0-9]+)*"},
    },
}


class RawSchemaError(ValueError):
    """A study's raw_schema.yaml is itself malformed."""


@dataclass(frozen=True)
class FileSchema:
    """One raw file: its columns (name -> spec, in file order where it matters) and rules."""

    name: str
    what: str
    columns: dict
    key: tuple[str, ...] = ()
    configurations: str | None = None     # "every row" | "timed rows" | None (not counted)
    timed: bool = False
    derived: dict = field(default_factory=dict)
    checks: tuple[dict, ...] = ()
    optional: bool = False                # may be absent (runs measured before it existed)


@dataclass(frozen=True)
class StudySchema:
    study: str
    path: Path
    files: dict[str, FileSchema]


def schema_path(study) -> Path:
    """The raw_schema.yaml beside a study's declaration (its package's folder)."""
    package = study.aggregate.partition(":")[0].rpartition(".")[0]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RawSchemaError(f"study {study.name!r}: cannot find its package {package!r}")
    return Path(next(iter(spec.submodule_search_locations))).resolve() / SCHEMA_FILE


def _file_schema(name: str, spec: dict) -> FileSchema:
    columns = dict(spec["columns"])
    checks = list(spec.get("checks", ()))
    if spec.get("timed"):
        columns = {**{c: {k: v for k, v in s.items() if v is not None} for c, s in TIMING_COLUMNS.items()},
                   **columns}
        checks = TIMING_CHECKS + checks
    return FileSchema(name=name, what=spec["what"], columns=columns, key=tuple(spec.get("key", ())),
                      configurations=spec.get("configurations"), timed=bool(spec.get("timed")),
                      derived=dict(spec.get("derived", {})), checks=tuple(checks),
                      optional=bool(spec.get("optional")))


def load(study, path: Path | None = None) -> StudySchema:
    """The study's raw-data schema, checked against the meta-schema."""
    path = Path(path or schema_path(study))
    try:
        raw = config_mod.load_schema(path)
    except FileNotFoundError:
        raise RawSchemaError(f"study {study.name!r} has no raw-data schema {path}") from None
    except yaml.YAMLError as error:
        raise RawSchemaError(f"{path}: not valid YAML: {error}") from None
    messages = config_mod.validate_against(raw, META_SCHEMA)
    if messages:
        raise RawSchemaError(f"{path}: " + "; ".join(m.replace("config key", "key") for m in messages))
    files = {name: _file_schema(name, spec) for name, spec in raw["files"].items()}
    for file in files.values():
        unknown = [c for c in (*file.key, *file.derived) if c not in file.columns]
        if unknown:
            raise RawSchemaError(f"{path}: files.{file.name} names columns it does not declare: {unknown}")
    missing = sorted(set(study.raw_files) - set(files))
    if missing:
        raise RawSchemaError(f"{path}: no schema for raw files {missing} of study {study.name!r}")
    if KERNELS_FILE not in files:
        files[KERNELS_FILE] = _file_schema(KERNELS_FILE, KERNELS_SCHEMA)
    return StudySchema(study.name, path, files)
