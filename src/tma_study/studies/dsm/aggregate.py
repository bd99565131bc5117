"""Aggregate the dsm study's raw data (CPU only).

Writes into ``derived_dir``:
- ``best.csv``       per (working set, cluster size, variant, tile): the fastest configuration
                     over stages, CTAs per SM and consumers, with delivered GB/s (bytes landing
                     in the shared memory of all CTAs) and what moved where per delivered byte
- ``winners.csv``    per (working set, cluster size, tile): the fastest variant, the runner-up
                     and the margin; ``tie`` when within the measured spread
- ``latency.csv``    per cluster size and target: cycles per dependent load (median of repeats)
                     and the same in ns at the SM clock the bandwidth runs recorded
- ``bandwidth.csv``  per path, read pattern (own, ring, pair) and cluster size: the best DSM read
                     bandwidth over CTAs per SM and threads, per SM, in bytes per SM cycle and as a
                     fraction of the same pattern's bandwidth with clusters of 2
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.harness import raw_data
from tma_study.atomic import atomic_write_text

from . import STUDY

GROUP = ["working_set", "cluster_size", "variant", "tile_bytes"]
MIN_TOLERANCE = 0.01
# Per delivered byte of an n-CTA broadcast: bytes read from L2 and bytes over the SM-to-SM network
L2_BYTES_PER_DELIVERED = {"multicast": "1/n", "dsm_pull": "1/n", "dsm_push": "1/n"}
SM_NETWORK_BYTES_PER_DELIVERED = {"multicast": "0 (L2 -> SMs, replicated on the way)",
                                  "dsm_pull": "(n-1)/n (peers read the leader)",
                                  "dsm_push": "(n-1)/n (the leader writes the peers)"}


def _write(frame: pd.DataFrame, path: Path) -> None:
    atomic_write_text(path, frame.to_csv(index=False))


def best_configurations(broadcast: pd.DataFrame) -> pd.DataFrame:
    frame = broadcast.assign(relative_iqr=broadcast.time_us_iqr / broadcast.time_us_median)
    best = frame.loc[frame.groupby(GROUP)["time_us_median"].idxmin()].copy()
    best["l2_bytes_per_delivered"] = best.variant.map(L2_BYTES_PER_DELIVERED)
    best["sm_network_bytes_per_delivered"] = best.variant.map(SM_NETWORK_BYTES_PER_DELIVERED)
    columns = [*GROUP, "stages", "ctas_per_sm", "consumer_threads", "grid_ctas", "clusters", "max_active_clusters",
               "busy_cta_share", "steps_total", "bytes_delivered", "time_us_median", "relative_iqr", "gbps",
               "sm_clock_mhz_mean", "l2_bytes_per_delivered", "sm_network_bytes_per_delivered"]
    return best[columns].sort_values(GROUP).reset_index(drop=True)


def winners(best: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for key, group in best.groupby(["working_set", "cluster_size", "tile_bytes"]):
        ranked = group.sort_values("time_us_median")
        first, second = ranked.iloc[0], ranked.iloc[1] if len(ranked) > 1 else None
        row = dict(zip(["working_set", "cluster_size", "tile_bytes"], key))
        row.update({"winner": first.variant, "winner_gbps": first.gbps, "winner_stages": first.stages,
                    "winner_ctas_per_sm": first.ctas_per_sm})
        for variant in ("multicast", "dsm_pull", "dsm_push"):
            match = group[group.variant == variant]
            row[f"{variant}_gbps"] = float(match.gbps.iloc[0]) if len(match) else float("nan")
        if second is not None:
            margin = second.time_us_median / first.time_us_median
            tolerance = max(MIN_TOLERANCE, first.relative_iqr + second.relative_iqr)
            row.update({"runner_up": second.variant, "margin": margin, "tie": bool(margin <= 1 + tolerance)})
        rows.append(row)
    return pd.DataFrame(rows)


def latency_table(latency: pd.DataFrame, sm_clock_mhz: float) -> pd.DataFrame:
    frame = latency.copy()
    frame["sm_clock_mhz"] = sm_clock_mhz
    frame["ns_per_hop_median"] = frame.cycles_per_hop_median / sm_clock_mhz * 1e3
    return frame


def with_pattern(bandwidth: pd.DataFrame) -> pd.DataFrame:
    """``bandwidth.csv`` with its ``pattern`` column; runs measured before it existed read the
    ring (remote rows) and their own buffer (local rows)."""
    if "pattern" in bandwidth.columns:
        return bandwidth
    return bandwidth.assign(pattern=bandwidth.path.map({"remote": "ring", "local": "own"}))


def bandwidth_table(bandwidth: pd.DataFrame, sm_count: int) -> pd.DataFrame:
    """Best per path, pattern and cluster size; per SM over the SMs the grid kept busy (a grid of
    at least one CTA per SM fills all of them; occupancy may cap CTAs per SM below the request), and
    per resident CTA (the grid holds every whole cluster that fits at once: persistent_grid);
    ``fraction_of_cluster_two``: GB/s over the same pattern's with clusters of 2 (empty without)."""
    frame = with_pattern(bandwidth)
    frame = frame.assign(relative_iqr=frame.time_us_iqr / frame.time_us_median)
    keys = ["path", "pattern", "cluster_size"]
    best = frame.loc[frame.groupby(keys)["gbps"].idxmax()].copy()
    best["busy_sms"] = best.grid_ctas.clip(upper=sm_count)
    best["gbps_per_busy_sm"] = best.gbps / best.busy_sms
    best["bytes_per_sm_cycle"] = best.gbps_per_busy_sm * 1e3 / best.sm_clock_mhz_mean
    best["gbps_per_resident_cta"] = best.gbps / best.grid_ctas      # the grid is every CTA that fits at once
    at_two = best[best.cluster_size == 2].set_index(["path", "pattern"]).gbps
    best["fraction_of_cluster_two"] = [
        r.gbps / at_two[(r.path, r.pattern)] if (r.path, r.pattern) in at_two.index else float("nan")
        for r in best.itertuples()]
    columns = [*keys, "ctas_per_sm", "threads_per_cta", "grid_ctas", "busy_sms", "busy_cta_share",
               "time_us_median", "relative_iqr", "gbps", "gbps_per_busy_sm", "bytes_per_sm_cycle",
               "gbps_per_resident_cta", "fraction_of_cluster_two", "sm_clock_mhz_mean"]
    return best[columns].sort_values(keys).reset_index(drop=True)


def aggregate(raw_dir: Path, derived_dir: Path, repeat_dir: Path | None = None) -> None:
    raw_dir, derived_dir = Path(raw_dir), Path(derived_dir)
    raw = raw_data.load(STUDY, raw_dir)           # checked before anything is written
    derived_dir.mkdir(parents=True, exist_ok=True)
    best = best_configurations(raw_data.ok_rows(raw["broadcast.csv"]))
    bandwidth = raw_data.ok_rows(raw["bandwidth.csv"])
    _write(best, derived_dir / "best.csv")
    _write(winners(best), derived_dir / "winners.csv")
    _write(latency_table(raw["latency.csv"], float(bandwidth.sm_clock_mhz_mean.median())),
           derived_dir / "latency.csv")
    _write(bandwidth_table(bandwidth, raw.provenance["gpu"]["sm_count"]), derived_dir / "bandwidth.csv")
