"""The cluster_launch study's numbers for the paper's text (entry point ``macros``).

Names: ``clusterLaunch<What>Cluster<n>Ctas<k>Fit<f>`` per cluster size n and occupancy setting
(k CTAs per SM the grid is sized for, f of its shape fit an SM), digits spelled out, e.g.
``clusterLaunchEmptyOverheadUsClusterEightCtasTwoFitThree``; and a few over the whole run.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.report.numbers import camel, number, percent, ratio


ONES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
        "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen")
TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")


def spelled(n: int) -> str:
    """16 -> 'sixteen', 24 -> 'twenty four' (0 .. 99): macro names hold no digits."""
    n = int(n)
    if not 0 <= n < 100:
        raise ValueError(f"{n} is outside 0..99")
    return ONES[n] if n < 20 else " ".join(filter(None, (TENS[n // 10], ONES[n % 10] if n % 10 else "")))


def setting_words(n: int, ctas: int, fit: int) -> tuple[str, ...]:
    return (f"cluster {spelled(n)}", f"ctas {spelled(ctas)}", f"fit {spelled(fit)}")


def macros(derived_dir: Path, provenance: dict) -> dict[str, str]:
    derived_dir = Path(derived_dir)
    out = {camel("cluster launch", "configurations"): number(provenance.get("configurations", float("nan")))}
    launch = pd.read_csv(derived_dir / "launch.csv")
    clustered = launch[launch.launch == "cluster"]
    longest = int(launch.spin_ns.max())
    for r in clustered.itertuples():
        words = setting_words(int(r.cluster_size), int(r.ctas_per_sm), int(r.ctas_per_sm_fit))
        if r.spin_ns == 0:
            out[camel("cluster launch", "empty overhead us", *words)] = number(r.overhead_us, 2)
            out[camel("cluster launch", "empty slowdown", *words)] = ratio(r.slowdown)
        elif r.spin_ns == longest:
            out[camel("cluster launch", "spin slowdown", *words)] = ratio(r.slowdown)
            out[camel("cluster launch", "waves", *words)] = number(r.waves)
            out[camel("cluster launch", "idle sms", *words)] = number(r.sms_idle)
            out[camel("cluster launch", "max concurrent", *words)] = number(r.max_concurrent_on_one_sm)
    empty = clustered[clustered.spin_ns == 0]
    if len(empty):
        out[camel("cluster launch", "empty overhead max us")] = number(empty.overhead_us.max(), 2)
        out[camel("cluster launch", "empty slowdown max")] = ratio(empty.slowdown.max())
    out[camel("cluster launch", "longest spin us")] = number(longest / 1e3)
    gpcs = pd.read_csv(derived_dir / "gpcs.csv")
    out[camel("cluster launch", "inferred gpcs")] = number(len(gpcs))
    out[camel("cluster launch", "gpc sizes")] = ", ".join(str(s) for s in sorted(gpcs.sm_count, reverse=True))
    fit = pd.read_csv(derived_dir / "cluster_fit.csv")
    out[camel("cluster launch", "fit matches")] = number(int(fit.prediction_matches.sum()))
    out[camel("cluster launch", "fit settings")] = number(len(fit))
    placement = pd.read_csv(derived_dir / "placement.csv")
    steps = placement.timer_step_ns.dropna()
    if len(steps):
        out[camel("cluster launch", "timer step ns")] = number(steps.median())
    partners = pd.read_csv(derived_dir / "partners.csv").set_index("pattern").same_tpc_share
    out[camel("cluster launch", "pair same tpc percent min")] = percent(partners.loc[["pair"]].min(), 0)
    out[camel("cluster launch", "ring same tpc percent max")] = percent(partners.loc[["ring"]].max(), 0)
    return out
