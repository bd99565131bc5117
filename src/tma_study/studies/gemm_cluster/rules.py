"""The gemm_cluster study's rule of thumb (entry point ``rules``), computed from gains.csv and
tile_order.csv: how much of a cluster's GEMM gain is tile order, and where multicast still wins
once the cluster-free sibling runs its best tile order. A row is a rule only while the claims it
names PASS."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

WIN, LOSS = "win", "loss"       # aggregate.py's verdicts (a tie: anything else)

CLAIMS = ("gemm_cluster_tile_order_lifts_1x1", "gemm_cluster_gains_only_for_small_fp8_tiles")
DTYPE_TEXT = {"bf16": "bf16", "fp8_e4m3": "fp8"}


def _tally(verdicts: pd.Series) -> str:
    return f"{(verdicts == WIN).sum()}/{(~verdicts.isin([WIN, LOSS])).sum()}/{(verdicts == LOSS).sum()}"


def _groups(rows: pd.DataFrame) -> str:
    """'fp8 tma_pingpong 128x128x64 1x2, ...' for the (dtype, family, cluster) groups of ``rows``."""
    keys = rows.drop_duplicates(["dtype", "mainloop", "tile", "cluster"])
    return ", ".join(f"{DTYPE_TEXT.get(r.dtype, r.dtype)} {r.mainloop} {r.tile} {r.cluster}" for r in keys.itertuples())


def rules_of_thumb(derived_dir: Path, provenance: dict) -> list[dict]:
    gains = pd.read_csv(Path(derived_dir) / "gains.csv")
    order = pd.read_csv(Path(derived_dir) / "tile_order.csv")
    if gains.empty:
        return []
    largest = sorted(gains["size"].unique())[-2:]
    ones = order[(order.cluster == "1x1") & order["size"].isin(largest)]
    wins = gains[gains.fair_verdict == WIN]
    pairs = gains[gains.cluster != "2x2"]
    rule = (f"give the cluster-free GEMM its best tile order (scheduler swizzle) before crediting multicast: "
            f"against it a cluster won {len(wins)} of {len(gains)} comparisons"
            + (f", only for {_groups(wins)}" if len(wins) else "")
            + f"; 2x2 clusters lost {(gains[gains.cluster == '2x2'].fair_verdict == LOSS).sum()} of "
              f"{(gains.cluster == '2x2').sum()}")
    evidence = (f"sizes {', '.join(str(s) for s in sorted(gains['size'].unique()))} (M = N = K), bf16 and fp8, "
                f"round-robin in one power state; 1x1 best order over the default at {' and '.join(map(str, largest))}: "
                f"median {ones.order_gain.median():.2f}; cluster over 1x1 (W/T/L): default order "
                f"{_tally(gains.default_verdict)} (median {gains.default_gain.median():.2f}), each at its best order "
                f"{_tally(gains.fair_verdict)} (median {gains.fair_gain.median():.2f}; clusters of two: "
                f"median {pairs.fair_gain.median():.2f})")
    return [{"situation": "a TMA GEMM: launch with a thread-block cluster (multicast A and B tiles) or without",
             "rule": rule, "evidence": evidence, "figure": "gemm_cluster_gains", "claims": CLAIMS}]
