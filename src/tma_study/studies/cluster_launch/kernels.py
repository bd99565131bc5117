"""The kernels the compile step builds for this study, with the SASS each must contain."""
from __future__ import annotations

from tma_study.harness.kernel_builds import KernelBuild

KERNEL = "cluster_launch_record_placement"
# %globaltimer -> CS2R SR_GLOBALTIMERLO; %smid -> S2R SR_VIRTUALSMID; %cluster_ctarank -> S2R
# SR_CgaCtaId; %clusterid.x is ctaid.x times the reciprocal cluster size (F2I.U32.TRUNC)
RECORD_SASS = ("CS2R", "S2R", "F2I.U32.TRUNC", "STG.E.64", "STG.E")


def compile_list(study_config: dict | None = None) -> list[KernelBuild]:
    """The one kernel the study times (the same whatever the sweep): no_cluster and every cluster
    size run this binary."""
    from tma_kernels.cluster_launch import SIGNATURE, record_placement
    return [KernelBuild(KERNEL, record_placement, SIGNATURE, RECORD_SASS)]
