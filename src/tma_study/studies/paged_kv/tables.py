"""Tables of the paged_kv study (paper/tables/paged_kv_*.tex|md)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.report.tables import source_line, write_table


def _phase(r) -> str:
    return f"{r.phase} q{r.seqlen_q} b{r.batch} ctx{r.context_tokens}"


def speedup_display(speedup: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for r in speedup.itertuples():
        rows.append({"shape": r.shape, "dtype": r.dtype, "phase": _phase(r), "page": r.page_size,
                     "TMA us": "n/a" if pd.isna(getattr(r, "tma_time_us", float("nan")))
                     else f"{r.tma_time_us:.1f}",
                     "cp.async us": f"{r.cp_async_time_us:.1f}",
                     "TMA speedup": "n/a" if pd.isna(r.tma_speedup) else f"{r.tma_speedup:.2f}",
                     "measured": r.measured_winner, "FA3 rule": r.fa3_load_path,
                     "agree": "yes" if r.fa3_agrees else "no"})
    return pd.DataFrame(rows)


def decode_display(decode: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for r in decode.itertuples():
        rows.append({"shape": r.shape, "dtype": r.dtype, "phase": _phase(r),
                     "best": f"{r.best_load_path}, page {r.best_page_size}",
                     "GB/s": f"{r.best_gbps:.0f}", "% of D2D copy": f"{100 * r.fraction_of_d2d_copy:.1f}",
                     "TMA best GB/s": f"{r.best_tma_gbps:.0f}", "cp.async best GB/s": f"{r.best_cp_async_gbps:.0f}",
                     "torch SDPA GB/s (contiguous, bf16)": "n/a" if pd.isna(r.torch_sdpa_gbps)
                     else f"{r.torch_sdpa_gbps:.0f}",
                     ">= 70 % bar": "n/a" if not r.bar_applies else ("met" if r.meets_bar else "missed")})
    return pd.DataFrame(rows)


def write_tables(derived_dir: Path, provenance: dict, tables_dir: Path) -> None:
    derived_dir = Path(derived_dir)
    source = source_line(provenance)
    write_table(speedup_display(pd.read_csv(derived_dir / "speedup.csv")), tables_dir, "paged_kv_speedup",
                "Paged-KV attention: TMA over cp.async K/V loads by page size, and FlashAttention-3's "
                f"rule for the same call ({source}).")
    write_table(decode_display(pd.read_csv(derived_dir / "decode.csv")), tables_dir, "paged_kv_decode",
                f"Paged-KV decode: K/V read rate of the better path against the same run's copy ({source}).")
    write_table(pd.read_csv(derived_dir / "fa3_agreement.csv"), tables_dir, "paged_kv_fa3",
                f"Where FlashAttention-3's paged-KV TMA rule agrees with the measured winner ({source}).")
