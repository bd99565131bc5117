"""The kernel table every gemm study writes (paper/tables/<study>_kernels.*): each CUTLASS variant's
accumulation, registers, stages, shared memory, spills, compile time and key SASS, from its
compile report."""
from __future__ import annotations

import pandas as pd

# variants.ACCUMULATION keys as the tables print them
ACCUMULATION_LABEL = {"fp32": "fp32", "fp8_no_promotion": "no promotion", "fp8_promoted": "promoted"}


def kernels_table(kernels: pd.DataFrame) -> pd.DataFrame:
    columns = {"variant": "variant", "accumulation": "accumulation", "registers": "regs/thread",
               "abi_stages": "stages", "abi_shared_storage_bytes": "smem B", "spill_store_bytes": "spill B",
               "compile_seconds": "nvcc s", "expected_sass": "key SASS (count)"}
    present = [c for c in columns if c in kernels.columns]
    table = kernels[present].rename(columns=columns)
    if "accumulation" in table.columns:
        table["accumulation"] = table["accumulation"].map(lambda v: ACCUMULATION_LABEL.get(v, v))
    return table
