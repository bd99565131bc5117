"""The paper's rules of thumb: one table gathered from every study present, kept to the rows
whose claims pass, and beside it the expectations the data refute.

A study contributes rows through its optional ``rules`` entry point,
``(derived_dir, provenance) -> [{"situation", "rule", "evidence", "figure", "claims"}, ...]``,
whose wording and numbers it computes from its own derived data; ``claims`` names the claims of
``config/claims/<study>.yaml`` the row rests on. With the checked claims at hand
(``results/<label>/claims.tsv``) a row is a rule of thumb only while every claim it names
PASSes; a row naming no claim, or one that fails or was not measured, is left out. Every claim
that FAILs is listed as a refuted expectation (``rules_refuted``): a finding, not a rule. This
module checks each row (every key present, the figure one of the study's, no missing numbers)
and writes ``paper/tables/rules_of_thumb.tex|md`` and ``rules_refuted.tex|md``.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.atomic import atomic_write_text
from tma_study.harness.provenance import read as read_provenance
from tma_study.report.tables import latex_escape, to_markdown

from .claims import FAIL, PASS, load_claims, read_outcomes

ROW_KEYS = ("situation", "rule", "evidence", "figure")
COLUMNS = ["study", "situation", "rule of thumb", "evidence (measured)", "claims", "rests on"]
REFUTED_COLUMNS = ["study", "expectation (claim)", "what the data show", "claims", "rests on"]
MISSING_MARKS = ("nan", "None", "??")
TABLE, REFUTED_TABLE = "rules_of_thumb", "rules_refuted"
# LaTeX column widths (cm) of the text that wraps; the tables fit the text width at \footnotesize. The
# paper's rules table leaves the evidence to the claims it cites (the Markdown keeps it).
WIDTHS_CM = {"situation": 4.2, "rule of thumb": 8.4, "claims": 1.8, "rests on": 1.6}
REFUTED_WIDTHS_CM = {"expectation (claim)": 6.2, "what the data show": 6.2, "claims": 1.3, "rests on": 1.6}


STUDY_TITLES = {"crossover": "Crossover", "multicast": "Multicast", "dsm": "Distributed shared memory",
                "gemm": "GEMM", "paged_kv": "Paged-KV attention"}   # headings of the LaTeX table


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
        claims = row.get("claims", ())
        if isinstance(claims, str) or not all(isinstance(c, str) and c for c in claims):
            problems.append(f"{at} key 'claims': {claims!r} is not a list of claim ids")
    if problems:
        raise RulesError("invalid rules of thumb:\n  " + "\n  ".join(problems))


def _statuses(claims_tsv: Path | None) -> dict[str, str] | None:
    if claims_tsv is None:
        return None
    outcomes = read_outcomes(claims_tsv)
    return dict(zip(outcomes.id, outcomes.status))


def collect(results_dir: Path, studies: dict, claims_tsv: Path | None = None) -> pd.DataFrame:
    """Every study's rows, in the order of ``studies``; with ``claims_tsv``, only the rows whose
    claims all PASS (a claim id the checker does not know stops with its name)."""
    statuses = _statuses(claims_tsv)
    rows = []
    for name, study in studies.items():
        if study.rules is None:
            continue
        study_dir = Path(results_dir) / name
        provenance = read_provenance(study_dir / "provenance.json", study=name)
        own = study.entry("rules")(study_dir / "derived", provenance)
        check_rows(own, study)
        for r in own:
            claims = tuple(r.get("claims", ()))
            if statuses is not None:
                unknown = [c for c in claims if c not in statuses]
                if unknown:
                    raise RulesError(f"study {name!r} ({study.rules}): row {r['situation']!r} names claims "
                                     f"{', '.join(unknown)}, which {claims_tsv} does not hold")
                if not claims or any(statuses[c] != PASS for c in claims):
                    continue
            rows.append({"study": name, "situation": r["situation"], "rule of thumb": r["rule"],
                         "evidence (measured)": r["evidence"], "claims": claims, "rests on": r["figure"]})
    return pd.DataFrame(rows, columns=COLUMNS)


def refuted(claims_tsv: Path | None, studies: dict, claims_dir: Path | None = None) -> pd.DataFrame:
    """The claims that FAIL: expectations the data refute, each beside the claim that states what
    the data show instead (its ``instead``), or else the numbers observed."""
    if claims_tsv is None:
        return pd.DataFrame(columns=REFUTED_COLUMNS)
    outcomes = read_outcomes(claims_tsv).set_index("id", drop=False)
    defined = {c.id: c for c in (load_claims(claims_dir) if claims_dir else load_claims())}
    rows = []
    for o in outcomes.itertuples():
        if o.status != FAIL or o.study not in studies:
            continue
        instead = defined[o.id].instead if o.id in defined else None
        if instead in outcomes.index and outcomes.loc[instead, "status"] == PASS:
            shows, ids = outcomes.loc[instead, "statement"], (o.id, instead)
        else:
            shows, ids = f"observed {o.observed} against {o.threshold}", (o.id,)
        rows.append({"study": o.study, "expectation (claim)": o.statement, "what the data show": shows,
                     "claims": ids, "rests on": o.figure})
    return pd.DataFrame(rows, columns=REFUTED_COLUMNS)


def _tex_cell(column: str, value, figures: set[str]) -> str:
    """A cell's LaTeX: claims as \\claimref (the claims table's numbers), the figure or table it
    rests on as a \\ref to the paper's float, text escaped."""
    if column == "claims":
        return ", ".join(rf"\claimref{{{c}}}" for c in value)
    if column == "rests on":
        if not value:
            return ""
        return rf"Fig.~\ref{{fig:{value}}}" if value in figures else rf"Table~\ref{{tab:{value}}}"
    return latex_escape(value).replace(r"\_", r"\_\allowbreak{}")


def to_latex(frame: pd.DataFrame, caption: str, label: str, widths: dict[str, float], figures: set[str]) -> str:
    """A longtable grouped by study (a heading row per study naming its section), wrapping columns."""
    columns = [c for c in frame.columns if c in widths]
    spec = "".join(rf">{{\raggedright\arraybackslash}}p{{{widths[c]}cm}}" for c in columns)
    head = " & ".join(rf"\textbf{{{latex_escape(c)}}}" for c in columns) + r" \\"
    lines = [r"{\footnotesize\setlength{\tabcolsep}{3pt}", rf"\begin{{longtable}}{{{spec}}}",
             rf"\caption{{{latex_escape(caption)}}}\label{{{label}}} \\", r"\toprule", head, r"\midrule",
             r"\endfirsthead", r"\toprule", head, r"\midrule", r"\endhead", r"\bottomrule", r"\endlastfoot"]
    for study, group in frame.groupby("study", sort=False):
        if study != "none":
            title = STUDY_TITLES.get(study, study.replace("_", " "))
            heading = rf"\textit{{{latex_escape(title)}}} (Section~\ref{{sec:{study}}})"
            lines.append(rf"\multicolumn{{{len(columns)}}}{{l}}{{{heading}}} \\")
        lines += [" & ".join(_tex_cell(c, row[c], figures) for c in columns) + r" \\"
                  for _, row in group.iterrows()]
        lines.append(r"\addlinespace")
    lines += [r"\end{longtable}", "}", ""]
    return "\n".join(lines)



def _markdown(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.assign(claims=[", ".join(c) for c in frame.claims])


def write(results_dir: Path, studies: dict, tables_dir: Path, claims_tsv: Path | None = None) -> pd.DataFrame:
    """rules_of_thumb.tex|md and rules_refuted.tex|md; returns the rules table."""
    figures = {f for study in studies.values() for f in study.figures}
    table = collect(results_dir, studies, claims_tsv)
    if table.empty:
        table = pd.DataFrame([{c: "" for c in COLUMNS} | {"situation": "no study with rules of thumb is present",
                                                          "claims": (), "study": "none"}])
    source = f"{Path(results_dir)}/" + (f" and the claims checked in {claims_tsv}" if claims_tsv else "")
    caption = (f"Rules of thumb, each computed from the measured data of {source}; a row is kept only while "
               "every claim it names passes.")
    tables_dir = Path(tables_dir)
    atomic_write_text(tables_dir / f"{TABLE}.tex", to_latex(table, caption, f"tab:{TABLE}", WIDTHS_CM, figures))
    atomic_write_text(tables_dir / f"{TABLE}.md", to_markdown(_markdown(table), caption))
    wrong = refuted(claims_tsv, studies)
    caption = "Expectations the data refute: the claims that fail, each a finding rather than a rule."
    if wrong.empty:
        wrong = pd.DataFrame([{c: "" for c in REFUTED_COLUMNS} | {"expectation (claim)": "none: every claim "
                              "checked holds or was not measured", "claims": (), "study": "none"}])
    atomic_write_text(tables_dir / f"{REFUTED_TABLE}.tex",
                      to_latex(wrong, caption, f"tab:{REFUTED_TABLE}", REFUTED_WIDTHS_CM, figures))
    atomic_write_text(tables_dir / f"{REFUTED_TABLE}.md", to_markdown(_markdown(wrong), caption))
    return table
