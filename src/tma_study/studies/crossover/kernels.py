"""The kernels the compile step builds for this study, with the SASS each must contain."""
from __future__ import annotations

from tma_study.harness.kernel_builds import KernelBuild

# mechanism -> SASS mnemonics (prefixes) its producer must compile to
EXPECTED_SASS = {
    "tma_tile": ("UTMALDG.2D",),
    "bulk_copy": ("UBLKCP.S.G",),
    "cp_async": ("LDGSTS.E.BYPASS.128", "ARRIVES.LDGSTSBAR"),
    "plain_loads": ("LDG.E.128", "STS.128"),
}
CONSUMER_SASS = ("LDS.128", "SYNCS.PHASECHK")


def compile_list(study_config: dict | None = None) -> list[KernelBuild]:
    """Every kernel the study times (the same whatever the sweep)."""
    from tma_kernels.crossover import (
        KERNEL_SIGNATURE,
        LATENCY_SIGNATURE,
        MECHANISMS,
        READ_SIGNATURE,
        latency_kernel,
        read_stream,
        stream_kernel,
    )
    kernels = [KernelBuild(f"stream_{m}", stream_kernel(m), KERNEL_SIGNATURE, EXPECTED_SASS[m] + CONSUMER_SASS)
               for m in MECHANISMS]
    kernels += [KernelBuild(f"latency_{m}", latency_kernel(m), LATENCY_SIGNATURE, EXPECTED_SASS[m] + ("CS2R",))
                for m in MECHANISMS]
    kernels.append(KernelBuild("read_stream", read_stream, READ_SIGNATURE, ("LDG.E.128",)))
    return kernels
