"""Reading Nsight Compute (ncu) output: the raw CSV page and its numbers, and the metric list.

Shared by the studies that count with ncu (paged_kv.profile, gemm_cluster_counters).
"""
from __future__ import annotations

import csv
import io


def raw_page(ncu_csv: str, metrics: tuple[str, ...]) -> tuple[list[str], list[str], list[list[str]]]:
    """(column names, their units, a row of values per profiled kernel) of ncu's raw CSV page (a
    header row naming the metrics, a row of units, the rows of values); every one of ``metrics``
    must be a column and at least one kernel a row."""
    lines = [line for line in ncu_csv.splitlines() if line.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    head = next((i for i, row in enumerate(rows) if metrics[0] in row), None)
    if head is None or len(rows) < head + 3:
        raise ValueError(f"no row of {metrics[0]!r} values in ncu's raw output")
    names = rows[head]
    missing = [m for m in metrics if m not in names]
    if missing:
        raise ValueError(f"ncu's raw output lacks {missing}")
    return names, rows[head + 1], [row for row in rows[head + 2:] if len(row) == len(names)]


def number(text: str) -> float:
    """A value of ncu's CSV ('1,234.5' -> 1234.5; '' or 'n/a' -> nan)."""
    text = text.replace(",", "").strip()
    try:
        return float(text)
    except ValueError:
        return float("nan")


def base_name(metric: str) -> str:
    """'lts__t_sectors.sum.pct_of_peak_sustained_elapsed' -> 'lts__t_sectors' (what --query-metrics lists)."""
    return metric.split(".", 1)[0]


def listed_metrics(query_output: str) -> set[str]:
    """The base metric names of ``ncu --query-metrics`` output (the first word of each line that
    has the shape of a metric name: lowercase words joined by '__' and '_')."""
    names = set()
    for line in query_output.splitlines():
        word = line.split(maxsplit=1)[0] if line.strip() else ""
        if "__" in word and word.replace("_", "").isalnum() and word == word.lower():
            names.add(word)
    return names
