"""Synthetic raw data of the crossover study, shaped like what measure.py writes.

Rows are built from the same pieces measure.py uses (``StreamConfig.columns()``,
``Timing.columns()``, ``SampleSummary.as_columns()``), so the columns follow the real ones;
only the numbers are invented, chosen by the caller (``gbps``, ``ns``) so a test knows which
mechanism wins where. ``write_raw_folder`` lays out ``results/<gpu>/crossover/``.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from raw_fixture import timed, valid_provenance
from tma_study.harness.stats import summarize
from tma_study.studies.crossover.grid import TMA_ENGINE_MECHANISMS, TMA_ENGINE_PRODUCER_THREADS, StreamConfig

MECHANISMS = ("tma_tile", "bulk_copy", "cp_async", "plain_loads")
SIZES = (256, 1024, 4096, 16384)
RINGS = (32768, 131072)
WORKING_SETS = {"hbm": {"bytes": 1 << 29, "bytes_per_launch": 1 << 29},   # (as in config.yaml)
                "l2": {"bytes": 1 << 24, "bytes_per_launch": 1 << 28}}
READ_CEILING_THREADS = 256
DEFAULT_RELATIVE_IQR = 0.002
SM_CLOCK_MHZ = 1980.0


def timing_columns(time_us: float, relative_iqr: float = DEFAULT_RELATIVE_IQR, samples: int = 40) -> dict:
    """What ``Timing.columns()`` gives for cuda-bench cold samples with this median and IQR."""
    return timed(time_us, samples, relative_iqr)


def _with_bandwidth(columns: dict, bytes_moved: int, gbps: float, relative_iqr: float) -> dict:
    """measure.py's row(): the case's columns, its timing, bytes moved and GB/s."""
    t = timing_columns(bytes_moved / (gbps * 1e3), relative_iqr)
    return {**columns, **t, "bytes_moved": bytes_moved, "gbps": bytes_moved / (t["time_us_median"] * 1e3)}


def stream_row(mechanism: str, working_set: str, bytes_per_transfer: int, ring_bytes_per_sm: int, gbps: float,
               *, stages: int = 2, ctas_per_sm: int = 1, consumer_threads: int = 128,
               producer_threads: int | None = None, issue_threads: int = 1, access_order: str = "scattered",
               relative_iqr: float = DEFAULT_RELATIVE_IQR) -> dict:
    """One stream.csv row measuring ``gbps``."""
    if producer_threads is None:
        producer_threads = TMA_ENGINE_PRODUCER_THREADS if mechanism in TMA_ENGINE_MECHANISMS else 128
    ws = WORKING_SETS[working_set]
    config = StreamConfig(mechanism=mechanism, working_set=working_set, working_set_bytes=ws["bytes"],
                          bytes_per_launch=ws["bytes_per_launch"], access_order=access_order,
                          bytes_per_transfer=bytes_per_transfer, ring_bytes_per_sm=ring_bytes_per_sm,
                          stages=stages, ctas_per_sm=ctas_per_sm, consumer_threads=consumer_threads,
                          producer_threads=producer_threads, issue_threads=issue_threads)
    passes = max(1, ws["bytes_per_launch"] // ws["bytes"])
    return _with_bandwidth(config.columns(), passes * ws["bytes"], gbps, relative_iqr)


def ceiling_row(ceiling: str, working_set: str, gbps: float, ctas_per_sm: int = 0) -> dict:
    """One ceilings.csv row: ``d2d_copy`` (reads and writes the set) or ``read_stream``."""
    ws = WORKING_SETS[working_set]
    passes = max(1, ws["bytes_per_launch"] // ws["bytes"])
    bytes_moved = 2 * ws["bytes"] if ceiling == "d2d_copy" else passes * ws["bytes"]
    columns = {"ceiling": ceiling, "working_set": working_set, "working_set_bytes": ws["bytes"],
               "bytes_moved": bytes_moved, "ctas_per_sm": ctas_per_sm,
               "threads_per_cta": READ_CEILING_THREADS if ctas_per_sm else 0}
    return _with_bandwidth(columns, bytes_moved, gbps, DEFAULT_RELATIVE_IQR)


def latency_row(mechanism: str, bytes_per_transfer: int, level: str, ns: float, hops: int = 256) -> dict:
    """One latency.csv row: ``ns`` per transfer (three repeats around it)."""
    cycles = summarize([ns * SM_CLOCK_MHZ / 1e3 * f for f in (0.99, 1.0, 1.02)])
    return {"mechanism": mechanism, "bytes_per_transfer": bytes_per_transfer, "level": level,
            "chase_bytes": 1 << 28, "hops": hops, "threads_per_cta": 128,
            **cycles.as_columns("cycles_per_transfer"), "ns_per_transfer_median": ns}


def _model_gbps(mechanism: str, working_set: str, size: int, ring: int) -> float:
    """A plausible shape: TMA-engine copies gain with size, cp.async and plain loads saturate early."""
    peak = {"hbm": 4000.0, "l2": 9000.0}[working_set] * (0.8 if ring == RINGS[0] else 1.0)
    half_size = {"tma_tile": 2048, "bulk_copy": 3072, "cp_async": 256, "plain_loads": 128}[mechanism]
    ceiling = {"tma_tile": 0.95, "bulk_copy": 0.9, "cp_async": 0.7, "plain_loads": 0.6}[mechanism]
    return peak * ceiling * size / (size + half_size)


def realistic_tables() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(stream, ceilings, latency) over every mechanism, both working sets, SIZES and RINGS."""
    stream = []
    for mechanism in MECHANISMS:
        for working_set in WORKING_SETS:
            for size in SIZES:
                for ring in RINGS:
                    gbps = _model_gbps(mechanism, working_set, size, ring)
                    stream.append(stream_row(mechanism, working_set, size, ring, gbps, stages=2))
                    stream.append(stream_row(mechanism, working_set, size, ring, 0.9 * gbps, stages=1))
    ceilings = [ceiling_row("d2d_copy", "hbm", 3900.0)]
    ceilings += [ceiling_row("read_stream", ws, peak * f, ctas)
                 for ws, peak in (("hbm", 4300.0), ("l2", 9500.0)) for ctas, f in ((2, 0.9), (4, 1.0), (8, 0.97))]
    slowdown = {"tma_tile": 1.15, "bulk_copy": 1.1, "cp_async": 1.0, "plain_loads": 0.95}
    latency = [latency_row(mechanism, size, level, base * (1 + size / 16384) * slowdown[mechanism])
               for mechanism in MECHANISMS for size in SIZES for level, base in (("hbm", 900.0), ("l2", 350.0))]
    return pd.DataFrame(stream), pd.DataFrame(ceilings), pd.DataFrame(latency)


def provenance_record(configurations: int = 1) -> dict:
    """A valid provenance.json of synthetic crossover data with ``configurations`` stream rows."""
    return valid_provenance("crossover", configurations)


def write_raw_folder(folder: Path, stream: pd.DataFrame, ceilings: pd.DataFrame, latency: pd.DataFrame) -> Path:
    """stream.csv, ceilings.csv, latency.csv and provenance.json in ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    stream.to_csv(folder / "stream.csv", index=False)
    ceilings.to_csv(folder / "ceilings.csv", index=False)
    latency.to_csv(folder / "latency.csv", index=False)
    (folder / "provenance.json").write_text(json.dumps(provenance_record(len(stream)), indent=2) + "\n")
    return folder


def write_realistic_raw_folder(folder: Path) -> Path:
    return write_raw_folder(folder, *realistic_tables())
