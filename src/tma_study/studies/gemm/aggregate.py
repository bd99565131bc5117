"""Derived tables of the gemm study (results/<gpu>/gemm/derived/*.csv), from gemm.csv.

- ``measured.csv``  every measured row with its fraction of cuBLAS (same dtype, shape and run)
- ``speedup.csv``   TMA over cp.async per (arch, dtype, shape): same schedule and tile with a 1x1
                    cluster, and best against best (any schedule, tile and, for TMA, cluster)
- ``multicast.csv`` per TMA variant with a cluster > 1: its TFLOP/s over the same variant at 1x1
- ``multicast_summary.csv``  that gain per (arch, dtype, cluster): median, min, max, shapes won
- ``cublas.csv``    best variant per load mechanism as a fraction of cuBLAS, per shape
- ``bar.csv``       the issue's bar: best SM90 TMA variant at 8192^3 bf16 >= 95 % of cuBLAS
- ``rules.csv``     do the crossover (and multicast) studies' rules predict the GEMM winners?
- ``status.csv``    rows per (arch, status): what was measured and what was not, and why

Rows that were not measured keep their reason in every file that would show them.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

MEASURED = "measured"
BAR_SHAPE = 8192
BAR_FRACTION = 0.95
TIE_TOLERANCE = 0.02           # |ratio - 1| below this (or the runs' spread) is a tie
SHAPE_KEYS = ["arch", "dtype", "shape", "family", "layer", "m", "n", "k"]
NOT_MEASURED_TEXT = "NOT MEASURED"


def _write(frame: pd.DataFrame, path: Path) -> None:
    """Write ``frame``; an empty one becomes one row saying that nothing was measured."""
    if frame.empty:
        frame = pd.DataFrame({"status": [f"{NOT_MEASURED_TEXT}: no measured rows for {path.stem}"]})
    frame.to_csv(path, index=False)


def with_cublas_fraction(gemm: pd.DataFrame) -> pd.DataFrame:
    measured = gemm[gemm.status == MEASURED].copy()
    anchor = measured[measured.implementation == "cublas"].set_index(["dtype", "shape"])["tflops"]
    measured["cublas_tflops"] = [anchor.get((d, s), np.nan) for d, s in zip(measured["dtype"], measured["shape"])]
    measured["fraction_of_cublas"] = measured.tflops / measured.cublas_tflops
    measured["relative_iqr"] = measured.time_us_iqr / measured.time_us_median
    return measured


def _verdict(ratio: float, spread: float) -> str:
    tolerance = max(TIE_TOLERANCE, spread)
    return "tma" if ratio > 1 + tolerance else ("cpasync" if ratio < 1 - tolerance else "tie")


def speedup(measured: pd.DataFrame) -> pd.DataFrame:
    """TMA over cp.async: same schedule and tile at 1x1, and best against best."""
    cutlass = measured[measured.implementation == "cutlass"]
    rows = []
    for key, group in cutlass.groupby(SHAPE_KEYS):
        tma, cpa = group[group.load == "tma"], group[group.load == "cpasync"]
        if tma.empty or cpa.empty:
            continue
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
                         "tile": t.tile, "schedule": t.schedule, "tma_cluster": t.cluster})
    return pd.DataFrame(rows)


def multicast(measured: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Gain of each cluster shape over the same TMA variant at 1x1, and its summary."""
    tma = measured[(measured.implementation == "cutlass") & (measured.load == "tma")]
    base = tma[tma.cluster == "1x1"].set_index(["arch", "mainloop", "dtype", "tile", "shape"])["tflops"]
    rows = []
    for r in tma[tma.cluster != "1x1"].itertuples():
        one = base.get((r.arch, r.mainloop, r.dtype, r.tile, r.shape), np.nan)
        rows.append({"arch": r.arch, "mainloop": r.mainloop, "dtype": r.dtype, "tile": r.tile, "cluster": r.cluster,
                     "shape": r.shape, "family": r.family, "m": r.m, "n": r.n, "k": r.k, "variant": r.variant,
                     "tflops": r.tflops, "tflops_1x1": one, "gain": r.tflops / one})
    gains = pd.DataFrame(rows)
    if gains.empty:
        return gains, pd.DataFrame()
    summary = gains.groupby(["arch", "dtype", "cluster"]).agg(
        median_gain=("gain", "median"), min_gain=("gain", "min"), max_gain=("gain", "max"),
        comparisons=("gain", "size"), wins=("gain", lambda g: int((g > 1 + TIE_TOLERANCE).sum())),
        losses=("gain", lambda g: int((g < 1 - TIE_TOLERANCE).sum()))).reset_index()
    return gains, summary


def cublas_fractions(measured: pd.DataFrame) -> pd.DataFrame:
    cutlass = measured[measured.implementation == "cutlass"]
    best = cutlass.loc[cutlass.groupby(SHAPE_KEYS + ["load"])["tflops"].idxmax()]
    return best[SHAPE_KEYS + ["load", "variant", "tflops", "cublas_tflops", "fraction_of_cublas"]] \
        .sort_values(["arch", "dtype", "family", "m", "n", "k", "load"]).reset_index(drop=True)


def bar(gemm: pd.DataFrame, measured: pd.DataFrame) -> pd.DataFrame:
    """Best SM90 TMA variant at 8192^3 bf16 against cuBLAS in the same run."""
    at = measured[(measured.family == "square") & (measured.m == BAR_SHAPE) & (measured.dtype == "bf16")]
    tma = at[(at.arch == "sm90") & (at.load == "tma")]
    base = {"shape": f"{BAR_SHAPE}^3", "dtype": "bf16", "required_fraction": BAR_FRACTION}
    if tma.empty:
        reason = gemm[(gemm.arch == "sm90") & (gemm.m == BAR_SHAPE) & (gemm.family == "square")].status
        return pd.DataFrame([{**base, "status": NOT_MEASURED_TEXT + (f": {reason.iloc[0]}" if len(reason) else
                                                                     ": no SM90 TMA variant at this shape")}])
    best = tma.loc[tma.tflops.idxmax()]
    return pd.DataFrame([{**base, "status": MEASURED, "variant": best.variant, "tflops": best.tflops,
                          "cublas_tflops": best.cublas_tflops, "fraction_of_cublas": best.fraction_of_cublas,
                          "passes": bool(best.fraction_of_cublas >= BAR_FRACTION)}])


def crossover_rule(crossover_raw: Path) -> pd.DataFrame | None:
    """The crossover study's TMA-vs-cp.async crossovers (HBM and L2, best ring), or None."""
    if not (crossover_raw / "stream.csv").exists():
        return None
    import json

    from tma_study.studies.crossover import aggregate as crossover
    stream = pd.read_csv(crossover_raw / "stream.csv")
    ceilings = crossover.best_ceilings(pd.read_csv(crossover_raw / "ceilings.csv"))
    sm_count = json.loads((crossover_raw / "provenance.json").read_text()).get("gpu", {}).get("sm_count")
    table = crossover.crossovers(crossover.best_configurations(stream, ceilings, sm_count))
    return table[(table.alternative == "cp_async") & (table.ring_bytes_per_sm == crossover.ANY_RING)]


BYTES_PER_ELEMENT = {"bf16": 2, "fp8_e4m3": 1}


def rules(speedups: pd.DataFrame, crossover: pd.DataFrame | None, multicast_raw: Path) -> pd.DataFrame:
    """How often the other studies' rules name the GEMM winner.

    Crossover rule: a TMA copy of the GEMM's A tile (tile M x tile K elements) is at least the
    crossover transfer size -> TMA wins; else cp.async. Checked against the same-configuration
    (1x1) TMA vs cp.async comparisons; ties count as neither right nor wrong.
    """
    rows = []
    same = speedups[speedups.compared != "best"] if len(speedups) else speedups
    if crossover is None or crossover.empty:
        rows.append({"rule": "crossover", "status": NOT_MEASURED_TEXT + ": no crossover raw data beside this run"})
    elif same.empty:
        rows.append({"rule": "crossover", "status": NOT_MEASURED_TEXT + ": no TMA/cp.async pair was measured"})
    else:
        for ws in crossover.working_set.unique():
            row = crossover[crossover.working_set == ws].iloc[0]
            threshold = row.crossover_bytes
            tile_m = same.tile.str.split("x").str[0].astype(int)
            tile_k = same.tile.str.split("x").str[2].astype(int)
            transfer = tile_m * tile_k * same.dtype.map(BYTES_PER_ELEMENT)
            predicted = np.where(np.isnan(threshold), "cpasync", np.where(transfer >= threshold, "tma", "cpasync"))
            decided = same.winner != "tie"
            right = (predicted == same.winner) & decided
            rows.append({"rule": "crossover", "status": MEASURED, "crossover_working_set": ws,
                         "crossover_bytes": threshold, "comparisons": len(same),
                         "ties": int((~decided).sum()), "predicted_right": int(right.sum()),
                         "predicted_wrong": int((decided & ~right).sum()),
                         "fraction_right_of_decided": float(right.sum() / decided.sum()) if decided.any() else np.nan})
    if not (multicast_raw / "provenance.json").exists():
        rows.append({"rule": "multicast", "status": NOT_MEASURED_TEXT + ": the multicast study has no data "
                                                     f"at {multicast_raw}"})
    else:  # the multicast study's rule (its derived tables) is not defined yet: say so, do not guess
        rows.append({"rule": "multicast", "status": "NOT COMPARED: multicast data present, its rule is not "
                                                     "yet exported by the multicast study"})
    return pd.DataFrame(rows)


def status_counts(gemm: pd.DataFrame) -> pd.DataFrame:
    return gemm.groupby(["arch", "implementation", "status"]).size().rename("rows").reset_index()


def aggregate(raw_dir: Path, derived_dir: Path, repeat_dir: Path | None = None) -> None:
    raw_dir, derived_dir = Path(raw_dir), Path(derived_dir)
    gemm = pd.read_csv(raw_dir / "gemm.csv")
    measured = with_cublas_fraction(gemm)
    speedups = speedup(measured)
    gains, gain_summary = multicast(measured)
    derived_dir.mkdir(parents=True, exist_ok=True)
    _write(measured, derived_dir / "measured.csv")
    _write(speedups, derived_dir / "speedup.csv")
    _write(gains, derived_dir / "multicast.csv")
    _write(gain_summary, derived_dir / "multicast_summary.csv")
    _write(cublas_fractions(measured), derived_dir / "cublas.csv")
    _write(bar(gemm, measured), derived_dir / "bar.csv")
    _write(rules(speedups, crossover_rule(raw_dir.parent / "crossover"),
                 raw_dir.parent / "multicast"), derived_dir / "rules.csv")
    _write(status_counts(gemm), derived_dir / "status.csv")
