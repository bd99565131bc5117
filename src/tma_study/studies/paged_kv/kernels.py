"""The kernels the compile step builds for this study, with the SASS each must contain:
every attention variant the configured sweep runs (the study's config section), the
launch-bounded builds of its decode variants that the measure step chooses among
(``residency_targets``; ptxas may refuse a cap too low), and the split combine at a few split
counts (the sweep picks its counts at run time; tests/cpu/paged_kv/test_kernels.py checks
that each count's loads unroll)."""
from __future__ import annotations

import dataclasses

from tma_kernels.paged_kv.geometry import resident_ctas_per_sm
from tma_kernels.paged_kv.tma_boxes import TMA_BOXES

from tma_study.harness.kernel_builds import KernelBuild

#: P V (and, but in the wgmma consumers, S): mma.sync, e4m3 unpacked to fp16 first; the consumers
#: with P V on wgmma too (register_v, e4m3 only: kq_wgmma_rs_lazy, ...) take e4m3 as it is, by QGMMA
MMA_SASS = {"bf16": ("HMMA.16816.F32.BF16",), "e4m3": ("F2FP.F16.E4M3.UNPACK_B", "HMMA.16816.F32"),
            "e4m3_pv_wgmma": ("QGMMA.64",)}
CP_ASYNC_SASS = ("LDGSTS.E.BYPASS.128",)
#: the TMA path's: each load shape's own (its record in tma_kernels.paged_kv.tma_boxes)
TMA_BOX_SASS = {name: box.expected_sass for name, box in TMA_BOXES.items()}
#: every attention kernel; PREEXIT: griddepcontrol.launch_dependents (the combine's early launch)
CONSUMER_SASS = ("LDSM.16.MT88.4", "MUFU.EX2", "SYNCS.PHASECHK", "PREEXIT")
#: Q or K through ldmatrix (mma.sync operands); the wgmma consumers' S^T reads K and Q from
#: shared memory by descriptor instead: HGMMA (bf16) or QGMMA (e4m3), the warpgroup mma
SCORE_SASS = {"mma_sync": ("LDSM.16.M88.4",), "bf16_wgmma": ("HGMMA.64",), "e4m3_wgmma": ("QGMMA.64",)}
COMBINE_SASS = ("MUFU.EX2", "FFMA", "LDG.E", "ACQBULK")   # ACQBULK: griddepcontrol.wait
COMBINE_SPLIT_COUNTS = (2, 8, 85)        # 85: the largest count in the H200 reference data
BOUNDED_SPILL_BYTES = 256           # per thread, for a launch-bounded decode kernel (to L1)


def residency_targets(variant, min_ctas_per_sm: int) -> list[tuple[int, int]]:
    """(CTAs per SM, spilled bytes per thread allowed) to try launch bounds for, most first:
    as many CTAs as shared memory lets reside, without spills (more residency only where
    the registers give it for free: e4m3 at head dim 128, 172 -> 168 registers, 4 -> 6
    CTAs), then config ``decode_min_ctas_per_sm`` with BOUNDED_SPILL_BYTES."""
    by_shared = resident_ctas_per_sm(1, variant.threads, variant.dynamic_shared_bytes)
    targets = [(min_ctas_per_sm, BOUNDED_SPILL_BYTES)]
    if by_shared > min_ctas_per_sm:
        targets.insert(0, (by_shared, 0))
    return targets


def bounded_variants(variant, min_ctas_per_sm: int) -> list:
    """The launch-bounded builds of a decode ``variant`` that the measure step chooses among."""
    return [dataclasses.replace(variant, min_ctas_per_sm=target)
            for target, _ in residency_targets(variant, min_ctas_per_sm) if target > 1]


def _mma_sass(variant) -> tuple[str, ...]:
    return MMA_SASS[f"{variant.dtype}_pv_wgmma" if variant.layout.register_v else variant.dtype]


def _score_sass(variant) -> tuple[str, ...]:
    return SCORE_SASS[f"{variant.dtype}_wgmma" if variant.layout.uses_wgmma else "mma_sync"]


def expected_sass(variant) -> tuple[str, ...]:
    """The SASS instruction prefixes ``variant``'s attention kernel must contain."""
    path = TMA_BOX_SASS[variant.tma_box] if variant.load_path == "tma" else CP_ASYNC_SASS
    return _mma_sass(variant) + path + CONSUMER_SASS + _score_sass(variant)


def sweep_builds(study_config: dict) -> tuple[list, list]:
    """(every variant the sweep runs, the launch-bounded builds of its decode variants), by name."""
    from .grid import sweep_configs
    configs = sweep_configs(study_config)
    variants = sorted({c.variant() for c in configs}, key=lambda v: v.name)
    decode = sorted({c.variant() for c in configs if c.phase.name == "decode"}, key=lambda v: v.name)
    bounded = [b for v in decode for b in bounded_variants(v, study_config["decode_min_ctas_per_sm"])]
    return variants, bounded


def attention_build(variant, may_be_refused: bool = False) -> KernelBuild:
    from tma_kernels.paged_kv.kernel import SIGNATURE, make_attention_kernel
    return KernelBuild(variant.name, make_attention_kernel(variant), SIGNATURE, expected_sass(variant),
                       may_be_refused)


def compile_list(study_config: dict) -> list[KernelBuild]:
    """Every attention build the sweep of ``study_config`` may time, and the combines."""
    from tma_kernels.paged_kv.combine import COMBINE_SIGNATURE, make_combine
    variants, bounded = sweep_builds(study_config)
    kernels = [attention_build(v) for v in variants] + [attention_build(b, True) for b in bounded]
    kernels += [KernelBuild(f"combine_splits_{n}", make_combine(n), COMBINE_SIGNATURE, COMBINE_SASS)
                for n in COMBINE_SPLIT_COUNTS]
    return kernels
