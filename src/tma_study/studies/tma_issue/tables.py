"""Tables of the tma_issue study (paper/tables/tma_issue_*.tex|md)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.report.tables import human_bytes, run_table, source_line, write_table

FORM_LABELS = {"tma_tile": "TMA tile", "bulk_copy": "bulk copy", "plain_indexed": "plain, indexed",
               "plain_minimal": "plain, minimal"}
MECHANISM_LABELS = {"tma_tile": "TMA tile", "bulk_copy": "bulk copy"}


def chase_pivot(chase: pd.DataFrame) -> pd.DataFrame:
    """One row per level and working set, one column per form: median SM cycles per hop."""
    rows = []
    for (level, nbytes), group in chase.groupby(["level", "working_set_bytes"], sort=False):
        cycles = group.set_index("form").cycles_per_hop_median
        rows.append({"level": level.upper() if level == "hbm" else "L2", "working set": human_bytes(nbytes),
                     **{label: f"{cycles[form]:.0f}" for form, label in FORM_LABELS.items() if form in cycles}})
    return pd.DataFrame(rows)


def issue_rate_pivot(issue_rate: pd.DataFrame) -> pd.DataFrame:
    """One row per mechanism and size, one column per issuing-thread count: copies per SM per us."""
    rows = []
    for (mechanism, size), group in issue_rate.groupby(["mechanism", "bytes_per_transfer"], sort=False):
        rates = group.set_index("issue_threads")
        best = rates.transfers_per_sm_per_us.idxmax()
        rows.append({"mechanism": MECHANISM_LABELS[mechanism], "size": human_bytes(size),
                     **{f"{t} thr": f"{r:.1f}" for t, r in rates.transfers_per_sm_per_us.items()},
                     "best: cycles/copy": f"{rates.sm_cycles_per_transfer[best]:.1f}",
                     "best: GB/s": f"{rates.gbps[best]:.0f}"})
    return pd.DataFrame(rows)


def write_tables(derived_dir: Path, provenance: dict, tables_dir: Path) -> None:
    derived_dir = Path(derived_dir)
    source = source_line(provenance)
    write_table(chase_pivot(pd.read_csv(derived_dir / "chase.csv")), tables_dir, "tma_issue_chase",
                "One 16-byte transfer from issue to arrival, SM cycles per hop of a one-thread pointer chase over "
                "random chunks of each working set (median of the chases). TMA tile and bulk copy: arm the "
                "mbarrier, issue, a try_wait loop, read the next index from shared memory; plain, indexed: one "
                "load whose word is the next chunk's index; plain, minimal: one load whose words are the next "
                f"address. HBM: right after an L2 flush; L2: the same chunks again. {source}.")
    write_table(issue_rate_pivot(pd.read_csv(derived_dir / "issue_rate.csv")), tables_dir, "tma_issue_rate",
                "TMA-engine copies issued per SM per microsecond, one CTA per SM copying from an L2-resident "
                "working set with 128 KiB in flight and nothing reading the copies, by issuing threads; at the "
                f"best thread count, SM cycles per copy per SM and the GB/s over the GPU. {source}.")
    write_table(run_table(provenance), tables_dir, "tma_issue_run",
                "How the tma_issue data were measured (from provenance.json).")
