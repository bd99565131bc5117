"""Inline-PTX intrinsics for Hopper (sm_90a) numba-cuda kernels: TMA, bulk
copies, cp.async, mbarriers, clusters and distributed shared memory.

Every name is a numba ``@intrinsic`` (callable inside ``@cuda.jit`` code only),
except the factory ``cp_async_wait_group(n)``. Shared-memory operands are uint32
shared-window addresses (``smem_u32``), global ones uint64 generic addresses
(``addr_of``); each module's docstring gives its operands, each intrinsic's the
exact PTX it emits.
"""

# First, before numba compiles anything: numba-cuda 0.30.4 fails every compile
# on numpy >= 2.5 unless np.row_stack is shimmed.
import tma_kernels.numpy_compat  # noqa: F401  isort: skip

from .address import addr_of, smem_u32
from .barrier import named_barrier_red_or, named_barrier_sync
from .bulk import bulk_copy_to_peer, bulk_load, bulk_store
from .cache_policy import l2_policy_evict_first, l2_policy_evict_last
from .cluster import (
    cluster_arrive,
    cluster_arrive_relaxed,
    cluster_ctaid_x,
    cluster_ctarank,
    cluster_nctaid_x,
    cluster_nctarank,
    cluster_sync,
    cluster_wait,
    clusterid_x,
    nclusterid_x,
    smid,
)
from .cp_async import (
    cp_async_ca16,
    cp_async_cg16,
    cp_async_commit,
    cp_async_mbarrier_arrive_noinc,
    cp_async_wait_all,
    cp_async_wait_group,
)
from .dsm import (
    ld_shared_cluster_u32,
    ld_shared_cluster_v4_u32,
    mapa_shared,
    st_shared_cluster_u32,
    st_shared_cluster_v4_u32,
)
from .fence import fence_mbarrier_init_cluster, fence_proxy_async_shared
from .grid_dependency import griddepcontrol_launch_dependents, griddepcontrol_wait
from .mbarrier import (
    mbarrier_arrive,
    mbarrier_arrive_cluster,
    mbarrier_arrive_expect_tx,
    mbarrier_arrive_remote,
    mbarrier_expect_tx,
    mbarrier_init,
    mbarrier_test_wait_parity,
    mbarrier_try_wait_parity,
    mbarrier_try_wait_parity_hint,
    mbarrier_wait_parity,
    mbarrier_wait_parity_acquire_cluster,
)
from .timer import clock64, globaltimer
from .tma import (
    bulk_commit_group,
    bulk_wait_group0,
    bulk_wait_group_read0,
    tma_load_1d,
    tma_load_1d_multicast,
    tma_load_2d,
    tma_load_2d_cache_hint,
    tma_load_2d_multicast,
    tma_load_3d,
    tma_load_3d_multicast,
    tma_load_4d,
    tma_load_4d_multicast,
    tma_load_5d,
    tma_load_5d_cache_hint,
    tma_load_5d_multicast,
    tma_prefetch_descriptor,
    tma_store_1d,
    tma_store_2d,
)
from .vector import (
    ld_global_nc_v4_u32,
    ld_global_v4_u32,
    ld_shared_u32,
    ld_shared_v4_u32,
    st_global_v4_u32,
    st_shared_u32,
    st_shared_v4_u32,
)

__all__ = [
    "addr_of", "smem_u32",
    "named_barrier_red_or", "named_barrier_sync",
    "bulk_copy_to_peer", "bulk_load", "bulk_store",
    "l2_policy_evict_first", "l2_policy_evict_last",
    "cluster_arrive", "cluster_arrive_relaxed", "cluster_ctaid_x", "cluster_ctarank",
    "cluster_nctaid_x", "cluster_nctarank", "cluster_sync", "cluster_wait",
    "clusterid_x", "nclusterid_x", "smid",
    "cp_async_ca16", "cp_async_cg16", "cp_async_commit", "cp_async_mbarrier_arrive_noinc",
    "cp_async_wait_all", "cp_async_wait_group",
    "ld_shared_cluster_u32", "ld_shared_cluster_v4_u32", "mapa_shared",
    "st_shared_cluster_u32", "st_shared_cluster_v4_u32",
    "fence_mbarrier_init_cluster", "fence_proxy_async_shared",
    "griddepcontrol_launch_dependents", "griddepcontrol_wait",
    "mbarrier_arrive", "mbarrier_arrive_cluster", "mbarrier_arrive_expect_tx",
    "mbarrier_arrive_remote", "mbarrier_expect_tx", "mbarrier_init", "mbarrier_test_wait_parity",
    "mbarrier_try_wait_parity", "mbarrier_try_wait_parity_hint",
    "mbarrier_wait_parity", "mbarrier_wait_parity_acquire_cluster",
    "clock64", "globaltimer",
    "bulk_commit_group", "bulk_wait_group0", "bulk_wait_group_read0",
    "tma_load_1d", "tma_load_1d_multicast", "tma_load_2d", "tma_load_2d_cache_hint",
    "tma_load_2d_multicast", "tma_load_3d", "tma_load_3d_multicast", "tma_load_4d",
    "tma_load_4d_multicast", "tma_load_5d", "tma_load_5d_cache_hint", "tma_load_5d_multicast",
    "tma_prefetch_descriptor", "tma_store_1d", "tma_store_2d",
    "ld_global_nc_v4_u32", "ld_global_v4_u32", "ld_shared_u32", "ld_shared_v4_u32", "st_shared_u32",
    "st_global_v4_u32", "st_shared_v4_u32",
]
