"""Fences that order mbarrier initialisation and generic-proxy shared-memory
writes before the async proxy (TMA, bulk copies) uses them. No operands."""

from numba.cuda.extending import intrinsic

from ._asm import asm_intrinsic


@intrinsic
def fence_mbarrier_init_cluster(typingctx):
    """``fence.mbarrier_init.release.cluster;``: makes this thread's prior
    ``mbarrier.init`` visible to the cluster (before a cluster barrier and the
    first remote arrive or multicast copy)."""
    return asm_intrinsic("fence.mbarrier_init.release.cluster;", (), ())


@intrinsic
def fence_proxy_async_shared(typingctx):
    """``fence.proxy.async.shared::cta;``: orders this thread's generic-proxy
    shared-memory accesses with later async-proxy ones (e.g. ``st.shared``
    before a TMA store reads the buffer)."""
    return asm_intrinsic("fence.proxy.async.shared::cta;", (), ())
