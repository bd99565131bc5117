"""What a row of the gemm studies' data says, shared by their analysis, rules, macros and tables:
the status words, the tie tolerance, the bar (the fraction of cuBLAS a TMA GEMM must reach), how a row accumulated (a column every row records), the
timing limits of its run, and the short names of variants."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

MEASURED = "measured"
TIE_TOLERANCE = 0.02           # |ratio - 1| below this (or the runs' spread) is a tie
NOT_MEASURED_TEXT = "NOT MEASURED"
BAR_FRACTION = 0.95           # the bar: at least this fraction of cuBLAS's TFLOP/s (gemm, gemm_paired)
# cuda-bench (nvbench) discards a sample taken below this percent of the default SM clock unless
# the config's timing.throttle_threshold_percent says otherwise (src/tma_study/harness/timing.py).
NVBENCH_DEFAULT_THROTTLE_PERCENT = 75.0
# A row whose accepted samples averaged at most 1 % above that floor ran at the floor: the GPU was
# power-limited for the whole measurement, and only samples that just cleared the floor were kept.
FLOOR_TOLERANCE = 0.01
BYTES_PER_ELEMENT = {"bf16": 2, "fp8_e4m3": 1}
ACCUMULATION_COLUMN = "accumulation"
# Every row says how it accumulated (column ``accumulation``, required by raw_schema.yaml: data
# without it are refused, never given an inferred value; docs/history.md). ``accumulation_source``
# in the derived data says where the value came from.
RECORDED = "recorded"


def with_accumulation(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (gemm.csv or kernels.csv rows) with ``accumulation_source``; ValueError naming
    the column where ``accumulation`` is missing (the raw-data schema refuses such data first)."""
    if ACCUMULATION_COLUMN not in frame.columns:
        raise ValueError(f"no column {ACCUMULATION_COLUMN!r} (how each row accumulates): the gemm raw-data schema "
                         "requires it; data without it are not analysed")
    return frame.assign(accumulation_source=RECORDED)


@dataclass(frozen=True)
class TimingLimits:
    """What the run asked of its timing, from provenance.json (None where it does not say)."""

    min_samples: int | None
    max_clock_mhz: float | None
    throttle_percent: float

    @classmethod
    def of(cls, provenance: dict) -> TimingLimits:
        timing = (provenance.get("config") or {}).get("timing") or {}
        khz = (provenance.get("gpu") or {}).get("max_sm_clock_khz")
        percent = timing.get("throttle_threshold_percent")
        return cls(min_samples=timing.get("min_samples"), max_clock_mhz=khz / 1000 if khz else None,
                   throttle_percent=NVBENCH_DEFAULT_THROTTLE_PERCENT if percent is None else float(percent))

    @property
    def floor_mhz(self) -> float | None:
        return None if self.max_clock_mhz is None else self.max_clock_mhz * self.throttle_percent / 100


def short_variant(name: str) -> str:
    """'sm90_tma_cooperative_bf16_t128x256x64_c2x1' -> 'tma_cooperative_t128x256x64_c2x1' (for tables)."""
    parts = str(name).split("_")
    dtype_at = next((i for i, p in enumerate(parts) if p in ("bf16", "fp8")), None)
    if dtype_at is None:
        return str(name)
    width = 2 if parts[dtype_at] == "fp8" else 1
    return "_".join(parts[1:dtype_at] + parts[dtype_at + width:])
