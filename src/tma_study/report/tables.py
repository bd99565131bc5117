"""Write one table as LaTeX (booktabs) and Markdown from a DataFrame of display strings."""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from tma_study.harness import l2_state
from tma_study.atomic import atomic_write_text

LATEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                 "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\^{}"}


def latex_escape(text) -> str:
    return "".join(LATEX_ESCAPES.get(ch, ch) for ch in str(text))


# The paper is two columns (IEEEtran, 10 pt): a table fits a column where it can, else the page
# (table*). Text is never smaller than \footnotesize (8 pt); a table taller than a page is a
# longtable, which breaks across pages (the appendix is one column, where longtable works).
COLUMN_WIDTH_CM = 8.2     # IEEEtran's column (8.9 cm) less slack for the estimate of a character's width
TEXT_WIDTH_CM = 17.0      # IEEEtran's text width (18.1 cm) less slack for the estimate of a character's width
CHAR_CM = {"small": 0.16, "footnotesize": 0.14}     # an average character of the paper's font
LINE_CM = 0.36            # one \footnotesize line of a table, rules included
LONG_TABLE_CM = 19.0      # taller than this (of a page's 24 cm): a longtable, not a float
COLSEP_CM = 0.42          # LaTeX's default space between two columns (2 x 6 pt)
WRAPPED_WIDTH_CM = 17.8   # wrapped columns' widths are exact (only their words' widths are estimates)
WRAPPED_COLSEP_PT = (3.0, 2.0)    # 	abcolsep between wrapped columns; the narrower where words need it
PT_CM = 2.54 / 72.27
ROUNDING_CM = 0.05        # each wrapped column's width is rounded up by this much


def _longest_word(text) -> int:
    """The longest piece a wrapped cell cannot break: words, split also after '_' (see breakable)."""
    return max((len(word) for word in re.split(r"[\s_]+", str(text))), default=0)


def breakable(text) -> str:
    """Escaped text that may wrap after underscores (long identifiers in narrow columns)."""
    return latex_escape(text).replace(r"\_", r"\_\allowbreak{}")


def column_layout(frame: pd.DataFrame) -> tuple[str, list[float] | None, bool, float]:
    r"""(font size, column widths in cm or None, wide, \tabcolsep in pt) so the table fits unshrunk:
    in a column where it can (as is at \small, then \footnotesize), else across the page (``wide``:
    table*), as is or at \footnotesize with wrapping columns, the widest wrapped first (never below
    its longest word), their space between them narrowed where the longest words need it."""
    columns = [str(c) for c in frame.columns]
    content = [max([len(str(v)) for v in frame[c]] or [0]) for c in frame.columns]
    for width, wide in ((COLUMN_WIDTH_CM, False), (TEXT_WIDTH_CM, True)):
        for size in ("small", "footnotesize"):
            natural = sum(max(n, len(h)) * CHAR_CM[size] + COLSEP_CM for n, h in zip(content, columns))
            if natural <= width:
                return size, None, wide, 6.0
    char = CHAR_CM["footnotesize"]
    widths = [max(n, _longest_word(h)) for n, h in zip(content, columns)]
    floors = [max(_longest_word(h), max([_longest_word(v) for v in frame[c]] or [0]), 4)
              for h, c in zip(columns, frame.columns)]
    for colsep_pt in WRAPPED_COLSEP_PT:
        available = (WRAPPED_WIDTH_CM - len(columns) * (2 * colsep_pt * PT_CM + ROUNDING_CM)) / char
        if sum(floors) <= available:
            break
    while sum(widths) > available:
        widest = max(range(len(widths)), key=lambda i: widths[i] - floors[i])
        if widths[widest] <= floors[widest]:
            break
        widths[widest] -= 1
    return "footnotesize", [round(w * char + ROUNDING_CM, 2) for w in widths], True, colsep_pt


def height_cm(frame: pd.DataFrame, widths: list[float] | None) -> float:
    """About how tall the table prints: one line a row, more where a wrapped cell needs them."""
    char = CHAR_CM["footnotesize"]
    lines = 2 + len(frame.columns) // 8     # the header (and the caption's first lines)
    for row in frame.itertuples(index=False):
        lines += 1 if widths is None else max(
            -(-len(str(v)) * char // max(w, char)) for v, w in zip(row, widths))
    return lines * LINE_CM


def to_latex(frame: pd.DataFrame, caption: str, label: str) -> str:
    size, widths, wide, colsep_pt = column_layout(frame)
    columns = ("l" * len(frame.columns) if widths is None else
               "".join(rf">{{\raggedright\arraybackslash}}p{{{w}cm}}" for w in widths))
    cell = latex_escape if widths is None else breakable
    head = " & ".join(cell(c) for c in frame.columns) + r" \\"
    rows = [" & ".join(cell(v) for v in row) + r" \\" for row in frame.itertuples(index=False)]
    spacing = [] if widths is None else [rf"\setlength{{\tabcolsep}}{{{colsep_pt:g}pt}}"]
    if height_cm(frame, widths) > LONG_TABLE_CM:
        return "\n".join([rf"{{\{size}{''.join(spacing)}", rf"\begin{{longtable}}{{{columns}}}",
                          rf"\caption{{{latex_escape(caption)}}}\label{{{label}}} \\", r"\toprule", head, r"\midrule",
                          r"\endfirsthead", r"\toprule", head, r"\midrule", r"\endhead", r"\bottomrule", r"\endlastfoot",
                          *rows, r"\end{longtable}", "}", ""])
    float_ = "table*" if wide else "table"
    lines = [rf"\begin{{{float_}}}[!htbp]", r"\centering", rf"\{size}", *spacing, rf"\caption{{{latex_escape(caption)}}}",
             rf"\label{{{label}}}", rf"\begin{{tabular}}{{{columns}}}", r"\toprule", head, r"\midrule", *rows,
             r"\bottomrule", r"\end{tabular}", rf"\end{{{float_}}}", ""]
    return "\n".join(lines)


def to_markdown(frame: pd.DataFrame, caption: str) -> str:
    header = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "| " + " | ".join("---" for _ in frame.columns) + " |"
    rows = ["| " + " | ".join(map(str, row)) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([f"**{caption}**", "", header, rule, *rows, ""])


def write_table(frame: pd.DataFrame, tables_dir: Path, name: str, caption: str) -> None:
    """paper/tables/<name>.tex and <name>.md."""
    tables_dir = Path(tables_dir)
    atomic_write_text(tables_dir / f"{name}.tex", to_latex(frame, caption, f"tab:{name}"))
    atomic_write_text(tables_dir / f"{name}.md", to_markdown(frame, caption))


def paragraph_table(frame, caption: str, label: str, widths_cm: list[float], long: bool = False) -> str:
    """A booktabs table whose text columns wrap (p{width}), for rows of sentences.

    ``long``: a longtable that continues onto the next page instead of a float, for tables that
    grow with every study (the claims, the rules of thumb): a float taller than the page is cut.
    """
    columns = "".join(rf">{{\raggedright\arraybackslash}}p{{{w}cm}}" for w in widths_cm)
    head = " & ".join(rf"\textbf{{{latex_escape(c)}}}" for c in frame.columns) + r" \\"
    body = [" & ".join(breakable(v) for v in row) + r" \\" for row in frame.itertuples(index=False)]
    if long:
        return "\n".join([r"{\small\setlength{\tabcolsep}{4pt}", rf"\begin{{longtable}}{{{columns}}}",
                          rf"\caption{{{latex_escape(caption)}}}\label{{{label}}} \\", r"\toprule", head,
                          r"\midrule", r"\endfirsthead", r"\toprule", head, r"\midrule", r"\endhead",
                          r"\midrule", r"\endfoot", r"\bottomrule", r"\endlastfoot", *body,
                          r"\end{longtable}", "}", ""])
    float_ = "table*" if sum(widths_cm) > COLUMN_WIDTH_CM else "table"
    lines = [rf"\begin{{{float_}}}[!htbp]", r"\centering", r"\small", rf"\caption{{{latex_escape(caption)}}}",
             rf"\label{{{label}}}", rf"\begin{{tabular}}{{{columns}}}", r"\toprule", head, r"\midrule"]
    lines += body
    lines += [r"\bottomrule", r"\end{tabular}", rf"\end{{{float_}}}", ""]
    return "\n".join(lines)


def write_paragraph_table(frame, tables_dir: Path, name: str, caption: str, widths_cm: list[float],
                          long: bool = False) -> None:
    """<name>.tex (wrapping columns; ``long``: across pages) and <name>.md, like report.tables.write_table."""
    if len(widths_cm) != len(frame.columns):
        raise ValueError(f"table {name}: {len(widths_cm)} widths for {len(frame.columns)} columns")
    atomic_write_text(Path(tables_dir) / f"{name}.tex",
                      paragraph_table(frame, caption, f"tab:{name}", widths_cm, long=long))
    atomic_write_text(Path(tables_dir) / f"{name}.md", to_markdown(frame, caption))


def source_line(provenance: dict) -> str:
    """'NVIDIA H200, 132 SMs, run 2026-11-29, commit abc1234' for captions."""
    gpu = provenance.get("gpu", {})
    commit = (provenance.get("git") or {}).get("commit")
    source = f"source {provenance.get('source_sha256', 'unknown')[:12]}"
    if commit:
        source += f", commit {commit[:10]}"
    return (f"{gpu.get('name', 'unknown GPU')}, {gpu.get('sm_count', '?')} SMs, measured "
            f"{str(provenance.get('finished_utc', ''))[:10]}, {source}")


def human_bytes(n) -> str:
    n = int(n)
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"


def run_table(provenance: dict) -> pd.DataFrame:
    """Where and how the data were measured, all read from provenance.json."""
    gpu = provenance.get("gpu", {})
    started = pd.Timestamp(provenance["started_utc"])
    seconds = (pd.Timestamp(provenance["finished_utc"]) - started).total_seconds()
    driver = int(provenance.get("cuda_driver_version") or 0)
    packages = provenance.get("packages", {})
    git = provenance.get("git") or {}
    rows = [
        ("GPU", f"{gpu.get('name')} ({gpu.get('sm_count')} SMs, L2 {human_bytes(gpu.get('l2_bytes', 0))})"),
        ("CUDA driver API", f"{driver // 1000}.{driver % 1000 // 10}"),
        ("configurations timed", str(provenance.get("configurations"))),
        ("GPU time of the whole study", f"{int(seconds // 60)} min {int(seconds % 60)} s"),
        ("measured (UTC)", f"{provenance['started_utc']} to {provenance['finished_utc']}"),
        ("timer", str(provenance.get("timer"))),
        ("L2 at the start of each sample", l2_state.describe(provenance)),
        ("numba-cuda / cuda-bench / numpy", " / ".join(str(packages.get(p)) for p in ("numba-cuda", "cuda-bench", "numpy"))),
        ("source sha256 (tma_study.harness.provenance.source_hash)", str(provenance.get("source_sha256"))),
        ("commit", f"{git.get('commit')} ({git.get('commit_source')})"),
    ]
    return pd.DataFrame(rows, columns=["", "value"])
