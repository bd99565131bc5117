"""The crossover study's headline numbers, read from its derived data.

Shared by the paper's macros (``macros.py``), the rules of thumb (``rules.py``) and the
comparison of runs (``compare.py``), so all three say the same thing about the same data.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from tma_study.report.tables import human_bytes

from .aggregate import ANY_RING, TMA

ORDER = "scattered"                 # the access order the figures show
CP_ASYNC, BULK = "cp_async", "bulk_copy"
MECHANISMS = ("tma_tile", "bulk_copy", "cp_async", "plain_loads")
WORKING_SETS = ("hbm", "l2")


@dataclass(frozen=True)
class Facts:
    best: pd.DataFrame
    crossover: pd.DataFrame
    peaks: pd.DataFrame
    ceilings: pd.DataFrame
    latency: pd.DataFrame
    reproducibility: pd.DataFrame

    @classmethod
    def load(cls, derived_dir: Path) -> Facts:
        derived_dir = Path(derived_dir)
        read = {name: pd.read_csv(derived_dir / f"{name}.csv") for name in cls.__dataclass_fields__}
        return cls(**read)

    # ------------------------------------------------------------------ bandwidth
    def peak(self, working_set: str, mechanism: str) -> pd.Series | None:
        rows = self.peaks[(self.peaks.working_set == working_set) & (self.peaks.access_order == ORDER)
                          & (self.peaks.mechanism == mechanism)]
        return rows.iloc[0] if len(rows) else None

    def ceiling(self, name: str, working_set: str) -> float | None:
        rows = self.ceilings[(self.ceilings.ceiling == name) & (self.ceilings.working_set == working_set)]
        return float(rows.gbps.max()) if len(rows) else None

    def crossover_row(self, working_set: str, alternative: str, ring: int = ANY_RING) -> pd.Series | None:
        c = self.crossover
        rows = c[(c.working_set == working_set) & (c.access_order == ORDER) & (c.ring_bytes_per_sm == ring)
                 & (c.alternative == alternative)]
        return rows.iloc[0] if len(rows) else None

    def ratio_to(self, working_set: str, alternative: str, ring: int = ANY_RING) -> pd.Series:
        """TMA GB/s over ``alternative``'s, by transfer size (best configurations)."""
        b = self.best[(self.best.working_set == working_set) & (self.best.access_order == ORDER)
                      & (self.best.ring_bytes_per_sm == ring)]
        tma = b[b.mechanism == TMA].set_index("bytes_per_transfer").gbps
        alt = b[b.mechanism == alternative].set_index("bytes_per_transfer").gbps
        return (tma / alt).dropna()

    def rings(self) -> list[int]:
        return sorted(r for r in self.crossover.ring_bytes_per_sm.unique() if r != ANY_RING)

    # ------------------------------------------------------------------ latency
    def latency_ratio(self, level: str, alternative: str = CP_ASYNC) -> pd.Series:
        """TMA ns per transfer over ``alternative``'s, by transfer size."""
        lat = self.latency[self.latency.level == level]
        tma = lat[lat.mechanism == TMA].set_index("bytes_per_transfer").ns_per_transfer_median
        alt = lat[lat.mechanism == alternative].set_index("bytes_per_transfer").ns_per_transfer_median
        return (tma / alt).dropna().sort_index()

    def latency_ns(self, level: str, mechanism: str, size: int) -> float | None:
        lat = self.latency
        rows = lat[(lat.level == level) & (lat.mechanism == mechanism) & (lat.bytes_per_transfer == size)]
        return float(rows.ns_per_transfer_median.iloc[0]) if len(rows) else None

    # ------------------------------------------------------------------ reproducibility
    def repeat(self, compared_prefix: str) -> pd.Series | None:
        r = self.reproducibility
        if "configurations" not in r.columns:
            return None
        rows = r[r.compared.str.startswith(compared_prefix)]
        return rows.iloc[0] if len(rows) else None


def crossover_size(row: pd.Series | None) -> float:
    """The crossover size in bytes (NaN when TMA never catches up or the case is absent)."""
    if row is None or row.tma_never_catches_up:
        return math.nan
    return float(row.crossover_bytes)


def describe_crossover(row: pd.Series | None) -> str:
    """'from 1 KiB (512 B < x <= 1 KiB)', 'at every size (from 256 B)' or 'never (up to 64 KiB)'."""
    if row is None:
        return "not measured"
    if row.tma_never_loses:
        return f"at every size (from {human_bytes(row.smallest_size_bytes)})"
    if row.tma_never_catches_up:
        return f"never (up to {human_bytes(row.largest_size_bytes)})"
    return (f"from {human_bytes(row.crossover_bytes)} "
            f"({human_bytes(row.crossover_bracket_low_bytes)} < x <= {human_bytes(row.crossover_bytes)})")
