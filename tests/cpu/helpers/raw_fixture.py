"""Pieces of synthetic raw data that pass the studies' raw-data schemas (harness.raw_data): a
provenance record, and the timing columns of a timed (or untimed) row as harness.timing
writes them."""
from __future__ import annotations

from tma_study.harness.provenance import config_hash
from tma_study.harness.timing import Timing

SYNTHETIC_GPU = {"name": "NVIDIA H200 (synthetic test data)", "compute_capability": [9, 0], "sm_count": 132,
                 "l2_bytes": 62914560}
SM_CLOCK_MHZ = 1980.0


def valid_provenance(study: str, configurations: int, config: dict | None = None, gpu: dict | None = None,
                     **extra) -> dict:
    """provenance.json of ``study``: ``configurations`` as its raw_schema.yaml counts them."""
    config = config or {}
    return {"study": study, "gpu": {**SYNTHETIC_GPU, **(gpu or {})}, "packages": {}, "python": "3.12.3",
            "git": {"commit": None, "dirty": None, "commit_source": "none: synthetic test data"},
            "source_sha256": "f" * 64, "config_sha256": config_hash(config), "config": config,
            "started_utc": "2026-01-01T00:00:00+00:00", "finished_utc": "2026-01-01T00:03:00+00:00",
            "configurations": configurations, **extra}


def timed(time_us: float, samples: int = 40, relative_iqr: float = 0.002) -> dict:
    """``Timing.columns()`` of cuda-bench cold samples with this median, IQR and count."""
    seconds, half_iqr = time_us * 1e-6, time_us * 1e-6 * relative_iqr / 2
    summary = {"nv/cold/time/gpu/median": seconds,
               "nv/cold/time/gpu/q1": seconds - half_iqr, "nv/cold/time/gpu/q3": seconds + half_iqr,
               "nv/cold/time/gpu/min": seconds - 2 * half_iqr, "nv/cold/time/gpu/max": seconds + 3 * half_iqr,
               "nv/cold/time/gpu/stdev/relative": relative_iqr / 1.35,
               "nv/cold/sample_size": samples, "nv/cold/sm_clock_rate/mean": SM_CLOCK_MHZ * 1e6}
    return {**Timing("fixture", summary).columns(), "time_us_median": time_us}   # exactly as asked


def untimed() -> dict:
    """``Timing.columns()`` of a case no valid sample survived (empty times, timing_status why)."""
    return Timing("fixture", {}).columns()
