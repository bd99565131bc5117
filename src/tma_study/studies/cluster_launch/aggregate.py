"""Aggregate the cluster_launch study's raw data (CPU only).

Writes into ``derived_dir``:
- ``launch.csv``       per launch point: time, and over the cluster-free launch of as many CTAs
                       at the same occupancy setting and spin: ``overhead_us`` (difference) and
                       ``slowdown`` (ratio); with the placement summary of its recorded launch
- ``placement.csv``    per recorded launch: start offsets (p50, p99, max), start waves, SMs used
                       and left idle, CTAs per SM (hosted, and at once), how far apart a
                       cluster's CTAs started, the timer's smallest step
- ``gpcs.csv``         SMs grouped by the clusters they shared: the CTAs of a cluster run on one
                       GPC, so SMs that ever hosted CTAs of one cluster belong to one GPC
                       (union-find over every cluster launch's clusters); a group is a GPC or,
                       where clusters never joined all its SMs, part of one
- ``cluster_fit.csv``  per cluster size and occupancy setting: the clusters the inferred GPCs
                       hold at once (sum over GPCs of floor(CTAs per SM x SMs / cluster size))
                       beside the occupancy API's max active clusters, and the SMs they leave idle
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from tma_study.harness import raw_data
from tma_study.atomic import atomic_write_text

KEY = ["launch", "cluster_size", "grid_ctas", "ctas_per_sm", "dynamic_shared_bytes", "spin_ns"]
SETTING = ["grid_ctas", "ctas_per_sm", "dynamic_shared_bytes", "spin_ns"]   # what a baseline shares
PLACEMENT_IN_LAUNCH = ["start_p99_ns", "start_max_ns", "waves", "late_ctas", "sms_idle",
                       "max_concurrent_on_one_sm", "clusters_sharing_an_sm", "span_us"]


def _write(frame: pd.DataFrame, path: Path) -> None:
    atomic_write_text(path, frame.to_csv(index=False))


# ---------------------------------------------------------------- one recorded launch

def start_waves(starts_ns, spin_ns: int) -> float:
    """How many waves the CTAs started in: a wave opens at the first CTA not yet placed and holds
    every CTA starting less than spin_ns after it (a CTA starting later may have waited for a
    slot another CTA left). NaN without a spin (nothing tells co-resident from late)."""
    if spin_ns <= 0:
        return float("nan")
    starts = np.sort(np.asarray(starts_ns))
    waves, i = 0, 0
    while i < len(starts):
        waves += 1
        i = int(np.searchsorted(starts, starts[i] + spin_ns, side="left"))
    return float(waves)


def max_concurrent(starts_ns, ends_ns) -> int:
    """Most intervals [start, end) open at once (an end at t closes before a start at t opens)."""
    events = sorted([(int(e), -1) for e in ends_ns] + [(int(s), 1) for s in starts_ns])
    running = best = 0
    for _, step in events:
        running += step
        best = max(best, running)
    return best


def timer_step(values) -> float:
    """The smallest positive difference between distinct timestamps: the timer's resolution, or
    a multiple of it (NaN when all are equal)."""
    distinct = np.unique(np.asarray(values, dtype=np.int64))
    return float(np.diff(distinct).min()) if len(distinct) > 1 else float("nan")


def hosted_histogram(hosted: pd.Series, idle: int) -> str:
    """'0x4 1x8 2x120': how many SMs ran k CTAs, for each k (0: SMs left idle)."""
    counts = hosted.value_counts().sort_index()
    parts = ([f"0x{idle}"] if idle > 0 else []) + [f"{int(k)}x{int(n)}" for k, n in counts.items()]
    return " ".join(parts)


def placement_row(ctas: pd.DataFrame, spin_ns: int, launch: str, sm_count: int) -> dict:
    starts, ends = ctas.start_ns.to_numpy(), ctas.end_ns.to_numpy()
    hosted = ctas.groupby("smid").size()
    concurrent = max(max_concurrent(g.start_ns, g.end_ns) for _, g in ctas.groupby("smid"))
    row = {"ctas": len(ctas), "start_p50_ns": float(np.percentile(starts, 50)),
           "start_p99_ns": float(np.percentile(starts, 99)), "start_max_ns": float(starts.max()),
           "span_us": float(ends.max()) / 1e3, "waves": start_waves(starts, spin_ns),
           "late_ctas": float((starts >= spin_ns).sum()) if spin_ns > 0 else float("nan"),
           "sms_used": int(hosted.size), "sms_idle": int(sm_count - hosted.size),
           "max_ctas_on_one_sm": int(hosted.max()), "max_concurrent_on_one_sm": int(concurrent),
           "hosted_per_sm": hosted_histogram(hosted, sm_count - hosted.size),
           "timer_step_ns": timer_step(np.concatenate([starts, ends]))}
    if launch == "cluster":
        by_cluster = ctas.groupby("cluster_id")
        spread = by_cluster.start_ns.agg(lambda s: s.max() - s.min())
        row["cluster_start_spread_max_ns"] = float(spread.max())
        row["clusters_sharing_an_sm"] = int((by_cluster.smid.nunique() < by_cluster.size()).sum())
    else:
        row["cluster_start_spread_max_ns"] = float("nan")
        row["clusters_sharing_an_sm"] = 0
    return row


def placement_table(ctas: pd.DataFrame, sm_count: int) -> pd.DataFrame:
    rows = []
    for key, group in ctas.groupby(KEY, sort=True):
        values = dict(zip(KEY, key))
        rows.append({**values, **placement_row(group, int(values["spin_ns"]), values["launch"], sm_count)})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- GPCs from shared clusters

class _UnionFind:
    def __init__(self):
        self.parent: dict[int, int] = {}

    def find(self, x: int) -> int:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def gpc_groups(ctas: pd.DataFrame) -> pd.DataFrame:
    """One row per group of SMs joined by the clusters they hosted (``gpc`` numbered by their
    lowest SM): ``sm_count`` and the SM ids. Every SM seen is in exactly one group."""
    groups = _UnionFind()
    for smid in ctas.smid.unique():
        groups.find(int(smid))
    clustered = ctas[(ctas.launch == "cluster") & (ctas.cluster_size > 1)]
    for _, cluster in clustered.groupby([*KEY, "cluster_id"]):
        sms = [int(s) for s in cluster.smid.unique()]
        for other in sms[1:]:
            groups.union(sms[0], other)
    members: dict[int, list[int]] = {}
    for smid in sorted(groups.parent):
        members.setdefault(groups.find(smid), []).append(smid)
    ordered = sorted(members.values(), key=min)
    return pd.DataFrame([{"gpc": i, "sm_count": len(sms), "smids": " ".join(map(str, sms))}
                         for i, sms in enumerate(ordered)])


def cluster_fit(gpcs: pd.DataFrame, launch: pd.DataFrame, placement: pd.DataFrame, sm_count: int) -> pd.DataFrame:
    """Per cluster size and occupancy setting of the cluster launches: clusters the inferred
    GPCs hold at once beside the occupancy API's count, and SMs left idle (predicted at one
    wave of the most clusters, and observed in the longest-spinning recorded launch)."""
    sizes = gpcs.sm_count.to_numpy()
    rows = []
    clustered = launch[launch.launch == "cluster"]
    for (n, ctas, smem), group in clustered.groupby(["cluster_size", "ctas_per_sm", "dynamic_shared_bytes"]):
        first = group.iloc[0]
        fit = int(first.ctas_per_sm_fit)
        per_gpc = (fit * sizes) // n
        predicted = int(per_gpc.sum())
        at_once = min(int(first.clusters), predicted)
        longest = placement[(placement.launch == "cluster") & (placement.cluster_size == n)
                            & (placement.ctas_per_sm == ctas) & (placement.dynamic_shared_bytes == smem)]
        longest = longest.sort_values("spin_ns").iloc[-1] if len(longest) else None
        rows.append({"cluster_size": n, "ctas_per_sm": ctas, "dynamic_shared_bytes": smem, "ctas_per_sm_fit": fit,
                     "grid_clusters": int(first.clusters), "inferred_gpcs": len(sizes),
                     "predicted_max_clusters": predicted, "max_active_clusters": int(first.max_active_clusters),
                     "prediction_matches": bool(predicted == int(first.max_active_clusters)),
                     "cta_slots_unusable": int(fit * sizes.sum() - n * predicted),
                     "predicted_idle_sms_one_wave": int(max(0, sm_count - int(np.ceil(at_once * n / fit))))
                     if ctas == fit else -1,
                     "observed_idle_sms": int(longest.sms_idle) if longest is not None else -1,
                     "observed_spin_ns": int(longest.spin_ns) if longest is not None else -1})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- launch times

def launch_table(launch: pd.DataFrame, placement: pd.DataFrame) -> pd.DataFrame:
    """Every timed point with its cluster-free baseline (same grid, occupancy setting and spin)."""
    base = (launch[launch.launch == "no_cluster"][SETTING + ["time_us_median"]]
            .rename(columns={"time_us_median": "no_cluster_time_us"}))
    frame = launch.merge(base, on=SETTING, how="left")
    frame["overhead_us"] = frame.time_us_median - frame.no_cluster_time_us
    frame["slowdown"] = frame.time_us_median / frame.no_cluster_time_us
    frame = frame.merge(placement[KEY + PLACEMENT_IN_LAUNCH], on=KEY, how="left")
    columns = [*KEY, "threads_per_cta", "clusters", "max_active_clusters", "all_resident", "ctas_per_sm_fit",
               "time_us_median", "time_us_iqr", "samples", "no_cluster_time_us", "overhead_us", "slowdown",
               "sms_used", "max_ctas_on_one_sm", *PLACEMENT_IN_LAUNCH]
    return frame[columns].sort_values(["ctas_per_sm", "dynamic_shared_bytes", "spin_ns", "launch", "cluster_size",
                                       "grid_ctas"], ascending=[True, False, True, False, True, True]
                                      ).reset_index(drop=True)


SMS_PER_TPC = 2     # Hopper: a TPC is two SMs with consecutive %smid (sm 2k and 2k+1)
PARTNERS = {"pair": lambda rank, size: rank ^ 1, "ring": lambda rank, size: (rank + 1) % size}


def partner_tpcs(ctas: pd.DataFrame) -> pd.DataFrame:
    """Per cluster size (4 and more) and DSM read pattern (dsm study: pair = rank xor 1, ring =
    rank + 1 mod n), the share of a cluster's CTAs whose partner ran on the same TPC, over every
    cluster launch recorded."""
    clustered = ctas[(ctas.launch != "no_cluster") & (ctas.cluster_size >= 4)]
    counts = {}
    for keys, cluster in clustered.groupby(["launch", "cluster_size", "grid_ctas", "ctas_per_sm",
                                            "dynamic_shared_bytes", "spin_ns", "cluster_id"]):
        size = keys[1]
        tpc = dict(zip(cluster.cluster_rank, cluster.smid // SMS_PER_TPC))
        for pattern, partner in PARTNERS.items():
            same = sum(tpc[rank] == tpc[partner(rank, size)] for rank in tpc if partner(rank, size) in tpc)
            total = sum(partner(rank, size) in tpc for rank in tpc)
            seen = counts.setdefault((size, pattern), [0, 0])
            seen[0] += same
            seen[1] += total
    rows = [{"cluster_size": size, "pattern": pattern, "partners": total, "same_tpc": same,
             "same_tpc_share": same / total if total else float("nan")}
            for (size, pattern), (same, total) in sorted(counts.items())]
    return pd.DataFrame(rows, columns=["cluster_size", "pattern", "partners", "same_tpc", "same_tpc_share"])


def aggregate(raw_dir: Path, derived_dir: Path, repeat_dir: Path | None = None) -> None:
    from . import STUDY
    raw_dir, derived_dir = Path(raw_dir), Path(derived_dir)
    raw = raw_data.load(STUDY, raw_dir)           # checked before anything is written
    derived_dir.mkdir(parents=True, exist_ok=True)
    sm_count = int(raw.provenance["gpu"]["sm_count"])
    launch = raw_data.ok_rows(raw["launch.csv"])
    placement = placement_table(raw["ctas.csv"], sm_count)
    gpcs = gpc_groups(raw["ctas.csv"])
    _write(launch_table(launch, placement), derived_dir / "launch.csv")
    _write(placement, derived_dir / "placement.csv")
    _write(gpcs, derived_dir / "gpcs.csv")
    _write(cluster_fit(gpcs, raw["launch.csv"], placement, sm_count), derived_dir / "cluster_fit.csv")
    _write(partner_tpcs(raw["ctas.csv"]), derived_dir / "partners.csv")
