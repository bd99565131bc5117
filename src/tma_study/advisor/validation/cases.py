"""One table for every validation case: the operand, what was measured, and who won.

A case compares TMA (``tma_time_us``) with one alternative (``alternative``: cp_async or
plain_loads, ``alternative_time_us``), each at its best measured configuration. ``ratio`` is
TMA's time over the alternative's, ``ratio_low``/``ratio_high`` its 95 % interval and
``interval_method`` how that was found: a bootstrap over paired samples where the study kept
its samples, else a normal approximation from each median's quartiles and sample count. The
winner is TMA where the whole interval lies below 1, the alternative where it lies above, else
a tie.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

OPERAND_COLUMNS = ("level", "shape", "box_dims", "element_bytes", "row_bytes", "bytes_per_transfer",
                   "bytes_in_flight_per_sm", "pattern", "cluster_sharing", "consumer", "mma_dtype", "mma_tile",
                   "flops_per_byte")
COLUMNS = ("set", "family", "case", *OPERAND_COLUMNS, "alternative", "tma_time_us", "alternative_time_us",
           "ratio", "ratio_low", "ratio_high", "interval_method", "winner", "fa3_load_path")
TMA, TIE = "tma", "tie"
Z95 = 1.959963984540054
QUARTILES = "normal approximation from each median's quartiles and sample count"
# The standard error of a sample median, from the interquartile range of n samples of a normal
# distribution: sigma = IQR / 1.349, se(median) = 1.2533 sigma / sqrt(n).
IQR_PER_SIGMA, MEDIAN_SE_FACTOR = 1.349, 1.2533


def median_se(iqr: float, samples: float) -> float:
    if not samples or samples < 2 or not np.isfinite(iqr):
        return float("nan")
    return MEDIAN_SE_FACTOR * (iqr / IQR_PER_SIGMA) / math.sqrt(samples)


def quartile_interval(t_a: float, iqr_a: float, n_a: float, t_b: float, iqr_b: float, n_b: float) -> tuple:
    """95 % interval of t_a / t_b from each median's standard error (delta method on the log)."""
    se = math.hypot(median_se(iqr_a, n_a) / t_a, median_se(iqr_b, n_b) / t_b)
    ratio = t_a / t_b
    if not np.isfinite(se):
        return ratio, ratio
    return ratio * math.exp(-Z95 * se), ratio * math.exp(Z95 * se)


def winner(low: float, high: float, alternative: str) -> str:
    return TMA if high < 1 else alternative if low > 1 else TIE


def finish(frame: pd.DataFrame) -> pd.DataFrame:
    """The case table in COLUMNS order, with ``winner`` from each interval."""
    frame = frame.copy()
    for column in COLUMNS:
        if column not in frame:
            frame[column] = np.nan if column not in ("fa3_load_path", "box_dims", "mma_tile") else ""
    frame["winner"] = [winner(lo, hi, alt) for lo, hi, alt in zip(frame.ratio_low, frame.ratio_high,
                                                                     frame.alternative)]
    return frame[list(COLUMNS)].reset_index(drop=True)


def operand_spec(row) -> dict:
    """The advisor's operand fields of one case row (a dict or a namedtuple-like)."""
    get = row.get if isinstance(row, dict) else lambda k, d=None: getattr(row, k, d)
    spec = {}
    for column in OPERAND_COLUMNS:
        value = get(column)
        if value is None or (isinstance(value, float) and math.isnan(value)) or value == "":
            continue
        if column == "box_dims":
            value = [int(v) for v in str(value).split("x")]
        elif column in ("element_bytes", "row_bytes", "bytes_per_transfer", "bytes_in_flight_per_sm",
                        "cluster_sharing"):
            value = int(value)
        elif column == "flops_per_byte":
            value = float(value)
        spec[column] = value
    if spec.get("shape") in ("box", "gather"):
        spec.pop("bytes_per_transfer", None)
    if spec.get("consumer") != "compute":
        spec.pop("flops_per_byte", None)
    return spec
