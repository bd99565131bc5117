"""The README's generated tables: the reviewer's checklist (from ``results/<label>/claims.tsv``:
per study, its claims' status, the figures and tables they rest on, and the commands that
regenerate and check them) and the time and hardware of measuring each study (from each
study's ``provenance.json`` and declaration).

Each table sits between markers (``<!-- checklist:begin -->`` ... ``<!-- checklist:end -->``,
``<!-- cost:begin -->`` ... ``<!-- cost:end -->``); ``tma-study readme-tables`` rewrites
them, and the no-GPU pipeline test fails when the committed README disagrees with what the
pipeline finds on the committed reference data, so the README cannot silently go stale when
a claim, a threshold or the data change. The cost table is the README's one source of the
times it quotes. docs/provenance.md's table of commits is rewritten with them (``doc_tables``).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.atomic import atomic_write_text
from tma_study.harness.provenance import read as read_provenance
from tma_study.studies import discover

from . import doc_tables
from .claims import FAIL, NOT_MEASURED, PASS, read_outcomes

BEGIN, END = "<!-- checklist:begin -->", "<!-- checklist:end -->"
COST_BEGIN, COST_END = "<!-- cost:begin -->", "<!-- cost:end -->"
TIME_BEGIN, TIME_END = "<!-- time:begin -->", "<!-- time:end -->"
ARCHITECTURES = {9: "Hopper (sm_90a)", 10: "Blackwell (sm_100a)"}
RUNS = Path("benchmarks") / "runs"          # benchmarks/reviewer_path.sh --record writes here


class ReadmeError(ValueError):
    """The README lacks the markers the generated table goes between."""


def _study_order(outcomes: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(outcomes.study))


def _where(name: str, figures: set[str]) -> str:
    """The file a reviewer opens for a figure or table the pipeline makes."""
    return f"`figures/{name}.png`" if name in figures else f"`paper/tables/{name}.md`"


def checklist_table(claims_tsv: Path) -> str:
    """Markdown: per study, its claims' status, the figures and tables they rest on, and the
    command that regenerates everything they need and prints their lines of claims.tsv."""
    claims_tsv = Path(claims_tsv)
    outcomes = read_outcomes(claims_tsv)
    figures = {f for study in discover().values() for f in study.figures}
    lines = [f"Generated from `{claims_tsv.as_posix()}` by `tma-study readme-tables` (do not edit by hand).",
             "", "| study | claims: pass / fail / not measured | rests on | regenerate and check |",
             "| --- | --- | --- | --- |"]
    for study in _study_order(outcomes):
        mine = outcomes[outcomes.study == study]
        tally = " / ".join(str(int((mine.status == s).sum())) for s in (PASS, FAIL, NOT_MEASURED))
        rests = ", ".join(_where(f, figures) for f in dict.fromkeys(mine.figure))
        check = (f"`.venv/bin/snakemake -c4 {claims_tsv.as_posix()} && .venv/bin/tma-study claims --results "
                 f"{claims_tsv.parent.as_posix()} --study {study}`")
        lines.append(f"| `{study}` | {tally} | {rests} | {check} |")
    return "\n".join(lines)


def _architectures(study: str) -> str:
    known = discover().get(study)
    if known is None:
        return "?"
    return ", ".join(ARCHITECTURES.get(major, f"sm_{major}x") for major in known.architectures)


def cost_table(results_dir: Path) -> str:
    """Markdown: per study measured under ``results_dir``: the GPUs it measures on, the GPU of the
    run, its configurations, the compile step (where the run recorded it) and the measure step,
    split into taking the kernels from the kernel cache and loading them, and timing."""
    results_dir = Path(results_dir)
    lines = [f"Generated from `{results_dir.as_posix()}/<study>/provenance.json` by `tma-study readme-tables`.",
             "", "| study | measures on | measured on | configurations | compile step (CPU) | measure step (GPU) "
             "| measured (UTC) |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for provenance_file in sorted(results_dir.glob("*/provenance.json")):
        study = provenance_file.parent.name
        provenance = read_provenance(provenance_file, study=study)
        gpu = provenance.get("gpu", {})
        lines.append(f"| `{study}` | {_architectures(study)} | {gpu.get('name', '?')} ({gpu.get('sm_count', '?')} SMs) "
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


def time_table(root: Path) -> str:
    """Markdown: the newest recorded run of benchmarks/reviewer_path.sh on a fresh clone: the
    machine, the install, the main job and the test command (a record without the tests omits them)."""
    records = sorted(Path(root, RUNS).glob("reviewer-path-*.txt"))
    if not records:
        return "No run of `benchmarks/reviewer_path.sh --record` is recorded yet (benchmarks/runs/)."
    fields = dict(line.split(": ", 1) for line in records[-1].read_text().splitlines()
                  if ": " in line and not line.startswith("#"))
    cores = fields["machine"].split()[0]
    lines = [f"Generated from `{(RUNS / records[-1].name).as_posix()}` (`benchmarks/reviewer_path.sh --record`, "
             f"a fresh clone at {fields['commit']}, {fields['date_utc']}) by `tma-study readme-tables`.", "",
             f"| without a GPU: {fields['machine']}, {fields['python']} | took |", "| --- | --- |",
             f"| install (`pip install -e .`) | {_duration(float(fields['install_s']))} |",
             f"| main job (`snakemake -c{cores}`, {fields['main_job_jobs']} jobs) | "
             f"{_duration(float(fields['main_job_s']))} |"]
    if "test_command_s" in fields:
        lines.append(f"| test command (install + `pytest`: {fields['test_result']}) | "
                     f"{_duration(float(fields['test_command_s']))} |")
    return "\n".join(lines)


def render(readme_text: str, table: str, begin: str = BEGIN, end: str = END) -> str:
    if begin not in readme_text or end not in readme_text:
        raise ReadmeError(f"README has no {begin} ... {end} markers for a generated table")
    head, rest = readme_text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{table}\n{end}{tail}"


def update_readme(readme: Path, claims_tsv: Path, check_only: bool = False) -> bool:
    """Rewrite the tables (unless ``check_only``); return whether they were out of date.

    The cost table is written only where the README has its markers; the provenance table of
    docs/provenance.md (beside the README) only where that file has its markers."""
    readme = Path(readme)
    current = readme.read_text()
    wanted = render(current, checklist_table(claims_tsv))
    if COST_BEGIN in wanted:
        wanted = render(wanted, cost_table(Path(claims_tsv).parent), COST_BEGIN, COST_END)
    if TIME_BEGIN in wanted:
        wanted = render(wanted, time_table(readme.parent), TIME_BEGIN, TIME_END)
    if wanted != current and not check_only:
        atomic_write_text(readme, wanted)
    return _update_provenance_doc(readme.parent, check_only) or wanted != current


def _update_provenance_doc(root: Path, check_only: bool) -> bool:
    """Rewrite docs/provenance.md's generated table (unless ``check_only``); whether it was stale.
    Only in the project's own git repository: elsewhere (a copy, an unpacked archive) no commit
    can be checked, and the table stays as the repository wrote it."""
    from tma_study.harness.source import own_repository
    doc = root / doc_tables.PROVENANCE_DOC
    if not doc.is_file() or doc_tables.BEGIN not in doc.read_text() or not own_repository(root):
        return False
    current = doc.read_text()
    wanted = render(current, doc_tables.provenance_table(root), doc_tables.BEGIN, doc_tables.END)
    if wanted != current and not check_only:
        atomic_write_text(doc, wanted)
    return wanted != current
