"""paper/main.pdf: latexmk + pdflatex (or a message saying what to install), and what a reader of
the PDF would see as broken: glyphs of a missing font encoding, undefined references, tables
shrunk below readability."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

# Debian's packages for the build: IEEEtran (texlive-publishers), Times and Helvetica
# (texlive-fonts-recommended) and Latin Modern (lmodern), which Debian only recommends, named here
# because a machine installed without recommended packages lacks them.
TEX_PACKAGES = ("texlive-latex-base", "texlive-latex-recommended", "texlive-latex-extra", "texlive-fonts-recommended",
                "texlive-publishers", "lmodern", "latexmk")
PDF_TEXT_PACKAGE = "poppler-utils"          # pdftotext, for checking what a reader of the PDF sees
MIN_TABLE_PT = 8.0          # no table prints smaller (main.tex logs the font size of each table it scales)
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
    # -g: run pdflatex even where latexmk's records say nothing changed. A build that failed for want
    # of a package leaves those records behind, and once the package is installed latexmk would
    # answer "Nothing to do" with the old error until build_dir was deleted by hand.
    subprocess.run(["latexmk", "-pdf", "-g", "-interaction=nonstopmode", "-halt-on-error", "-file-line-error",
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


def shrunk_tables(log_text: str, minimum_pt: float = MIN_TABLE_PT) -> list[str]:
    """The tables main.tex had to scale so far that their text prints below ``minimum_pt``
    ('tma-table-scale: table <label> <factor> size <font pt>' lines; without a size, 10 pt)."""
    found = re.findall(r"tma-table-scale: table (\S+) ([0-9.]+)(?: size ([0-9.]+))?", log_text)
    shrunk = []
    for label, factor, size in found:
        printed = float(factor) * float(size or 10)
        if printed < minimum_pt - 1e-6:
            shrunk.append(f"table {label} shrunk to {float(factor):.0%}: {printed:.1f} pt text")
    return shrunk


MAX_OVERFULL_PT = 5.0       # a line or table this much wider than its column shows in print
FILE_OPENED = re.compile(r"\((?:\./)?((?:sections|tables|generated)/[^\s()]+\.tex)")


def overfull_boxes(log_text: str, over_pt: float = MAX_OVERFULL_PT) -> list[str]:
    """Each overfull box wider than ``over_pt`` in the LaTeX log, with the last source file LaTeX
    opened before it (where a table or a paragraph sticks out of its column)."""
    found, current = [], "main.tex"
    for line in log_text.splitlines():
        opened = FILE_OPENED.findall(line)
        if opened:
            current = opened[-1]
        match = re.match(r"Overfull \\[hv]box \(([0-9.]+)pt too (?:wide|high)\) (.*)", line)
        if match and float(match.group(1)) > over_pt:
            found.append(f"{current}: {float(match.group(1)):.1f} pt, {match.group(2)}")
    return found


def floats_too_large(log_text: str) -> list[str]:
    """LaTeX's 'Float too large for page' warnings: a table or figure cut at the page's foot."""
    return [line.strip() for line in log_text.splitlines() if "Float too large for page" in line]


def body_pages(aux_text: str) -> int | None:
    """The page the body ends on: main.tex's label body-end, from main.aux (None: no such label)."""
    match = re.search(r"\\newlabel\{body-end\}\{\{[^{}]*\}\{(\d+)\}", aux_text)
    return int(match.group(1)) if match else None


def printed_figure_widths(log_text: str) -> dict[str, float]:
    """{figure file: printed width in big points (1/72 in)}, from main.tex's 'tma-figure-width'
    lines; a figure printed twice keeps its narrowest."""
    widths: dict[str, float] = {}
    for name, points in re.findall(r"tma-figure-width: (\S+) ([0-9.]+)pt", log_text):
        width = float(points) * 72 / 72.27
        widths[name] = min(width, widths.get(name, width))
    return widths
