"""Tables of the paged_kv study (paper/tables/paged_kv_*.tex|md). Every time is a path at its
own best K/V ring stage count (aggregate.best_stages); paged_kv_stages says which won where."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.report.tables import source_line, write_table

from . import facts

NA = "n/a"
NOT_MEASURED = "not measured"


def _phase(r) -> str:
    return f"{r.phase} q{r.seqlen_q} b{r.batch} ctx{r.context_tokens}"


def _number(value, digits: int = 1, text_if_missing: str = NA) -> str:
    return text_if_missing if pd.isna(value) else f"{value:.{digits}f}"


def _stages(value) -> str:
    return "-" if pd.isna(value) else str(int(value))


def speedup_display(speedup: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for r in speedup.itertuples():
        tma_us, tma_stages = getattr(r, "tma_time_us", float("nan")), getattr(r, "tma_stages", float("nan"))
        gather_us = getattr(r, "cp_async_time_us", float("nan"))
        gather_stages = getattr(r, "cp_async_stages", float("nan"))
        rows.append({"shape": r.shape, "dtype": r.dtype, "phase": _phase(r), "page": r.page_size,
                     "TMA us": _number(tma_us), "cp.async us": _number(gather_us),
                     "stages (TMA/cp.async)": f"{_stages(tma_stages)}/{_stages(gather_stages)}",
                     "TMA speedup": _number(r.tma_speedup, 2),
                     "measured": r.measured_winner, "FA3 rule": r.fa3_load_path,
                     "agree": NA if pd.isna(r.fa3_agrees) else ("yes" if r.fa3_agrees else "no")})
    return pd.DataFrame(rows)


def decode_display(decode: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for r in decode.itertuples():
        measured = r.best_load_path != NOT_MEASURED
        rows.append({"shape": r.shape, "dtype": r.dtype, "phase": _phase(r),
                     "best": (f"{r.best_load_path}, page {r.best_page_size}, {r.best_stages} stages"
                              if measured else NOT_MEASURED),
                     "GB/s": _number(r.best_gbps, 0), "% of D2D copy": _number(100 * r.fraction_of_d2d_copy),
                     "TMA best GB/s": _number(r.best_tma_gbps, 0),
                     "cp.async best GB/s": _number(r.best_cp_async_gbps, 0),
                     "torch SDPA GB/s (contiguous, bf16)": _number(r.torch_sdpa_gbps, 0),
                     ">= 70 % bar": NA if not r.bar_applies else (
                         NOT_MEASURED if pd.isna(r.meets_bar) else ("met" if r.meets_bar else "missed"))})
    return pd.DataFrame(rows)


def scaling_display(scaling: pd.DataFrame) -> pd.DataFrame:
    """One row per (series, dtype, point): each path's rate (GB/s of K/V for decode, TFLOP/s
    for prefill) at its best stage count, with the copy rate and torch SDPA for decode."""
    if scaling.empty:
        return pd.DataFrame({"series": [f"{NOT_MEASURED}: no point was measured at a single page size"]})
    rows = []
    keys = ["series", "shape", "dtype", "page_size", "batch", "seqlen_q", "context_tokens"]
    for key, point in scaling.groupby(keys, sort=False):
        row = dict(zip(keys, key))
        first = point.iloc[0]
        decode = first.phase == "decode"
        out = {"series": row["series"], "shape": row["shape"], "dtype": row["dtype"], "page": row["page_size"],
               "point": _phase(first)}
        for path, label in (("tma", "TMA"), ("cp_async", "cp.async")):
            at = point[point.load_path == path]
            if at.empty:
                out[label] = NA
            elif at.status.iloc[0] != "measured":
                out[label] = NOT_MEASURED
            else:
                value = at.gbps.iloc[0] if decode else at.tflops.iloc[0]
                out[label] = (f"{value:.0f} GB/s" if decode else f"{value:.1f} TFLOP/s") + \
                    f" ({_stages(at.stages.iloc[0])} st.)"
        out["D2D copy GB/s"] = _number(first.d2d_copy_gbps, 0) if decode else NA
        out["torch SDPA GB/s (bf16)"] = _number(first.torch_sdpa_gbps, 0) if decode else NA
        rows.append(out)
    return pd.DataFrame(rows)


def stages_display(tuning: pd.DataFrame) -> pd.DataFrame:
    """Per (phase, shape, dtype, load path): how often each stage count won, the median time
    ratio of the deepest to the shallowest ring, and what the chosen kernels were."""
    counts = sorted(int(c.removeprefix("time_us_s")) for c in tuning.columns if c.startswith("time_us_s"))
    lo, hi = counts[0], counts[-1]
    rows = []
    keys = ["phase", "seqlen_q", "shape", "dtype", "load_path"]
    for key, group in tuning.groupby(keys, sort=True):
        row = dict(zip(keys, key))
        measured = group[group.status == "measured"]
        wins = measured.stages_chosen.value_counts().sort_index()
        both = measured[[f"time_us_s{lo}", f"time_us_s{hi}"]].dropna() if hi != lo else pd.DataFrame()
        ratio = (both[f"time_us_s{hi}"] / both[f"time_us_s{lo}"]).median() if len(both) else float("nan")

        rows.append({"phase": f"{row['phase']} q{row['seqlen_q']}", "shape": row["shape"], "dtype": row["dtype"],
                     "path": row["load_path"], "cells": len(group),
                     "not measured": len(group) - len(measured),
                     "chosen stages (cells)": ", ".join(f"{int(s)}: {n}" for s, n in wins.items()) or NA,
                     **({f"median time {hi}/{lo} stages": _number(ratio, 2)} if hi != lo else {}),
                     **{f"CTAs/SM at {c} stages": _values(measured, f"resident_ctas_per_sm_s{c}") for c in counts},
                     "registers (chosen)": _values(measured, "registers"),
                     "local B/thread (chosen)": _values(measured, "local_bytes_per_thread"),
                     "launch min CTAs/SM (chosen)": _values(measured, "launch_min_ctas_per_sm")})
    return pd.DataFrame(rows)


def _values(frame: pd.DataFrame, column: str) -> str:
    """The distinct integers of ``column``, joined by '/' ("168/176"), n/a when none."""
    return "/".join(str(int(v)) for v in sorted(frame[column].dropna().unique())) or NA


def summary_display(speedup: pd.DataFrame) -> pd.DataFrame:
    """Per phase and dtype: who won the page-size sweep, by how much, the page-size rule it
    gives and how often FA3's rule named the winner (facts.py; the paper's summary)."""
    rows = []
    for phase in facts.PHASES:
        for dtype in facts.DTYPES:
            rule = facts.page_rule(speedup, phase, dtype)
            if rule is None:
                continue
            fa3 = facts.fa3_agreement(speedup[speedup.page_sweep.astype(bool)], phase, dtype)
            rows.append({"phase": phase, "dtype": dtype, "compared": rule.tally.compared,
                         "TMA wins": rule.tally.tma_wins, "ties": rule.tally.ties,
                         "cp.async wins": rule.tally.cp_async_wins,
                         "TMA speedup median (min-max)": f"{rule.speedup_median:.2f} ({rule.speedup_min:.2f}-"
                                                        f"{rule.speedup_max:.2f})",
                         "page-size rule": rule.verdict, "FA3 names the winner": f"{fa3.agrees} of {fa3.decided}"})
    if not rows:
        return pd.DataFrame({"phase": [f"{NOT_MEASURED}: no page size at which both load paths were timed"]})
    return pd.DataFrame(rows)


def write_tables(derived_dir: Path, provenance: dict, tables_dir: Path) -> None:
    derived_dir = Path(derived_dir)
    source = source_line(provenance)
    write_table(summary_display(pd.read_csv(derived_dir / "speedup.csv")), tables_dir, "paged_kv_summary",
                "Paged-KV attention, page-size sweep: TMA against cp.async K/V loads per phase and dtype, each "
                "path at its best K/V ring stage count (speedup: cp.async time / TMA time; a tie: medians within "
                "each other's interquartile range), the page-size rule this gives, and how often "
                f"FlashAttention-3's rule names the measured winner ({source}).")
    write_table(speedup_display(pd.read_csv(derived_dir / "speedup.csv")), tables_dir, "paged_kv_speedup",
                "Paged-KV attention: TMA over cp.async K/V loads by page size, each path at its best K/V "
                f"ring stage count, and FlashAttention-3's rule for the same call ({source}).")
    write_table(decode_display(pd.read_csv(derived_dir / "decode.csv")), tables_dir, "paged_kv_decode",
                "Paged-KV decode: K/V read rate of the better path (at its best page size and stage count) "
                f"against the same run's copy ({source}).")
    write_table(pd.read_csv(derived_dir / "fa3_agreement.csv"), tables_dir, "paged_kv_fa3",
                f"Where FlashAttention-3's paged-KV TMA rule agrees with the measured winner ({source}).")
    write_table(scaling_display(pd.read_csv(derived_dir / "scaling.csv")), tables_dir, "paged_kv_scaling",
                "Paged-KV batch and context scaling: each path at its best K/V ring stage count; decode "
                "K/V GB/s with the same run's device-to-device copy and torch SDPA on a contiguous bf16 "
                f"cache, prefill TFLOP/s ({source}).")
    write_table(stages_display(pd.read_csv(derived_dir / "tuning.csv")), tables_dir, "paged_kv_stages",
                "Paged-KV K/V ring stages: which stage count each path won with, what the deeper ring "
                "cost, and the chosen kernels' registers, spills, residency and launch bounds "
                f"({source}).")
