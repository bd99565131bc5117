"""A synthetic raw folder of the gemm study, shaped like measure.py writes it (for CPU tests).

SM90 rows are 'measured' with made-up but plausible TFLOP/s (TMA faster than cp.async on big
shapes, slower on the smallest; 2x1 multicast a little faster); SM100 rows are not measured,
as on an H200.
"""
import json
from pathlib import Path

import pandas as pd

from raw_fixture import valid_provenance
from tma_study.gemm_lib import shapes as shapes_mod
from tma_study.gemm_lib import variants as V
from tma_study.studies.gemm.measure import (
    CUBLAS,
    CUBLAS_ACCUMULATION,
    MEASURED,
    NOT_MEASURED,
)

STUDY = {
    "variants": {
        "sm90": {"mainloops": ["tma_cooperative", "cpasync_cooperative"], "dtypes": ["bf16", "fp8_e4m3"],
                 "tiles": [[128, 256, 64]], "clusters": [[1, 1], [2, 1]]},
        "sm100": {"mainloops": ["tma_1sm", "cpasync_1sm"], "dtypes": ["bf16"], "tiles": [[128, 256, 64]],
                  "clusters": [[1, 1]]},
    },
    "shapes": {"square": [1024, 8192], "tokens": [16, 4096], "projections": {"llama3_8b/q_o": [4096, 4096]}},
    "correctness": {"samples": 256, "rtol_output": 0.0078125, "rtol_accumulate": 0.000244140625},
    "timing": {"max_noise": 0.01, "min_time_s": 0.005, "min_samples": 10, "timeout_s": 0.5,
               "preheat_min_gflop": 50, "preheat_s": 0.5, "order_seed": 0},
}
CUBLAS_TFLOPS = {"bf16": 780.0, "fp8_e4m3": 1400.0}


def _timing(flop: int, tflops: float) -> dict:
    us = flop / (tflops * 1e12) * 1e6
    return {"time_us_median": us, "time_us_q1": us * 0.995, "time_us_q3": us * 1.005, "time_us_iqr": us * 0.01,
            "time_us_min": us * 0.99, "time_us_max": us * 1.02, "time_relative_stdev": 0.004, "samples": 50,
            "sm_clock_mhz_mean": 1980.0, "timing_status": "ok", "tflops": flop / (us * 1e-6) / 1e12,
            "max_error_over_bound": 0.1}


def _tflops(v: V.Variant, shape: shapes_mod.Shape) -> float:
    base = CUBLAS_TFLOPS[v.dtype] * (0.97 if shape.m >= 4096 else 0.6)
    if v.load == "cpasync":
        base *= 0.8 if shape.m >= 4096 else 1.1
    if v.cluster == "2x1":
        base *= 1.01
    return base


def write_raw_folder(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for shape in shapes_mod.shapes(STUDY):
        for dtype in ("bf16", "fp8_e4m3"):
            cublas = CUBLAS_TFLOPS[dtype] * (1.0 if shape.m >= 4096 else 0.65)
            rows.append({"variant": f"{CUBLAS}_{dtype}", "arch": "sm90", "implementation": CUBLAS, "dtype": dtype,
                         "load": CUBLAS, "accumulation": CUBLAS_ACCUMULATION[dtype], **shape.columns(),
                         "status": MEASURED, **_timing(shape.flop, cublas)})
            for v in (v for v in V.variants(STUDY, "sm90") if v.dtype == dtype):
                rows.append({**v.columns(), "implementation": "cutlass", **shape.columns(), "status": MEASURED,
                             **_timing(shape.flop, _tflops(v, shape))})
        for v in V.variants(STUDY, "sm100"):
            rows.append({**v.columns(), "implementation": "cutlass", **shape.columns(), "status": NOT_MEASURED["sm100"]})
    pd.DataFrame(rows).assign(measured_on="synthetic test data").to_csv(folder / "gemm.csv", index=False)
    pd.DataFrame([{**v.columns(), "registers": 168, "abi_stages": 4, "abi_shared_storage_bytes": 200000,
                   "spill_store_bytes": 0, "spill_load_bytes": 0, "compile_seconds": 45.0,
                   "expected_sass": "UTMALDGx4 HGMMAx8"}
                  for v in V.variants(STUDY)]).to_csv(folder / "kernels.csv", index=False)
    provenance = valid_provenance("gemm", sum(r["status"] == MEASURED for r in rows), config=STUDY,
                                  gpu={"name": "synthetic test data"}, measured_arch="sm90",
                                  not_measured_arches={"sm100": NOT_MEASURED["sm100"]}, estimated_gpu_seconds=200.0)
    (folder / "provenance.json").write_text(json.dumps(provenance, indent=2))
    return folder
