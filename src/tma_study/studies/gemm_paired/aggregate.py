"""Derived tables of the gemm_paired study (results/<gpu>/gemm_paired/derived/*.csv), from samples.csv.

- ``pairs.csv``   one row per pair: cuBLAS's and the candidate's time, clock and power, and the
                  paired ratio ``fraction_of_cublas`` = cuBLAS time / candidate time (the
                  candidate's TFLOP/s over cuBLAS's in the same power state)
- ``ratios.csv``  per (state, candidate): the paired ratios' median, quartiles, min and max, each
                  side's median TFLOP/s, SM clock and power, whether the median clears the bar, and
                  the ratio warm against warm (each side where it ran second: ``warm``) with its
                  bootstrap interval
- ``bar.csv``     per state: the candidate with the highest median paired ratio (the bar's "best
                  SM90 TMA variant"), its ratios' spread and whether it clears the bar
- ``states.csv``  per state: cuBLAS's median TFLOP/s, SM clock, power and temperature, and its
                  clock and TFLOP/s over the sustained state's (how different the two states are)
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from tma_study.bootstrap import median_ratio_interval
from tma_study.gemm_lib.rows import BAR_FRACTION, short_variant
from tma_study.harness import raw_data

from . import STUDY

PAIR_KEY = ["state", "candidate", "pair"]
SIDE_COLUMNS = ["time_us", "tflops", "sm_clock_mhz_mean", "power_w_mean", "temperature_c", "power_capped"]
SUSTAINED = "sustained"


def pairs(samples: pd.DataFrame) -> pd.DataFrame:
    """One row per pair: each side's columns (prefix cublas_ / candidate_) and the paired ratios."""
    sides = {}
    for implementation, prefix in (("cublas", "cublas_"), ("cutlass", "candidate_")):
        side = samples[samples.implementation == implementation].set_index(PAIR_KEY)
        sides[prefix] = side[SIDE_COLUMNS + ["position"]].add_prefix(prefix)
    out = sides["cublas_"].join(sides["candidate_"], how="inner").reset_index()
    out["candidate_first"] = out.candidate_position == 0
    out["fraction_of_cublas"] = out.cublas_time_us / out.candidate_time_us
    out["clock_ratio"] = out.candidate_sm_clock_mhz_mean / out.cublas_sm_clock_mhz_mean
    return out.drop(columns=["cublas_position", "candidate_position"]).sort_values(PAIR_KEY).reset_index(drop=True)


def _spread(values: pd.Series, prefix: str) -> dict:
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return {f"{prefix}_median": median, f"{prefix}_q1": q1, f"{prefix}_q3": q3, f"{prefix}_min": values.min(),
            f"{prefix}_max": values.max(), f"{prefix}_relative_iqr": (q3 - q1) / median}


def abba(group: pd.DataFrame) -> pd.Series:
    """Geometric means of consecutive pairs (0 and 1, 2 and 3, ...): one opened by cuBLAS, one by
    the candidate, so an advantage of the first slot cancels. This is the bar's estimator: in the
    H200 bursts the kernel that ran first in a pair was about 9 % faster, whichever it was."""
    ordered = group.sort_values("pair")
    both = ordered.groupby(ordered.pair // 2).fraction_of_cublas
    return np.sqrt(both.prod())[both.size() == 2]


def warm(group: pd.DataFrame) -> tuple[float, float, float]:
    """Warm against warm: per consecutive pair of pairs, cuBLAS's time where it ran second over the
    candidate's where it ran second (neither opens its pair); (median, bootstrap 95 % interval)."""
    ordered = group.sort_values("pair")
    key = ordered.pair // 2
    cublas = ordered[ordered.candidate_first].set_index(key[ordered.candidate_first]).cublas_time_us
    candidate = ordered[~ordered.candidate_first].set_index(key[~ordered.candidate_first]).candidate_time_us
    both = pd.concat([cublas, candidate], axis=1, keys=["cublas", "candidate"]).dropna()
    if both.empty:
        return np.nan, np.nan, np.nan
    return median_ratio_interval(both.cublas.to_numpy(), both.candidate.to_numpy())


def ratios(paired: pd.DataFrame) -> pd.DataFrame:
    """Per (state, candidate): the paired ratios' spread and each side's medians."""
    rows = []
    for (state, candidate), group in paired.groupby(["state", "candidate"], sort=True):
        rows.append({"state": state, "candidate": candidate, "variant": short_variant(candidate), "pairs": len(group),
                     **_spread(group.fraction_of_cublas, "fraction_of_cublas"),
                     **_spread(abba(group), "abba"),
                     "passes": bool(abba(group).median() >= BAR_FRACTION),
                     **dict(zip(("warm_median", "warm_low", "warm_high"), warm(group))),
                     "required_fraction": BAR_FRACTION,
                     "candidate_first_median": group[group.candidate_first].fraction_of_cublas.median(),
                     # each side's TFLOP/s where it opened its pair and where it ran second
                     "candidate_tflops_first": group[group.candidate_first].candidate_tflops.median(),
                     "candidate_tflops_second": group[~group.candidate_first].candidate_tflops.median(),
                     "cublas_tflops_first": group[~group.candidate_first].cublas_tflops.median(),
                     "cublas_tflops_second": group[group.candidate_first].cublas_tflops.median(),
                     "cublas_first_median": group[~group.candidate_first].fraction_of_cublas.median(),
                     **{f"{side}_{c}_median": group[f"{side}_{c}"].median()
                        for side in ("candidate", "cublas")
                        for c in ("tflops", "sm_clock_mhz_mean", "power_w_mean")},
                     "clock_ratio_median": group.clock_ratio.median(),
                     "power_capped_fraction": float(pd.concat([group.candidate_power_capped,
                                                               group.cublas_power_capped]).mean())})
    return pd.DataFrame(rows)


def bar(ratio_rows: pd.DataFrame) -> pd.DataFrame:
    """Per state, the candidate with the highest median ABBA ratio, and how many candidates there were."""
    best = ratio_rows.loc[ratio_rows.groupby("state").abba_median.idxmax()].copy()
    best["candidates"] = best.state.map(ratio_rows.groupby("state").size())
    return best.reset_index(drop=True)


def states(samples: pd.DataFrame) -> pd.DataFrame:
    """Per state, cuBLAS's medians, and its clock and TFLOP/s over the sustained state's."""
    cublas = samples[samples.implementation == "cublas"]
    rows = [{"state": state, "cublas_samples": len(group), "cublas_tflops_median": group.tflops.median(),
             "cublas_sm_clock_mhz_median": group.sm_clock_mhz_mean.median(),
             "cublas_power_w_median": group.power_w_mean.median(),
             "temperature_c_max": samples[samples.state == state].temperature_c.max(),
             "power_capped_fraction": float(samples[samples.state == state].power_capped.mean()),
             "cooldown_s": group.cooldown_s.max(), "launches_per_sample": int(group.launches.max())}
            for state, group in cublas.groupby("state", sort=True)]
    out = pd.DataFrame(rows)
    sustained = out[out.state == SUSTAINED]
    if len(sustained):
        base = sustained.iloc[0]
        out["cublas_clock_over_sustained"] = out.cublas_sm_clock_mhz_median / base.cublas_sm_clock_mhz_median
        out["cublas_tflops_over_sustained"] = out.cublas_tflops_median / base.cublas_tflops_median
    return out


def aggregate(raw_dir: Path, derived_dir: Path, repeat_dir: Path | None = None) -> None:
    raw = raw_data.load(STUDY, Path(raw_dir))       # checked before anything is written
    samples = raw["samples.csv"]
    paired = pairs(samples)
    ratio_rows = ratios(paired)
    derived_dir = Path(derived_dir)
    derived_dir.mkdir(parents=True, exist_ok=True)
    paired.to_csv(derived_dir / "pairs.csv", index=False)
    ratio_rows.to_csv(derived_dir / "ratios.csv", index=False)
    bar(ratio_rows).to_csv(derived_dir / "bar.csv", index=False)
    states(samples).to_csv(derived_dir / "states.csv", index=False)
