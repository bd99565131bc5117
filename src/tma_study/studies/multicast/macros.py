"""The multicast study's numbers for the paper's text (entry point ``macros``).

Names: ``multicast<What><Where>``, e.g. ``multicastMaxSpeedupOnedHbm``; no digits in names.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.report.numbers import camel, number, ratio

PATTERNS = {"1d": "oned", "2d": "twod"}
SETS = {"hbm": "hbm", "l2": "ltwo"}


def macros(derived_dir: Path, provenance: dict) -> dict[str, str]:
    derived_dir = Path(derived_dir)
    out = {}
    break_even = pd.read_csv(derived_dir / "break_even.csv")
    for (pattern, ws), rows in break_even.groupby(["pattern", "working_set"]):
        out[camel("multicast", "max speedup", PATTERNS[pattern], SETS[ws])] = ratio(rows.max_speedup.max())
        out[camel("multicast", "min speedup", PATTERNS[pattern], SETS[ws])] = ratio(rows.min_speedup.min())
    scheduling = pd.read_csv(derived_dir / "scheduling.csv")
    by_size = scheduling[scheduling.pattern == "1d"].groupby("cluster_size").scheduling_factor.median()
    if len(by_size):
        out[camel("multicast", "scheduling factor largest cluster")] = ratio(by_size.iloc[-1])
        out[camel("multicast", "largest cluster")] = str(int(by_size.index[-1]))
        smallest = by_size.index[0]
        rows = scheduling[scheduling.pattern == "1d"]
        at_smallest = rows[rows.cluster_size == smallest].scheduling_factor
        out[camel("multicast", "smallest cluster")] = str(int(smallest))
        out[camel("multicast", "scheduling deviation percent smallest cluster")] = number(
            100 * (at_smallest - 1).abs().max(), 1)
        if len(by_size) > 1:          # the cheapest median among the larger clusters
            out[camel("multicast", "scheduling factor min larger clusters")] = ratio(by_size.iloc[1:].min())
            out[camel("multicast", "second cluster")] = str(int(by_size.index[1]))
    traffic = pd.read_csv(derived_dir / "traffic.csv")
    if "l2_read_bytes_per_unique_byte" in traffic:
        largest = traffic[traffic.cluster_size == traffic.cluster_size.max()].set_index("variant")
        out[camel("multicast", "ltwo reads own copies")] = ratio(largest.l2_read_bytes_per_unique_byte["no_cluster"])
        out[camel("multicast", "ltwo reads multicast")] = ratio(largest.l2_read_bytes_per_unique_byte["multicast"])
    out[camel("multicast", "configurations")] = number(provenance.get("configurations", float("nan")))
    out |= compute_macros(derived_dir)
    return out


SHAPE_NAMES = {(1, 2): "one by two", (2, 1): "two by one", (2, 2): "two by two"}
NOT_MEASURED = "(not measured)"


def compute_macros(derived_dir: Path) -> dict[str, str]:
    """The compute sweep's numbers (compute.csv, compute_boundary.csv); '(not measured)' for a run
    without it, so the text still builds."""
    names = [camel("multicast compute", what) for what in ("wins", "compared", "losses", "max speedup",
                                                            "ltwo ceiling gbps", "max consumer to load of wins")]
    names += [camel("multicast compute win from percent", name) for name in SHAPE_NAMES.values()]
    boundary = pd.read_csv(Path(derived_dir) / "compute_boundary.csv")
    if "win_from_l2_read_fraction" not in boundary.columns:
        return dict.fromkeys(names, NOT_MEASURED)
    out = dict.fromkeys(names, NOT_MEASURED)
    out |= {names[0]: number(boundary.wins.sum()), names[1]: number(boundary.rows.sum()),
            names[2]: number(boundary.losses.sum()), names[3]: ratio(boundary.max_speedup.max()),
            names[4]: number(boundary.l2_read_ceiling_gbps.iloc[0])}
    if boundary.wins_max_consumer_to_load.notna().any():
        out[names[5]] = number(boundary.wins_max_consumer_to_load.max(), 2)
    for r in boundary.itertuples():
        name = SHAPE_NAMES.get((int(r.cluster_x), int(r.cluster_y)))
        if name and pd.notna(r.win_from_l2_read_fraction):
            out[camel("multicast compute win from percent", name)] = number(100 * r.win_from_l2_read_fraction)
        elif name:
            out[camel("multicast compute win from percent", name)] = "(no win)"
    return out
