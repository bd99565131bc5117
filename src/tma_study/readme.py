"""The README's generated tables: the claims (from ``results/<label>/claims.tsv``) and the
cost of measuring each study (from each study's ``provenance.json``).

Each table sits between markers (``<!-- claims:begin -->`` ... ``<!-- claims:end -->``,
``<!-- cost:begin -->`` ... ``<!-- cost:end -->``); ``tma-study readme-tables`` rewrites
them, and the no-GPU pipeline test fails when the committed README disagrees with what the
pipeline finds on the committed reference data, so the README cannot silently go stale when
a claim, a threshold or the data change.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from .claims import read_outcomes
from .harness.atomic import atomic_write_text
from .harness.provenance import read as read_provenance

BEGIN, END = "<!-- claims:begin -->", "<!-- claims:end -->"
COST_BEGIN, COST_END = "<!-- cost:begin -->", "<!-- cost:end -->"
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
    lines = [f"Generated from `{claims_tsv.as_posix()}` by `tma-study readme-tables` (do not edit by hand).",
             "", "| claim | statement | rests on | check | expected output |", "| --- | --- | --- | --- | --- |"]
    for row in outcomes.itertuples(index=False):
        expected = f"`{row.status}`" + (f" ({_short(row.observed)})" if row.observed else "")
        command = f"`grep -w {row.id} {claims_tsv.as_posix()}`"
        cells = [f"`{row.id}`", row.statement, f"`{row.figure}`", command, expected]
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def cost_table(results_dir: Path) -> str:
    """Markdown: per study measured under ``results_dir``, the GPU, configurations, the compile
    step (where the run recorded it) and the measure step, split into taking the kernels from
    the kernel cache and loading them, and timing."""
    results_dir = Path(results_dir)
    lines = [f"Generated from `{results_dir.as_posix()}/<study>/provenance.json` by `tma-study readme-tables`.",
             "", "| study | measured on | configurations | compile step (CPU) | measure step (GPU) | measured (UTC) |",
             "| --- | --- | --- | --- | --- | --- |"]
    for provenance_file in sorted(results_dir.glob("*/provenance.json")):
        provenance = read_provenance(provenance_file, study=provenance_file.parent.name)
        gpu = provenance.get("gpu", {})
        lines.append(f"| `{provenance_file.parent.name}` | {gpu.get('name', '?')} ({gpu.get('sm_count', '?')} SMs) "
                     f"| {provenance.get('configurations', '?')} | {_compile_step(provenance)} "
                     f"| {_measure_step(provenance)} | {str(provenance['started_utc'])[:10]} |")
    return "\n".join(lines)


def _compile_step(provenance: dict) -> str:
    step = provenance.get("compile_step")
    if not step:
        return "not recorded"
    took = _duration(_seconds(step["started_utc"], step["finished_utc"]))
    return f"{took} ({step['builds']} kernels, {step['compiled']} compiled, {step['cache_hits']} from the cache)"


def _measure_step(provenance: dict) -> str:
    seconds = _seconds(provenance["started_utc"], provenance["finished_utc"])
    if "timing_started_utc" not in provenance:
        return _duration(seconds)
    timed = _seconds(provenance["timing_started_utc"], provenance["finished_utc"])
    before = "taking and loading the kernels" if "kernel_cache" in provenance else "compiling and loading the kernels"
    return f"{_duration(seconds)} ({_duration(seconds - timed)} {before}, {_duration(timed)} timing)"


def _seconds(start: str, end: str) -> float:
    return (pd.Timestamp(end) - pd.Timestamp(start)).total_seconds()


def _duration(seconds: float) -> str:
    return f"{int(seconds // 60)} min {int(seconds % 60)} s"


def render(readme_text: str, table: str, begin: str = BEGIN, end: str = END) -> str:
    if begin not in readme_text or end not in readme_text:
        raise ReadmeError(f"README has no {begin} ... {end} markers for a generated table")
    head, rest = readme_text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{table}\n{end}{tail}"


def update_readme(readme: Path, claims_tsv: Path, check_only: bool = False) -> bool:
    """Rewrite the tables (unless ``check_only``); return whether they were out of date.

    The cost table is written only where the README has its markers."""
    readme = Path(readme)
    current = readme.read_text()
    wanted = render(current, claims_table(claims_tsv))
    if COST_BEGIN in wanted:
        wanted = render(wanted, cost_table(Path(claims_tsv).parent), COST_BEGIN, COST_END)
    if wanted != current and not check_only:
        atomic_write_text(readme, wanted)
    return wanted != current
