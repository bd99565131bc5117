"""The dsm study's numbers for the paper's text (entry point ``macros``)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.report.numbers import camel, number, size

from .aggregate import with_pattern

SIZE_WORDS = {2: "two", 4: "four", 8: "eight", 16: "sixteen"}
NOT_MEASURED = "n/a"


def macros(derived_dir: Path, provenance: dict) -> dict[str, str]:
    derived_dir = Path(derived_dir)
    out = {}
    latency = pd.read_csv(derived_dir / "latency.csv")
    remote = latency[(latency.path == "ld.shared::cluster") & (latency.target.astype(str) != "0")]
    local = latency[latency.target.astype(str) == "local_lds"]
    if len(remote) and len(local):
        out[camel("dsm", "remote latency min cycles")] = number(remote.cycles_per_hop_median.min())
        out[camel("dsm", "remote latency max cycles")] = number(remote.cycles_per_hop_median.max())
        out[camel("dsm", "local latency cycles")] = number(local.cycles_per_hop_median.median())
    bandwidth = with_pattern(pd.read_csv(derived_dir / "bandwidth.csv"))
    for r in bandwidth[bandwidth.path == "remote"].itertuples():
        # the ring keeps the names it had before the pair pattern was measured beside it
        prefix = "" if r.pattern == "ring" else str(r.pattern)
        words = SIZE_WORDS[int(r.cluster_size)]
        out[camel("dsm", prefix, "read gbps cluster", words)] = number(r.gbps)
        out[camel("dsm", prefix, "read bytes per cycle cluster", words)] = number(r.bytes_per_sm_cycle, 1)
        if "gbps_per_resident_cta" in bandwidth:
            out[camel("dsm", prefix, "read gbps per cta cluster", words)] = number(r.gbps_per_resident_cta, 1)
            out[camel("dsm", prefix, "resident ctas cluster", words)] = number(r.grid_ctas)
        if r.cluster_size != 2 and not pd.isna(r.fraction_of_cluster_two):
            out[camel("dsm", prefix, "read drop percent from two cluster", words)] = number(
                100 * (1 - r.fraction_of_cluster_two))
    for prefix in ("", "pair"):             # a run without the pair pattern: its names say so
        for n, words in SIZE_WORDS.items():
            out.setdefault(camel("dsm", prefix, "read gbps cluster", words), NOT_MEASURED)
            out.setdefault(camel("dsm", prefix, "read bytes per cycle cluster", words), NOT_MEASURED)
            out.setdefault(camel("dsm", prefix, "read gbps per cta cluster", words), NOT_MEASURED)
            out.setdefault(camel("dsm", prefix, "resident ctas cluster", words), NOT_MEASURED)
            if n != 2:
                out.setdefault(camel("dsm", prefix, "read drop percent from two cluster", words), NOT_MEASURED)
    winners = pd.read_csv(derived_dir / "winners.csv")
    largest = winners[winners.cluster_size == winners.cluster_size.max()]
    if len(largest):
        out[camel("dsm", "multicast gbps largest cluster")] = number(largest.multicast_gbps.max())
        out[camel("dsm", "pull gbps largest cluster")] = number(largest.dsm_pull_gbps.max())
    multicast_only = winners.groupby("cluster_size").winner.apply(lambda w: (w == "multicast").all())
    if multicast_only.any():        # the smallest cluster size from which multicast wins at every tile
        start = int(min(size for size, every in multicast_only.items() if every and multicast_only[size:].all()))
        wins = winners[winners.cluster_size >= start]
        out[camel("dsm", "multicast wins from")] = number(start)
        out[camel("dsm", "multicast min margin from")] = number(wins.margin.min(), 2)
        out[camel("dsm", "multicast median margin from")] = number(wins.margin.median(), 2)
    beaten = winners[winners.winner != "multicast"]
    out[camel("dsm", "when multicast loses")] = (
        f"only with clusters of at most {int(beaten.cluster_size.max())} CTAs and tiles of at most "
        f"{size(beaten.tile_bytes.max())}" if len(beaten) else "at no cluster size or tile size")
    out[camel("dsm", "configurations")] = number(provenance.get("configurations", float("nan")))
    return out
