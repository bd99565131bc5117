"""Synthetic raw data of the gemm_cluster study whose gains are known (for its tests and the
paper-tier tests, before the study's first measurement lands). No tests here."""
import json
from pathlib import Path

import pandas as pd

from raw_fixture import valid_provenance
from tma_study.gemm_lib import variants as gemm_variants
from tma_study.gemm_lib import cluster_configs as configs
from tma_study.studies.gemm_cluster import schedule

REPO = Path(__file__).resolve().parents[3]

BASE_US = {4096: 200.0, 8192: 1600.0, 16384: 12800.0}
# time factor of each (cluster, swizzle) against the 1x1 at swizzle 1, for every family:
#   1x1: best at swizzle 2 (1/0.95 = 5.3 % faster than swizzle 1)
#   2x1: 1/0.90 over the 1x1 at swizzle 1, best at swizzle 4 (0.88): 0.95/0.88 = 8.0 % over the best 1x1
#   1x2: the same at every swizzle (the best is swizzle 1 by the tie rule): 0.95/0.94 = 1.1 %, a tie
#   2x2: 1/0.96 at swizzle 1 and best at swizzle 8 (0.945): 0.95/0.945 = 0.5 %, a tie
FACTOR = {"1x1": {1: 1.0, 2: 0.95, 4: 0.97, 8: 0.99}, "2x1": {1: 0.90, 2: 0.89, 4: 0.88, 8: 0.885},
          "1x2": {1: 0.94, 2: 0.94, 4: 0.94, 8: 0.94}, "2x2": {1: 0.96, 2: 0.955, 4: 0.95, 8: 0.945}}
NOISY = ("tma_pingpong_t128x128x64", "2x1")        # this variant's rounds alternate by 10 %: its gains are ties


def synthetic_samples(study_config: dict) -> pd.DataFrame:
    rows = []
    for shape in schedule.shapes(study_config):
        for samples in schedule.plan(study_config, shape):
            for s in samples:
                v = gemm_variants.parse_name(s.configuration.variant)
                family = configs.family_name(v.mainloop, (v.tile_m, v.tile_n, v.tile_k))
                noise = 1 + 0.002 * (-1) ** s.round
                if (family, v.cluster) == NOISY:
                    noise = 1 + 0.10 * (-1) ** s.round
                time_us = BASE_US[shape.size] * FACTOR[v.cluster][s.configuration.swizzle] * noise
                time_us *= 0.6 if shape.dtype == "fp8_e4m3" else 1.0
                clock = 1500.0 + 10 * (v.cluster != "1x1")
                rows.append({"size": shape.size, "dtype": shape.dtype, "m": shape.size, "n": shape.size,
                             "k": shape.size, "flop": shape.flop, "round": s.round, "position": s.position,
                             "variant": v.name, "family": family, "mainloop": v.mainloop, "tile": v.tile,
                             "cluster": v.cluster, "swizzle": s.configuration.swizzle,
                             "raster_order": s.configuration.raster_order, "launches": s.launches,
                             "time_us": time_us, "t_s": 0.02 * (s.round * 100 + s.position),
                             "sm_clock_mhz_mean": clock, "sm_clock_mhz_min": clock - 15, "clock_readings": 20,
                             "power_w_mean": 690.0, "temperature_c": 60.0, "clocks_event_reasons": 4,
                             "power_capped": True, "tflops": shape.flop / (time_us * 1e6),
                             "measured_on": "synthetic test data"})
    return pd.DataFrame(rows)


def synthetic_raw(folder: Path, study_config: dict, multicast: bool = True) -> Path:
    """samples.csv, kernels.csv and provenance.json as measure.py writes them, in results/<label>/gemm_cluster/
    beside the committed multicast data (linked), as the aggregate step finds them."""
    folder.mkdir(parents=True, exist_ok=True)
    samples = synthetic_samples(study_config)
    samples.to_csv(folder / "samples.csv", index=False)
    names = samples.variant.unique()
    pd.DataFrame([{**gemm_variants.parse_name(n).columns(), "registers": 168, "spill_store_bytes": 0,
                   "spill_load_bytes": 0} for n in names]).to_csv(folder / "kernels.csv", index=False)
    (folder / "provenance.json").write_text(json.dumps(valid_provenance(
        "gemm_cluster", len(samples), config=study_config, gpu={"name": "synthetic test data"})))
    if multicast and not (folder.parent / "multicast").exists():
        (folder.parent / "multicast").symlink_to(REPO / "results" / "h200" / "multicast")
    return folder
