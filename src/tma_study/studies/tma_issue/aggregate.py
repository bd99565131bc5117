"""Aggregate the tma_issue study's raw data (CPU only).

Writes into ``derived_dir``:
- ``chase.csv``       per form, working set and level: one hop's cycles (median, IQR) and ns;
                      ``cycles_minus_plain_minimal``: less the minimal plain-load chase's (same working
                      set and level); ``fraction_of_smallest_working_set``: over the same form's at the
                      smallest working set (same level)
- ``issue_rate.csv``  per mechanism, size and issuing threads: copies per SM per microsecond, SM
                      cycles per copy per SM, GB/s, and the share of the best thread count's rate at
                      that mechanism and size
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.atomic import atomic_write_text
from tma_study.harness import raw_data

from . import STUDY

FORM_ORDER = ("tma_tile", "bulk_copy", "plain_indexed", "plain_minimal")
CHASE_COLUMNS = ["form", "bytes_per_transfer", "working_set_bytes", "level", "cycles_per_hop_median",
                 "cycles_per_hop_iqr", "ns_per_hop_median", "cycles_minus_plain_minimal",
                 "fraction_of_smallest_working_set"]
ISSUE_COLUMNS = ["mechanism", "bytes_per_transfer", "issue_threads", "threads_per_cta", "stages",
                 "in_flight_bytes_per_sm", "transfers_per_sm_per_us", "sm_cycles_per_transfer", "gbps",
                 "fraction_of_best_threads", "sm_clock_mhz_mean"]


def chase_table(chase: pd.DataFrame) -> pd.DataFrame:
    keys = ["bytes_per_transfer", "working_set_bytes", "level"]
    minimal = chase[chase.form == "plain_minimal"].set_index(keys).cycles_per_hop_median.rename("_minimal")
    rows = chase.join(minimal, on=keys)
    smallest = rows.groupby(["form", "bytes_per_transfer", "level"]).working_set_bytes.transform("min")
    at_smallest = rows[rows.working_set_bytes == smallest].set_index(["form", "bytes_per_transfer", "level"])
    rows = rows.join(at_smallest.cycles_per_hop_median.rename("_smallest"), on=["form", "bytes_per_transfer", "level"])
    rows = rows.assign(cycles_minus_plain_minimal=rows.cycles_per_hop_median - rows._minimal,
                       fraction_of_smallest_working_set=rows.cycles_per_hop_median / rows._smallest,
                       _order=rows.form.map({f: i for i, f in enumerate(FORM_ORDER)}))
    return rows.sort_values(["level", "working_set_bytes", "_order"])[CHASE_COLUMNS].reset_index(drop=True)


def issue_rate_table(issue_rate: pd.DataFrame) -> pd.DataFrame:
    rows = issue_rate[issue_rate.timing_status == "ok"].copy()
    rows["fraction_of_best_threads"] = rows.gbps / rows.groupby(["mechanism", "bytes_per_transfer"]).gbps.transform("max")
    rows["sm_cycles_per_transfer"] = rows.sm_clock_mhz_mean / rows.transfers_per_sm_per_us
    return rows.sort_values(["mechanism", "bytes_per_transfer", "issue_threads"])[ISSUE_COLUMNS].reset_index(drop=True)


def aggregate(raw_dir: Path, derived_dir: Path, repeat_dir: Path | None = None) -> None:
    """Write every derived file (no repeat analysis: ``repeat_dir`` is ignored)."""
    raw = raw_data.load(STUDY, Path(raw_dir))          # checked before anything is written
    derived_dir = Path(derived_dir)
    derived_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(derived_dir / "chase.csv", chase_table(raw["chase.csv"]).to_csv(index=False))
    atomic_write_text(derived_dir / "issue_rate.csv", issue_rate_table(raw["issue_rate.csv"]).to_csv(index=False))
