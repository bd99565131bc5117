"""The dsm study's rules of thumb (entry point ``rules``), computed from derived data."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.report.tables import human_bytes

LABELS = {"multicast": "TMA multicast", "dsm_pull": "a DSM pull", "dsm_push": "a DSM push"}


def _broadcast_rule(winners: pd.DataFrame) -> dict | None:
    if winners.empty:
        return None
    not_multicast = winners[winners.winner != "multicast"]
    if not_multicast.empty:
        rule = "broadcast with TMA multicast at every cluster size and tile"
    else:
        largest_n = int(not_multicast.cluster_size.max())
        largest_tile = int(not_multicast.tile_bytes.max())
        others = " or ".join(sorted({LABELS[w] for w in not_multicast.winner}))
        rule = (f"broadcast with TMA multicast; only at clusters of {largest_n} or fewer with tiles up to "
                f"{human_bytes(largest_tile)} is {others} faster")
    big = winners[winners.cluster_size == winners.cluster_size.max()]
    evidence = (f"cluster {int(big.cluster_size.iloc[0])}: multicast {big.multicast_gbps.max():.0f} GB/s delivered vs "
                f"DSM pull {big.dsm_pull_gbps.max():.0f}, push {big.dsm_push_gbps.max():.0f} (one CTA feeds all "
                "the others over the SM-to-SM network)")
    return {"situation": "giving every CTA of a cluster the same tile", "rule": rule, "evidence": evidence,
            "figure": "dsm_broadcast", "claims": ("dsm_multicast_wins_from_four_ctas",)}


def _primitive_rule(latency: pd.DataFrame, bandwidth: pd.DataFrame) -> dict | None:
    remote = latency[latency.path == "ld.shared::cluster"]
    remote = remote[remote.target.astype(str) != "0"]
    local = latency[latency.target.astype(str) == "local_lds"]
    reads = bandwidth[bandwidth.path == "remote"]
    if remote.empty or local.empty or reads.empty:
        return None
    return {"situation": "exchanging data between CTAs through DSM",
            "rule": "use DSM for small, latency-tolerant exchanges (reductions, handshakes), not to stream tiles",
            "evidence": (f"remote load {remote.cycles_per_hop_median.min():.0f}-{remote.cycles_per_hop_median.max():.0f} "
                         f"cycles vs {local.cycles_per_hop_median.median():.0f} local; neighbour reads "
                         f"{reads.bytes_per_sm_cycle.max():.1f} B/cycle per SM at best"),
            "figure": "dsm_primitives",
            "claims": ("dsm_remote_load_latency", "dsm_remote_load_at_least_five_times_local",
                       "dsm_bandwidth_falls_beyond_two")}


def rules_of_thumb(derived_dir: Path, provenance: dict) -> list[dict]:
    derived_dir = Path(derived_dir)
    rows = [_broadcast_rule(pd.read_csv(derived_dir / "winners.csv")),
            _primitive_rule(pd.read_csv(derived_dir / "latency.csv"), pd.read_csv(derived_dir / "bandwidth.csv"))]
    return [row for row in rows if row is not None]
