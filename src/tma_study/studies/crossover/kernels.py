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
# the issue-to-arrival chases (kernels/crossover/latency_chain.py): the bare issue, and each wait form
CHAIN_ISSUE_SASS = {
    "tma_tile": ("UTMALDG.2D", "SYNCS.ARRIVE.TRANS64"),
    "bulk_copy": ("UBLKCP.S.G", "SYNCS.ARRIVE.TRANS64"),
    "cp_async": ("LDGSTS.E.BYPASS.128", "ARRIVES.LDGSTSBAR"),
    "plain_loads": ("LDG.E.128",),
}
CHAIN_WAIT_SASS = {"try_wait": ("SYNCS.PHASECHK.TRANS64.TRYWAIT",),
                   "try_wait_hint": ("SYNCS.PHASECHK.TRANS64.TRYWAIT", "NANOSLEEP.SYNCS"),
                   "test_wait": ("SYNCS.PHASECHK.TRANS64",)}


def chain_waits(mechanism: str) -> tuple[str, ...]:
    """The wait forms a mechanism's issue-to-arrival chase is built with (plain loads: none)."""
    from tma_kernels.crossover import WAITS
    return ("try_wait",) if mechanism == "plain_loads" else WAITS


def chain_kernel_name(mechanism: str, wait: str) -> str:
    return "issue_to_arrival_plain_loads" if mechanism == "plain_loads" else f"issue_to_arrival_{mechanism}_{wait}"


def compile_list(study_config: dict | None = None) -> list[KernelBuild]:
    """Every kernel the study times (the same whatever the sweep)."""
    from tma_kernels.crossover import (
        CHAIN_SIGNATURE,
        KERNEL_SIGNATURE,
        LATENCY_SIGNATURE,
        MECHANISMS,
        READ_SIGNATURE,
        chain_kernel,
        latency_kernel,
        read_stream,
        stream_kernel,
    )
    kernels = [KernelBuild(f"stream_{m}", stream_kernel(m), KERNEL_SIGNATURE, EXPECTED_SASS[m] + CONSUMER_SASS)
               for m in MECHANISMS]
    kernels += [KernelBuild(f"latency_{m}", latency_kernel(m), LATENCY_SIGNATURE, EXPECTED_SASS[m] + ("CS2R",))
                for m in MECHANISMS]
    kernels += [KernelBuild(chain_kernel_name(m, wait), chain_kernel(m, wait), CHAIN_SIGNATURE,
                            CHAIN_ISSUE_SASS[m] + (CHAIN_WAIT_SASS[wait] if m != "plain_loads" else ()) + ("CS2R",))
                for m in MECHANISMS for wait in chain_waits(m)]
    kernels.append(KernelBuild("read_stream", read_stream, READ_SIGNATURE, ("LDG.E.128",)))
    return kernels
