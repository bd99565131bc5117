"""Derived tables of the gemm study (results/<gpu>/gemm/derived/*.csv), from gemm.csv.

- ``measured.csv``  every measured row with its fraction of cuBLAS (same dtype, shape and run) and
                    how trustworthy its timing is (samples against ``min_samples``, mean SM clock
                    against the GPU's maximum and nvbench's throttle floor)
- ``speedup.csv``   TMA over cp.async per (arch, dtype, shape): same schedule and tile with a 1x1
                    cluster, and best against best (any schedule, tile and, for TMA, cluster), with
                    how many candidates of each mechanism were not measured and each side's
                    register spills (kernels.csv)
- ``multicast.csv`` per TMA variant with a cluster > 1: its TFLOP/s over the same variant at 1x1
                    (or why not compared), and whether the cluster exceeds the problem's tiles
- ``multicast_summary.csv``  that gain per (arch, dtype, cluster): median, min, max, shapes won
- ``cublas.csv``    best variant per load mechanism as a fraction of cuBLAS, per shape
- ``bar.csv``       the issue's bar: best SM90 TMA variant at 8192^3 bf16 >= 95 % of cuBLAS, with
                    the candidates that could not be measured
- ``rules.csv``     do the crossover and multicast studies' rules predict the GEMM winners?
                    (predict.py)
- ``rule_baselines.csv`` each of those rules beside its trivial baselines, with bootstrap intervals
                    (baselines.py)
- ``status.csv``    rows per (arch, implementation, load, status), and how many measured rows have
                    fewer samples than asked for or ran at the throttle floor

Clocks: large GEMMs are power-limited, so two rows of one comparison may have run at different
SM clocks. Every measured row has ``tflops_per_ghz`` (TFLOP/s over its mean SM clock in GHz), and
every comparison (measured, speedup, multicast, cublas, bar) adds, beside its ratio, the ratio of
the compared rows' mean clocks (``clock_ratio``, oriented as the comparison's own ratio: row over
cuBLAS, TMA over cp.async, cluster over 1x1), ``clocks_differ`` (they differ by more than the
tie tolerance, so the clock alone could decide the comparison) and the ratio per clock. Per
clock is a diagnostic, not the result: under a power cap a kernel's own draw sets part of its
clock. Winners and the existing columns are unchanged.

Rows that were not measured keep their reason in every file that would show them. Every row
says how it accumulates (``accumulation``: a key of variants.ACCUMULATION), and the TMA vs
cp.async and cuBLAS comparisons carry both sides', so a comparison of two kinds of fp8
accumulation is visible as such.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from tma_study.harness import raw_data

from . import STUDY
from .baselines import rule_baselines
from .predict import crossover_verdicts, multicast_boundary, multicast_verdicts, rules
from tma_study.gemm_lib.rows import (
    ACCUMULATION_COLUMN,
    BAR_FRACTION,
    BYTES_PER_ELEMENT,
    FLOOR_TOLERANCE,
    MEASURED,
    NOT_MEASURED_TEXT,
    NVBENCH_DEFAULT_THROTTLE_PERCENT,
    TIE_TOLERANCE,
    TimingLimits,
    short_variant,
    with_accumulation,
)

BAR_SHAPE = 8192
SHAPE_KEYS = ["arch", "dtype", "shape", "family", "layer", "m", "n", "k"]


def _write(frame: pd.DataFrame, path: Path) -> None:
    """Write ``frame``; an empty one becomes one row saying that nothing was measured."""
    if frame.empty:
        frame = pd.DataFrame({"status": [f"{NOT_MEASURED_TEXT}: no measured rows for {path.stem}"]})
    frame.to_csv(path, index=False)


def tflops_per_ghz(tflops, sm_clock_mhz):
    """TFLOP/s per GHz of mean SM clock: a row's throughput with its clock divided out."""
    return tflops / (sm_clock_mhz / 1000.0)


def clocks_differ(clock_ratio) -> bool | pd.Series:
    """Two rows' mean clocks differ by more than a tie: the clock alone could decide between them."""
    return abs(clock_ratio - 1) > TIE_TOLERANCE


def _clock_comparison(ratio, clock_ratio) -> dict:
    """The clock columns every comparison adds beside its own ``ratio`` (same orientation)."""
    return {"clock_ratio": clock_ratio, "clocks_differ": clocks_differ(clock_ratio),
            "ratio_per_clock": ratio / clock_ratio}


def with_cublas_fraction(gemm: pd.DataFrame, limits: TimingLimits | None = None) -> pd.DataFrame:
    measured = gemm[gemm.status == MEASURED].copy()
    anchors = measured[measured.implementation == "cublas"].set_index(["dtype", "shape"])
    anchor, anchor_clock = anchors["tflops"], anchors["sm_clock_mhz_mean"]
    keys = list(zip(measured["dtype"], measured["shape"]))
    measured["cublas_tflops"] = [anchor.get(key, np.nan) for key in keys]
    measured["fraction_of_cublas"] = measured.tflops / measured.cublas_tflops
    measured["tflops_per_ghz"] = tflops_per_ghz(measured.tflops, measured.sm_clock_mhz_mean)
    measured["cublas_sm_clock_mhz"] = [anchor_clock.get(key, np.nan) for key in keys]
    clock = _clock_comparison(measured.fraction_of_cublas, measured.sm_clock_mhz_mean / measured.cublas_sm_clock_mhz)
    measured["clock_ratio"] = clock["clock_ratio"]
    measured["clocks_differ"] = clock["clocks_differ"]
    measured["fraction_of_cublas_per_clock"] = clock["ratio_per_clock"]
    measured["relative_iqr"] = measured.time_us_iqr / measured.time_us_median
    limits = limits or TimingLimits(None, None, NVBENCH_DEFAULT_THROTTLE_PERCENT)
    measured["fewer_than_min_samples"] = (measured.samples < limits.min_samples) if limits.min_samples else False
    if limits.max_clock_mhz:
        measured["sm_clock_fraction_of_max"] = measured.sm_clock_mhz_mean / limits.max_clock_mhz
        measured["at_throttle_floor"] = measured.sm_clock_mhz_mean <= limits.floor_mhz * (1 + FLOOR_TOLERANCE)
    else:
        measured["sm_clock_fraction_of_max"] = np.nan
        measured["at_throttle_floor"] = False
    return measured


def _verdict(ratio: float, spread: float) -> str:
    tolerance = max(TIE_TOLERANCE, spread)
    return "tma" if ratio > 1 + tolerance else ("cpasync" if ratio < 1 - tolerance else "tie")


def _spills(kernels: pd.DataFrame | None) -> pd.Series:
    """Spill-store bytes per variant (ptxas), or an empty Series when kernels.csv lacks them."""
    if kernels is None or "spill_store_bytes" not in kernels.columns:
        return pd.Series(dtype=float)
    return kernels.drop_duplicates("variant").set_index("variant")["spill_store_bytes"]


def speedup(measured: pd.DataFrame, gemm: pd.DataFrame | None = None,
            kernels: pd.DataFrame | None = None) -> pd.DataFrame:
    """TMA over cp.async: same schedule and tile at 1x1, and best against best.

    Best-against-best rows count the candidates of each mechanism at that shape that were not
    measured (their best may be missing); every row carries each side's ptxas spill bytes, since
    a spilling mainloop measures its spills, not its load path.
    """
    cutlass = measured[measured.implementation == "cutlass"]
    candidates = (gemm if gemm is not None else measured)
    candidates = candidates[candidates.implementation == "cutlass"]
    spills = _spills(kernels)
    anchors = measured[measured.implementation == "cublas"]
    cublas_accumulation = (anchors.set_index(["dtype", "shape"])[ACCUMULATION_COLUMN]
                           if ACCUMULATION_COLUMN in anchors.columns else pd.Series(dtype=object))
    rows = []
    for key, group in cutlass.groupby(SHAPE_KEYS):
        tma, cpa = group[group.load == "tma"], group[group.load == "cpasync"]
        if tma.empty or cpa.empty:
            continue
        at = candidates[(candidates.arch == key[0]) & (candidates.dtype == key[1]) & (candidates["shape"] == key[2])]
        unmeasured = {load: int(((at.load == load) & (at.status != MEASURED)).sum()) for load in ("tma", "cpasync")}
        pairs = [("best", tma.loc[tma.tflops.idxmax()], cpa.loc[cpa.tflops.idxmax()])]
        for c in cpa.itertuples():
            same = tma[(tma.schedule == c.schedule) & (tma.tile == c.tile) & (tma.cluster == "1x1")]
            if len(same):
                pairs.append((f"{c.schedule} {c.tile} 1x1", same.iloc[0], cpa.loc[c.Index]))
        for compared, t, c in pairs:
            ratio = t.tflops / c.tflops
            rows.append({**dict(zip(SHAPE_KEYS, key)), "compared": compared, "tma_variant": t.variant,
                         "cpasync_variant": c.variant, "tma_tflops": t.tflops, "cpasync_tflops": c.tflops,
                         "speedup": ratio, "winner": _verdict(ratio, t.relative_iqr + c.relative_iqr),
                         "tile": t.tile, "schedule": t.schedule, "tma_cluster": t.cluster,
                         "tma_candidates": int((at.load == "tma").sum()), "tma_not_measured": unmeasured["tma"],
                         "cpasync_candidates": int((at.load == "cpasync").sum()),
                         "cpasync_not_measured": unmeasured["cpasync"],
                         "tma_spill_store_bytes": spills.get(t.variant, np.nan),
                         "cpasync_spill_store_bytes": spills.get(c.variant, np.nan),
                         "tma_accumulation": t.get(ACCUMULATION_COLUMN, np.nan),
                         "cpasync_accumulation": c.get(ACCUMULATION_COLUMN, np.nan),
                         "cublas_accumulation": cublas_accumulation.get((key[1], key[2]), np.nan),
                         "tma_samples": t.samples, "cpasync_samples": c.samples,
                         "tma_sm_clock_mhz": t.sm_clock_mhz_mean, "cpasync_sm_clock_mhz": c.sm_clock_mhz_mean,
                         "tma_tflops_per_ghz": t.tflops_per_ghz, "cpasync_tflops_per_ghz": c.tflops_per_ghz,
                         **_renamed(_clock_comparison(ratio, t.sm_clock_mhz_mean / c.sm_clock_mhz_mean),
                                    "speedup_per_clock")})
    return pd.DataFrame(rows)


def _renamed(clock: dict, ratio_name: str) -> dict:
    """_clock_comparison's columns with the per-clock ratio named after the comparison's ratio."""
    return {(ratio_name if k == "ratio_per_clock" else k): v for k, v in clock.items()}


def _cluster_exceeds_tiles(r) -> bool:
    """A cluster longer than the problem's tile grid along M or N leaves CTAs without a tile."""
    return bool(np.ceil(r.m / r.tile_m) < r.cluster_m or np.ceil(r.n / r.tile_n) < r.cluster_n)


def multicast(measured: pd.DataFrame, gemm: pd.DataFrame | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Gain of each cluster shape over the same TMA variant at 1x1, and its summary.

    With ``gemm`` (every row, measured or not) a comparison whose cluster or 1x1 side was not
    measured is kept with NaN gain and the reason in ``status``.
    """
    rows_of = (gemm if gemm is not None else measured)
    tma_all = rows_of[(rows_of.implementation == "cutlass") & (rows_of.load == "tma")]
    tma = measured[(measured.implementation == "cutlass") & (measured.load == "tma")].set_index(["variant", "shape"])
    one_key = ["arch", "mainloop", "dtype", "tile", "shape"]
    ones = tma_all[tma_all.cluster == "1x1"].set_index(one_key)
    rows = []
    for r in tma_all[tma_all.cluster != "1x1"].itertuples():
        one = ones.loc[(r.arch, r.mainloop, r.dtype, r.tile, r.shape)] if (r.arch, r.mainloop, r.dtype, r.tile,
                                                                           r.shape) in ones.index else None
        have_cluster, have_one = (r.variant, r.shape) in tma.index, one is not None and one.status == MEASURED
        if have_cluster and have_one:
            status = why = MEASURED
        elif not have_cluster:
            why = r.status
            status = f"not compared: {short_variant(r.variant)} {why}"
        else:
            why = "its 1x1 variant is not in the sweep" if one is None else one.status
            status = f"not compared: its 1x1 variant {why}"
        mine = tma.loc[(r.variant, r.shape)] if have_cluster else None
        base = tma.loc[(one.variant, r.shape)] if have_one else None
        rows.append({"arch": r.arch, "mainloop": r.mainloop, "dtype": r.dtype, "tile": r.tile, "cluster": r.cluster,
                     "cluster_m": int(r.cluster_m), "cluster_n": int(r.cluster_n),
                     "a_tile_bytes": int(r.tile_m * r.tile_k * BYTES_PER_ELEMENT[r.dtype]),
                     "shape": r.shape, "family": r.family, "m": r.m, "n": r.n, "k": r.k, "variant": r.variant,
                     "status": status, "why_not_compared": "" if status == MEASURED else why,
                     "cluster_exceeds_tiles": _cluster_exceeds_tiles(r),
                     "tflops": mine.tflops if mine is not None else np.nan,
                     "tflops_1x1": base.tflops if base is not None else np.nan,
                     "gain": mine.tflops / base.tflops if status == MEASURED else np.nan,
                     "spread": mine.relative_iqr + base.relative_iqr if status == MEASURED else np.nan,
                     "sm_clock_mhz": mine.sm_clock_mhz_mean if mine is not None else np.nan,
                     "sm_clock_mhz_1x1": base.sm_clock_mhz_mean if base is not None else np.nan,
                     **(_renamed(_clock_comparison(mine.tflops / base.tflops,
                                                   mine.sm_clock_mhz_mean / base.sm_clock_mhz_mean), "gain_per_clock")
                        if status == MEASURED else
                        {"clock_ratio": np.nan, "clocks_differ": False, "gain_per_clock": np.nan})})
    gains = pd.DataFrame(rows)
    if gains.empty or not (gains.status == MEASURED).any():
        return gains, pd.DataFrame()
    summary = []
    for (arch, dtype, cluster), group in gains.groupby(["arch", "dtype", "cluster"]):
        compared = group[group.status == MEASURED]
        busy = compared[~compared.cluster_exceeds_tiles]
        summary.append({"arch": arch, "dtype": dtype, "cluster": cluster,
                        "status": MEASURED if len(compared) else group.why_not_compared.iloc[0],
                        "median_gain": compared.gain.median(), "min_gain": compared.gain.min(),
                        "max_gain": compared.gain.max(), "comparisons": len(compared),
                        "wins": int((compared.gain > 1 + TIE_TOLERANCE).sum()),
                        "losses": int((compared.gain < 1 - TIE_TOLERANCE).sum()),
                        "not_compared": len(group) - len(compared),
                        "median_gain_every_cta_busy": busy.gain.median() if len(busy) else np.nan,
                        "comparisons_every_cta_busy": len(busy),
                        "median_clock_ratio": compared.clock_ratio.median(),
                        "comparisons_clocks_differ": int(compared.clocks_differ.sum()),
                        "median_gain_per_clock": compared.gain_per_clock.median()})
    return gains, pd.DataFrame(summary)


def cublas_fractions(measured: pd.DataFrame, gemm: pd.DataFrame | None = None) -> pd.DataFrame:
    cutlass = measured[measured.implementation == "cutlass"]
    best = cutlass.loc[cutlass.groupby(SHAPE_KEYS + ["load"])["tflops"].idxmax()].copy()
    if gemm is not None:   # why a missing fraction is missing: cuBLAS itself was not measured there
        anchor = gemm[gemm.implementation == "cublas"].set_index(["dtype", "shape"])["status"]
        best["cublas_status"] = [anchor.get((d, s), "no cuBLAS row") for d, s in zip(best["dtype"], best["shape"])]
    columns = SHAPE_KEYS + ["load", "variant", "tflops", "cublas_tflops", "fraction_of_cublas"]
    columns += ["cublas_status"] if "cublas_status" in best.columns else []
    columns += ["sm_clock_mhz_mean", "cublas_sm_clock_mhz", "tflops_per_ghz", "clock_ratio", "clocks_differ",
                "fraction_of_cublas_per_clock"]
    if ACCUMULATION_COLUMN in measured.columns:      # each side's accumulation: cuBLAS's is the anchor's
        anchor = measured[measured.implementation == "cublas"].set_index(["dtype", "shape"])[ACCUMULATION_COLUMN]
        best["cublas_accumulation"] = [anchor.get((d, s), np.nan) for d, s in zip(best["dtype"], best["shape"])]
        columns += [ACCUMULATION_COLUMN, "cublas_accumulation"]
    return best[columns].sort_values(["arch", "dtype", "family", "m", "n", "k", "load"]).reset_index(drop=True)


def bar(gemm: pd.DataFrame, measured: pd.DataFrame) -> pd.DataFrame:
    """Best SM90 TMA variant at 8192^3 bf16 against cuBLAS in the same run.

    The best is taken over the candidates that were measured; the row names the candidates that
    were not (and why), and the samples and clock behind both numbers.
    """
    def at_shape(frame):
        return frame[(frame.arch == "sm90") & (frame.family == "square") & (frame.m == BAR_SHAPE)
                     & (frame.dtype == "bf16")]

    candidates = at_shape(gemm)
    candidates = candidates[(candidates.implementation == "cutlass") & (candidates.load == "tma")]
    missing = candidates[candidates.status != MEASURED]
    base = {"shape": f"{BAR_SHAPE}^3", "dtype": "bf16", "required_fraction": BAR_FRACTION,
            "tma_candidates": len(candidates), "tma_measured": len(candidates) - len(missing),
            "tma_not_measured": len(missing),
            "tma_not_measured_variants": "; ".join(short_variant(v) for v in missing.variant),
            "not_measured_reason": "; ".join(sorted(set(missing.status)))}
    tma = at_shape(measured)
    tma = tma[tma.load == "tma"]
    if tma.empty:
        reason = sorted(set(candidates.status)) or ["no SM90 TMA variant at this shape"]
        return pd.DataFrame([{**base, "status": f"{NOT_MEASURED_TEXT}: {reason[0]}"}])
    best = tma.loc[tma.tflops.idxmax()]
    cublas = at_shape(measured)
    cublas = cublas[cublas.implementation == "cublas"]
    anchor = cublas.iloc[0] if len(cublas) else None
    return pd.DataFrame([{**base, "status": MEASURED, "variant": best.variant, "tflops": best.tflops,
                          "cublas_tflops": best.cublas_tflops, "fraction_of_cublas": best.fraction_of_cublas,
                          "passes": bool(best.fraction_of_cublas >= BAR_FRACTION),
                          "samples": best.samples, "sm_clock_mhz": best.sm_clock_mhz_mean,
                          "cublas_samples": anchor.samples if anchor is not None else np.nan,
                          "cublas_sm_clock_mhz": anchor.sm_clock_mhz_mean if anchor is not None else np.nan,
                          "tflops_per_ghz": best.tflops_per_ghz,
                          "cublas_tflops_per_ghz": anchor.tflops_per_ghz if anchor is not None else np.nan,
                          "clock_ratio": best.clock_ratio, "clocks_differ": bool(best.clocks_differ),
                          "fraction_of_cublas_per_clock": best.fraction_of_cublas_per_clock}])


def status_counts(gemm: pd.DataFrame, measured: pd.DataFrame | None = None) -> pd.DataFrame:
    """Rows per (arch, implementation, load, status); for measured rows, how many are weak."""
    counts = gemm.groupby(["arch", "implementation", "load", "status"]).size().rename("rows").reset_index()
    counts["fewer_than_min_samples"] = 0
    counts["at_throttle_floor"] = 0
    if measured is not None and len(measured):
        weak = measured.groupby(["arch", "implementation", "load"])[["fewer_than_min_samples", "at_throttle_floor"]] \
            .sum().astype(int)
        for i, r in counts[counts.status == MEASURED].iterrows():
            key = (r.arch, r.implementation, r.load)
            if key in weak.index:
                counts.loc[i, ["fewer_than_min_samples", "at_throttle_floor"]] = weak.loc[key].values
    return counts


def aggregate(raw_dir: Path, derived_dir: Path, repeat_dir: Path | None = None) -> None:
    raw_dir, derived_dir = Path(raw_dir), Path(derived_dir)
    raw = raw_data.load(STUDY, raw_dir)           # checked before anything is written
    # rows not timed stay, with their status (measured: timing ok, raw_data checks it)
    gemm, kernels = with_accumulation(raw["gemm.csv"]), raw["kernels.csv"]
    # the other studies' raw data beside this run, read (and checked) before anything is written
    crossover = crossover_verdicts(raw_dir.parent / "crossover")
    multicast_rule = multicast_verdicts(raw_dir.parent / "multicast")
    l2_boundary = multicast_boundary(raw_dir.parent / "multicast")
    measured = with_cublas_fraction(gemm, TimingLimits.of(raw.provenance))
    speedups = speedup(measured, gemm, kernels)
    gains, gain_summary = multicast(measured, gemm)
    derived_dir.mkdir(parents=True, exist_ok=True)
    _write(measured, derived_dir / "measured.csv")
    _write(speedups, derived_dir / "speedup.csv")
    _write(gains, derived_dir / "multicast.csv")
    _write(gain_summary, derived_dir / "multicast_summary.csv")
    _write(cublas_fractions(measured, gemm), derived_dir / "cublas.csv")
    _write(bar(gemm, measured), derived_dir / "bar.csv")
    _write(rules(speedups, crossover, gains, multicast_rule, raw_dir.parent / "multicast", l2_boundary,
                 int(raw.provenance["gpu"].get("sm_count") or 132)), derived_dir / "rules.csv")
    _write(rule_baselines(speedups, crossover, gains, multicast_rule, l2_boundary), derived_dir / "rule_baselines.csv")
    _write(status_counts(gemm, measured), derived_dir / "status.csv")
