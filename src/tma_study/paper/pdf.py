"""paper/main.pdf: latexmk + pdflatex (or a message saying what to install), and what a reader of
the PDF would see as broken: glyphs of a missing font encoding, undefined references, tables
shrunk below readability."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

TEX_PACKAGES = ("texlive-latex-base", "texlive-latex-recommended", "texlive-latex-extra", "latexmk")
PDF_TEXT_PACKAGE = "poppler-utils"          # pdftotext, for checking what a reader of the PDF sees
MIN_TABLE_SCALE = 0.9       # no table may be shrunk further to fit the page (main.tex logs each factor)
NEEDED_PROGRAMS = ("latexmk", "pdflatex")


class TexMissingError(RuntimeError):
    """No TeX installation: the message says what to install."""


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
    found = re.findall(r"tma-table-scale: table (\S+) ([0-9.]+)", log_text)
    return [f"table {label} shrunk to {float(factor):.0%}" for label, factor in found if float(factor) < minimum]
