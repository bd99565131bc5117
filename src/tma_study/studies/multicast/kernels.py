"""The kernels the compile step builds for this study, with the SASS each must contain."""

CONSUMER_SASS = ("LDS.128", "SYNCS.PHASECHK")


def compile_list():
    """[(name, python function, signature, expected SASS prefixes)]."""
    from tma_kernels.multicast import SIGNATURE, cluster_stream
    return [
        # no_cluster and cluster run this one binary: nothing in it touches another CTA
        ("cluster_stream_own_copy", cluster_stream(False), SIGNATURE, ("UTMALDG.2D",) + CONSUMER_SASS),
        ("cluster_stream_multicast", cluster_stream(True), SIGNATURE,
         ("UTMALDG.2D.MULTICAST", "SYNCS.ARRIVE.TRANS64.RED", "UCGABAR_ARV", "UCGABAR_WAIT") + CONSUMER_SASS),
        # release once per CTA: the consumer warps meet at a named barrier first
        ("cluster_stream_own_copy_cta_release", cluster_stream(False, "cta"), SIGNATURE,
         ("UTMALDG.2D", "BAR.SYNC") + CONSUMER_SASS),
        ("cluster_stream_multicast_cta_release", cluster_stream(True, "cta"), SIGNATURE,
         ("UTMALDG.2D.MULTICAST", "SYNCS.ARRIVE.TRANS64.RED", "BAR.SYNC") + CONSUMER_SASS),
    ]
