"""Bootstrap intervals shared by every score of a rule: the advisor's validation and the studies'
rules scored beside their trivial baselines (``tma_study.rule_scores``).

Cases are resampled with replacement, BOOTSTRAP_RESAMPLES times, from one fixed seed, so every
output is the same bytes run to run; an interval is the central CONFIDENCE share of the resampled
statistic. Two policies scored on the same cases are compared on the same resamples (paired).
"""
from __future__ import annotations

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE = 0.95
SEED = 20261205


def resamples(n: int, seed: int = SEED) -> np.ndarray:
    """(BOOTSTRAP_RESAMPLES, n) case indices, drawn with replacement."""
    return np.random.default_rng(seed).integers(0, n, size=(BOOTSTRAP_RESAMPLES, n))


def interval(values: np.ndarray) -> tuple[float, float]:
    """The central CONFIDENCE interval of resampled values."""
    tail = (1 - CONFIDENCE) / 2
    return float(np.quantile(values, tail)), float(np.quantile(values, 1 - tail))


def median_ratio_interval(numerator: np.ndarray, denominator: np.ndarray,
                          seed: int = SEED) -> tuple[float, float, float]:
    """(median, low, high) of the per-pair ratio numerator / denominator, pairs resampled."""
    ratio = np.asarray(numerator, float) / np.asarray(denominator, float)
    medians = np.median(ratio[resamples(len(ratio), seed)], axis=1)
    return (float(np.median(ratio)), *interval(medians))


def interval_verdict(low: float, high: float, tolerance: float = 0.0) -> str:
    """win | tie | loss of a gain (a time ratio, the other's time over this one's) from its interval:
    a tie where the interval contains 1 or lies inside 1 +- tolerance, else a win above, a loss below."""
    if low <= 1.0 <= high or (1.0 - tolerance <= low and high <= 1.0 + tolerance):
        return "tie"
    return "win" if low > 1.0 else "loss"
