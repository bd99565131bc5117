"""Summary statistics of timing samples: the numbers every raw-data row carries."""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class SampleSummary:
    """Median and spread of one configuration's samples (all in the samples' unit)."""

    median: float
    q1: float
    q3: float
    minimum: float
    maximum: float
    count: int

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @property
    def relative_iqr(self) -> float:
        """IQR over median: the noise figure reported beside each median."""
        return self.iqr / self.median if self.median else float("nan")

    def as_columns(self, prefix: str) -> dict[str, float | int]:
        """Columns named ``<prefix>_median`` etc., e.g. prefix ``time_us``."""
        cols = {f"{prefix}_{k}": v for k, v in asdict(self).items() if k != "count"}
        cols[f"{prefix}_iqr"] = self.iqr
        cols["samples"] = self.count
        return cols


def summarize(samples) -> SampleSummary:
    """Median, quartiles, min, max and count; raises on an empty or non-finite sample set."""
    values = np.asarray(samples, dtype=np.float64)
    if values.size == 0:
        raise ValueError("no samples to summarize")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"non-finite samples: {values[~np.isfinite(values)][:5]}")
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return SampleSummary(float(median), float(q1), float(q3), float(values.min()),
                         float(values.max()), int(values.size))


def relative_difference(a: float, b: float) -> float:
    """|a - b| / mean(a, b): how far two runs of the same configuration disagree."""
    mean = (a + b) / 2
    return abs(a - b) / mean if mean else float("nan")
