"""The multicast study's rules of thumb (entry point ``rules``), computed from derived data."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.report.tables import human_bytes

LEVEL_NAMES = {"hbm": "HBM", "l2": "L2"}


def _cluster_shapes(rows: pd.DataFrame) -> str:
    """'1x2, 1x4, 1x8, 1x16': cluster shapes in numeric order."""
    shapes = sorted({(int(r.cluster_x), int(r.cluster_y)) for r in rows.itertuples()},
                    key=lambda xy: (xy[0] * xy[1], xy))
    return ", ".join(f"{x}x{y}" for x, y in shapes)


def _pattern_rule(break_even: pd.DataFrame, pattern: str, situation: str, figure: str,
                  claims: tuple[str, ...]) -> dict | None:
    rows = break_even[break_even.pattern == pattern]
    if rows.empty:
        return None
    wins = rows[rows.break_even_tile_bytes.notna() & (rows.max_speedup > 1.0)]
    shapes = _cluster_shapes(rows)
    if wins.empty:
        rule = ("do not expect bandwidth from multicast: let each CTA load its own copy (the copies hit "
                "L2); use multicast where the L2 (in a GEMM, its request rate), not delivery, is the limit")
    else:
        best = wins.loc[wins.max_speedup.idxmax()]
        rule = (f"multicast pays from {human_bytes(best.break_even_tile_bytes)} tiles at cluster "
                f"{best.cluster_x}x{best.cluster_y} ({LEVEL_NAMES[best.working_set]})")
    evidence = (f"multicast / best own-copy speed {rows.min_speedup.min():.2f} .. {rows.max_speedup.max():.2f} over "
                f"clusters {shapes}, tiles {human_bytes(rows.smallest_tile_bytes.min())} .. "
                f"{human_bytes(rows.largest_tile_bytes.max())}, HBM and L2")
    return {"situation": situation, "rule": rule, "evidence": evidence, "figure": figure, "claims": claims}


def _traffic_rule(traffic: pd.DataFrame) -> dict | None:
    if "l2_read_bytes_per_unique_byte" not in traffic:
        return None
    largest = traffic.cluster_size.max()
    at = traffic[traffic.cluster_size == largest].set_index("variant")
    if not {"multicast", "no_cluster"} <= set(at.index):
        return None
    return {"situation": "what multicast saves",
            "rule": "L2 reads (each tile leaves L2 once), not crossbar delivery: count on it to relieve L2, "
                    "not to feed SMs faster",
            "evidence": (f"cluster {largest}: L2 bytes read per operand byte {at.l2_read_bytes_per_unique_byte['multicast']:.2f} "
                         f"(multicast) vs {at.l2_read_bytes_per_unique_byte['no_cluster']:.2f} (own copies); crossbar "
                         f"delivers {at.xbar_bytes_per_unique_byte['multicast']:.0f}x either way"),
            "figure": "multicast_traffic",
            "claims": ("multicast_reads_each_tile_once_from_l2", "multicast_own_copies_multiply_l2_reads",
                       "multicast_crossbar_delivers_every_copy")}


def _scheduling_rule(scheduling: pd.DataFrame) -> dict | None:
    rows = scheduling[scheduling.pattern == "1d"]
    if rows.empty:
        return None
    by_size = rows.groupby("cluster_size").scheduling_factor.median()
    small, large = by_size.index.min(), by_size.index.max()
    return {"situation": "choosing a cluster size",
            "rule": f"keep clusters at {small} unless the kernel needs more: larger cluster launches cost time through "
                    "placement (whole clusters per GPC leave SMs without a CTA and stack CTAs on others)",
            "evidence": (f"same kernel, cluster launch / plain launch time (median over tiles): "
                         f"{by_size[small]:.2f} at {small}, {by_size[large]:.2f} at {large}"),
            "figure": "multicast_scaling", "claims": ("multicast_cluster_launch_costs_at_four_and_more",)}


def _compute_rule(boundary: pd.DataFrame) -> dict | None:
    """Where multicast starts to win once the consumer computes (compute_boundary.csv)."""
    if "win_from_l2_read_fraction" not in boundary.columns:
        return None
    ceiling = boundary.l2_read_ceiling_gbps.iloc[0]
    found = boundary[boundary.win_from_l2_read_fraction.notna()]
    shapes = "; ".join(f"{r.cluster_x}x{r.cluster_y} from {100 * r.win_from_l2_read_fraction:.0f} %"
                       for r in found.itertuples())
    if found.empty:
        rule = ("do not expect multicast to pay even when the consumer computes or every cluster reads the same "
                "tiles: no cluster shape won from any L2 read rate")
    else:
        rule = (f"use multicast where own copies would read L2 near its ceiling ({ceiling:.0f} GB/s): your 1x1 "
                f"kernel's L2 read rate = stage bytes per CTA x CTAs / stage time (a GEMM: TFLOP/s x bytes per FLOP); "
                f"wins from {shapes} of the ceiling")
    evidence = (f"compute sweep (work rounds per word, own or shared tiles, HBM and L2): multicast wins "
                f"{int(boundary.wins.sum())}, loses {int(boundary.losses.sum())} of {int(boundary.rows.sum())}; best "
                f"speedup {boundary.max_speedup.max():.2f}")
    return {"situation": "a GEMM-like kernel whose consumer computes on each stage", "rule": rule,
            "evidence": evidence, "figure": "multicast_compute",
            "claims": ("multicast_wins_from_an_l2_read_rate", "multicast_not_faster_when_the_consumer_dominates")}


def rules_of_thumb(derived_dir: Path, provenance: dict) -> list[dict]:
    derived_dir = Path(derived_dir)
    break_even = pd.read_csv(derived_dir / "break_even.csv")
    rows = [_pattern_rule(break_even, "1d", "a tile every CTA of a cluster needs (broadcast)", "multicast_scaling",
                          ("multicast_not_faster_for_1d_broadcast",)),
            _pattern_rule(break_even, "2d", "GEMM-like A/B sharing across a cluster, loads only (no math)",
                          "multicast_2d", ("multicast_close_at_two_ctas_gemm_pattern",)),
            _traffic_rule(pd.read_csv(derived_dir / "traffic.csv")),
            _scheduling_rule(pd.read_csv(derived_dir / "scheduling.csv")),
            _compute_rule(pd.read_csv(derived_dir / "compute_boundary.csv"))]
    return [row for row in rows if row is not None]
