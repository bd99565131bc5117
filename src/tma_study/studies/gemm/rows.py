"""What a row of the gemm study's data says, shared by its analysis, rules, macros and tables:
the status words, the tie tolerance, how a row accumulated (recorded, or inferred for data that
predate the column), the timing limits of its run, and the short names of variants."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from .variants import parse_name

MEASURED = "measured"
TIE_TOLERANCE = 0.02           # |ratio - 1| below this (or the runs' spread) is a tie
NOT_MEASURED_TEXT = "NOT MEASURED"
# cuda-bench (nvbench) discards a sample taken below this percent of the default SM clock unless
# the config's timing.throttle_threshold_percent says otherwise (src/tma_study/harness/timing.py).
NVBENCH_DEFAULT_THROTTLE_PERCENT = 75.0
# A row whose accepted samples averaged at most 1 % above that floor ran at the floor: the GPU was
# power-limited for the whole measurement, and only samples that just cleared the floor were kept.
FLOOR_TOLERANCE = 0.01
BYTES_PER_ELEMENT = {"bf16": 2, "fp8_e4m3": 1}
ACCUMULATION_COLUMN = "accumulation"
# Whether a row's accumulation was written by the measure step or inferred (column
# ``accumulation_source``): data that predate the column get the accumulation of the code that
# measured them, legacy_accumulation() (docs/history.md: why that rule holds for them).
RECORDED, INFERRED = "recorded", "inferred: the data predate the accumulation column"


def legacy_accumulation(arch: str, dtype: str, load: str) -> str:
    """How a row of data written before the ``accumulation`` column accumulated (see INFERRED)."""
    if dtype != "fp8_e4m3":
        return "fp32"
    promoted = load == "cublas" or (arch == "sm90" and load == "tma")
    return "fp8_promoted" if promoted else "fp8_no_promotion"


def with_accumulation(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (gemm.csv or kernels.csv rows) with ``accumulation`` and ``accumulation_source``.

    Rows without arch, dtype or load columns (a kernels.csv reduced to a few columns) take them
    from their variant's name.
    """
    frame = frame.copy()
    if ACCUMULATION_COLUMN in frame.columns:
        frame["accumulation_source"] = RECORDED
        return frame
    if {"arch", "dtype", "load"} <= set(frame.columns):
        keys = zip(frame["arch"], frame["dtype"], frame["load"])
    else:
        keys = ((v.arch, v.dtype, v.load) for v in map(parse_name, frame["variant"]))
    frame[ACCUMULATION_COLUMN] = [legacy_accumulation(*key) for key in keys]
    frame["accumulation_source"] = INFERRED
    return frame


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
