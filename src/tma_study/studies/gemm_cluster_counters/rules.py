"""The gemm_cluster_counters study's rule of thumb (entry point ``rules``), from counters.csv and
rule.csv: when a TMA GEMM's cluster (multicast) pays, read from the cluster-free kernel's counters.
A row is a rule only while the claims it names PASS."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from .aggregate import EVERY_SIZE

CLAIMS = ("gemm_cluster_counters_small_fp8_tile_is_l2_request_bound", "gemm_cluster_counters_bf16_is_tensor_bound",
          "gemm_cluster_counters_rule_names_every_gemm_win")


def rules_of_thumb(derived_dir: Path, provenance: dict) -> list[dict]:
    rule = pd.read_csv(Path(derived_dir) / "rule.csv")
    counters = pd.read_csv(Path(derived_dir) / "counters.csv")
    every = rule[(rule.scope == EVERY_SIZE) & (rule.status == "measured")]
    if every.empty:
        return []
    every = every.iloc[0]
    one = counters[(counters.order == "best") & (counters.cluster == "1x1")]
    shown = "; ".join(f"{r.dtype} {r.family}: tag {r.l2_tag_requests_pct:.0f} %, tensor {r.tensor_active_pct:.0f} %, "
                      f"{r.bytes_per_l2_request:.0f} B per request" for r in one.itertuples())
    bound = (f"L2-request bound - L2 tag lookups at {every.tag_bound_pct:.0f} % of peak or more with the tensor pipe busy "
             f"{every.tensor_idle_pct:.0f} % or less (here: fp8 tiles whose 64-element k-block makes 64-byte requests, with "
             "the 128 x 128 tile)")
    scores = _rule_row(Path(derived_dir))
    predictive = scores is None or bool(scores.predictive)
    text = (f"launch with a cluster of two (multicast) where the cluster-free kernel is {bound}; where the tensor pipe "
            "is already busy (every bf16 tile) a cluster cannot pay" if predictive else
            f"look for a cluster's gain only where the cluster-free kernel is {bound}, and measure it there: as a "
            "prediction the rule is right no more often than 'clusters never win'; where the tensor pipe is already "
            "busy (every bf16 tile) a cluster cannot pay")
    evidence = (f"Nsight Compute counters at M = N = K = {provenance.get('config', {}).get('size', '?')}, each 1x1 at its "
                f"best tile order: {shown}; against the GEMM's fair verdicts at every size: names "
                f"{every.gemm_wins_predicted} of {every.gemm_wins} wins, agrees with {every.agree} of "
                f"{every.comparisons} comparisons")
    if scores is not None:
        evidence += (f"; {'predictive' if scores.predictive else 'not predictive'}: right in {100 * scores.share:.0f} % "
                     f"[{100 * scores.share_low:.0f}, {100 * scores.share_high:.0f}], "
                     f"{scores.best_baseline.replace('_', ' ')} in {100 * scores.baseline_share:.0f} %, a margin of "
                     f"{100 * scores.over_best_baseline:+.0f} points [{100 * scores.over_best_low:+.0f}, "
                     f"{100 * scores.over_best_high:+.0f}]")
    return [{"situation": "a TMA GEMM: launch with a thread-block cluster (multicast A and B tiles) or without",
             "rule": text, "evidence": evidence, "figure": "gemm_cluster_counters", "claims": CLAIMS}]


def _rule_row(derived_dir: Path):
    """The registered rule's row over every size in rule_baselines.csv, with its best baseline's share."""
    path = derived_dir / "rule_baselines.csv"
    if not path.is_file():
        return None
    scores = pd.read_csv(path)
    rows = scores[(scores.rule == "counters") & (scores.scope == EVERY_SIZE) & (scores.role == "rule")]
    if rows.empty:
        return None
    row = rows.iloc[0].copy()
    best = scores[(scores.rule == "counters") & (scores.scope == EVERY_SIZE) & (scores.policy == row.best_baseline)]
    row["baseline_share"] = float(best.share.iloc[0])
    return row
