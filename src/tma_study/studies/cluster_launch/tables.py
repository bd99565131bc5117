"""Tables of the cluster_launch study (paper/tables/cluster_launch_*.tex|md)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.report.tables import human_bytes, run_table, source_line, write_table


def setting_label(ctas_per_sm: int, dynamic_shared_bytes: int, fit: int) -> str:
    """'2/SM, 64.1 KiB (3 fit)': the CTAs per SM the grid is sized for, the shared memory per CTA
    and how many CTAs of that shape an SM holds."""
    kib = dynamic_shared_bytes / 1024
    smem = human_bytes(dynamic_shared_bytes) if dynamic_shared_bytes % 1024 == 0 else f"{kib:.1f} KiB"
    return f"{ctas_per_sm}/SM, {smem} ({fit} fit)"


def _value(value, digits: int = 2) -> str:
    return "" if pd.isna(value) else f"{value:.{digits}f}"


def cost_table(launch: pd.DataFrame) -> pd.DataFrame:
    """Per occupancy setting and cluster size: the empty launch's time and cost over the
    cluster-free launch, and at the longest spin the slowdown, start waves and idle SMs."""
    clustered = launch[launch.launch == "cluster"]
    longest = int(launch.spin_ns.max())
    rows = []
    for (ctas, smem, n), group in clustered.groupby(["ctas_per_sm", "dynamic_shared_bytes", "cluster_size"], sort=False):
        empty = group[group.spin_ns == 0]
        spun = group[group.spin_ns == longest]
        first = group.iloc[0]
        row = {"setting": setting_label(ctas, smem, int(first.ctas_per_sm_fit)), "cluster": int(n),
               "grid": f"{int(first.grid_ctas)} ({int(first.max_active_clusters) * int(n)} resident)"}
        if len(empty):
            e = empty.iloc[0]
            row.update({"empty us": _value(e.time_us_median), "empty +us": _value(e.overhead_us),
                        "empty x": _value(e.slowdown)})
        if len(spun) and longest > 0:
            s = spun.iloc[0]
            row.update({f"{longest // 1000} us spin x": _value(s.slowdown), "waves": _value(s.waves, 0),
                        "idle SMs": str(int(s.sms_idle)), "max CTAs at once per SM": str(int(s.max_concurrent_on_one_sm)),
                        "start p99 us": _value(s.start_p99_ns / 1e3)})
        rows.append(row)
    return pd.DataFrame(rows)


def gpc_table(gpcs: pd.DataFrame, fit: pd.DataFrame) -> pd.DataFrame:
    """Inferred GPC sizes, then per cluster size at one CTA per SM: clusters the GPCs hold at
    once beside the occupancy API's answer."""
    sizes = ", ".join(str(s) for s in sorted(gpcs.sm_count, reverse=True))
    rows = [{"what": f"inferred GPCs ({len(gpcs)})", "value": f"SMs each: {sizes}"}]
    for r in fit.sort_values(["ctas_per_sm_fit", "cluster_size"]).itertuples():
        rows.append({"what": f"clusters of {r.cluster_size}, {r.ctas_per_sm_fit} CTA(s)/SM fit, "
                             f"{human_bytes(r.dynamic_shared_bytes)}",
                     "value": f"GPCs hold {r.predicted_max_clusters}, occupancy API {r.max_active_clusters}"
                              f"{'' if r.prediction_matches else ' (differ)'}; {r.cta_slots_unusable} CTA slots "
                              f"unusable; idle SMs seen {r.observed_idle_sms}"})
    return pd.DataFrame(rows)


def write_tables(derived_dir: Path, provenance: dict, tables_dir: Path) -> None:
    derived_dir = Path(derived_dir)
    source = source_line(provenance)
    write_table(cost_table(pd.read_csv(derived_dir / "launch.csv")), tables_dir, "cluster_launch_cost",
                "What a cluster launch costs by itself: a near-empty kernel (every CTA records its SM, cluster "
                "and %globaltimer, then spins on it) launched as clusters and without, over the same CTAs. "
                "empty: no spin (time, difference and ratio to the cluster-free launch); at the longest spin: "
                "the ratio, the start waves, the SMs left without a CTA, the most CTAs one SM ran at once and "
                f"the 99th percentile of the CTAs' start after the first. {source}.")
    write_table(gpc_table(pd.read_csv(derived_dir / "gpcs.csv"), pd.read_csv(derived_dir / "cluster_fit.csv")),
                tables_dir, "cluster_launch_gpcs",
                "GPCs inferred from placement (the SMs that hosted CTAs of one cluster share a GPC) and the "
                "clusters they hold at once (per GPC: floor(CTAs per SM x SMs / cluster size)) beside the "
                f"occupancy API's max active clusters. {source}.")
    write_table(run_table(provenance), tables_dir, "cluster_launch_run",
                "How the cluster_launch data were measured (from provenance.json).")
