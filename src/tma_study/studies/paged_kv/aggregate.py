"""Derived tables of the paged_kv study, from attention.csv and ceilings.csv.

- ``speedup.csv``: per (shape, dtype, phase point, page size): the TMA and cp.async times
  where both ran, TMA's speedup (cp.async time / TMA time), the measured winner (a tie
  when the two medians are within each other's interquartile spread), FA3's choice for
  the same call and whether they agree.
- ``decode.csv``: per decode point, the better path's K/V read rate as a fraction of the
  same run's device-to-device copy rate (read + write bytes per second), next to torch
  SDPA on a contiguous cache, and whether it meets the issue's bar (>= 70 % at contexts
  >= 8K with batch >= 32).
- ``prefill.csv``: TFLOP/s of each path per prefill configuration.
- ``fa3_agreement.csv``: per (dtype, phase): configurations, agreements, disagreements.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.harness.atomic import atomic_write_text

POINT = ["shape", "q_heads", "kv_heads", "head_dim", "dtype", "phase", "batch", "seqlen_q",
         "context_tokens"]
DECODE_BAR_FRACTION = 0.70
DECODE_BAR_MIN_CONTEXT = 8192
DECODE_BAR_MIN_BATCH = 32


def speedup_table(attention: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for key, cell in attention.groupby(POINT + ["page_size"], sort=True):
        by_path = {r.load_path: r for r in cell.itertuples()}
        row = dict(zip(POINT + ["page_size"], key))
        any_row = next(iter(by_path.values()))
        row["fa3_load_path"], row["fa3_reason"] = any_row.fa3_load_path, any_row.fa3_reason
        for path, r in by_path.items():
            row[f"{path}_time_us"] = r.time_us_median
            row[f"{path}_gbps"] = r.gbps
        if {"tma", "cp_async"} <= set(by_path):
            tma, gather = by_path["tma"], by_path["cp_async"]
            row["tma_speedup"] = gather.time_us_median / tma.time_us_median
            overlap = tma.time_us_q1 <= gather.time_us_q3 and gather.time_us_q1 <= tma.time_us_q3
            row["measured_winner"] = "tie" if overlap else (
                "tma" if tma.time_us_median < gather.time_us_median else "cp_async")
            row["fa3_agrees"] = row["measured_winner"] in ("tie", row["fa3_load_path"])
        else:
            row["tma_speedup"] = float("nan")
            row["measured_winner"] = "cp_async (only path)"
            row["fa3_agrees"] = row["fa3_load_path"] == "cp_async"
        rows.append(row)
    return pd.DataFrame(rows)


def decode_table(attention: pd.DataFrame, ceilings: pd.DataFrame) -> pd.DataFrame:
    copy_gbps = float(ceilings.loc[ceilings.ceiling == "d2d_copy", "gbps"].max())
    sdpa = ceilings[ceilings.ceiling == "torch_sdpa_contiguous"]
    rows = []
    for key, cell in attention[attention.phase == "decode"].groupby(POINT, sort=True):
        best = cell.loc[cell.gbps.idxmax()]
        row = dict(zip(POINT, key))
        row.update({"best_load_path": best.load_path, "best_page_size": int(best.page_size),
                    "best_gbps": best.gbps, "d2d_copy_gbps": copy_gbps,
                    "fraction_of_d2d_copy": best.gbps / copy_gbps,
                    "best_tma_gbps": cell.loc[cell.load_path == "tma", "gbps"].max(),
                    "best_cp_async_gbps": cell.loc[cell.load_path == "cp_async", "gbps"].max()})
        match = sdpa[(sdpa["shape"] == key[0]) & (sdpa.seqlen_q == row["seqlen_q"])
                     & (sdpa.batch == row["batch"]) & (sdpa.context_tokens == row["context_tokens"])]
        row["torch_sdpa_gbps"] = float(match.gbps.iloc[0]) if len(match) else float("nan")
        in_scope = row["context_tokens"] >= DECODE_BAR_MIN_CONTEXT and row["batch"] >= DECODE_BAR_MIN_BATCH
        row["bar_applies"] = in_scope
        row["meets_bar"] = (row["fraction_of_d2d_copy"] >= DECODE_BAR_FRACTION) if in_scope else None
        rows.append(row)
    return pd.DataFrame(rows)


def prefill_table(attention: pd.DataFrame) -> pd.DataFrame:
    prefill = attention[attention.phase == "prefill"]
    return prefill[POINT + ["page_size", "load_path", "time_us_median", "tflops", "fa3_load_path"]]


def agreement_table(speedup: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (dtype, phase), cell in speedup.groupby(["dtype", "phase"], sort=True):
        rows.append({"dtype": dtype, "phase": phase, "configurations": len(cell),
                     "fa3_agrees": int(cell.fa3_agrees.sum()),
                     "fa3_disagrees": int((~cell.fa3_agrees.astype(bool)).sum()),
                     "tma_wins": int((cell.measured_winner == "tma").sum()),
                     "cp_async_wins": int(cell.measured_winner.isin(["cp_async", "cp_async (only path)"]).sum()),
                     "ties": int((cell.measured_winner == "tie").sum())})
    return pd.DataFrame(rows)


def aggregate(raw_dir: Path, derived_dir: Path, repeat_dir: Path | None = None) -> None:
    """Read raw data from ``raw_dir``, write the derived tables into ``derived_dir``."""
    attention = pd.read_csv(Path(raw_dir) / "attention.csv")
    ceilings = pd.read_csv(Path(raw_dir) / "ceilings.csv")
    derived_dir = Path(derived_dir)
    derived_dir.mkdir(parents=True, exist_ok=True)
    speedup = speedup_table(attention)
    for name, frame in (("speedup.csv", speedup), ("decode.csv", decode_table(attention, ceilings)),
                        ("prefill.csv", prefill_table(attention)),
                        ("fa3_agreement.csv", agreement_table(speedup))):
        atomic_write_text(derived_dir / name, frame.to_csv(index=False))
