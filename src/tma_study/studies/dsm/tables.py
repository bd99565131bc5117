"""Tables of the dsm study (paper/tables/dsm_*.tex|md)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.report.tables import human_bytes, run_table, source_line, write_table

from .aggregate import with_pattern

VARIANT_LABELS = {"multicast": "TMA multicast", "dsm_pull": "DSM pull", "dsm_push": "DSM push"}


def winners_table(winners: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for r in winners.sort_values(["working_set", "cluster_size", "tile_bytes"]).itertuples():
        margin = "tie" if r.tie else f"{r.margin:.2f}x"
        rows.append({"operand in": r.working_set, "cluster": r.cluster_size, "tile": human_bytes(r.tile_bytes),
                     "winner": VARIANT_LABELS[r.winner], "over": f"{VARIANT_LABELS[r.runner_up]} ({margin})",
                     **{f"{VARIANT_LABELS[v]} GB/s": f"{getattr(r, f'{v}_gbps'):.0f}"
                        for v in ("multicast", "dsm_pull", "dsm_push")}})
    return pd.DataFrame(rows)


def latency_target_label(target) -> str:
    """Whose shared memory a latency.csv row's dependent loads read, and with which instruction."""
    if str(target) == "local_lds":
        return "own smem, ld.shared"
    return "own smem, ld.shared::cluster" if str(target) == "0" else f"CTA {target}, ld.shared::cluster"


PATTERN_LABELS = {"ring": "neighbour's smem (ring: CTA r+1 mod n)", "pair": "partner's smem (pair: CTA r xor 1)"}


def bandwidth_path_label(path: str, pattern: str = "ring") -> str:
    """Whose shared memory a bandwidth.csv row's CTAs stream, and with which instruction."""
    if path == "local":
        return "own smem, LDS.128"
    return f"{PATTERN_LABELS[pattern]}, 128-bit ld.shared::cluster"


def primitives_table(latency: pd.DataFrame, bandwidth: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for r in latency.itertuples():
        rows.append({"measure": "latency", "cluster": r.cluster_size, "what": latency_target_label(r.target),
                     "value": f"{r.cycles_per_hop_median:.0f} cycles ({r.ns_per_hop_median:.0f} ns)"})
    for r in with_pattern(bandwidth).itertuples():
        rows.append({"measure": "bandwidth", "cluster": r.cluster_size,
                     "what": bandwidth_path_label(r.path, r.pattern),
                     "value": f"{r.gbps:.0f} GB/s ({r.bytes_per_sm_cycle:.1f} B/cycle per SM"
                              + (f"; {r.gbps_per_resident_cta:.1f} GB/s per resident CTA, {r.grid_ctas} CTAs"
                                 if hasattr(r, "gbps_per_resident_cta") else "")
                              + f", {r.grid_ctas / r.busy_sms:.0f} CTAs/SM x {r.threads_per_cta} threads)"})
    return pd.DataFrame(rows)


def write_tables(derived_dir: Path, provenance: dict, tables_dir: Path) -> None:
    derived_dir = Path(derived_dir)
    source = source_line(provenance)
    write_table(winners_table(pd.read_csv(derived_dir / "winners.csv")), tables_dir, "dsm_winners",
                "Broadcasting one tile to every CTA of a cluster: delivered GB/s (bytes landing in all CTAs' "
                "shared memory per second) of each primitive at its own best stages and CTAs per SM, and the "
                f"winner's margin over the runner-up (tie: within the measured spread). {source}.")
    write_table(primitives_table(pd.read_csv(derived_dir / "latency.csv"), pd.read_csv(derived_dir / "bandwidth.csv")),
                tables_dir, "dsm_primitives",
                "DSM raw cost: one thread's dependent 4-byte loads (clock64 cycles, median of repeats; ns at the "
                "median SM clock of the bandwidth runs) and the read bandwidth when every CTA streams a partner's "
                "shared memory, CTA r reading CTA (r+1) mod n (ring) or CTA r xor 1 (pair) (best over CTAs/SM and "
                "threads; per SM over the SMs the grid kept busy; per resident CTA over the grid, every whole cluster that fits "
                "at once). "
                f"{source}.")
    write_table(run_table(provenance), tables_dir, "dsm_run", "How the dsm data were measured (from provenance.json).")
