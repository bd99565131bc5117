"""The kernels the compile step builds for this study, with the SASS each must contain."""


def compile_list():
    """[(name, python function, signature, expected SASS prefixes)]."""
    from tma_kernels.dsm import bandwidth, broadcast, latency
    return [
        # pull: remote 128-bit loads (generic LD.E.128 on a shared::cluster address), the leader's
        # .release.cluster arrive (MEMBAR.ALL.GPU) and the peers' .acquire.cluster wait (CCTL.IVALL)
        ("broadcast_dsm_pull", broadcast.make_broadcast("dsm_pull"), broadcast.SIGNATURE,
         ("UTMALDG.2D", "LD.E.128", "MEMBAR.ALL.GPU", "CCTL.IVALL", "SYNCS.ARRIVE.TRANS64.RED")),
        # push: shared::cta -> shared::cluster bulk copy, then wait for its reads
        ("broadcast_dsm_push", broadcast.make_broadcast("dsm_push"), broadcast.SIGNATURE,
         ("UTMALDG.2D", "UBLKCP.S.S", "DEPBAR.LE", "LDS.128", "SYNCS.ARRIVE.TRANS64.RED")),
        ("dsm_latency_chase", latency.chase, latency.SIGNATURE, ("LD.E", "LDS", "CS2R")),
        ("dsm_neighbour_read", bandwidth.make_neighbour_read(True), bandwidth.SIGNATURE, ("LD.E.128",)),
        ("dsm_own_read", bandwidth.make_neighbour_read(False), bandwidth.SIGNATURE, ("LDS.128",)),
    ]
