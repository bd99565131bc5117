"""The kernels the compile step builds for this study, with the SASS each must contain:
every attention variant the configured sweep runs (config/config.yaml, studies.paged_kv)
and the split combine at a few split counts (the sweep picks its counts at run time;
tests/cpu/test_paged_kv_kernels.py checks that each count's loads unroll)."""
from __future__ import annotations

import yaml
from tma_kernels.paged_kv.geometry import PV_WGMMA_LAYOUTS, WGMMA_LAYOUTS

from tma_study.config import REPO_ROOT

#: P V (and, but in the wgmma consumers, S): mma.sync, e4m3 unpacked to fp16 first; the consumers
#: with P V on wgmma too (e4m3 only: kq_wgmma_rs_lazy, ...) take e4m3 as it is, by QGMMA
MMA_SASS = {"bf16": ("HMMA.16816.F32.BF16",), "e4m3": ("F2FP.F16.E4M3.UNPACK_B", "HMMA.16816.F32"),
            "e4m3_pv_wgmma": ("QGMMA.64",)}
PATH_SASS = {"tma": ("UTMALDG.4D",), "cp_async": ("LDGSTS.E.BYPASS.128",)}
#: every attention kernel; PREEXIT: griddepcontrol.launch_dependents (the combine's early launch)
CONSUMER_SASS = ("LDSM.16.MT88.4", "MUFU.EX2", "SYNCS.PHASECHK", "PREEXIT")
#: Q or K through ldmatrix (mma.sync operands); the wgmma consumers' S^T reads K and Q from
#: shared memory by descriptor instead: HGMMA (bf16) or QGMMA (e4m3), the warpgroup mma
SCORE_SASS = {"mma_sync": ("LDSM.16.M88.4",), "bf16_wgmma": ("HGMMA.64",), "e4m3_wgmma": ("QGMMA.64",)}
COMBINE_SASS = ("MUFU.EX2", "FFMA", "LDG.E", "ACQBULK")   # ACQBULK: griddepcontrol.wait
COMBINE_SPLIT_COUNTS = (2, 8, 85)        # 85: the largest count in the H200 reference data
CONFIG = REPO_ROOT / "config" / "config.yaml"


def _mma_sass(variant) -> tuple[str, ...]:
    return MMA_SASS[f"{variant.dtype}_pv_wgmma" if variant.score_layout in PV_WGMMA_LAYOUTS else variant.dtype]


def _score_sass(variant) -> tuple[str, ...]:
    return SCORE_SASS[f"{variant.dtype}_wgmma" if variant.score_layout in WGMMA_LAYOUTS else "mma_sync"]


def compile_list():
    """[(name, python function, signature, expected SASS prefixes)]."""
    from tma_kernels.paged_kv import (
        COMBINE_SIGNATURE,
        SIGNATURE,
        make_attention_kernel,
        make_combine,
    )

    from .grid import sweep_configs
    study = yaml.safe_load(CONFIG.read_text())["studies"]["paged_kv"]
    variants = sorted({c.variant() for c in sweep_configs(study)}, key=lambda v: v.name)
    kernels = [(v.name, make_attention_kernel(v), SIGNATURE,
                _mma_sass(v) + PATH_SASS[v.load_path] + CONSUMER_SASS + _score_sass(v)) for v in variants]
    kernels += [(f"combine_splits_{n}", make_combine(n), COMBINE_SIGNATURE, COMBINE_SASS)
                for n in COMBINE_SPLIT_COUNTS]
    return kernels
