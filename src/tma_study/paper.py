"""The paper tier: generated LaTeX inputs, comparisons between runs, and the PDF build.

- ``write_generated``: ``paper/generated/macros.tex`` (every number of the text, see
  ``tma_study.macros``) and ``paper/generated/studies.tex``, the list of study sections: a
  study's hand-written ``paper/sections/studies/<study>.tex`` where it exists, otherwise a
  section generated from its declaration (question, figures, tables), so a new study appears
  in the paper as soon as its data do.
- ``write_comparison``: ``paper/tables/<study>_comparison.tex|md`` from the study's
  ``compare`` entry point over every run present (the reference first).
- ``build_pdf``: latexmk + pdflatex, or a message saying what to install.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from . import macros as macros_mod
from .claims import SPREAD_TEXT, notebook_title
from .config import REPO_ROOT
from .atomic import atomic_write_text
from .harness.provenance import read as read_provenance
from .report.tables import latex_escape, to_markdown, write_table

SPREAD_PERCENT = re.escape(SPREAD_TEXT) + r" ([0-9.]+) %"
from .report.tables import to_latex as _to_latex

SECTIONS = Path("sections") / "studies"       # relative to paper/
GENERATED = Path("generated")
TEX_PACKAGES = ("texlive-latex-base", "texlive-latex-recommended", "texlive-latex-extra", "latexmk")
PDF_TEXT_PACKAGE = "poppler-utils"          # pdftotext, for checking what a reader of the PDF sees
MIN_TABLE_SCALE = 0.9       # no table may be shrunk further to fit the page (main.tex logs each factor)
NEEDED_PROGRAMS = ("latexmk", "pdflatex")


class TexMissingError(RuntimeError):
    """No TeX installation: the message says what to install."""


def paragraph_table(frame, caption: str, label: str, widths_cm: list[float], long: bool = False) -> str:
    """A booktabs table whose text columns wrap (p{width}), for rows of sentences.

    ``long``: a longtable that continues onto the next page instead of a float, for tables that
    grow with every study (the claims, the rules of thumb): a float taller than the page is cut.
    """
    columns = "".join(rf">{{\raggedright\arraybackslash}}p{{{w}cm}}" for w in widths_cm)
    head = " & ".join(rf"\textbf{{{latex_escape(c)}}}" for c in frame.columns) + r" \\"
    body = [" & ".join(_breakable(v) for v in row) + r" \\" for row in frame.itertuples(index=False)]
    if long:
        return "\n".join([r"{\small\setlength{\tabcolsep}{4pt}", rf"\begin{{longtable}}{{{columns}}}",
                          rf"\caption{{{latex_escape(caption)}}}\label{{{label}}} \\", r"\toprule", head,
                          r"\midrule", r"\endfirsthead", r"\toprule", head, r"\midrule", r"\endhead",
                          r"\midrule", r"\endfoot", r"\bottomrule", r"\endlastfoot", *body,
                          r"\end{longtable}", "}", ""])
    lines = [r"\begin{table}[!htbp]", r"\centering", r"\small", rf"\caption{{{latex_escape(caption)}}}",
             rf"\label{{{label}}}", rf"\begin{{tabular}}{{{columns}}}", r"\toprule", head, r"\midrule"]
    lines += body
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]
    return "\n".join(lines)


def to_latex_table(frame, caption_tex: str, label: str) -> str:
    """A small float table whose caption is LaTeX already (it may hold a \\ref)."""
    text = _to_latex(frame, "CAPTION", label)
    return text.replace(r"\caption{CAPTION}", rf"\caption{{{caption_tex}}}")


def _breakable(text) -> str:
    """Escaped text that may wrap after underscores (long identifiers in narrow columns)."""
    return latex_escape(text).replace(r"\_", r"\_\allowbreak{}")


def write_paragraph_table(frame, tables_dir: Path, name: str, caption: str, widths_cm: list[float],
                          long: bool = False) -> None:
    """<name>.tex (wrapping columns; ``long``: across pages) and <name>.md, like report.tables.write_table."""
    if len(widths_cm) != len(frame.columns):
        raise ValueError(f"table {name}: {len(widths_cm)} widths for {len(frame.columns)} columns")
    atomic_write_text(Path(tables_dir) / f"{name}.tex",
                      paragraph_table(frame, caption, f"tab:{name}", widths_cm, long=long))
    atomic_write_text(Path(tables_dir) / f"{name}.md", to_markdown(frame, caption))


def claims_table(claims_tsv: Path, figures: set[str]) -> str:
    """The claims and their status as a LaTeX longtable: each claim numbered (C1, C2, ...) and
    labelled ``claim:<id>``, so the text and the rules of thumb cite it with \\claimref{<id>}."""
    from .claims import read_outcomes
    outcomes = read_outcomes(claims_tsv)
    widths = (2.9, 8.1, 1.4, 1.3, 2.0)
    spec = "".join(rf">{{\raggedright\arraybackslash}}p{{{w}cm}}" for w in widths)
    head = r"\textbf{claim} & \textbf{statement} & \textbf{status} & \textbf{spread} & \textbf{rests on} \\"
    caption = (f"The claims, checked against {Path(claims_tsv).parent}/ by the pipeline (definitions: "
               "config/claims/; observed values and thresholds: claims.md beside the data).")
    lines = [r"{\small\setlength{\tabcolsep}{3pt}", rf"\begin{{longtable}}{{{spec}}}",
             rf"\caption{{{latex_escape(caption)}}}\label{{tab:claims}} \\", r"\toprule", head, r"\midrule",
             r"\endfirsthead", r"\toprule", head, r"\midrule", r"\endhead", r"\bottomrule", r"\endlastfoot"]
    for row in outcomes.itertuples(index=False):
        rests = (rf"Fig.~\ref{{fig:{row.figure}}}" if row.figure in figures else rf"Table~\ref{{tab:{row.figure}}}")
        number = (rf"\refstepcounter{{claimnumber}}\label{{claim:{row.id}}}C\theclaimnumber{{}} "
                  rf"{{\scriptsize\texttt{{{_breakable(row.id)}}}}}")
        status = rf"\textbf{{{latex_escape(row.status)}}}" if row.status != "PASS" else "PASS"
        lines.append(f"{number} & {latex_escape(row.statement)} & {status} & {_spread(row.threshold)} & {rests} \\\\")
    lines += [r"\end{longtable}", "}", ""]
    return "\n".join(lines)


def _spread(threshold) -> str:
    """The largest spread between runs of the same sweep the claim's checks were judged with
    (tma_study.claims), or a dash where no second run of the sweep is present."""
    found = [float(x) for x in re.findall(SPREAD_PERCENT, str(threshold))]
    return rf"{max(found):.1f}\,\%" if found else "--"


def write_claims_table(claims_tsv: Path, out: Path, figures: set[str]) -> None:
    """paper/generated/claims.tex: the numbered claims (see ``claims_table``)."""
    atomic_write_text(Path(out), claims_table(claims_tsv, figures))


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
                    catalog_derived: Path | None = None) -> None:
    paper_dir = Path(paper_dir)
    macros_mod.write(results_dir, studies, paper_dir / GENERATED / "macros.tex", claims_tsv, catalog_derived)
    from . import projection
    atomic_write_text(paper_dir / GENERATED / "projection.tex", to_latex_table(
        projection.table(projection.load_specs()), "Published specifications the projection of Section~\\ref{sec:generality} "
        "uses (config/gpu\\_specs.yaml; dense tensor rates, per GPU).", "tab:projection"))
    if claims_tsv is not None:
        figures = {f for study in studies.values() for f in study.figures}
        write_claims_table(claims_tsv, paper_dir / GENERATED / "claims.tex", figures)
    inputs = ["% Generated by `tma-study paper-generated`: one section per study present; do not edit."]
    for name, study in studies.items():
        if (paper_dir / SECTIONS / f"{name}.tex").is_file():
            inputs.append(rf"\input{{{(SECTIONS / name).as_posix()}}}")
        else:
            atomic_write_text(paper_dir / GENERATED / f"study_{name}.tex", generated_section(study))
            inputs.append(rf"\input{{{(GENERATED / f'study_{name}').as_posix()}}}")
    atomic_write_text(paper_dir / GENERATED / "studies.tex", "\n".join(inputs) + "\n")


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


def build_pdf(paper_dir: Path, out_pdf: Path, build_dir: Path) -> Path:
    """Run latexmk on paper/main.tex; raise TexMissingError saying what to install."""
    missing = [program for program in NEEDED_PROGRAMS if shutil.which(program) is None]
    if missing:
        raise TexMissingError(
            f"building the paper needs {' and '.join(missing)}, not found on PATH. Install a TeX "
            f"distribution, e.g. on Debian/Ubuntu: apt-get install {' '.join(TEX_PACKAGES)} "
            "(on macOS: MacTeX). Everything else (figures, tables, claims) builds without TeX.")
    build_dir = Path(build_dir).resolve()
    build_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run(["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error", "-file-line-error",
                    f"-outdir={build_dir}", "main.tex"], cwd=paper_dir, check=True)
    shutil.copyfile(build_dir / "main.pdf", out_pdf)
    return Path(out_pdf)


def pdf_text_problems(text: str) -> list[str]:
    """What a reader would see as broken in the PDF's text: glyphs of a missing font encoding
    (a '<' printed as an inverted exclamation mark), undefined references or citations ('??')."""
    problems = []
    for mark, what in (("\u00a1", "an inverted exclamation mark (a '<' or '>' without T1 font encoding)"),
                       ("\u00bf", "an inverted question mark (a '>' without T1 font encoding)"),
                       ("??", "an undefined reference or citation")):
        lines = [line.strip() for line in text.splitlines() if mark in line]
        if lines:
            problems.append(f"{what}, {len(lines)} lines, e.g.: {lines[0][:120]}")
    return problems


def shrunk_tables(log_text: str, minimum: float = MIN_TABLE_SCALE) -> list[str]:
    """The tables main.tex had to scale below ``minimum`` to fit the page ('tma-table-scale' lines)."""
    import re
    found = re.findall(r"tma-table-scale: table (\S+) ([0-9.]+)", log_text)
    return [f"table {label} shrunk to {float(factor):.0%}" for label, factor in found if float(factor) < minimum]
