"""Tables of the multicast study (paper/tables/multicast_*.tex|md)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.report.tables import human_bytes, run_table, source_line, write_table

VARIANT_LABELS = {"no_cluster": "own copy, no cluster", "cluster": "own copy, cluster launch",
                  "multicast": "TMA multicast"}


def _shape(r) -> str:
    return f"{r.cluster_x}x{r.cluster_y}"


def break_even_verdict(r) -> str:
    """Where multicast stops losing to the better alternative, in words (a break_even.csv row)."""
    if r.multicast_never_loses:
        return f"never slower (from {human_bytes(r.smallest_tile_bytes)})"
    if r.multicast_always_loses or pd.isna(r.break_even_tile_bytes):
        return f"slower up to {human_bytes(r.largest_tile_bytes)}"
    return f"{human_bytes(r.bracket_low_tile_bytes)} < tile <= {human_bytes(r.break_even_tile_bytes)}"


def summary_table(break_even: pd.DataFrame, scheduling: pd.DataFrame, pattern: str) -> pd.DataFrame:
    rows = []
    for r in break_even[break_even.pattern == pattern].sort_values(["working_set", "cluster_size"]).itertuples():
        sched = scheduling[(scheduling.pattern == pattern) & (scheduling.working_set == r.working_set)
                           & (scheduling.cluster_x == r.cluster_x) & (scheduling.cluster_y == r.cluster_y)]
        at = sched[sched.tile_bytes == r.tile_of_max_speedup].iloc[0]
        rows.append({
            "operand in": r.working_set, "cluster": _shape(r),
            "multicast vs best alternative": break_even_verdict(r),
            "speedup range": f"{r.min_speedup:.2f} .. {r.max_speedup:.2f}",
            "best at tile": human_bytes(r.tile_of_max_speedup),
            "cluster launch alone (time x)": f"{at.scheduling_factor:.2f}",
            "multicast under it (time x)": f"{at.multicast_factor:.2f}",
        })
    return pd.DataFrame(rows)


def traffic_table(traffic: pd.DataFrame) -> pd.DataFrame:
    if "l2_read_bytes_per_unique_byte" not in traffic:
        return pd.DataFrame({"configuration": traffic.key, "result": traffic.status})
    return pd.DataFrame([{
        "cluster": r.cluster_size, "variant": VARIANT_LABELS[r.variant],
        "L2 bytes read / operand byte": f"{r.l2_read_bytes_per_unique_byte:.2f}",
        "crossbar bytes to SMs / operand byte": f"{r.xbar_bytes_per_unique_byte:.2f}",
        "DRAM bytes / operand byte": f"{r.dram_bytes_per_unique_byte:.2f}",
    } for r in traffic.sort_values(["cluster_size", "variant"]).itertuples()])


def compute_table(boundary: pd.DataFrame) -> pd.DataFrame:
    """Per cluster shape: where multicast wins in the compute sweep (compute_boundary.csv)."""
    if "win_from_l2_read_fraction" not in boundary.columns:
        return pd.DataFrame({"compute sweep": boundary.status})

    def percent(v) -> str:
        return "-" if pd.isna(v) else f"{100 * v:.0f} %"

    def ratio(v) -> str:
        return "-" if pd.isna(v) else f"{v:.2f}"

    return pd.DataFrame([{
        "cluster": _shape(r), "multicast wins / loses / compared": f"{r.wins} / {r.losses} / {r.rows}",
        "best speedup": f"{r.max_speedup:.2f}",
        "wins from own-copy L2 read rate (of ceiling)": percent(r.win_from_l2_read_fraction),
        "highest loss or tie below it": percent(r.below_it_l2_read_fraction),
        "consumer / load time of the wins": f"{ratio(r.wins_min_consumer_to_load)} .. {ratio(r.wins_max_consumer_to_load)}",
    } for r in boundary.sort_values(["cluster_size", "cluster_x"]).itertuples()])


def write_tables(derived_dir: Path, provenance: dict, tables_dir: Path) -> None:
    derived_dir = Path(derived_dir)
    source = source_line(provenance)
    break_even = pd.read_csv(derived_dir / "break_even.csv")
    scheduling = pd.read_csv(derived_dir / "scheduling.csv")
    explain = ("Speedup = best time of the better alternative (each CTA loads its own copy with TMA, "
               "without or with a cluster launch) / best multicast time, each variant at its own best "
               "stages and CTAs per SM; ties within the measured spread count as not slower. The last two "
               "columns split multicast's time against the cluster-free launch at the tile where it does "
               "best: what the cluster launch of the same binary costs, times what multicast changes.")
    write_table(summary_table(break_even, scheduling, "1d"), tables_dir, "multicast_summary",
                f"Every CTA of a 1-D cluster needs the same tiles. {explain} {source}.")
    write_table(summary_table(break_even, scheduling, "2d"), tables_dir, "multicast_2d",
                "GEMM-like 2-D pattern (A tile shared along the cluster's y, B along x, as CUTLASS "
                f"multicasts them). {explain} {source}.")
    write_table(traffic_table(pd.read_csv(derived_dir / "traffic.csv")), tables_dir, "multicast_traffic",
                "Where the bytes go (Nsight Compute counters, one launch each; 1-D pattern, 16 KiB tiles, 4 stages, "
                "operand streamed from HBM): L2 read sectors requested by the SMs' load path (lts__t_sectors_srcunit_"
                "tex_op_read x 32 B), bytes the crossbar delivered to the SMs (l1tex__m_xbar2l1tex_read_bytes) and "
                f"DRAM reads, each per byte of the operand. {source}.")
    boundary = pd.read_csv(derived_dir / "compute_boundary.csv")
    ceiling = (f" L2 read ceiling: {boundary.l2_read_ceiling_gbps.iloc[0]:.0f} GB/s, the highest own-copy rate of the "
               "sweep." if "l2_read_ceiling_gbps" in boundary.columns else "")
    write_table(compute_table(boundary), tables_dir, "multicast_compute",
                "The GEMM-like pattern with a consumer that computes: every loaded word goes through work_rounds "
                "dependent IMADs before the checksum, each cluster reading its own tiles or every cluster the same "
                "ones, from HBM and L2 (A = B tile of 8 and 16 KiB, 4 stages, one CTA per SM). Per cluster shape: "
                "how often multicast beat, tied or lost to the better own-copy variant, the own copies' L2 read "
                "rate from which it never lost and won at least once, and the consumer-to-load time ratios where "
                f"it won.{ceiling} {source}.")
    write_table(run_table(provenance), tables_dir, "multicast_run",
                "How the multicast data were measured (from provenance.json).")
