"""The kernels the compile step builds for this study, with the SASS each must contain."""
from __future__ import annotations

from tma_study.harness.kernel_builds import KernelBuild

CONSUMER_SASS = ("LDS.128", "SYNCS.PHASECHK")


def compile_list(study_config: dict | None = None) -> list[KernelBuild]:
    """Every kernel the study times (the same whatever the sweep)."""
    from tma_kernels.multicast import SIGNATURE, cluster_stream
    return [
        # no_cluster and cluster run this one binary: nothing in it touches another CTA
        KernelBuild("cluster_stream_own_copy", cluster_stream(False), SIGNATURE, ("UTMALDG.2D",) + CONSUMER_SASS),
        KernelBuild("cluster_stream_multicast", cluster_stream(True), SIGNATURE,
                    ("UTMALDG.2D.MULTICAST", "SYNCS.ARRIVE.TRANS64.RED", "UCGABAR_ARV", "UCGABAR_WAIT") + CONSUMER_SASS),
        # release once per CTA: the consumer warps meet at a named barrier first
        KernelBuild("cluster_stream_own_copy_cta_release", cluster_stream(False, "cta"), SIGNATURE,
                    ("UTMALDG.2D", "BAR.SYNC") + CONSUMER_SASS),
        KernelBuild("cluster_stream_multicast_cta_release", cluster_stream(True, "cta"), SIGNATURE,
                    ("UTMALDG.2D.MULTICAST", "SYNCS.ARRIVE.TRANS64.RED", "BAR.SYNC") + CONSUMER_SASS),
    ]
