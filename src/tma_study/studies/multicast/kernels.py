"""The kernels the compile step builds for this study, with the SASS each must contain."""
from __future__ import annotations

from tma_study.harness.cluster_ring import CONSUMER_SASS
from tma_study.harness.kernel_builds import KernelBuild

# the compute consumer's churn: one 32-bit IMAD per word and round (consume.LCG_MULTIPLIER, a 21-bit constant)
COMPUTE_SASS = ("IMAD",)


def compile_list(study_config: dict | None = None) -> list[KernelBuild]:
    """Every kernel the study times (the same whatever the sweep)."""
    from tma_kernels.multicast import COMPUTE_SIGNATURE, SIGNATURE, cluster_compute_stream, cluster_stream
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
        # the compute consumer (work_rounds IMADs per word) and the tile order are runtime arguments
        KernelBuild("cluster_compute_stream_own_copy", cluster_compute_stream(False), COMPUTE_SIGNATURE,
                    ("UTMALDG.2D",) + CONSUMER_SASS + COMPUTE_SASS),
        KernelBuild("cluster_compute_stream_multicast", cluster_compute_stream(True), COMPUTE_SIGNATURE,
                    ("UTMALDG.2D.MULTICAST", "SYNCS.ARRIVE.TRANS64.RED", "UCGABAR_ARV", "UCGABAR_WAIT")
                    + CONSUMER_SASS + COMPUTE_SASS),
    ]
