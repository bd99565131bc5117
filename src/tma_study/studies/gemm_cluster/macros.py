"""The gemm_cluster study's numbers for the paper's text (entry point ``macros``).

Names begin ``gemmCluster``. Over the run: its rounds, warm-up, sample time, swizzles and sizes.
From gains.csv at the sizes of the gemm study's finding (LARGE_SIZES, ``...Large``) and over every
size: the median default gain (1x1 at swizzle 1), fair gain (best order against best order) and
the 1x1's tile-order gain, with win counts; per input type and cluster shape (summary.csv) the
median default and fair gains (``gemmClusterFairGainBfTwoByOne``); from rule.csv the share of the
multicast rule's "not faster" predictions that held at each baseline, the lower of its two operand
locations (``gemmClusterRuleHeldPercentBest``).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study import rule_scores
from tma_study.report.numbers import camel, number, percent, ratio

from .aggregate import BASELINES, EVERY_CLUSTER

LARGE_SIZES = (8192, 16384)               # where the gemm study saw clusters win (its multicast.csv)
DTYPE_WORDS = {"bf16": "bf", "fp8_e4m3": "fpeight"}
NUMBER_WORDS = {"1": "one", "2": "two", "4": "four", "8": "eight"}
BASELINE_WORDS = {"default_order": "default", "best_order": "best"}
PREFIX = "gemm cluster"


def _cluster_words(cluster: str) -> str:
    """'2x1' -> 'two by one'."""
    m, n = cluster.split("x")
    return f"{NUMBER_WORDS.get(m, m)} by {NUMBER_WORDS.get(n, n)}"


def _gain_macros(rows: pd.DataFrame, scope: str) -> dict[str, str]:
    out = {}
    for prefix in ("default", "fair", "one_order"):
        if f"{prefix}_gain" not in rows or rows[f"{prefix}_gain"].isna().all():
            continue
        gains, verdicts = rows[f"{prefix}_gain"].dropna(), rows[f"{prefix}_verdict"]
        out[camel(PREFIX, prefix, "gain", scope)] = ratio(gains.median())
        out[camel(PREFIX, prefix, "gain min", scope)] = ratio(gains.min())
        out[camel(PREFIX, prefix, "gain max", scope)] = ratio(gains.max())
        out[camel(PREFIX, prefix, "wins", scope)] = number(int((verdicts == "win").sum()))
        out[camel(PREFIX, prefix, "losses", scope)] = number(int((verdicts == "loss").sum()))
    out[camel(PREFIX, "comparisons", scope)] = number(len(rows))
    share = rows.get("order_share_of_gain", pd.Series(dtype=float)).dropna()
    if len(share):
        out[camel(PREFIX, "order share percent", scope)] = percent(share.median(), 0)
    return out


def macros(derived_dir: Path, provenance: dict) -> dict[str, str]:
    derived_dir = Path(derived_dir)
    config = provenance.get("config", {})
    out = {camel(PREFIX, "rounds"): number(config["rounds"]),
           camel(PREFIX, "warmup s"): number(config["warmup_s"], 0),
           camel(PREFIX, "sample ms"): number(1e3 * float(config["sample_s"]), 0),
           camel(PREFIX, "swizzles"): ", ".join(str(s) for s in config["swizzles"]),
           camel(PREFIX, "sizes"): ", ".join(str(s) for s in sorted(config["sizes"])),
           camel(PREFIX, "large sizes"): " and ".join(str(s) for s in LARGE_SIZES),
           camel(PREFIX, "samples"): number(provenance.get("configurations", 0))}
    gains = pd.read_csv(derived_dir / "gains.csv")
    out.update(_gain_macros(gains, "all"))
    out.update(_gain_macros(gains[gains["size"].isin(LARGE_SIZES)], "large"))
    for r in pd.read_csv(derived_dir / "summary.csv").itertuples():
        words = (DTYPE_WORDS.get(r.dtype, r.dtype), _cluster_words(r.cluster))
        for prefix in ("default", "fair"):
            value = getattr(r, f"{prefix}_gain_median", float("nan"))
            if pd.notna(value):
                out[camel(PREFIX, prefix, "gain", *words)] = ratio(value)
    rule = pd.read_csv(derived_dir / "rule.csv")
    if "baseline" in rule:
        every = rule[rule.scope == EVERY_CLUSTER]
        for baseline in BASELINES:
            rows = every[every.baseline == baseline].dropna(subset=["fraction_not_faster_held"])
            if len(rows):
                lowest = rows.loc[rows.fraction_not_faster_held.idxmin()]
                word = BASELINE_WORDS[baseline]
                out[camel(PREFIX, "rule held percent", word)] = percent(lowest.fraction_not_faster_held, 0)
                out[camel(PREFIX, "rule comparisons", word)] = number(lowest.comparisons)
                out[camel(PREFIX, "rule gemm wins", word)] = number(lowest.gemm_wins)
    if "fair_verdict_interval" in gains:
        for verdict, word in (("win", "wins"), ("tie", "ties"), ("loss", "losses")):
            out[camel(PREFIX, "fair interval", word, "all")] = number((gains.fair_verdict_interval == verdict).sum())
        out[camel(PREFIX, "fair interval changed all")] = number((gains.fair_verdict_interval != gains.fair_verdict).sum())
    if (derived_dir / "rule_baselines.csv").is_file():
        out |= rule_scores.macros(pd.read_csv(derived_dir / "rule_baselines.csv"), "gemmClusterRuleVsBaselines",
                                  baseline="best_order", working_set="hbm")
    return out
