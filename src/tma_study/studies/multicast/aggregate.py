"""Aggregate the multicast study's raw data (CPU only).

Writes into ``derived_dir``:
- ``best.csv``        per (pattern, working set, cluster shape, variant, tile): the fastest
                      configuration over stages, CTAs per SM and consumers (each variant gets
                      its own best ring), with delivered GB/s (bytes landing in shared memory)
- ``speedup.csv``     per (pattern, working set, shape, tile): each variant's best time, and
                      multicast's speedup over the two alternatives; ``status`` win/tie/loss
- ``break_even.csv``  per (pattern, working set, shape): the smallest tile from which multicast
                      is never slower than the better alternative at any larger tile
- ``traffic.csv``     per profiled configuration (ncu): L2 bytes read by the SMs' load path and
                      bytes the crossbar delivered, each per unique operand byte
- ``scheduling.csv``  per (pattern, working set, shape, tile): of multicast's distance from the
                      cluster-free launch, the part a cluster launch of the same binary already
                      costs (scheduling) and the part multicast itself adds or saves
- ``compute.csv``     the compute sweep (compute.py): multicast against own copies per working
                      set, tile order, work rounds, shape and tile, with the consumer-to-load time
                      ratio and the own copies' L2 read rate against the L2 read ceiling
- ``compute_boundary.csv`` per cluster shape: the L2 read fraction from which multicast wins
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from tma_study.harness import raw_data
from tma_study.atomic import atomic_write_text

from . import STUDY
from . import compute as compute_mod
from .comparison import SHAPE, best_configurations, speedups
from .traffic import traffic_config, traffic_configs

def _write(frame: pd.DataFrame, path: Path) -> None:
    atomic_write_text(path, frame.to_csv(index=False))


def break_even(speedup: pd.DataFrame) -> pd.DataFrame:
    """Smallest tile from which multicast never loses to the better alternative (ties count)."""
    rows = []
    for key, group in speedup.groupby(SHAPE):
        group = group.sort_values("tile_bytes")
        tiles = group.tile_bytes.to_numpy()
        ok = (group.status != "loss").to_numpy()
        never_loses_from = next((i for i in range(len(tiles)) if ok[i:].all()), None)
        row = dict(zip(SHAPE, key))
        row.update({"cluster_size": key[2] * key[3], "smallest_tile_bytes": int(tiles[0]),
                    "largest_tile_bytes": int(tiles[-1]),
                    "multicast_never_loses": bool(ok.all()), "multicast_always_loses": not ok[-1],
                    "break_even_tile_bytes": int(tiles[never_loses_from]) if never_loses_from is not None else None,
                    "bracket_low_tile_bytes": int(tiles[never_loses_from - 1]) if never_loses_from else None,
                    "max_speedup": float(group.speedup_over_best_alternative.max()),
                    "tile_of_max_speedup": int(group.tile_bytes[group.speedup_over_best_alternative.idxmax()]),
                    "min_speedup": float(group.speedup_over_best_alternative.min())})
        rows.append(row)
    return pd.DataFrame(rows)


def scheduling(speedup: pd.DataFrame) -> pd.DataFrame:
    """Split multicast's time against the cluster-free launch into scheduling and multicast.

    t_mc / t_none = (t_cluster / t_none) x (t_mc / t_cluster): the first factor is what the
    cluster launch of the same binary costs (where its CTAs land: the cluster_launch study), the
    second what multicast itself changes under that launch.
    """
    frame = speedup[[*SHAPE, "tile_bytes", "multicast_time_us", "cluster_time_us", "no_cluster_time_us"]].copy()
    frame["cluster_size"] = frame.cluster_x * frame.cluster_y
    frame["scheduling_factor"] = frame.cluster_time_us / frame.no_cluster_time_us
    frame["multicast_factor"] = frame.multicast_time_us / frame.cluster_time_us
    frame["total_factor"] = frame.multicast_time_us / frame.no_cluster_time_us
    loss = np.log(frame.total_factor)
    frame["scheduling_share_of_log_change"] = np.where(np.abs(loss) > 1e-9, np.log(frame.scheduling_factor) / loss,
                                                        np.nan)
    return frame


SECTOR_BYTES = 32
L2_READ_SECTORS = "lts__t_sectors_srcunit_tex_op_read.sum"
XBAR_BYTES = "l1tex__m_xbar2l1tex_read_bytes.sum"
DRAM_BYTES = "dram__bytes_read.sum"


def traffic(raw: pd.DataFrame, study: dict) -> pd.DataFrame:
    """ncu counters per unique operand byte (rows without counters keep their status).

    ``study`` is the measured config (provenance.json): it says which configurations
    traffic.py profiled and how many operand bytes each launch read.
    """
    unique = {traffic_config(spec).key: spec["unique_bytes_per_launch"] for spec in traffic_configs(study)}
    frame = raw.copy()
    parts = frame.key.str.split("/")
    frame["variant"] = parts.str[1]
    frame["cluster_size"] = parts.str[2].str.split("x").str[1].astype(int)
    if L2_READ_SECTORS in frame:
        per_unique = frame.key.map(unique)
        frame["l2_read_bytes_per_unique_byte"] = frame[L2_READ_SECTORS] * SECTOR_BYTES / per_unique
        frame["xbar_bytes_per_unique_byte"] = frame[XBAR_BYTES] / per_unique
        frame["dram_bytes_per_unique_byte"] = frame[DRAM_BYTES] / per_unique
    return frame


def aggregate(raw_dir: Path, derived_dir: Path, repeat_dir: Path | None = None) -> None:
    raw_dir, derived_dir = Path(raw_dir), Path(derived_dir)
    raw = raw_data.load(STUDY, raw_dir)           # checked before anything is written
    derived_dir.mkdir(parents=True, exist_ok=True)
    best = best_configurations(raw_data.ok_rows(raw["stream.csv"]))
    speedup = speedups(best)
    _write(best, derived_dir / "best.csv")
    _write(speedup, derived_dir / "speedup.csv")
    _write(break_even(speedup), derived_dir / "break_even.csv")
    _write(scheduling(speedup), derived_dir / "scheduling.csv")
    _write(traffic(raw["traffic.csv"], raw.provenance["config"]), derived_dir / "traffic.csv")
    compute = raw.frames.get("compute.csv")
    compute_table = compute_mod.compute_speedups(raw_data.ok_rows(compute) if compute is not None else None)
    _write(compute_table, derived_dir / "compute.csv")
    _write(compute_mod.boundary(compute_table), derived_dir / "compute_boundary.csv")
