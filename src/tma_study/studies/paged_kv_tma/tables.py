"""Tables of the paged_kv_tma study (paper/tables/paged_kv_tma_*.tex|md)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.report.tables import run_table, source_line, write_table

from .aggregate import TMA_BOXES


def _gbps(value) -> str:
    return "" if pd.isna(value) else f"{value:.0f}"


def _pct(value) -> str:
    return "" if pd.isna(value) else f"{100 * value:.1f}"


def points_frame(points: pd.DataFrame) -> pd.DataFrame:
    """Per decode point: cp.async and each TMA shape's best GB/s, the better path's share of the
    read ceiling and of the copy, and the roofline bound."""
    rows = []
    for r in points.itertuples():
        row = {"point": r.point, "cp.async GB/s": _gbps(r.best_cp_async_gbps)}
        row.update({f"tma {box}": _gbps(getattr(r, f"best_tma_{box}_gbps")) for box in TMA_BOXES})
        row.update({"best tma / cp.async": f"{r.tma_over_cp_async:.3f}",
                    "% of read": _pct(r.fraction_of_read_ceiling), "% of copy": _pct(r.fraction_of_d2d_copy),
                    "flop/B": f"{r.flops_per_kv_byte:.1f}", "bound": r.bound,
                    "% of bound": _pct(r.fraction_of_bound)})
        rows.append(row)
    return pd.DataFrame(rows)


def producers_frame(producers: pd.DataFrame) -> pd.DataFrame:
    """Every configuration: point, page, producer, residency and splits, GB/s and its ratio to
    the same page's best cp.async."""
    return pd.DataFrame([{
        "point": r.point, "page": int(r.page_size), "producer": r.producer,
        "CTAs/SM": int(r.resident_ctas_per_sm), "splits": int(r.num_splits), "GB/s": _gbps(r.gbps),
        "% of read": _pct(r.fraction_of_read_ceiling), "vs cp.async": f"{r.over_cp_async:.3f}",
        "same launch": "yes" if r.same_launch_as_cp_async else "no"} for r in producers.itertuples()])


def write_tables(derived_dir: Path, provenance: dict, tables_dir: Path) -> None:
    derived_dir = Path(derived_dir)
    source = source_line(provenance)
    points = pd.read_csv(derived_dir / "points.csv")
    read, copy = points.read_ceiling_gbps.iloc[0], points.d2d_copy_gbps.iloc[0]
    write_table(points_frame(points), tables_dir, "paged_kv_tma_points",
                "Paged-KV decode per load path and TMA load shape (best over page sizes; consumer and stages "
                "fixed per point): K/V GB/s of cp.async and of each TMA shape (chunk: a box per 128-B chunk, "
                "as the paged_kv sweep; tile: FlashAttention-3's one rank-5 box a tile, tile evict last: with its "
                "L2 evict-last hint; slot: a box per swizzle "
                "atom, chunks inner; slot_lanes: the same from a lane each), the better path's share of the "
                f"same run's pure-read stream ({read:.0f} GB/s) and of its copy ({copy:.0f} GB/s), and the "
                "roofline: flops per K/V byte, whether bytes / read ceiling or flops / dense tensor peak bounds "
                f"the point, and the better path's share of that bound. {source}.")
    write_table(producers_frame(pd.read_csv(derived_dir / "producers.csv")), tables_dir, "paged_kv_tma_producers",
                "Every paged_kv_tma configuration: resident CTAs per SM and KV splits of its launch, K/V GB/s, "
                "its share of the read ceiling, and the best cp.async time of the same point and page over its "
                f"time (same launch: at that configuration's residency and splits). {source}.")
    write_table(run_table(provenance), tables_dir, "paged_kv_tma_run",
                "How the paged_kv_tma data were measured (from provenance.json).")
