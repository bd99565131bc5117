"""The paper's rules of thumb: one table gathered from every study present.

A study contributes rows through its optional ``rules`` entry point,
``(derived_dir, provenance) -> [{"situation", "rule", "evidence", "figure"}, ...]``, whose
wording and numbers it computes from its own derived data; this module checks each row
(every key present, the figure one of the study's, no missing numbers) and writes
``paper/tables/rules_of_thumb.tex|md``. A study without ``rules`` contributes nothing.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from .harness.provenance import read as read_provenance
from .paper import write_paragraph_table

ROW_KEYS = ("situation", "rule", "evidence", "figure")
COLUMNS = ["study", "situation", "rule of thumb", "evidence (measured)", "rests on"]
MISSING_MARKS = ("nan", "None", "??")
TABLE = "rules_of_thumb"
WIDTHS_CM = [1.4, 2.7, 4.1, 5.0, 2.3]      # the LaTeX columns wrap (rows are sentences) and fit the text width


class RulesError(ValueError):
    """A study returned an unusable row; the message names the study, row and key."""


def check_rows(rows: list[dict], study) -> None:
    problems = []
    allowed = (*study.figures, *study.tables)
    for index, row in enumerate(rows, start=1):
        at = f"study {study.name!r} ({study.rules}) row {index}"
        missing = [k for k in ROW_KEYS if not str(row.get(k, "")).strip()]
        if missing:
            problems.append(f"{at}: missing {', '.join(missing)}")
        if row.get("figure") not in allowed:
            problems.append(f"{at} key 'figure': {row.get('figure')!r} is not one of {', '.join(allowed)}")
        for key in ROW_KEYS:
            if any(mark in str(row.get(key, "")).split() for mark in MISSING_MARKS):
                problems.append(f"{at} key {key!r}: a number is missing ({row.get(key)!r})")
    if problems:
        raise RulesError("invalid rules of thumb:\n  " + "\n  ".join(problems))


def collect(results_dir: Path, studies: dict) -> pd.DataFrame:
    """Every study's rows, in the order of ``studies``."""
    rows = []
    for name, study in studies.items():
        if study.rules is None:
            continue
        study_dir = Path(results_dir) / name
        provenance = read_provenance(study_dir / "provenance.json", study=name)
        own = study.entry("rules")(study_dir / "derived", provenance)
        check_rows(own, study)
        rows += [{"study": name, "situation": r["situation"], "rule of thumb": r["rule"],
                  "evidence (measured)": r["evidence"], "rests on": r["figure"]} for r in own]
    return pd.DataFrame(rows, columns=COLUMNS)


def write(results_dir: Path, studies: dict, tables_dir: Path) -> pd.DataFrame:
    table = collect(results_dir, studies)
    if table.empty:
        table = pd.DataFrame([{c: "" for c in COLUMNS} | {"situation": "no study with rules of thumb is present"}])
    write_paragraph_table(table, tables_dir, TABLE,
                          f"Rules of thumb, each computed from the measured data of {Path(results_dir)}/ and "
                          "naming the figure or table it rests on.", WIDTHS_CM, long=True)
    return table
