"""The kernels the compile step builds for this study, with the SASS each must contain."""
from __future__ import annotations

from tma_study.harness.cluster_ring import CONSUMER_SASS
from tma_study.harness.kernel_builds import KernelBuild


def compile_list(study_config: dict | None = None) -> list[KernelBuild]:
    """Every kernel the study times (the same whatever the sweep)."""
    from tma_kernels.dsm import bandwidth, broadcast, latency
    from tma_kernels.multicast import SIGNATURE, cluster_stream

    return [
        # the multicast ring the DSM broadcasts are compared with (multicast study's build)
        KernelBuild("cluster_stream_multicast", cluster_stream(True), SIGNATURE,
                    ("UTMALDG.2D.MULTICAST", "SYNCS.ARRIVE.TRANS64.RED") + CONSUMER_SASS),
        # pull: remote 128-bit loads (generic LD.E.128 on a shared::cluster address), the leader's
        # .release.cluster arrive (MEMBAR.ALL.GPU) and the peers' .acquire.cluster wait (CCTL.IVALL)
        KernelBuild("broadcast_dsm_pull", broadcast.make_broadcast("dsm_pull"), broadcast.SIGNATURE,
                    ("UTMALDG.2D", "LD.E.128", "MEMBAR.ALL.GPU", "CCTL.IVALL", "SYNCS.ARRIVE.TRANS64.RED")),
        # push: shared::cta -> shared::cluster bulk copy, then wait for its reads
        KernelBuild("broadcast_dsm_push", broadcast.make_broadcast("dsm_push"), broadcast.SIGNATURE,
                    ("UTMALDG.2D", "UBLKCP.S.S", "DEPBAR.LE", "LDS.128", "SYNCS.ARRIVE.TRANS64.RED")),
        KernelBuild("dsm_latency_chase", latency.chase, latency.SIGNATURE, ("LD.E", "LDS", "CS2R")),
        KernelBuild("dsm_neighbour_read", bandwidth.make_neighbour_read(True, "ring"), bandwidth.SIGNATURE,
                    ("LD.E.128",)),
        KernelBuild("dsm_pair_read", bandwidth.make_neighbour_read(True, "pair"), bandwidth.SIGNATURE, ("LD.E.128",)),
        KernelBuild("dsm_own_read", bandwidth.make_neighbour_read(False), bandwidth.SIGNATURE, ("LDS.128",)),
    ]
