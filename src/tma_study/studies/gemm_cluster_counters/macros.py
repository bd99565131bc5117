"""The gemm_cluster_counters study's numbers for the paper's text (entry point ``macros``).

Names begin ``gemmClusterCounters``. Per input type (``Bf``, ``Fpeight``) and family at the best
order, for the 1x1 and each cluster of two: cycles per k-block, L2 reads per operand byte, L2
requests per SM cycle and the L2, tag and tensor shares (``...CyclesPerKblockFpeightPingpongSmallOneByOne``);
per input type the lowest and highest tensor and tag shares over every variant
(``...TensorActivePctBfMin``); from rule.csv the rule's agreement with the GEMM per size and over all (``...RuleAgreePercentAll``).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study import rule_scores
from tma_study.report.numbers import camel, number

from .aggregate import EVERY_SIZE, TAG_BOUND_PCT, TENSOR_IDLE_PCT

PREFIX = "gemm cluster counters"
DTYPE_WORDS = {"bf16": "bf", "fp8_e4m3": "fpeight"}
FAMILY_WORDS = {"tma_cooperative_t128x128x64": "cooperative small", "tma_pingpong_t128x128x64": "pingpong small",
                "tma_cooperative_t128x256x64": "cooperative wide"}
CLUSTER_WORDS = {"1x1": "one by one", "1x2": "one by two", "2x1": "two by one", "2x2": "two by two"}
QUANTITIES = {"tflops": 0, "cycles_per_kblock": 0, "l2_reads_per_operand_byte": 2, "l2_read_tbps": 1,
              "l2_requests_per_sm_cycle": 2, "bytes_per_l2_request": 0, "l2_throughput_pct": 0,
              "l2_tag_requests_pct": 0, "tensor_active_pct": 0, "dram_reads_per_operand_byte": 2}


def macros(derived_dir: Path, provenance: dict) -> dict[str, str]:
    counters = pd.read_csv(Path(derived_dir) / "counters.csv")
    out = {camel(PREFIX, "size"): number(provenance.get("config", {}).get("size", 0)),
           camel(PREFIX, "configurations"): number(len(counters)),
           camel(PREFIX, "ncu version"): str(provenance.get("ncu_version", "")).replace("_", " ")}
    for r in counters[counters.order == "best"].itertuples():
        words = (DTYPE_WORDS.get(r.dtype, r.dtype), FAMILY_WORDS.get(r.family, r.family),
                 CLUSTER_WORDS.get(r.cluster, r.cluster))
        for quantity, digits in QUANTITIES.items():
            value = getattr(r, quantity)
            if pd.notna(value):
                out[camel(PREFIX, quantity.replace("_", " "), *words)] = number(value, digits)
    best = counters[counters.order == "best"]
    for dtype, rows in best.groupby("dtype"):
        word = DTYPE_WORDS.get(dtype, dtype)
        for quantity in ("tensor_active_pct", "l2_tag_requests_pct"):
            values = rows[quantity].dropna()
            if len(values):
                out[camel(PREFIX, quantity.replace("_", " "), word, "min")] = number(values.min(), 1)
                out[camel(PREFIX, quantity.replace("_", " "), word, "max")] = number(values.max(), 1)
    rule = pd.read_csv(Path(derived_dir) / "rule.csv")
    out[camel(PREFIX, "tag bound percent")] = number(TAG_BOUND_PCT, 0)
    out[camel(PREFIX, "tensor idle percent")] = number(TENSOR_IDLE_PCT, 0)
    for r in rule[rule.status == "measured"].itertuples():
        scope = "all" if r.scope == EVERY_SIZE else r.scope
        out[camel(PREFIX, "rule agree percent", scope)] = number(100 * r.fraction_agree, 0)
        out[camel(PREFIX, "rule comparisons", scope)] = number(r.comparisons)
        out[camel(PREFIX, "rule gemm wins", scope)] = number(r.gemm_wins)
        out[camel(PREFIX, "rule gemm wins predicted", scope)] = number(r.gemm_wins_predicted)
        out[camel(PREFIX, "rule predicted wins", scope)] = number(r.predicted_wins)
    baselines = Path(derived_dir) / "rule_baselines.csv"
    if baselines.is_file():
        scores = pd.read_csv(baselines)
        out |= rule_scores.macros(scores, "gemmClusterCountersRuleVsBaselines", rule="counters", scope=EVERY_SIZE)
        out |= rule_scores.macros(scores, "gemmClusterCountersCrossValidated", rule="counters_cross_validated",
                                  scope=EVERY_SIZE)
    return out
