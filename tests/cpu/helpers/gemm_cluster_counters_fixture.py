"""Synthetic raw data of the gemm_cluster_counters study whose derived numbers are known (for its
tests and the paper-tier tests before its first measurement lands). No tests here."""
import json
from pathlib import Path

import pandas as pd
from raw_fixture import valid_provenance

from tma_study.gemm_lib import variants as gemm_variants
from tma_study.gemm_lib import cluster_configs
from tma_study.studies.gemm_cluster_counters import configs

SM_COUNT = 132
CLOCK_HZ = 1.5e9
# every launch: 1 ms; the 1x1 reads each operand byte once from L2, a cluster of two 3/4 of them
DURATION_NS = 1.0e6
L2_SHARE = {"1x1": 1.0, "2x1": 0.75, "1x2": 0.75, "2x2": 0.5}


def operand_bytes(variant: gemm_variants.Variant, size: int) -> int:
    """Bytes every CTA reads with its own copies: k-blocks x (tile_m + tile_n) x tile_k x element bytes."""
    kblocks = (size // variant.tile_m) * (size // variant.tile_n) * (size // variant.tile_k)
    element = 2 if variant.dtype == "bf16" else 1
    return kblocks * (variant.tile_m + variant.tile_n) * variant.tile_k * element


def synthetic_counters(study_config: dict) -> pd.DataFrame:
    size = int(study_config["size"])
    rows = []
    for order in configs.ORDERS:
        for v in configs.variants(study_config):
            swizzle, raster = (2, "along_m") if order == "best" else (1, "heuristic")
            l2_bytes = operand_bytes(v, size) * L2_SHARE[v.cluster]
            rows.append({"size": size, "dtype": v.dtype, "variant": v.name,
                         "family": cluster_configs.family_name(v.mainloop, (v.tile_m, v.tile_n, v.tile_k)),
                         "mainloop": v.mainloop, "tile": v.tile, "cluster": v.cluster, "order": order,
                         "swizzle": swizzle, "raster_order": raster, "duration_ns": DURATION_NS,
                         "sm_clock_hz": CLOCK_HZ, "l2_read_sectors": l2_bytes / 32, "l2_read_requests": l2_bytes / 64,
                         "l2_read_sectors_pct": 50.0, "l2_sectors_pct": 55.0, "l2_tag_requests_pct": 60.0,
                         "l2_throughput_pct": 65.0, "l2_hit_rate_pct": 90.0, "xbar_to_sm_bytes": operand_bytes(v, size),
                         "xbar_to_sm_pct": 40.0, "dram_read_bytes": 4 * size * size, "dram_pct": 20.0,
                         "tensor_active_pct": 70.0, "sm_throughput_pct": 72.0, "kernel": "void cutlass::device_kernel",
                         "measured_on": "synthetic test data"})
    return pd.DataFrame(rows)


def synthetic_raw(folder: Path, study_config: dict) -> Path:
    """counters.csv, kernels.csv and provenance.json as measure.py writes them."""
    folder.mkdir(parents=True, exist_ok=True)
    counters = synthetic_counters(study_config)
    counters.to_csv(folder / "counters.csv", index=False)
    pd.DataFrame([{**gemm_variants.parse_name(n).columns(), "registers": 168, "spill_store_bytes": 0,
                   "spill_load_bytes": 0} for n in counters.variant.unique()]).to_csv(folder / "kernels.csv",
                                                                                      index=False)
    (folder / "provenance.json").write_text(json.dumps(valid_provenance(
        "gemm_cluster_counters", len(counters), config=study_config,
        gpu={"name": "synthetic test data", "sm_count": SM_COUNT}, ncu_version="Version 2025.3.1.0",
        metrics={}, metrics_left_out=[])))
    return folder
