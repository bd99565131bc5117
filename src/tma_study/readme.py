"""The README's claims table, generated from ``results/<label>/claims.tsv``.

The table sits between ``<!-- claims:begin -->`` and ``<!-- claims:end -->``; ``tma-study
readme-claims`` rewrites it, and the no-GPU pipeline test fails when the committed README
disagrees with what the checker finds on the committed reference data, so the README
cannot silently go stale when a claim, a threshold or the data change.
"""
from __future__ import annotations

from pathlib import Path

from .claims import read_outcomes
from .harness.atomic import atomic_write_text

BEGIN, END = "<!-- claims:begin -->", "<!-- claims:end -->"
MAX_OBSERVED_CHARS = 70


class ReadmeError(ValueError):
    """The README lacks the markers the generated table goes between."""


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_OBSERVED_CHARS else text[:MAX_OBSERVED_CHARS - 1] + "…"


def claims_table(claims_tsv: Path) -> str:
    """Markdown: each claim, the figure it rests on, the command that checks it, what it prints."""
    claims_tsv = Path(claims_tsv)
    outcomes = read_outcomes(claims_tsv)
    lines = [f"Generated from `{claims_tsv.as_posix()}` by `tma-study readme-claims` (do not edit by hand).",
             "", "| claim | statement | rests on | check | expected output |", "| --- | --- | --- | --- | --- |"]
    for row in outcomes.itertuples(index=False):
        expected = f"`{row.status}`" + (f" ({_short(row.observed)})" if row.observed else "")
        command = f"`grep -w {row.id} {claims_tsv.as_posix()}`"
        cells = [f"`{row.id}`", row.statement, f"`{row.figure}`", command, expected]
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def render(readme_text: str, table: str) -> str:
    if BEGIN not in readme_text or END not in readme_text:
        raise ReadmeError(f"README has no {BEGIN} ... {END} markers for the claims table")
    head, rest = readme_text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{table}\n{END}{tail}"


def update_readme(readme: Path, claims_tsv: Path, check_only: bool = False) -> bool:
    """Rewrite the table (unless ``check_only``); return whether it was out of date."""
    readme = Path(readme)
    current = readme.read_text()
    wanted = render(current, claims_table(claims_tsv))
    if wanted != current and not check_only:
        atomic_write_text(readme, wanted)
    return wanted != current
