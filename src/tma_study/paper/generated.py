"""The paper's generated LaTeX inputs and the comparisons between runs.

- ``write_generated``: ``paper/generated/macros.tex`` (every number of the text, see
  ``tma_study.paper.macros``) and the lists of study sections, ``studies.tex`` (the body's story,
  ``BODY_STUDIES``) and ``studies_appendix.tex`` (every other study): a study's hand-written
  ``paper/sections/studies/<study>.tex`` where it exists, otherwise a section generated from its
  declaration (question, figures, tables), so a new study appears in the appendix as soon as its
  data do.
- ``write_comparison``: ``paper/tables/<study>_comparison.tex|md`` from the study's
  ``compare`` entry point over every run present (the reference first).
"""
from __future__ import annotations

import re
from pathlib import Path

from tma_study.advisor.validation.run import FIGURES as ADVISOR_FIGURES
from tma_study.atomic import atomic_write_text
from tma_study.config import REPO_ROOT
from tma_study.harness.provenance import read as read_provenance
from tma_study.report.tables import breakable, latex_escape, write_table
from tma_study.report.tables import to_latex as _to_latex

from . import claims_registry
from . import macros as macros_mod
from . import projection
from .claims import (
    BY_RUN_FILE,
    SPREAD_TEXT,
    notebook_title,
    read_outcomes,
    run_agreement,
)
from .instances import ANNOTATIONS

SPREAD_PERCENT = re.escape(SPREAD_TEXT) + r" ([0-9.]+) %"

SECTIONS = Path("sections") / "studies"       # relative to paper/
GENERATED = Path("generated")
# The studies the body tells as its story, in its order (generated/studies.tex); every other study
# present, a new one included, gets a section of the appendix (generated/studies_appendix.tex).
BODY_STUDIES = ("crossover", "multicast", "dsm", "paged_kv", "gemm")
LISTINGS = {"studies": "the body's study sections, in the paper's order",
            "studies_appendix": "the appendix's sections of the other studies present"}


def to_latex_table(frame, caption_tex: str, label: str) -> str:
    """A small float table whose caption is LaTeX already (it may hold a \\ref)."""
    text = _to_latex(frame, "CAPTION", label)
    return text.replace(r"\caption{CAPTION}", rf"\caption{{{caption_tex}}}")


CLAIM_WIDTHS_CM = (3.2, 8.4, 1.5, 1.3, 2.0)


def registered_before_data(entries: list[dict] | None = None) -> set[str]:
    """The ids of the claims the claims registry (config/claims_registry/) records as registered
    while their study's data were absent from the tree: hypotheses, not findings."""
    entries = claims_registry.load() if entries is None else entries
    return {e["id"] for e in entries if e.get("before_data")}


def claims_table(claims_tsv: Path, figures: set[str], absent_studies: frozenset[str] = frozenset(),
                 before_data: set[str] | None = None) -> str:
    """The ledger: the claims and their status as LaTeX longtables, those the claims registry records
    as registered before their data apart from the others, each claim numbered (C1, C2, ...) and
    labelled ``claim:<id>``, so the text and the rules of thumb cite it with \\claimref{<id>}.
    A claim of a study in ``absent_studies`` (no data in this run, so no section) names its
    figure or table without a reference to it."""
    outcomes = read_outcomes(claims_tsv)
    before = registered_before_data() if before_data is None else before_data
    registered = outcomes[outcomes.id.isin(sorted(before))]
    common = (f"checked against {Path(claims_tsv).parent}/ by the pipeline (definitions: config/claims/; observed "
              "values and thresholds: claims.md beside the data; the commit that registered each: "
              "config/claims_registry/). Spread: the largest change of the number a check "
              "stands on between this run and the other runs of the same sweep in results/ (other instances), as a "
              "share of the threshold (of the tolerance where the value is 0); a claim clears its threshold by the "
              "larger of its margin and its spread; -- where no other run holds the number.")
    parts = [(registered, "tab:claims_registered",
              f"Hypotheses: claims registered before their study's data were in the repository, {common}"),
             (outcomes.drop(registered.index), "tab:claims",
              f"Findings: claims registered with their study's data at hand, {common}")]
    return "\n".join(_claims_longtable(rows, label, caption, figures, absent_studies)
                     for rows, label, caption in parts if len(rows) or label == "tab:claims")


def _claims_longtable(outcomes, label: str, caption: str, figures: set[str], absent_studies: frozenset[str]) -> str:
    spec = "".join(rf">{{\raggedright\arraybackslash}}p{{{w}cm}}" for w in CLAIM_WIDTHS_CM)
    head = r"\textbf{claim} & \textbf{statement} & \textbf{status} & \textbf{spread} & \textbf{rests on} \\"
    lines = [r"{\footnotesize\setlength{\tabcolsep}{3pt}", rf"\begin{{longtable}}{{{spec}}}",
             rf"\caption{{{latex_escape(caption)}}}\label{{{label}}} \\", r"\toprule", head, r"\midrule",
             r"\endfirsthead", r"\toprule", head, r"\midrule", r"\endhead", r"\bottomrule", r"\endlastfoot"]
    for row in outcomes.itertuples(index=False):
        rests = (rf"\texttt{{{breakable(row.figure)}}} (no data)" if row.study in absent_studies
                 else rf"Fig.~\ref{{fig:{row.figure}}}" if row.figure in figures else rf"Table~\ref{{tab:{row.figure}}}")
        number = (rf"\refstepcounter{{claimnumber}}\label{{claim:{row.id}}}C\theclaimnumber{{}} "
                  rf"\texttt{{{breakable(row.id)}}}")
        status = rf"\textbf{{{latex_escape(row.status)}}}" if row.status != "PASS" else "PASS"
        lines.append(f"{number} & {latex_escape(row.statement)} & {status} & {_spread(row.threshold)} & {rests} \\\\")
    lines += [r"\end{longtable}", "}", ""]
    return "\n".join(lines)


def _spread(threshold) -> str:
    """The largest spread between runs of the same sweep the claim's checks were judged with
    (tma_study.paper.claims), or a dash where no second run of the sweep is present."""
    found = [float(x) for x in re.findall(SPREAD_PERCENT, str(threshold))]
    return rf"{max(found):.1f}\,\%" if found else "--"


def runs_table(by_run_tsv: Path) -> str:
    """The claims whose status differs in another run of their sweep (claims_by_run.tsv), each
    run's status beside the reference's, as a LaTeX table; how many agree in the caption."""
    by_run = read_outcomes(by_run_tsv)
    checked, differing = run_agreement(by_run)
    runs = [c for c in by_run.columns[2:] if c not in ANNOTATIONS]
    if not checked:
        return ("% claims_by_run.tsv: no other run of any study's sweep in results/, so no claim was judged again\n"
                r"\label{tab:claims_by_run}" + "\n")
    caption = (f"Every claim judged again on the data of each other run of its study's sweep in results/ "
               f"(another instance, judged as the reference is, with the same spreads): {len(checked) - len(differing)} "
               f"of the {len(checked)} claims so checked have the same status in every run; the "
               f"{len(differing)} below do not (column {runs[0]}: the reference; -- where a run does not hold "
               "the claim's sweep). Such a claim is instance-dependent: below each, the number each differing check "
               "stands on in every run, and the claims that restate it with what holds on every instance.")
    spec = r">{\raggedright\arraybackslash}p{3.2cm}" + "c" * len(runs)
    head = r"\textbf{claim} & " + " & ".join(rf"\rotatebox{{60}}{{\texttt{{{latex_escape(r)}}}}}" for r in runs)
    lines = [r"{\footnotesize\setlength{\tabcolsep}{3pt}", rf"\begin{{longtable}}{{{spec}}}",
             rf"\caption{{{latex_escape(caption)}}}\label{{tab:claims_by_run}} \\", r"\toprule", head + r" \\",
             r"\midrule", r"\endfirsthead", r"\toprule", head + r" \\", r"\midrule", r"\endhead",
             r"\bottomrule", r"\endlastfoot"]
    for row in by_run[by_run.id.isin(differing)].to_dict("records"):
        cells = [latex_escape(row[run]) if row[run] else "--" for run in runs]
        lines.append(rf"\claimref{{{row['id']}}} \texttt{{{breakable(row['id'])}}} & "
                     + " & ".join(cells) + r" \\")
        notes = [f"{name}: {row[name]}" for name in ANNOTATIONS if row.get(name)]
        if notes:
            lines.append(rf"\multicolumn{{{len(runs) + 1}}}{{p{{11cm}}}}{{\scriptsize {latex_escape('. '.join(notes))}}} \\")
    lines += [r"\end{longtable}", "}", ""]
    return "\n".join(lines)


def write_claims_table(claims_tsv: Path, out: Path, figures: set[str],
                       absent_studies: frozenset[str] = frozenset()) -> None:
    """paper/generated/claims.tex: the numbered claims (see ``claims_table``), and where
    claims_by_run.tsv lies beside claims.tsv, the claims whose status another run changes."""
    text = claims_table(claims_tsv, figures, absent_studies)
    by_run = Path(claims_tsv).parent / BY_RUN_FILE
    if by_run.is_file():
        text += "\n" + runs_table(by_run)
    atomic_write_text(Path(out), text)


def figure_block(figure: str, notebooks: Path = REPO_ROOT / "notebooks") -> str:
    """A figure environment for figures/<figure>.pdf, captioned by its notebook's title."""
    caption = latex_escape(notebook_title(notebooks / f"{figure}.py"))
    return "\n".join([r"\begin{figure}[t]", r"\centering",
                      rf"\includegraphics[width=\linewidth]{{{figure}.pdf}}",
                      rf"\caption{{{caption}.}}", rf"\label{{fig:{figure}}}", r"\end{figure}", ""])


def generated_section(study) -> str:
    """A section for a study that has no hand-written text yet: its question, figures, tables."""
    lines = [f"% Generated from the declaration of study {study.name!r}; write",
             f"% paper/{SECTIONS}/{study.name}.tex to replace it.",
             rf"\section{{Study: {latex_escape(study.name)}}}", rf"\label{{sec:{study.name}}}",
             latex_escape(study.question), ""]
    lines += [figure_block(figure) for figure in study.figures]
    lines += [rf"\input{{tables/{table}}}" for table in study.tables]
    if study.compare is not None:
        lines.append(rf"\input{{tables/{study.name}_comparison}}")
    return "\n".join(lines) + "\n"


def write_generated(results_dir: Path, studies: dict, paper_dir: Path, claims_tsv: Path | None = None,
                    catalog_derived: Path | None = None, out_dir: Path | None = None) -> None:
    """paper_dir/generated/ (or ``out_dir``): macros, projection, claims and the study sections,
    deciding which sections are hand-written from paper_dir/sections/studies/."""
    paper_dir = Path(paper_dir)
    out = Path(out_dir) if out_dir is not None else paper_dir / GENERATED
    macros_mod.write(results_dir, studies, out / "macros.tex", claims_tsv, catalog_derived)
    specs = projection.load_specs()
    shown = {k: specs[k] for k in (projection.HOPPER_OTHER, *projection.PROJECTED) if k in specs}
    atomic_write_text(out / "projection.tex", to_latex_table(
        projection.table(shown), "Published specifications (config/gpu\\_specs.yaml; tensor rates dense, per GPU): "
        "the H100 and H200 in SXM form, and the \\projectionTargetName{} of the projection "
        "(Section~\\ref{sec:generality}).", "tab:projection"))
    if claims_tsv is not None:
        figures = {f for study in studies.values() for f in study.figures} | set(ADVISOR_FIGURES)
        from tma_study.studies import discover
        absent = frozenset(discover()) - frozenset(studies)     # no data in this run: no section
        write_claims_table(claims_tsv, out / "claims.tex", figures, absent)
    body = [name for name in BODY_STUDIES if name in studies]
    for listing, names in (("studies", body), ("studies_appendix", [n for n in studies if n not in body])):
        inputs = [f"% Generated by `tma-study paper-generated`: {LISTINGS[listing]}; do not edit."]
        for name in names:
            if (paper_dir / SECTIONS / f"{name}.tex").is_file():
                inputs.append(rf"\input{{{(SECTIONS / name).as_posix()}}}")
            else:
                atomic_write_text(out / f"study_{name}.tex", generated_section(study=studies[name]))
                inputs.append(rf"\input{{{(GENERATED / f'study_{name}').as_posix()}}}")
        atomic_write_text(out / f"{listing}.tex", "\n".join(inputs) + "\n")


def _gpu_name(derived_dir: Path) -> str:
    provenance = Path(derived_dir).parent / "provenance.json"
    if provenance.is_file():
        return read_provenance(provenance)["gpu"]["name"]
    return "unknown GPU"


def write_comparison(study, derived_dirs: dict[str, Path], reference: str, tables_dir: Path) -> None:
    """paper/tables/<study>_comparison.tex|md: each run of the study beside the reference."""
    frame = study.entry("compare")({k: Path(v) for k, v in derived_dirs.items()}, reference)
    runs = ", ".join(f"{label} ({_gpu_name(d)})" for label, d in derived_dirs.items())
    if len(derived_dirs) == 1:
        note = "Only the reference run is present; other runs under results/ appear here when they exist."
    else:
        note = "'moved' names the runs whose value differs from the reference."
    name = f"{study.name}_comparison"
    write_table(frame, tables_dir, name,
                f"Runs of study {study.name} compared with the reference {reference}: {runs}. {note}")
    if len(derived_dirs) == 1:          # nothing to compare: the paper prints no empty table
        atomic_write_text(Path(tables_dir) / f"{name}.tex",
                          f"% {name}: only the reference run {reference} is present; nothing to compare.\n")
