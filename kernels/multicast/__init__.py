"""Kernels of the ``multicast`` study: a cluster ring where every CTA of a cluster needs the
same tiles, loaded with TMA per CTA or with TMA multicast (see :mod:`.ring`)."""
from .ring import (
    MAX_CLUSTER_SIZE,
    MAX_STAGES,
    RELEASES,
    ROW_BYTES,
    ROW_ELEMENTS,
    SIGNATURE,
    dynamic_shared_bytes,
    make_cluster_stream,
    sharers,
    threads_per_cta,
)

VARIANT_KERNEL = {"no_cluster": False, "cluster": False, "multicast": True}   # variant -> multicast build


def cluster_stream(multicast: bool, release: str = "warp"):
    """The Python kernel function for one build (compile it with SIGNATURE)."""
    return make_cluster_stream(multicast, release)


__all__ = ["MAX_CLUSTER_SIZE", "MAX_STAGES", "RELEASES", "ROW_BYTES", "ROW_ELEMENTS", "SIGNATURE", "VARIANT_KERNEL",
           "cluster_stream", "dynamic_shared_bytes", "sharers", "threads_per_cta"]
