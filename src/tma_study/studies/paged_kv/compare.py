"""What moved between runs of the paged_kv study (entry point ``compare``).

Given each run's derived folder (``{label: derived_dir}``) and which label is the reference:
per phase and dtype, the page-size verdict (facts.PageRule.verdict: "TMA from 64-token
pages", ...; it moved when the verdict differs, the win/tie/loss tally shown beside it) and
the median TMA speedup; per dtype, the median fraction of the copy rate the better decode
path reached at the bar's points; and how often FA3's rule named the winner. A number moved
when it changed by more than ``MOVED_RELATIVE``.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.report.compare import (
    Verdict,
    only_the_reference,
    run_labels,
    value_row,
    verdict_row,
)

from . import facts

MOVED_RELATIVE = 0.05   # paged-KV kernels run tens of microseconds: a 5 % shift of a median is news


def _run(derived_dir: Path) -> dict[str, pd.DataFrame]:
    return {name: pd.read_csv(Path(derived_dir) / f"{name}.csv") for name in ("speedup", "decode")}


def compare_runs(derived_dirs: dict[str, Path], reference: str) -> pd.DataFrame:
    """One row per quantity, one column per run (the reference first), and 'moved'."""
    labels = run_labels(derived_dirs, reference)
    alone = only_the_reference("paged_kv", labels)
    if alone is not None:
        return pd.DataFrame(alone, columns=["quantity", *labels, "moved"])
    runs = {label: _run(derived_dirs[label]) for label in labels}
    rows = []
    for phase in facts.PHASES:
        for dtype in facts.DTYPES:
            rules = {label: facts.page_rule(run["speedup"], phase, dtype) for label, run in runs.items()}
            if all(rule is None for rule in rules.values()):
                continue
            rows.append(verdict_row(f"{phase}, {dtype}: page-size rule",
                                    {label: None if r is None else Verdict(r.verdict, r.tally.short())
                                     for label, r in rules.items()}, labels))
            rows.append(value_row(f"{phase}, {dtype}: median cp.async / TMA time",
                                  {label: None if r is None else r.speedup_median for label, r in rules.items()},
                                  labels, lambda v: f"{v:.2f}", MOVED_RELATIVE))
    for dtype in facts.DTYPES:
        bars = {label: facts.decode_bar(run["decode"], dtype) for label, run in runs.items()}
        if any(bar is not None for bar in bars.values()):
            rows.append(value_row(f"decode, {dtype}: better path, median % of copy (bar's points)",
                                  {label: None if b is None else 100 * b.fraction_median for label, b in bars.items()},
                                  labels, lambda v: f"{v:.0f} %", MOVED_RELATIVE))
    agreement = {label: facts.fa3_agreement(run["speedup"]) for label, run in runs.items()}
    rows.append(value_row("FA3's rule names the winner, % where both paths ran",
                          {label: 100 * a.fraction if a.decided else None for label, a in agreement.items()},
                          labels, lambda v: f"{v:.0f} %", MOVED_RELATIVE))
    return pd.DataFrame(rows, columns=["quantity", *labels, "moved"])
