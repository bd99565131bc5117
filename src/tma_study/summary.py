"""The main job's last lines: what a reviewer came for, after Snakemake's own output.

One line per study (its claims: pass / fail / not measured, from ``results/<label>/claims.tsv``)
and where to read the rest: claims.md, the figures, the tables and the HTML report. Read with
the csv module alone, so printing it costs nothing next to the job (the Snakefile's
``onsuccess`` handler calls it); Snakemake's full output stays in the log it names below.
"""
from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

STATUSES = ("PASS", "FAIL", "NOT MEASURED")


def study_counts(claims_tsv: Path) -> dict[str, Counter]:
    """{study: Counter(status)} in the order the studies appear in claims.tsv."""
    counts: dict[str, Counter] = {}
    with open(claims_tsv, newline="") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            counts.setdefault(row["study"], Counter())[row["status"]] += 1
    return counts


def summary(claims_tsv: Path, figures: list[str], tables_dir: str, report: str = "report.html") -> str:
    """The summary block: a headline, one line per study, then the paths to read."""
    claims_tsv = Path(claims_tsv)
    counts = study_counts(claims_tsv)
    total = sum(counts.values(), Counter())
    width = max(map(len, counts), default=5) + 2
    lines = [f"Claims checked against {claims_tsv.parent.as_posix()}/: {sum(total.values())} claims, "
             + ", ".join(f"{total[s]} {s}" for s in STATUSES), f"  {'study':<{width}}pass / fail / not measured"]
    lines += [f"  {study:<{width}}" + " / ".join(str(c[s]) for s in STATUSES) for study, c in counts.items()]
    lines += [f"Each claim with its numbers, threshold and reason: {claims_tsv.with_suffix('.md').as_posix()}",
              f"Figures: {len(figures)} in {_folder(figures)} (.png and .pdf); tables: {tables_dir}/*.md",
              f"Every figure and table by study, with its claims' status: .venv/bin/snakemake --report {report}"]
    return "\n".join(lines)


def _folder(figures: list[str]) -> str:
    folders = sorted({Path(f).parent.as_posix() for f in figures})
    return ", ".join(f"{f}/" for f in folders) or "figures/"
