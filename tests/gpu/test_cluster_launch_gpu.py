"""GPU: tma_kernels.launch runs numba kernels as thread-block clusters.

Checked here, each on fresh random data with poisoned outputs:
- cluster ids: every CTA of cluster sizes 1..16 records its rank, the cluster
  size, its cluster id and the cluster count, then reads each peer's shared
  flag through distributed shared memory (mapa + ld.shared::cluster) after a
  cluster barrier;
- TMA multicast (CUTLASS style): in a cluster of n CTAs, CTA r issues only
  slice r (TILE_ROWS / n rows) of the cluster's tile with CTA mask (1<<n)-1;
  every CTA expects the whole tile on its own mbarrier:

      cluster c, n = 4       source rows c*64 .. c*64+63
      CTA 0 issues rows  0..15 ──┐
      CTA 1 issues rows 16..31 ──┤ multicast, mask 0b1111
      CTA 2 issues rows 32..47 ──┤ ──> the full 64 x 32 tile in CTAs 0, 1, 2, 3
      CTA 3 issues rows 48..63 ──┘

- dynamic shared memory above 48 KiB (the attribute set by launch_cluster, and
  by set_max_dynamic_shared_bytes for numba's own launch);
- max_active_clusters: positive, decreasing with the cluster size.

Kernels are plain functions compiled on first use (``jitted``), so this module
imports without a GPU; tests/cpu/kernels/test_gpu_test_kernels_compile.py compiles
every entry of ``KERNELS`` for sm_90a on any machine.
"""

import functools
import secrets

import numpy as np
import pytest
from numba import cuda, float32, uint32, uint64
from tma_kernels.launch import (
    CLUSTER_SIZES,
    launch_cluster,
    max_active_clusters,
    set_max_dynamic_shared_bytes,
)
from tma_kernels.ptx import (
    cluster_ctarank,
    cluster_nctarank,
    cluster_sync,
    clusterid_x,
    fence_mbarrier_init_cluster,
    ld_shared_cluster_u32,
    mapa_shared,
    mbarrier_arrive_expect_tx,
    mbarrier_init,
    mbarrier_wait_parity,
    nclusterid_x,
    smem_u32,
    tma_load_2d_multicast,
)
from tma_kernels.tensor_map import encode, tiled_2d, to_device

from tma_study.harness.kernel_builds import load_cached

pytestmark = pytest.mark.gpu

THREADS = 128
CLUSTERS = 6  # clusters per launch: several, so cluster ids are exercised
MAX_CLUSTER_SIZE = max(CLUSTER_SIZES)
ID_FIELDS = 4  # rank, cluster size, cluster id, cluster count
POISON_U32 = np.uint32(0xDEADBEEF)
POISON_F32 = np.float32(-12345.0)
FIRST_PHASE = 0  # parity of an mbarrier's first phase

TILE_ROWS, TILE_COLS = 64, 32  # the tile every CTA of a cluster receives (fp32)
TILE_BYTES = TILE_ROWS * TILE_COLS * 4

DYNAMIC_FLOATS = 50_000  # 200,000 B of dynamic shared memory, above the 48 KiB default
DYNAMIC_BYTES = DYNAMIC_FLOATS * 4


# ---------------------------------------------------------------- kernels
def cluster_identity(ids, peer_flags, seed):
    """ids[block] = (rank, size, cluster id, cluster count); peer_flags[block, p]
    = the shared flag of peer p (seed + its block index), read through DSM."""
    flag = cuda.shared.array(1, uint32)
    tid = cuda.threadIdx.x
    block = cuda.blockIdx.x
    size = cluster_nctarank()
    if tid == 0:
        flag[0] = seed + block
        ids[block, 0] = cluster_ctarank()
        ids[block, 1] = size
        ids[block, 2] = clusterid_x()
        ids[block, 3] = nclusterid_x()
    cluster_sync()  # every CTA's flag is written before any peer reads it
    if tid < size:
        peer_flags[block, tid] = ld_shared_cluster_u32(mapa_shared(smem_u32(flag), tid))
    cluster_sync()  # no CTA exits (freeing its flag) before every peer has read it


def multicast_tile(tmap_slice, out):
    """out[block] = the (TILE_ROWS, TILE_COLS) tile of rows clusterid*TILE_ROWS..;
    ``tmap_slice``'s box is one CTA's slice: TILE_ROWS / size rows."""
    tile = cuda.shared.array((TILE_ROWS, TILE_COLS), float32, alignment=128)
    bar = cuda.shared.array(1, uint64, alignment=8)
    tid = cuda.threadIdx.x
    rank = cluster_ctarank()
    size = cluster_nctarank()
    bar_addr = smem_u32(bar)
    # Step 1: each CTA initialises its barrier; the cluster barrier publishes
    # them before any multicast can signal a peer's barrier.
    if tid == 0:
        mbarrier_init(bar_addr, 1)
        fence_mbarrier_init_cluster()
    cluster_sync()
    # Step 2: expect the whole tile; issue only this CTA's slice, to every CTA.
    slice_rows = TILE_ROWS // size
    if tid == 0:
        mbarrier_arrive_expect_tx(bar_addr, TILE_BYTES)
        all_ctas = (uint32(1) << size) - uint32(1)
        slice_dst = smem_u32(tile) + rank * slice_rows * TILE_COLS * 4
        first_row = clusterid_x() * TILE_ROWS + rank * slice_rows
        tma_load_2d_multicast(slice_dst, tmap_slice, bar_addr, 0, first_row, all_ctas)
    # Step 3: wait for the tile, copy it out.
    mbarrier_wait_parity(bar_addr, FIRST_PHASE)
    block = cuda.blockIdx.x
    for i in range(tid, TILE_ROWS * TILE_COLS, cuda.blockDim.x):
        r = i // TILE_COLS
        c = i - r * TILE_COLS
        out[block, r, c] = tile[r, c]
    cluster_sync()  # every CTA stays resident until all multicasts into the cluster landed


def reverse_through_dynamic_shared(src, out):
    """out[block] = src[block] reversed, staged in dynamic shared memory (every
    element is written by one thread and read by another)."""
    staged = cuda.shared.array(0, float32)
    tid = cuda.threadIdx.x
    block = cuda.blockIdx.x
    count = src.shape[1]
    for i in range(tid, count, cuda.blockDim.x):
        staged[i] = src[block, i]
    cuda.syncthreads()
    for i in range(tid, count, cuda.blockDim.x):
        out[block, i] = staged[count - 1 - i]


#: name -> (Python kernel, its one explicit signature)
KERNELS = {
    "cluster_identity": (cluster_identity, "void(uint32[:, ::1], uint32[:, ::1], uint32)"),
    "multicast_tile": (multicast_tile, "void(uint64, float32[:, :, ::1])"),
    "reverse_through_dynamic_shared": (
        reverse_through_dynamic_shared,
        "void(float32[:, ::1], float32[:, ::1])",
    ),
}


@functools.cache
def jitted(name):
    """KERNELS[name] compiled through the kernel cache and loaded (as the measure step does)."""
    function, signature = KERNELS[name]
    return load_cached(name, function, signature)


def fresh_seed() -> int:
    return secrets.randbits(31)


# ---------------------------------------------------------------- tests
@pytest.mark.parametrize("cluster_size", CLUSTER_SIZES)
def test_cluster_ids_and_dsm_reads(cluster_size):
    seed = fresh_seed()
    blocks = CLUSTERS * cluster_size
    d_ids = cuda.to_device(np.full((blocks, ID_FIELDS), POISON_U32))
    d_peer_flags = cuda.to_device(np.full((blocks, MAX_CLUSTER_SIZE), POISON_U32))
    launch_cluster(
        jitted("cluster_identity"), CLUSTERS, cluster_size, THREADS, 0, d_ids, d_peer_flags, seed
    )
    cuda.synchronize()

    block = np.arange(blocks)
    expected_ids = np.stack(
        [
            block % cluster_size,
            np.full(blocks, cluster_size),
            block // cluster_size,
            np.full(blocks, CLUSTERS),
        ],
        axis=1,
    ).astype(np.uint32)
    expected_flags = np.full((blocks, MAX_CLUSTER_SIZE), POISON_U32)
    first_block_of_cluster = (block // cluster_size) * cluster_size
    for peer in range(cluster_size):
        expected_flags[:, peer] = seed + first_block_of_cluster + peer
    np.testing.assert_array_equal(d_ids.copy_to_host(), expected_ids, err_msg=f"seed={seed}")
    np.testing.assert_array_equal(
        d_peer_flags.copy_to_host(), expected_flags, err_msg=f"seed={seed}"
    )


def test_host_arrays_are_copied_back_after_a_cluster_launch():
    cluster_size, seed = 2, fresh_seed()
    blocks = CLUSTERS * cluster_size
    ids = np.full((blocks, ID_FIELDS), POISON_U32)
    peer_flags = np.full((blocks, MAX_CLUSTER_SIZE), POISON_U32)
    launch_cluster(
        jitted("cluster_identity"), CLUSTERS, cluster_size, THREADS, 0, ids, peer_flags, seed
    )
    cuda.synchronize()
    np.testing.assert_array_equal(ids[:, 0], np.arange(blocks) % cluster_size)
    np.testing.assert_array_equal(peer_flags[:, 1], seed + (np.arange(blocks) // 2) * 2 + 1)


@pytest.mark.parametrize("cluster_size", [size for size in CLUSTER_SIZES if size > 1])
def test_tma_multicast_delivers_the_whole_tile_to_every_cta(cluster_size):
    seed = fresh_seed()
    src = np.random.default_rng(seed).standard_normal(
        (CLUSTERS * TILE_ROWS, TILE_COLS), dtype=np.float32
    )
    blocks = CLUSTERS * cluster_size
    d_src = cuda.to_device(src)
    d_out = cuda.to_device(np.full((blocks, TILE_ROWS, TILE_COLS), POISON_F32))
    slice_spec = tiled_2d(
        d_src,
        np.float32,
        *src.shape,
        row_stride_bytes=src.strides[0],
        box_rows=TILE_ROWS // cluster_size,
        box_cols=TILE_COLS,
    )
    tmap = to_device(encode(slice_spec), slice_spec)  # alive until the kernel has finished
    launch_cluster(
        jitted("multicast_tile"), CLUSTERS, cluster_size, THREADS, 0, tmap.address, d_out
    )
    cuda.synchronize()

    tiles = src.reshape(CLUSTERS, TILE_ROWS, TILE_COLS)
    expected = np.repeat(tiles, cluster_size, axis=0)  # every CTA of cluster c gets tile c
    np.testing.assert_array_equal(d_out.copy_to_host(), expected, err_msg=f"seed={seed}")


def dynamic_shared_case(blocks):
    seed = fresh_seed()
    src = np.random.default_rng(seed).standard_normal((blocks, DYNAMIC_FLOATS), dtype=np.float32)
    d_out = cuda.to_device(np.full_like(src, POISON_F32))
    return seed, src, cuda.to_device(src), d_out


def test_dynamic_shared_memory_above_48_kib_in_a_cluster_launch():
    cluster_size, clusters = 2, 4
    seed, src, d_src, d_out = dynamic_shared_case(clusters * cluster_size)
    stream = cuda.stream()
    launch_cluster(
        jitted("reverse_through_dynamic_shared"),
        clusters,
        cluster_size,
        256,
        DYNAMIC_BYTES,
        d_src,
        d_out,
        stream=stream,
    )
    stream.synchronize()
    np.testing.assert_array_equal(d_out.copy_to_host(), src[:, ::-1], err_msg=f"seed={seed}")


def test_set_max_dynamic_shared_bytes_enables_numbas_own_launch():
    blocks = 3
    seed, src, d_src, d_out = dynamic_shared_case(blocks)
    kernel = jitted("reverse_through_dynamic_shared")
    set_max_dynamic_shared_bytes(kernel, DYNAMIC_BYTES)
    kernel[blocks, 256, 0, DYNAMIC_BYTES](d_src, d_out)
    cuda.synchronize()
    np.testing.assert_array_equal(d_out.copy_to_host(), src[:, ::-1], err_msg=f"seed={seed}")


def test_max_active_clusters_is_positive_and_decreases_with_cluster_size():
    kernel = jitted("cluster_identity")
    counts = [max_active_clusters(kernel, size, THREADS, 0) for size in CLUSTER_SIZES]
    assert all(count > 0 for count in counts), counts
    assert all(a > b for a, b in zip(counts, counts[1:])), counts
