"""Tables of the paged_kv study (paper/tables/paged_kv_*.tex|md). Every time is a path at its
own best tuning, K/V ring stages x producer warps (aggregate.best_tuning); paged_kv_tuning says
which combination won where. "N st., M pw": N K/V stages filled by M producer warps."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study import rule_scores
from tma_study.harness import l2_state as l2_state_mod
from tma_study.report.tables import source_line, write_table

from . import facts, tuning_facts

NA = "n/a"
NOT_MEASURED = "not measured"


def _phase(r) -> str:
    return f"{r.phase} q{r.seqlen_q} b{r.batch} ctx{r.context_tokens}"


def _number(value, digits: int = 1, text_if_missing: str = NA) -> str:
    return text_if_missing if pd.isna(value) else f"{value:.{digits}f}"


def _stages(value) -> str:
    return "-" if pd.isna(value) else str(int(value))


def _knobs(stages, producer_warps) -> str:
    """'2 st., 1 pw' (2 K/V stages, 1 producer warp); '-' where nothing was timed."""
    return "-" if pd.isna(stages) else f"{int(stages)} st., {int(producer_warps)} pw"


def speedup_display(speedup: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for r in speedup.itertuples():
        tma_us, tma_stages = getattr(r, "tma_time_us", float("nan")), getattr(r, "tma_stages", float("nan"))
        gather_us = getattr(r, "cp_async_time_us", float("nan"))
        gather_stages = getattr(r, "cp_async_stages", float("nan"))
        gather_warps = getattr(r, "cp_async_producer_warps", float("nan"))
        rows.append({"shape": r.shape, "dtype": r.dtype, "phase": _phase(r), "page": r.page_size,
                     "TMA us": _number(tma_us), "cp.async us": _number(gather_us),
                     "stages (TMA/cp.async)": f"{_stages(tma_stages)}/{_stages(gather_stages)}",
                     "cp.async producer warps": _stages(gather_warps),
                     "TMA speedup": _number(r.tma_speedup, 2),
                     "measured": r.measured_winner, "FA3 rule": r.fa3_load_path,
                     "agree": NA if pd.isna(r.fa3_agrees) else ("yes" if r.fa3_agrees else "no")})
    return pd.DataFrame(rows)


def _roofline(r) -> dict[str, str]:
    """flop per K/V byte, and the bound: the copy rate, or the K/V rate the shape's prefill
    TFLOP/s allows where that is lower (data before the roofline columns: not computed)."""
    if not hasattr(r, "bound"):
        return {}
    bound = ("copy" if r.bound == "copy" else
             f"prefill math, {_number(r.bound_gbps, 0)} GB/s" if r.bound == "prefill_tflops" else r.bound)
    shown = {"flop/B": _number(r.flops_per_kv_byte), "bound": bound,
             "% of bound": _number(100 * r.fraction_of_bound)}
    if hasattr(r, "fraction_of_same_bytes_copy"):
        shown["% of same-size copy"] = _number(100 * r.fraction_of_same_bytes_copy)
    return shown


def decode_display(decode: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for r in decode.itertuples():
        measured = r.best_load_path != NOT_MEASURED
        consumer = getattr(r, "best_score_layout", None)           # data that record the consumer
        rows.append({"shape": r.shape, "dtype": r.dtype, "phase": _phase(r),
                     "best": (f"{r.best_load_path}, page {r.best_page_size}, "
                              f"{_knobs(r.best_stages, r.best_producer_warps)}"
                              + (f", {consumer}" if isinstance(consumer, str) else "") if measured else NOT_MEASURED),
                     "GB/s": _number(r.best_gbps, 0), "% of D2D copy": _number(100 * r.fraction_of_d2d_copy),
                     "TMA best GB/s": _number(r.best_tma_gbps, 0),
                     "cp.async best GB/s": _number(r.best_cp_async_gbps, 0),
                     "torch SDPA GB/s (contiguous, bf16)": _number(r.torch_sdpa_gbps, 0),
                     **_roofline(r),
                     ">= 70 % bar": NA if not r.bar_applies else (
                         NOT_MEASURED if pd.isna(r.meets_bar) else ("met" if r.meets_bar else "missed"))})
    return pd.DataFrame(rows)


def scaling_display(scaling: pd.DataFrame) -> pd.DataFrame:
    """One row per (series, dtype, point): each path's rate (GB/s of K/V for decode, TFLOP/s
    for prefill) at its best stages and producer warps, with the copy rate and torch SDPA for decode."""
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
                    f" ({_knobs(at.stages.iloc[0], at.producer_warps.iloc[0])})"
        out["D2D copy GB/s"] = _number(first.d2d_copy_gbps, 0) if decode else NA
        out["torch SDPA GB/s (bf16)"] = _number(first.torch_sdpa_gbps, 0) if decode else NA
        rows.append(out)
    return pd.DataFrame(rows)


def _ratio_at_chosen(measured: pd.DataFrame, vary: str, low: int, high: int) -> float:
    """Median over cells of time(high) / time(low) of knob ``vary`` ("s" stages, "p" producer
    warps), the other knob held at the cell's chosen value; NaN where no cell timed both."""
    ratios = []
    for r in measured.itertuples():
        if vary == "s":
            hi, lo = f"time_us_s{high}_p{int(r.producer_warps_chosen)}", f"time_us_s{low}_p{int(r.producer_warps_chosen)}"
        else:
            hi, lo = f"time_us_s{int(r.stages_chosen)}_p{high}", f"time_us_s{int(r.stages_chosen)}_p{low}"
        if hi in measured and lo in measured:
            ratios.append(getattr(r, hi) / getattr(r, lo))
    ratios = pd.Series(ratios, dtype=float).dropna()
    return float(ratios.median()) if len(ratios) else float("nan")


def _wins(measured: pd.DataFrame, column: str) -> str:
    counts = measured[column].value_counts().sort_index()
    return ", ".join(f"{int(v)}: {n}" for v, n in counts.items()) or NA


def tuning_display(tuning: pd.DataFrame) -> pd.DataFrame:
    """Per (phase, shape, dtype, load path): how often each stage count, each producer-warp
    count, each combination and (decode, where both ran) each consumer won, the median time
    ratio of the deepest to the shallowest ring, of the most to the fewest producer warps (the
    other knob at its chosen value) and of each other consumer to kq, the resident CTAs per SM at each
    combination, and what the chosen kernels were."""
    labels = [c.removeprefix("time_us_") for c in tuning.columns if c.startswith("time_us_s")]
    combos = sorted((int(label[1:].split("_p")[0]), int(label.split("_p")[1])) for label in labels)
    stage_counts = sorted({s for s, _ in combos})
    warp_counts = sorted({w for _, w in combos})
    others = tuning_facts.compared_consumers(tuning)      # decode consumers swept beside kq (grid.py)
    rows = []
    keys = ["phase", "seqlen_q", "shape", "dtype", "load_path"]
    for key, group in tuning.groupby(keys, sort=True):
        row = dict(zip(keys, key))
        measured = group[group.status == "measured"]
        swept = [(s, w) for s, w in combos if group[f"time_us_s{s}_p{w}"].notna().any()]
        chosen = measured.apply(lambda r: f"{int(r.stages_chosen)} st., {int(r.producer_warps_chosen)} pw", axis=1)
        out = {"phase": f"{row['phase']} q{row['seqlen_q']}", "shape": row["shape"], "dtype": row["dtype"],
               "path": row["load_path"], "cells": len(group), "not measured": len(group) - len(measured),
               "chosen stages (cells)": _wins(measured, "stages_chosen"),
               "chosen producer warps (cells)": _wins(measured, "producer_warps_chosen"),
               "chosen combination (cells)": ", ".join(f"{c}: {n}" for c, n in
                                                       chosen.value_counts().sort_index().items()) or NA}
        if len(stage_counts) > 1:
            lo, hi = stage_counts[0], stage_counts[-1]
            out[f"median time {hi}/{lo} stages"] = _number(_ratio_at_chosen(measured, "s", lo, hi), 2)
        if len(warp_counts) > 1:
            lo, hi = warp_counts[0], warp_counts[-1]
            out[f"median time {hi}/{lo} producer warps"] = _number(_ratio_at_chosen(measured, "p", lo, hi), 2)
        if others:
            out["chosen consumer (cells)"] = (", ".join(f"{c}: {n}" for c, n in
                                                        measured.score_layout.value_counts().sort_index().items())
                                              if row["phase"] == "decode" else NA) or NA
            for consumer in others:
                tally = tuning_facts.consumer_tally(group, consumer)
                out[f"median time {consumer}/kq"] = _number(tally.over_kq_median, 2) if tally else NA
        for s, w in combos:
            out[f"CTAs/SM at {s} st., {w} pw"] = (_values(measured, f"resident_ctas_per_sm_s{s}_p{w}")
                                                 if (s, w) in swept else NA)
        out |= {"registers (chosen)": _values(measured, "registers"),
                "local B/thread (chosen)": _values(measured, "local_bytes_per_thread"),
                "launch min CTAs/SM (chosen)": _values(measured, "launch_min_ctas_per_sm")}
        rows.append(out)
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


L2_STATE_BEFORE = "measured before the harness recorded the L2 state"
L2_STATE_NOT_MEASURED = f"not measured in this run ({L2_STATE_BEFORE})"
L2_STATE_HEADER = ["bytes moved (MB)", "clean GB/s", "dirty GB/s", "time dirty/clean", "dirty - clean (us)"]


def l2_state_display(l2_state: pd.DataFrame) -> pd.DataFrame:
    """Per copied size (MB: 10^6 bytes, read + write): the same-bytes copy's GB/s in each L2
    state, the time ratio and the extra microseconds of the dirty state; one row saying so
    where the run did not time the dirty state (aggregate.l2_state_table)."""
    if l2_state.empty:
        return pd.DataFrame([[L2_STATE_NOT_MEASURED, *[NA] * (len(L2_STATE_HEADER) - 1)]], columns=L2_STATE_HEADER)
    rows = [[_number(r.bytes_moved / 1e6), _number(r.clean_gbps, 0, NOT_MEASURED),
             _number(r.dirty_gbps, 0, NOT_MEASURED), _number(r.dirty_over_clean_time, 2, NOT_MEASURED),
             _number(r.dirty_extra_us, 1, NOT_MEASURED)] for r in l2_state.itertuples()]
    return pd.DataFrame(rows, columns=L2_STATE_HEADER)


def l2_state_caption(l2_state: pd.DataFrame, provenance: dict, source: str) -> str:
    what = ("Paged-KV, L2 state at the start of a sample: a device-to-device copy of each decode point's "
            "K/V size (MB moved, read + write) timed after nvbench's memset flush alone (dirty) and after "
            "the clean step, an untimed read of twice the L2 size after that flush (clean), in the same run")
    if l2_state.empty:
        return f"{what}: not measured in this run ({L2_STATE_BEFORE}; {source})."
    run_state = l2_state_mod.describe(provenance)      # the "clean" column is timed in the run's state
    unlike = "" if run_state.startswith("clean") else f"; this run's own state, not clean: {run_state}"
    return (f"{what}; the difference is the write-back of the flush's dirty lines inside the timed region "
            f"({source}{unlike}).")


FA3_COLUMNS = {"dtype": "dtype", "phase": "phase", "configurations": "configurations", "fa3_agrees": "FA3 agrees",
               "fa3_disagrees": "FA3 slower", "tma_wins": "TMA wins", "cp_async_wins": "cp.async wins",
               "ties": "ties"}


def fa3_display(agreement: pd.DataFrame, speedup: pd.DataFrame) -> pd.DataFrame:
    """fa3_agreement.csv with readable headers and, per row, the largest cost of FA3's misses."""
    shown = agreement[[c for c in FA3_COLUMNS if c in agreement]].rename(columns=FA3_COLUMNS)
    costs = []
    for r in agreement.itertuples():
        misses = speedup[(speedup.dtype == r.dtype) & (speedup.phase == r.phase)
                         & (speedup.fa3_agrees.astype(str).str.lower() == "false")]
        costs.append(f"{100 * (misses.fa3_slowdown.max() - 1):.1f} %"
                     if len(misses) and "fa3_slowdown" in misses else NA)
    return shown.assign(**{"largest cost of a miss": costs})


def write_tables(derived_dir: Path, provenance: dict, tables_dir: Path) -> None:
    derived_dir = Path(derived_dir)
    source = source_line(provenance)
    speedup = pd.read_csv(derived_dir / "speedup.csv")
    write_table(summary_display(speedup), tables_dir, "paged_kv_summary",
                "Paged-KV attention, page-size sweep: TMA against cp.async K/V loads per phase and dtype, each "
                "path at its best K/V ring stages and producer warps (speedup: cp.async time / TMA time; a tie: medians within "
                "each other's interquartile range), the page-size rule this gives, and how often "
                f"FlashAttention-3's rule names the measured winner ({source}).")
    write_table(speedup_display(speedup), tables_dir, "paged_kv_speedup",
                "Paged-KV attention: TMA over cp.async K/V loads by page size, each path at its best K/V "
                "ring stage count and (cp.async; TMA's producer is one warp) producer-warp count, and "
                f"FlashAttention-3's rule for the same call ({source}).")
    write_table(decode_display(pd.read_csv(derived_dir / "decode.csv")), tables_dir, "paged_kv_decode",
                "Paged-KV decode: K/V read rate of the better path (at its best page size, stages and producer "
                "warps: st., pw, and decode consumer) "
                "against the same run's copy, and against a roofline bound: the copy rate, or where lower "
                "the K/V rate at which the point's flops per K/V byte (flop/B) run at the best prefill "
                "TFLOP/s of its shape and dtype in the same run (prefill math; the rate these kernels' "
                "mma.sync math is seen to reach, not a hardware peak); for context, against a copy "
                f"moving as many bytes as the point reads, timed the same way ({source}).")
    write_table(fa3_display(pd.read_csv(derived_dir / "fa3_agreement.csv"), speedup), tables_dir, "paged_kv_fa3",
                "Where FlashAttention-3's paged-KV rule, evaluated for each measured call, names the faster path "
                "(a tie agrees with either choice; one path only: pages too small for TMA), and what its "
                f"choice costs where it does not: its path's time over the faster path's ({source}).")
    write_table(rule_scores.table(pd.read_csv(derived_dir / "rule_baselines.csv"), ["scope"]), tables_dir,
                "paged_kv_fa3_baselines",
                "FlashAttention-3's rule beside the trivial baselines on the configurations where both paths ran "
                "(a tie is right for every policy): the share each names right with a bootstrap 95 % interval "
                "(configurations resampled), and the rule's margin over the best baseline (paired resamples); a "
                "rule is predictive only where that interval lies above 0. The per-phase majority picks each "
                f"phase's more common winner, as FA3's rule picks by phase ({source}).")
    write_table(scaling_display(pd.read_csv(derived_dir / "scaling.csv")), tables_dir, "paged_kv_scaling",
                "Paged-KV batch and context scaling: each path at its best K/V ring stages (st.) and "
                "producer warps (pw); decode "
                "K/V GB/s with the same run's device-to-device copy and torch SDPA on a contiguous bf16 "
                f"cache, prefill TFLOP/s ({source}).")
    write_table(tuning_display(pd.read_csv(derived_dir / "tuning.csv")), tables_dir, "paged_kv_tuning",
                "Paged-KV tuning: which K/V ring stage count (st.) and producer-warp count (pw) each path "
                "won with, what the deeper ring and the larger producer cost, in decode which consumer "
                "won (where the run swept several) and each one's best time over kq's, the "
                "resident CTAs per SM at each combination (the faster consumer's), and the chosen "
                "kernels' registers, spills and launch bounds "
                f"({source}).")
    l2_state = pd.read_csv(derived_dir / "l2_state.csv")
    write_table(l2_state_display(l2_state), tables_dir, "paged_kv_l2_state",
                l2_state_caption(l2_state, provenance, source))
