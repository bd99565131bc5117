"""The kernels the compile step builds for this study, with the SASS each must contain."""
from __future__ import annotations

from tma_study.harness.kernel_builds import KernelBuild

CHASE_SASS = {
    "tma_tile": ("UTMALDG.2D", "SYNCS.ARRIVE.TRANS64", "SYNCS.PHASECHK.TRANS64.TRYWAIT", "CS2R"),
    "bulk_copy": ("UBLKCP.S.G", "SYNCS.ARRIVE.TRANS64", "SYNCS.PHASECHK.TRANS64.TRYWAIT", "CS2R"),
    "plain_indexed": ("LDG.E", "SHF.L.U64.HI", "CS2R"),   # ptxas keeps the one word (the index) used
    "plain_minimal": ("LDG.E.64", "CS2R"),      # ptxas keeps the two words the chase uses
}
ISSUE_RATE_SASS = {"tma_tile": ("UTMALDG.2D", "SYNCS.ARRIVE.TRANS64"),
                   "bulk_copy": ("UBLKCP.S.G", "SYNCS.ARRIVE.TRANS64")}


def compile_list(study_config: dict | None = None) -> list[KernelBuild]:
    """Every kernel the study times (the same whatever the sweep)."""
    from tma_kernels.tma_issue import CHASE_SIGNATURE, FORMS, ISSUE_RATE_SIGNATURE, chase_kernel, issue_rate_kernel
    builds = [KernelBuild(f"chase_{form}", chase_kernel(form), CHASE_SIGNATURE, CHASE_SASS[form]) for form in FORMS]
    builds += [KernelBuild(f"issue_rate_{m}", issue_rate_kernel(m), ISSUE_RATE_SIGNATURE, ISSUE_RATE_SASS[m])
               for m in ISSUE_RATE_SASS]
    return builds
