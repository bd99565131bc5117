"""GPU: the tma_kernels.ptx intrinsics move exactly the data they promise.

Covers what tests/gpu/test_tensor_map_gpu.py and test_cluster_launch_gpu.py do
not (those check the 2-D TMA load, 2-D multicast, cluster ids, DSM u32 reads
and dynamic shared memory). One test function per intrinsic family:

- TMA loads of rank 1, 3, 4, 5 and the 2-D load with an L2 cache hint
  (evict_first / evict_last, plus ``prefetch.tensormap``): each block loads one
  box of a small uint32 tensor at its own coordinates; the box must land;
- TMA stores of rank 1 and 2: threads fill a shared tile, one thread stores it
  as a box; the box must be in global memory and everything else untouched;
- bulk_load + bulk_store: a global -> shared -> global round trip (both bulk
  waits), the shared tile read by the threads as well;
- bulk_copy_to_peer: in a cluster of 2, CTA 0 pushes its shared tile into CTA
  1's shared memory, completing on CTA 1's mbarrier; CTA 1 writes it out;
- cp.async (.ca and .cg) completed by commit + wait_group 0, by wait_all, and
  by cp.async.mbarrier.arrive.noinc on a barrier counting every thread;
- 16-byte vector loads and stores, global (plain and .nc) and shared;
- mbarrier phases: expect_tx + bulk load + arrive, polled with try_wait.parity;
  the parity answers before, between and after the phases;
- mbarrier_arrive_cluster: every CTA arrives on CTA 0's barrier;
- DSM stores (u32 and v4) into the next CTA's tile and v4 DSM loads back;
- cluster_arrive_relaxed + cluster_wait: no CTA leaves before the last arrives;
- cluster special registers (%cluster_ctaid.x, %cluster_nctaid.x, %smid);
- clock64 and globaltimer: monotonic, advancing.

Every check uses fresh random uint32 data (seed from os.urandom, printed on
failure), outputs poisoned with other random values beforehand, and compares
exactly against a host reference.

Kernels are plain functions compiled on first use (``jitted``), so this module
imports without a GPU; tests/cpu/kernels/test_gpu_test_kernels_compile.py compiles
every entry of ``KERNELS`` for sm_90a on any machine.
"""

import functools
import os

import numpy as np
import pytest
from numba import cuda, uint32, uint64
from tma_kernels.launch import launch_cluster
from tma_kernels.ptx import (
    addr_of,
    bulk_commit_group,
    bulk_copy_to_peer,
    bulk_load,
    bulk_store,
    bulk_wait_group0,
    bulk_wait_group_read0,
    clock64,
    cluster_arrive,
    cluster_arrive_relaxed,
    cluster_ctaid_x,
    cluster_ctarank,
    cluster_nctaid_x,
    cluster_nctarank,
    cluster_sync,
    cluster_wait,
    clusterid_x,
    cp_async_ca16,
    cp_async_cg16,
    cp_async_commit,
    cp_async_mbarrier_arrive_noinc,
    cp_async_wait_all,
    cp_async_wait_group,
    fence_mbarrier_init_cluster,
    fence_proxy_async_shared,
    globaltimer,
    l2_policy_evict_first,
    l2_policy_evict_last,
    ld_global_nc_v4_u32,
    ld_global_v4_u32,
    ld_shared_cluster_v4_u32,
    ld_shared_v4_u32,
    mapa_shared,
    mbarrier_arrive,
    mbarrier_arrive_cluster,
    mbarrier_arrive_expect_tx,
    mbarrier_expect_tx,
    mbarrier_init,
    mbarrier_try_wait_parity,
    mbarrier_wait_parity,
    smem_u32,
    smid,
    st_global_v4_u32,
    st_shared_cluster_u32,
    st_shared_cluster_v4_u32,
    st_shared_v4_u32,
    tma_load_1d,
    tma_load_2d_cache_hint,
    tma_load_3d,
    tma_load_4d,
    tma_load_5d,
    tma_prefetch_descriptor,
    tma_store_1d,
    tma_store_2d,
)
from tma_kernels.tensor_map import encode, spec_for_array, to_device

from tma_study.harness.kernel_builds import load_cached

pytestmark = pytest.mark.gpu

THREADS = 128
WORD_BYTES = 4
VECTOR_WORDS = 4  # a 16-byte vector: four uint32
VECTOR_BYTES = VECTOR_WORDS * WORD_BYTES
FIRST_PHASE = 0  # parity of an mbarrier's first phase
PRECEDING_PHASE = 1  # parity of the phase "before" the first (counts as complete)
TMA_TILE_WORDS = 256  # shared tile of the TMA load/store kernels (largest box: 96 words)
BULK_TILE_WORDS = 1024  # 4 KiB shared tile of the bulk, cp.async, vector and DSM kernels
MBARRIER_ROUNDS = 2  # phases the mbarrier kernel completes (parities 0 then 1)
CP_ASYNC_WAIT_NONE_PENDING = cp_async_wait_group(0)
CP_ASYNC_WAIT_GROUP, CP_ASYNC_WAIT_ALL, CP_ASYNC_MBARRIER = 0, 1, 2
MAX_POLLS = 100_000  # bounded try_wait polls: a lost arrival fails, it does not hang
TIMER_SPIN_CYCLES = 1 << 22  # about 2 ms at 2 GHz: globaltimer (ns) must advance
RELAXED_DELAY_NS = 100_000  # CTA rank 0 arrives this late at the relaxed cluster barrier
PLAUSIBLE_SPAN_NS = 10 * 10**9  # globaltimer readings of one launch lie within 10 s
TIMER_SKEW_NS = 2_000  # allowance between globaltimer readings on different SMs


# ---------------------------------------------------------------- kernels: TMA loads
def _tma_box_kernel(name, issue):
    """Kernel ``name(tmap, coords, out)``: block b TMA-loads the box at
    ``coords[b]`` (innermost coordinate first) with ``issue`` and copies it to
    ``out[b]`` (the box's words, C order of the array's axes)."""

    def kernel(tmap, coords, out):
        tile = cuda.shared.array(TMA_TILE_WORDS, uint32, alignment=128)
        bar = cuda.shared.array(1, uint64, alignment=8)
        tid = cuda.threadIdx.x
        block = cuda.blockIdx.x
        box_words = out.shape[1]
        bar_addr = smem_u32(bar)
        if tid == 0:
            mbarrier_init(bar_addr, 1)
            fence_mbarrier_init_cluster()
        cuda.syncthreads()
        if tid == 0:
            mbarrier_arrive_expect_tx(bar_addr, box_words * WORD_BYTES)
            issue(smem_u32(tile), tmap, bar_addr, coords, block)
        mbarrier_wait_parity(bar_addr, FIRST_PHASE)
        for i in range(tid, box_words, cuda.blockDim.x):
            out[block, i] = tile[i]

    kernel.__name__ = kernel.__qualname__ = name
    return kernel


@cuda.jit(device=True, inline=True)
def _issue_1d(dst, tmap, bar, coords, block):
    tma_load_1d(dst, tmap, bar, coords[block, 0])


@cuda.jit(device=True, inline=True)
def _issue_2d_evict_first(dst, tmap, bar, coords, block):
    tma_prefetch_descriptor(tmap)
    tma_load_2d_cache_hint(
        dst, tmap, bar, coords[block, 0], coords[block, 1], l2_policy_evict_first()
    )


@cuda.jit(device=True, inline=True)
def _issue_2d_evict_last(dst, tmap, bar, coords, block):
    tma_prefetch_descriptor(tmap)
    tma_load_2d_cache_hint(
        dst, tmap, bar, coords[block, 0], coords[block, 1], l2_policy_evict_last()
    )


@cuda.jit(device=True, inline=True)
def _issue_3d(dst, tmap, bar, coords, block):
    tma_load_3d(dst, tmap, bar, coords[block, 0], coords[block, 1], coords[block, 2])


@cuda.jit(device=True, inline=True)
def _issue_4d(dst, tmap, bar, coords, block):
    tma_load_4d(
        dst, tmap, bar, coords[block, 0], coords[block, 1], coords[block, 2], coords[block, 3]
    )


@cuda.jit(device=True, inline=True)
def _issue_5d(dst, tmap, bar, coords, block):
    tma_load_5d(
        dst, tmap, bar,
        coords[block, 0], coords[block, 1], coords[block, 2], coords[block, 3], coords[block, 4],
    )


tma_load_1d_box = _tma_box_kernel("tma_load_1d_box", _issue_1d)
tma_load_2d_evict_first_box = _tma_box_kernel("tma_load_2d_evict_first_box", _issue_2d_evict_first)
tma_load_2d_evict_last_box = _tma_box_kernel("tma_load_2d_evict_last_box", _issue_2d_evict_last)
tma_load_3d_box = _tma_box_kernel("tma_load_3d_box", _issue_3d)
tma_load_4d_box = _tma_box_kernel("tma_load_4d_box", _issue_4d)
tma_load_5d_box = _tma_box_kernel("tma_load_5d_box", _issue_5d)


# ---------------------------------------------------------------- kernels: TMA stores
def _tma_store_kernel(name, issue):
    """Kernel ``name(tmap, coords, values)``: block b's threads write
    ``values[b]`` into a shared tile; one thread TMA-stores the tile as the box
    at ``coords[b]`` and waits for the bulk group."""

    def kernel(tmap, coords, values):
        tile = cuda.shared.array(TMA_TILE_WORDS, uint32, alignment=128)
        tid = cuda.threadIdx.x
        block = cuda.blockIdx.x
        for i in range(tid, values.shape[1], cuda.blockDim.x):
            tile[i] = values[block, i]
        fence_proxy_async_shared()  # each writer: st.shared before the async-proxy read
        cuda.syncthreads()
        if tid == 0:
            issue(tmap, smem_u32(tile), coords, block)
            bulk_commit_group()
            bulk_wait_group0()

    kernel.__name__ = kernel.__qualname__ = name
    return kernel


@cuda.jit(device=True, inline=True)
def _store_1d(tmap, src, coords, block):
    tma_store_1d(tmap, src, coords[block, 0])


@cuda.jit(device=True, inline=True)
def _store_2d(tmap, src, coords, block):
    tma_store_2d(tmap, src, coords[block, 0], coords[block, 1])


tma_store_1d_box = _tma_store_kernel("tma_store_1d_box", _store_1d)
tma_store_2d_box = _tma_store_kernel("tma_store_2d_box", _store_2d)


# ---------------------------------------------------------------- kernels: bulk copies
def bulk_round_trip(src, seen, dst, wait_read_only):
    """Block b: bulk_load src[b] into shared memory (mbarrier), the threads copy
    the tile to seen[b], then one thread bulk_stores it to dst[b] and waits
    (for the whole group, or only until the tile has been read)."""
    tile = cuda.shared.array(BULK_TILE_WORDS, uint32, alignment=128)
    bar = cuda.shared.array(1, uint64, alignment=8)
    tid = cuda.threadIdx.x
    block = cuda.blockIdx.x
    words = src.shape[1]
    nbytes = words * WORD_BYTES
    offset = uint64(block * nbytes)
    bar_addr = smem_u32(bar)
    if tid == 0:
        mbarrier_init(bar_addr, 1)
        fence_mbarrier_init_cluster()
    cuda.syncthreads()
    if tid == 0:
        mbarrier_arrive_expect_tx(bar_addr, nbytes)
        bulk_load(smem_u32(tile), addr_of(src) + offset, nbytes, bar_addr)
    mbarrier_wait_parity(bar_addr, FIRST_PHASE)
    for i in range(tid, words, cuda.blockDim.x):
        seen[block, i] = tile[i]
    if tid == 0:
        bulk_store(addr_of(dst) + offset, smem_u32(tile), nbytes)
        bulk_commit_group()
        if wait_read_only != 0:
            bulk_wait_group_read0()
        else:
            bulk_wait_group0()


def bulk_copy_to_peer_pair(src, received):
    """Cluster c of 2: CTA 0 fills its tile with src[c] and bulk-copies it into
    CTA 1's tile, completing on CTA 1's mbarrier; CTA 1 writes it to received[c]."""
    outgoing = cuda.shared.array(BULK_TILE_WORDS, uint32, alignment=128)
    incoming = cuda.shared.array(BULK_TILE_WORDS, uint32, alignment=128)
    bar = cuda.shared.array(1, uint64, alignment=8)
    tid = cuda.threadIdx.x
    rank = cluster_ctarank()
    cluster = clusterid_x()
    words = src.shape[1]
    nbytes = words * WORD_BYTES
    bar_addr = smem_u32(bar)
    # Step 1: CTA 0 fills its outgoing tile; CTA 1 arms its barrier for the bytes.
    if rank == 0:
        for i in range(tid, words, cuda.blockDim.x):
            outgoing[i] = src[cluster, i]
        fence_proxy_async_shared()  # st.shared before the async-proxy copy reads the tile
    if rank == 1 and tid == 0:
        mbarrier_init(bar_addr, 1)
        fence_mbarrier_init_cluster()
        mbarrier_arrive_expect_tx(bar_addr, nbytes)
    cluster_sync()  # tile written, barrier initialised and armed, both CTAs running
    # Step 2: CTA 0 pushes the tile into CTA 1 (same offsets there).
    if rank == 0 and tid == 0:
        peer = uint32(1)
        bulk_copy_to_peer(
            mapa_shared(smem_u32(incoming), peer),
            smem_u32(outgoing),
            nbytes,
            mapa_shared(bar_addr, peer),
        )
    # Step 3: CTA 1 waits for the bytes and writes them out.
    if rank == 1:
        mbarrier_wait_parity(bar_addr, FIRST_PHASE)
        for i in range(tid, words, cuda.blockDim.x):
            received[cluster, i] = incoming[i]
    cluster_sync()  # CTA 0 (the copy's source) stays resident until the copy landed


# ---------------------------------------------------------------- kernels: cp.async
def cp_async_copy(src, out, use_cg, completion):
    """Block b copies src[b] into shared memory with 16-byte cp.async (.cg when
    use_cg, else .ca), completes them by ``completion`` (commit + wait_group 0,
    wait_all, or the noinc mbarrier arrive), then out[b] = the tile reversed
    (each word read by another thread than the one that copied it)."""
    tile = cuda.shared.array(BULK_TILE_WORDS, uint32, alignment=128)
    bar = cuda.shared.array(1, uint64, alignment=8)
    tid = cuda.threadIdx.x
    block = cuda.blockIdx.x
    threads = cuda.blockDim.x
    words = src.shape[1]
    bar_addr = smem_u32(bar)
    if tid == 0:
        mbarrier_init(bar_addr, threads)  # one (noinc) arrival per thread
        fence_mbarrier_init_cluster()
    cuda.syncthreads()
    tile_addr = smem_u32(tile)
    source = addr_of(src) + uint64(block * words * WORD_BYTES)
    for piece in range(tid, words // VECTOR_WORDS, threads):
        dst = tile_addr + uint32(piece * VECTOR_BYTES)
        if use_cg != 0:
            cp_async_cg16(dst, source + uint64(piece * VECTOR_BYTES))
        else:
            cp_async_ca16(dst, source + uint64(piece * VECTOR_BYTES))
    if completion == CP_ASYNC_WAIT_GROUP:
        cp_async_commit()
        CP_ASYNC_WAIT_NONE_PENDING()
    elif completion == CP_ASYNC_WAIT_ALL:
        cp_async_wait_all()
    else:
        cp_async_mbarrier_arrive_noinc(bar_addr)
        mbarrier_wait_parity(bar_addr, FIRST_PHASE)
    cuda.syncthreads()  # the waits cover this thread's copies; others read them next
    for i in range(tid, words, threads):
        out[block, i] = tile[words - 1 - i]


# ---------------------------------------------------------------- kernels: 16-byte vectors
def vector_reverse(src, out, use_nc):
    """Block b: 16-byte global loads (.nc when use_nc) of src[b], 16-byte shared
    stores, then 16-byte shared loads in reverse vector order and 16-byte
    global stores: out[b] = src[b] with its vectors reversed (words kept)."""
    tile = cuda.shared.array(BULK_TILE_WORDS, uint32, alignment=16)
    tid = cuda.threadIdx.x
    block = cuda.blockIdx.x
    threads = cuda.blockDim.x
    vectors = src.shape[1] // VECTOR_WORDS
    block_offset = uint64(block * vectors * VECTOR_BYTES)
    src_base = addr_of(src) + block_offset
    out_base = addr_of(out) + block_offset
    tile_addr = smem_u32(tile)
    for v in range(tid, vectors, threads):
        if use_nc != 0:
            w = ld_global_nc_v4_u32(src_base + uint64(v * VECTOR_BYTES))
        else:
            w = ld_global_v4_u32(src_base + uint64(v * VECTOR_BYTES))
        st_shared_v4_u32(tile_addr + uint32(v * VECTOR_BYTES), w[0], w[1], w[2], w[3])
    cuda.syncthreads()
    for v in range(tid, vectors, threads):
        w = ld_shared_v4_u32(tile_addr + uint32((vectors - 1 - v) * VECTOR_BYTES))
        st_global_v4_u32(out_base + uint64(v * VECTOR_BYTES), w[0], w[1], w[2], w[3])


# ---------------------------------------------------------------- kernels: mbarrier phases
def mbarrier_phases(src, out, parity):
    """Block b, round r: one thread does expect_tx (no arrival), bulk-loads
    src[b, r] and arrives; every thread polls try_wait.parity(r & 1), then
    out[b, r] = the tile. parity[b] = try_wait answers for parity 0 and 1 before
    the first phase and after the last (single polls, no arrival pending)."""
    tile = cuda.shared.array(BULK_TILE_WORDS, uint32, alignment=128)
    bar = cuda.shared.array(1, uint64, alignment=8)
    tid = cuda.threadIdx.x
    block = cuda.blockIdx.x
    rounds = src.shape[1]
    words = src.shape[2]
    nbytes = words * WORD_BYTES
    bar_addr = smem_u32(bar)
    if tid == 0:
        mbarrier_init(bar_addr, 1)
        fence_mbarrier_init_cluster()
        parity[block, 0] = mbarrier_try_wait_parity(bar_addr, FIRST_PHASE)  # incomplete: 0
        parity[block, 1] = mbarrier_try_wait_parity(bar_addr, PRECEDING_PHASE)  # complete: 1
    cuda.syncthreads()
    for r in range(rounds):
        if tid == 0:
            mbarrier_expect_tx(bar_addr, nbytes)
            bulk_load(
                smem_u32(tile),
                addr_of(src) + uint64((block * rounds + r) * nbytes),
                nbytes,
                bar_addr,
            )
            mbarrier_arrive(bar_addr)
        while mbarrier_try_wait_parity(bar_addr, r & 1) == 0:
            pass
        for i in range(tid, words, cuda.blockDim.x):
            out[block, r, i] = tile[i]
        cuda.syncthreads()  # all have read the tile before the next round overwrites it
    if tid == 0:
        parity[block, 2] = mbarrier_try_wait_parity(bar_addr, 0)
        parity[block, 3] = mbarrier_try_wait_parity(bar_addr, 1)


def cluster_arrivals(result, max_polls):
    """Every CTA of the cluster arrives (one thread) on CTA 0's barrier, which
    expects one arrival per CTA. CTA 0 records result[cluster] = (its barrier's
    completion before its own arrival, completion within max_polls after)."""
    bar = cuda.shared.array(1, uint64, alignment=8)
    tid = cuda.threadIdx.x
    rank = cluster_ctarank()
    cluster = clusterid_x()
    bar_addr = smem_u32(bar)
    if rank == 0 and tid == 0:
        mbarrier_init(bar_addr, cluster_nctarank())
        fence_mbarrier_init_cluster()
    cluster_sync()  # the barrier is initialised before any CTA arrives on it
    if tid == 0:
        if rank == 0:
            result[cluster, 0] = mbarrier_try_wait_parity(bar_addr, FIRST_PHASE)
        mbarrier_arrive_cluster(bar_addr, 0)
        if rank == 0:
            done = uint32(0)
            for _ in range(max_polls):
                if mbarrier_try_wait_parity(bar_addr, FIRST_PHASE) != 0:
                    done = uint32(1)
                    break
            result[cluster, 1] = done
    cluster_sync()  # CTA 0's barrier outlives every arrival on it


# ---------------------------------------------------------------- kernels: clusters
def dsm_ring_exchange(src, received, read_back, use_v4):
    """Each CTA stores src[block] into the next cluster CTA's tile through DSM
    (v4 or u32 stores); after a cluster barrier received[block] = its own tile
    (its predecessor's data) and read_back[block] = the next CTA's tile read
    with v4 DSM loads (this block's own data)."""
    tile = cuda.shared.array(BULK_TILE_WORDS, uint32, alignment=16)
    tid = cuda.threadIdx.x
    threads = cuda.blockDim.x
    block = cuda.blockIdx.x
    rank = cluster_ctarank()
    size = cluster_nctarank()
    words = src.shape[1]
    next_tile = mapa_shared(smem_u32(tile), (rank + uint32(1)) % size)
    cluster_sync()  # every CTA of the cluster runs before its shared memory is written
    if use_v4 != 0:
        for v in range(tid, words // VECTOR_WORDS, threads):
            i = v * VECTOR_WORDS
            st_shared_cluster_v4_u32(
                next_tile + uint32(v * VECTOR_BYTES),
                src[block, i], src[block, i + 1], src[block, i + 2], src[block, i + 3],
            )
    else:
        for i in range(tid, words, threads):
            st_shared_cluster_u32(next_tile + uint32(i * WORD_BYTES), src[block, i])
    cluster_arrive()  # release: the stores are visible after the wait
    cluster_wait()
    for i in range(tid, words, threads):
        received[block, i] = tile[i]
    for v in range(tid, words // VECTOR_WORDS, threads):
        w = ld_shared_cluster_v4_u32(next_tile + uint32(v * VECTOR_BYTES))
        i = v * VECTOR_WORDS
        read_back[block, i] = w[0]
        read_back[block, i + 1] = w[1]
        read_back[block, i + 2] = w[2]
        read_back[block, i + 3] = w[3]
    cluster_sync()  # no CTA exits while a peer still reads its tile


def relaxed_cluster_barrier(times, delay_ns):
    """CTA rank 0 spins delay_ns on globaltimer before arriving (relaxed) at the
    cluster barrier; the others arrive at once. times[block] = (globaltimer at
    start, at this CTA's arrival, after its cluster_wait)."""
    tid = cuda.threadIdx.x
    block = cuda.blockIdx.x
    start = globaltimer()
    arrived = start
    if cluster_ctarank() == 0:
        while arrived - start < delay_ns:
            arrived = globaltimer()
    cluster_arrive_relaxed()
    cluster_wait()
    left = globaltimer()
    if tid == 0:
        times[block, 0] = start
        times[block, 1] = arrived
        times[block, 2] = left


def cluster_registers(regs):
    """regs[block] = (%cluster_ctaid.x, %cluster_nctaid.x, %smid)."""
    if cuda.threadIdx.x == 0:
        block = cuda.blockIdx.x
        regs[block, 0] = cluster_ctaid_x()
        regs[block, 1] = cluster_nctaid_x()
        regs[block, 2] = smid()


# ---------------------------------------------------------------- kernels: timers
def timers(min_cycles, samples):
    """Each thread spins until clock64 advanced min_cycles, checking that every
    clock64 and globaltimer read is >= the previous one. samples[thread] =
    (clock64 start, end, globaltimer start, end, 1 if monotonic else 0)."""
    thread = cuda.grid(1)
    c_start = clock64()
    g_start = globaltimer()
    c_now = c_start
    g_now = g_start
    monotonic = uint64(1)
    while c_now - c_start < min_cycles:
        c_next = clock64()
        g_next = globaltimer()
        if c_next < c_now or g_next < g_now:
            monotonic = uint64(0)
        c_now = c_next
        g_now = g_next
    g_end = globaltimer()
    samples[thread, 0] = c_start
    samples[thread, 1] = c_now
    samples[thread, 2] = g_start
    samples[thread, 3] = g_end
    samples[thread, 4] = monotonic


TMA_BOX_SIGNATURE = "void(uint64, int32[:, ::1], uint32[:, ::1])"

#: name -> (Python kernel, its one explicit signature)
KERNELS = {
    "tma_load_1d_box": (tma_load_1d_box, TMA_BOX_SIGNATURE),
    "tma_load_2d_evict_first_box": (tma_load_2d_evict_first_box, TMA_BOX_SIGNATURE),
    "tma_load_2d_evict_last_box": (tma_load_2d_evict_last_box, TMA_BOX_SIGNATURE),
    "tma_load_3d_box": (tma_load_3d_box, TMA_BOX_SIGNATURE),
    "tma_load_4d_box": (tma_load_4d_box, TMA_BOX_SIGNATURE),
    "tma_load_5d_box": (tma_load_5d_box, TMA_BOX_SIGNATURE),
    "tma_store_1d_box": (tma_store_1d_box, TMA_BOX_SIGNATURE),
    "tma_store_2d_box": (tma_store_2d_box, TMA_BOX_SIGNATURE),
    "bulk_round_trip": (
        bulk_round_trip,
        "void(uint32[:, ::1], uint32[:, ::1], uint32[:, ::1], int32)",
    ),
    "bulk_copy_to_peer_pair": (bulk_copy_to_peer_pair, "void(uint32[:, ::1], uint32[:, ::1])"),
    "cp_async_copy": (cp_async_copy, "void(uint32[:, ::1], uint32[:, ::1], int32, int32)"),
    "vector_reverse": (vector_reverse, "void(uint32[:, ::1], uint32[:, ::1], int32)"),
    "mbarrier_phases": (
        mbarrier_phases,
        "void(uint32[:, :, ::1], uint32[:, :, ::1], uint32[:, ::1])",
    ),
    "cluster_arrivals": (cluster_arrivals, "void(uint32[:, ::1], int32)"),
    "dsm_ring_exchange": (
        dsm_ring_exchange,
        "void(uint32[:, ::1], uint32[:, ::1], uint32[:, ::1], int32)",
    ),
    "relaxed_cluster_barrier": (relaxed_cluster_barrier, "void(uint64[:, ::1], uint64)"),
    "cluster_registers": (cluster_registers, "void(uint32[:, ::1])"),
    "timers": (timers, "void(uint64, uint64[:, ::1])"),
}


@functools.cache
def jitted(name):
    """KERNELS[name] compiled through the kernel cache and loaded (as the measure step does)."""
    function, signature = KERNELS[name]
    return load_cached(name, function, signature)


# ---------------------------------------------------------------- host helpers
def fresh_rng():
    """(seed, generator): a new seed from os.urandom for every check."""
    seed = int.from_bytes(os.urandom(8), "little")
    return seed, np.random.default_rng(seed)


def random_words(rng, shape):
    """Random uint32 data, never 0."""
    return rng.integers(1, 2**32, size=shape, dtype=np.uint32)


def poisoned(rng, shape, dtype=np.uint32):
    """A device array filled with random non-zero values (independent of any data)."""
    high = 2**32 if np.dtype(dtype) == np.uint32 else 2**63
    return cuda.to_device(rng.integers(1, high, size=shape, dtype=dtype))


def box_of(array, box_shape, coords):
    """The box of ``array`` at ``coords`` (innermost first, as TMA takes them)."""
    starts = tuple(reversed(coords))
    return array[tuple(slice(s, s + b) for s, b in zip(starts, box_shape))]


def tensor_map_for(d_array, box_shape):
    spec = spec_for_array(d_array, box_shape)
    return to_device(encode(spec), spec)  # keep alive until the kernel has finished


# ---------------------------------------------------------------- tests: TMA
# kernel -> (tensor shape, box shape), array axis order (outermost first). Odd
# extents, so strides and coordinates are not all powers of two; every
# box_shape[-1] * 4 is a multiple of 16 bytes, every row pitch too.
TMA_LOAD_CASES = {
    "tma_load_1d_box": ((4096,), (64,)),
    "tma_load_2d_evict_first_box": ((48, 40), (8, 12)),
    "tma_load_2d_evict_last_box": ((48, 40), (8, 12)),
    "tma_load_3d_box": ((6, 10, 36), (2, 4, 8)),
    "tma_load_4d_box": ((3, 5, 6, 20), (2, 2, 3, 4)),
    "tma_load_5d_box": ((3, 4, 5, 6, 12), (2, 2, 2, 3, 4)),
}
TMA_BOXES = 8  # blocks per launch, one box each


TMA_INNER_ALIGN_WORDS = 16 // WORD_BYTES  # the innermost box start: a multiple of 16 bytes


def box_coordinates(rng, shape, box_shape, count):
    """``count`` in-bounds box origins, innermost first: the origin, the far
    corner, then random ones. The innermost coordinate is kept a multiple of
    16 bytes: on the H200 a tile load whose box starts off a 16-byte boundary in
    global memory faulted (CUDA_ERROR_ILLEGAL_INSTRUCTION), so kernels keep it
    aligned (as CUTLASS and FlashAttention-3 do with tile-aligned coordinates)."""
    highs = [extent - box for extent, box in zip(shape, box_shape)]
    steps = [1] * (len(shape) - 1) + [TMA_INNER_ALIGN_WORDS]  # numpy order: innermost last
    highs = [h - h % step for h, step in zip(highs, steps)]
    coords = [[0] * len(shape), highs]
    coords += [[int(rng.integers(0, h // step + 1)) * step for h, step in zip(highs, steps)]
               for _ in range(count - 2)]
    return np.array([c[::-1] for c in coords], dtype=np.int32)


@pytest.mark.parametrize("kernel_name", list(TMA_LOAD_CASES))
def test_tma_load_lands_the_box(kernel_name):
    shape, box_shape = TMA_LOAD_CASES[kernel_name]
    seed, rng = fresh_rng()
    src = random_words(rng, shape)
    box_words = int(np.prod(box_shape))
    assert box_words <= TMA_TILE_WORDS
    coords = box_coordinates(rng, shape, box_shape, TMA_BOXES)
    d_src = cuda.to_device(src)
    d_out = poisoned(rng, (TMA_BOXES, box_words))
    tmap = tensor_map_for(d_src, box_shape)
    jitted(kernel_name)[TMA_BOXES, THREADS](tmap.address, cuda.to_device(coords), d_out)
    cuda.synchronize()

    expected = np.stack([box_of(src, box_shape, c).ravel() for c in coords])
    np.testing.assert_array_equal(d_out.copy_to_host(), expected, err_msg=f"seed={seed}")


# kernel -> (tensor shape, box shape): the tensor is a whole number of boxes,
# each block stores one distinct box slot.
TMA_STORE_CASES = {
    "tma_store_1d_box": ((2048,), (64,)),
    "tma_store_2d_box": ((40, 48), (8, 16)),
}
TMA_STORE_BOXES = 6


@pytest.mark.parametrize("kernel_name", list(TMA_STORE_CASES))
def test_tma_store_writes_the_box_and_nothing_else(kernel_name):
    shape, box_shape = TMA_STORE_CASES[kernel_name]
    seed, rng = fresh_rng()
    slots_per_axis = [extent // box for extent, box in zip(shape, box_shape)]
    slot_ids = rng.choice(int(np.prod(slots_per_axis)), size=TMA_STORE_BOXES, replace=False)
    slots = np.array(np.unravel_index(slot_ids, slots_per_axis)).T  # array axis order
    coords = (slots * np.array(box_shape))[:, ::-1].astype(np.int32)  # innermost first
    box_words = int(np.prod(box_shape))
    values = random_words(rng, (TMA_STORE_BOXES, box_words))
    d_dst = poisoned(rng, shape)
    before = d_dst.copy_to_host()
    tmap = tensor_map_for(d_dst, box_shape)
    jitted(kernel_name)[TMA_STORE_BOXES, THREADS](
        tmap.address, cuda.to_device(np.ascontiguousarray(coords)), cuda.to_device(values)
    )
    cuda.synchronize()

    expected = before.copy()
    for c, v in zip(coords, values):
        box_of(expected, box_shape, c)[...] = v.reshape(box_shape)
    np.testing.assert_array_equal(d_dst.copy_to_host(), expected, err_msg=f"seed={seed}")


# ---------------------------------------------------------------- tests: bulk copies
BULK_BLOCKS = 5


@pytest.mark.parametrize("nbytes", [16, 1024, BULK_TILE_WORDS * WORD_BYTES])
@pytest.mark.parametrize("wait_read_only", [0, 1], ids=["wait_group0", "wait_group_read0"])
def test_bulk_load_and_bulk_store_round_trip(nbytes, wait_read_only):
    seed, rng = fresh_rng()
    src = random_words(rng, (BULK_BLOCKS, nbytes // WORD_BYTES))
    d_seen = poisoned(rng, src.shape)
    d_dst = poisoned(rng, src.shape)
    jitted("bulk_round_trip")[BULK_BLOCKS, THREADS](
        cuda.to_device(src), d_seen, d_dst, wait_read_only
    )
    cuda.synchronize()
    np.testing.assert_array_equal(d_seen.copy_to_host(), src, err_msg=f"seed={seed} (shared)")
    np.testing.assert_array_equal(d_dst.copy_to_host(), src, err_msg=f"seed={seed} (global)")


PEER_CLUSTERS = 4


@pytest.mark.parametrize("nbytes", [16, BULK_TILE_WORDS * WORD_BYTES])
def test_bulk_copy_to_peer_lands_in_the_peer_cta(nbytes):
    seed, rng = fresh_rng()
    src = random_words(rng, (PEER_CLUSTERS, nbytes // WORD_BYTES))
    d_received = poisoned(rng, src.shape)
    launch_cluster(
        jitted("bulk_copy_to_peer_pair"), PEER_CLUSTERS, 2, THREADS, 0,
        cuda.to_device(src), d_received,
    )
    cuda.synchronize()
    np.testing.assert_array_equal(d_received.copy_to_host(), src, err_msg=f"seed={seed}")


# ---------------------------------------------------------------- tests: cp.async
CP_ASYNC_BLOCKS = 4


@pytest.mark.parametrize("use_cg", [0, 1], ids=["ca16", "cg16"])
@pytest.mark.parametrize(
    "completion",
    [CP_ASYNC_WAIT_GROUP, CP_ASYNC_WAIT_ALL, CP_ASYNC_MBARRIER],
    ids=["commit+wait_group0", "wait_all", "mbarrier_arrive_noinc"],
)
@pytest.mark.parametrize("words", [BULK_TILE_WORDS, 4 * 40])  # 8 or 1.25 pieces per thread
def test_cp_async_copies_complete(use_cg, completion, words):
    seed, rng = fresh_rng()
    src = random_words(rng, (CP_ASYNC_BLOCKS, words))
    d_out = poisoned(rng, src.shape)
    jitted("cp_async_copy")[CP_ASYNC_BLOCKS, THREADS](
        cuda.to_device(src), d_out, use_cg, completion
    )
    cuda.synchronize()
    np.testing.assert_array_equal(d_out.copy_to_host(), src[:, ::-1], err_msg=f"seed={seed}")


# ---------------------------------------------------------------- tests: vectors
VECTOR_BLOCKS = 6


@pytest.mark.parametrize("use_nc", [0, 1], ids=["ld.global", "ld.global.nc"])
def test_vector_loads_and_stores_keep_every_word(use_nc):
    seed, rng = fresh_rng()
    src = random_words(rng, (VECTOR_BLOCKS, BULK_TILE_WORDS))
    d_out = poisoned(rng, src.shape)
    jitted("vector_reverse")[VECTOR_BLOCKS, THREADS](cuda.to_device(src), d_out, use_nc)
    cuda.synchronize()
    vectors = src.reshape(VECTOR_BLOCKS, -1, VECTOR_WORDS)
    expected = vectors[:, ::-1, :].reshape(VECTOR_BLOCKS, -1)
    np.testing.assert_array_equal(d_out.copy_to_host(), expected, err_msg=f"seed={seed}")


# ---------------------------------------------------------------- tests: mbarriers
MBARRIER_BLOCKS = 4


def test_mbarrier_expect_tx_arrive_and_try_wait_parity():
    seed, rng = fresh_rng()
    words = 512
    src = random_words(rng, (MBARRIER_BLOCKS, MBARRIER_ROUNDS, words))
    d_out = poisoned(rng, src.shape)
    d_parity = poisoned(rng, (MBARRIER_BLOCKS, 4))
    jitted("mbarrier_phases")[MBARRIER_BLOCKS, THREADS](cuda.to_device(src), d_out, d_parity)
    cuda.synchronize()
    np.testing.assert_array_equal(d_out.copy_to_host(), src, err_msg=f"seed={seed}")
    # Before: phase 0 incomplete, its predecessor (parity 1) complete. After two
    # phases: phase 2 (parity 0) incomplete, phase 1 (parity 1) complete.
    expected_parity = np.tile(np.array([0, 1, 0, 1], dtype=np.uint32), (MBARRIER_BLOCKS, 1))
    np.testing.assert_array_equal(d_parity.copy_to_host(), expected_parity, err_msg=f"seed={seed}")


ARRIVAL_CLUSTERS = 6


@pytest.mark.parametrize("cluster_size", [2, 4, 8])
def test_mbarrier_arrive_cluster_completes_cta0s_barrier(cluster_size):
    _, rng = fresh_rng()
    d_result = poisoned(rng, (ARRIVAL_CLUSTERS, 2))
    launch_cluster(
        jitted("cluster_arrivals"), ARRIVAL_CLUSTERS, cluster_size, THREADS, 0,
        d_result, MAX_POLLS,
    )
    cuda.synchronize()
    expected = np.tile(np.array([0, 1], dtype=np.uint32), (ARRIVAL_CLUSTERS, 1))
    np.testing.assert_array_equal(d_result.copy_to_host(), expected)


# ---------------------------------------------------------------- tests: clusters
DSM_CLUSTERS = 4


@pytest.mark.parametrize("cluster_size", [2, 4])
@pytest.mark.parametrize("use_v4", [0, 1], ids=["st_u32", "st_v4"])
def test_dsm_stores_and_v4_loads_reach_the_peer(cluster_size, use_v4):
    seed, rng = fresh_rng()
    blocks = DSM_CLUSTERS * cluster_size
    src = random_words(rng, (blocks, BULK_TILE_WORDS))
    d_received = poisoned(rng, src.shape)
    d_read_back = poisoned(rng, src.shape)
    launch_cluster(
        jitted("dsm_ring_exchange"), DSM_CLUSTERS, cluster_size, THREADS, 0,
        cuda.to_device(src), d_received, d_read_back, use_v4,
    )
    cuda.synchronize()
    block = np.arange(blocks)
    rank = block % cluster_size
    predecessor = block - rank + (rank - 1) % cluster_size
    np.testing.assert_array_equal(
        d_received.copy_to_host(), src[predecessor], err_msg=f"seed={seed} (stores)"
    )
    np.testing.assert_array_equal(d_read_back.copy_to_host(), src, err_msg=f"seed={seed} (loads)")


RELAXED_CLUSTERS = 4


@pytest.mark.parametrize("cluster_size", [2, 4])
def test_cluster_arrive_relaxed_and_wait_hold_every_cta(cluster_size):
    _, rng = fresh_rng()
    blocks = RELAXED_CLUSTERS * cluster_size
    d_times = poisoned(rng, (blocks, 3), np.uint64)
    launch_cluster(
        jitted("relaxed_cluster_barrier"), RELAXED_CLUSTERS, cluster_size, THREADS, 0,
        d_times, RELAXED_DELAY_NS,
    )
    cuda.synchronize()
    times = d_times.copy_to_host().astype(np.int64).reshape(RELAXED_CLUSTERS, cluster_size, 3)
    start, arrived, left = times[..., 0], times[..., 1], times[..., 2]
    assert times.max() - times.min() < PLAUSIBLE_SPAN_NS, times  # all written, not poison
    assert (start <= arrived).all() and (arrived <= left).all(), times
    last_arrival = arrived[:, :1]  # CTA rank 0 arrives last, after its delay
    assert (arrived[:, 0] - start[:, 0] >= RELAXED_DELAY_NS).all(), times
    # Nobody left the barrier before rank 0 arrived (up to the timer's skew between
    # SMs), so every CTA was held for most of the delay.
    assert (left >= last_arrival - TIMER_SKEW_NS).all(), times
    assert (left - start >= RELAXED_DELAY_NS // 2).all(), times


REGISTER_CLUSTERS = 3


@pytest.mark.parametrize("cluster_size", [1, 2, 4, 8, 16])
def test_cluster_special_registers(cluster_size):
    _, rng = fresh_rng()
    blocks = REGISTER_CLUSTERS * cluster_size
    d_regs = poisoned(rng, (blocks, 3))
    launch_cluster(
        jitted("cluster_registers"), REGISTER_CLUSTERS, cluster_size, THREADS, 0, d_regs
    )
    cuda.synchronize()
    regs = d_regs.copy_to_host()
    np.testing.assert_array_equal(regs[:, 0], np.arange(blocks) % cluster_size)
    np.testing.assert_array_equal(regs[:, 1], np.full(blocks, cluster_size))
    sm_count = cuda.get_current_device().MULTIPROCESSOR_COUNT
    assert (regs[:, 2] < sm_count).all(), regs[:, 2]


# ---------------------------------------------------------------- tests: timers
TIMER_BLOCKS, TIMER_THREADS = 4, 64


def test_clock64_and_globaltimer_are_monotonic_and_advance():
    _, rng = fresh_rng()
    threads = TIMER_BLOCKS * TIMER_THREADS
    d_samples = poisoned(rng, (threads, 5), np.uint64)
    jitted("timers")[TIMER_BLOCKS, TIMER_THREADS](TIMER_SPIN_CYCLES, d_samples)
    cuda.synchronize()
    samples = d_samples.copy_to_host()
    c_start, c_end, g_start, g_end, monotonic = (samples[:, i] for i in range(5))
    np.testing.assert_array_equal(monotonic, np.ones(threads, dtype=np.uint64))
    assert (c_end > c_start).all(), samples
    assert (c_end - c_start >= TIMER_SPIN_CYCLES).all(), samples
    assert (g_end > g_start).all(), samples
    assert (g_end - g_start < PLAUSIBLE_SPAN_NS).all(), samples
