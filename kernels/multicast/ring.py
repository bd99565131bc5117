"""The cluster ring of the ``multicast`` study: every CTA of a cluster needs the same tiles.

A cluster of ``cluster_x * cluster_y`` CTAs is viewed as a grid (x, y), rank = x + y*cluster_x
(launched as a 1-D cluster: the hardware knows only ranks). Each step, CTA (x, y) receives
one stage = an A tile and (optionally) a B tile, as a GEMM mainloop does:

    A tile (q*cluster_x + x) mod a_tiles    shared by the cluster_y CTAs with the same x
    B tile (q*cluster_y + y) mod b_tiles    shared by the cluster_x CTAs with the same y

The 1-D broadcast of the study is cluster (1, n) with no B: all n CTAs share every A tile.

Persistent grid: CTAs [g*size, (g+1)*size) form group g (the cluster, when launched as one),
and group g runs steps q = g, g + groups, ... < steps_total. Warp-specialised ring as in
kernels/crossover/ring.py: one producer thread, ``consumer_threads`` consumers, full/empty
mbarriers per stage.

Two kernels from one source (``multicast`` is fixed at build time):

* ``multicast=False``: each CTA loads whole tiles into its own shared memory with TMA; no
  instruction touches another CTA, so the *same binary* runs without a cluster (variant
  ``no_cluster``) and under a cluster launch (variant ``cluster``): the difference between
  the two is what cluster scheduling alone costs.
* ``multicast=True`` (CUTLASS-style): CTA (x, y) issues slice y of its A tile (1/cluster_y
  of the rows) multicast to every CTA sharing it, and slice x of its B tile likewise; every
  CTA's full barrier expects the whole stage. A stage may be refilled only when every CTA
  that writes into it is done with it, so each consumer warp releases the stage in every CTA
  of its row and column (``mbarrier_arrive_remote``: the default ``.release.cta`` form
  CUTLASS uses; no fence is needed because the released reads have been used), and each
  empty barrier counts ``consumer_warps * sharers`` arrivals. Barrier init is published with
  ``fence.mbarrier_init.release.cluster`` plus a cluster barrier; a second cluster barrier
  before exit keeps a CTA alive while peers may still multicast into it or arrive on it.

``cluster_compute_stream`` is the same ring with two runtime knobs: ``work_rounds`` dependent
IMADs per loaded word before the checksum (consumer time per stage), and ``same_tiles``: every
cluster reads the same tile sequence (tile index from its own step count), so own copies of many
clusters all read the same L2-resident lines and multicast divides those L2 reads.
"""
from numba import cuda, int32, int64, uint16, uint32, uint64
from tma_kernels.ptx import (
    cluster_sync,
    fence_mbarrier_init_cluster,
    ld_shared_v4_u32,
    mbarrier_arrive,
    mbarrier_arrive_expect_tx,
    mbarrier_arrive_remote,
    mbarrier_init,
    mbarrier_wait_parity,
    named_barrier_sync,
    smem_u32,
    tma_load_2d,
    tma_load_2d_multicast,
)

from tma_kernels.common.cluster_consume import make_consume, make_consume_compute
from tma_kernels.common.cluster_tiles import (  # noqa: F401  ROW_BYTES, ROW_ELEMENTS re-exported (kernels/multicast)
    LOG2_ROW_BYTES,
    MBARRIER_BYTES,
    RING_ALIGN_BYTES,
    ROW_BYTES,
    ROW_ELEMENTS,
    WARP,
)

MAX_STAGES = 8
CONSUMER_BARRIER = 1             # named barrier id of the consumer warps (0 is __syncthreads)

# (a_map, b_map, a_tiles, b_tiles, steps_total, a_tile_bytes, b_tile_bytes, stages,
#  cluster_x, cluster_y, consumer_threads, checksums)
SIGNATURE = ("void(uint64, uint64, int64, int64, int64, int32, int32, int32, int32, int32, int32, "
             "uint64[::1])")

consume_local = make_consume(ld_shared_v4_u32)
consume_compute = make_consume_compute(ld_shared_v4_u32)


RELEASES = ("warp", "cta")


def cluster_stream(multicast: bool, release: str = "warp"):
    """The Python kernel function (compile with SIGNATURE); both choices fixed at build time.

    ``release`` is how consumers hand a stage back: ``"warp"``: each consumer warp arrives on
    the empty barrier of every CTA writing into the stage as soon as it is done; ``"cta"``:
    the consumer warps first meet at a named barrier, then one warp arrives once per CTA
    (as many remote arrives as sharers, instead of consumer warps x sharers).
    """
    run = _ring(multicast, release, compute=False)

    def cluster_stream(a_map, b_map, a_tiles, b_tiles, steps_total, a_tile_bytes, b_tile_bytes,
                       stages, cluster_x, cluster_y, consumer_threads, checksums):
        ring = cuda.shared.array(0, uint32)
        full = cuda.shared.array(MAX_STAGES, uint64)
        empty = cuda.shared.array(MAX_STAGES, uint64)
        run(smem_u32(ring), smem_u32(full), smem_u32(empty), a_map, b_map, a_tiles, b_tiles, steps_total,
            a_tile_bytes, b_tile_bytes, stages, cluster_x, cluster_y, consumer_threads, checksums, int32(0),
            int32(0))

    return cluster_stream


# SIGNATURE, then work_rounds (LCG steps per loaded word, kernels/common/cluster_consume.py) and
# same_tiles (1: every cluster reads the same tile sequence, its own step count k instead of the
# global step q, so all clusters hit the same L2 lines at once)
COMPUTE_SIGNATURE = SIGNATURE.removesuffix(")") + ", int32, int32)"


def cluster_compute_stream(multicast: bool, release: str = "warp"):
    """The ring with the compute consumer (compile with COMPUTE_SIGNATURE): each stage's words
    are churned ``work_rounds`` times before the checksum, and ``same_tiles`` picks the tile
    order; ``multicast`` and ``release`` as in :func:`cluster_stream`."""
    run = _ring(multicast, release, compute=True)

    def cluster_compute_stream(a_map, b_map, a_tiles, b_tiles, steps_total, a_tile_bytes, b_tile_bytes,
                               stages, cluster_x, cluster_y, consumer_threads, checksums, work_rounds, same_tiles):
        ring = cuda.shared.array(0, uint32)
        full = cuda.shared.array(MAX_STAGES, uint64)
        empty = cuda.shared.array(MAX_STAGES, uint64)
        run(smem_u32(ring), smem_u32(full), smem_u32(empty), a_map, b_map, a_tiles, b_tiles, steps_total,
            a_tile_bytes, b_tile_bytes, stages, cluster_x, cluster_y, consumer_threads, checksums, work_rounds,
            same_tiles)

    return cluster_compute_stream


def _ring(multicast: bool, release: str, compute: bool):
    """The kernel body as an inline device function over the shared-memory addresses of the ring
    and its barriers (the kernels declare the shared arrays)."""
    if release not in RELEASES:
        raise ValueError(f"release {release!r} is not one of {RELEASES}")
    per_cta = release == "cta"
    produce = _producer(multicast)
    consume = _consumer(multicast, per_cta, compute)

    @cuda.jit(device=True, inline=True)
    def run(ring_raw, full_smem, empty_smem, a_map, b_map, a_tiles, b_tiles, steps_total, a_tile_bytes,
            b_tile_bytes, stages, cluster_x, cluster_y, consumer_threads, checksums, work_rounds, same_tiles):
        tid = cuda.threadIdx.x
        size = cluster_x * cluster_y
        rank = cuda.blockIdx.x % size
        group = cuda.blockIdx.x // size
        groups = cuda.gridDim.x // size
        x = rank % cluster_x
        y = rank // cluster_x
        has_b = b_tile_bytes > 0
        stage_bytes = a_tile_bytes + b_tile_bytes
        consumer_warps = consumer_threads // WARP
        ring_smem = (ring_raw + uint32(RING_ALIGN_BYTES - 1)) & ~uint32(RING_ALIGN_BYTES - 1)
        if tid == 0:
            releases = 1 if per_cta else consumer_warps
            if multicast:
                releases *= cluster_y + (cluster_x - 1 if has_b else 0)
            for s in range(stages):
                mbarrier_init(full_smem + uint32(s * MBARRIER_BYTES), 1)
                mbarrier_init(empty_smem + uint32(s * MBARRIER_BYTES), releases)
            fence_mbarrier_init_cluster()
        if multicast:
            cluster_sync()
        else:
            cuda.syncthreads()

        a_rows = a_tile_bytes >> LOG2_ROW_BYTES
        b_rows = b_tile_bytes >> LOG2_ROW_BYTES
        checksum = uint64(0)
        if tid == consumer_threads:
            produce(a_map, b_map, a_tiles, b_tiles, steps_total, a_tile_bytes, a_rows, b_rows, has_b, stage_bytes,
                    stages, cluster_x, cluster_y, x, y, int64(group), groups, ring_smem, full_smem, empty_smem,
                    same_tiles)
        elif tid < consumer_threads:
            checksum = consume(steps_total, stage_bytes, stages, cluster_x, x, y, has_b, size, tid,
                               consumer_threads, int64(group), groups, ring_smem, full_smem, empty_smem, work_rounds)
        if multicast:
            cluster_sync()
        checksums[cuda.blockIdx.x * cuda.blockDim.x + tid] = checksum

    return run


def _producer(multicast: bool):
    """The producer thread's loop: refill stage s once every CTA writing into it released it."""

    @cuda.jit(device=True, inline=True)
    def produce(a_map, b_map, a_tiles, b_tiles, steps_total, a_tile_bytes, a_rows, b_rows, has_b, stage_bytes,
                stages, cluster_x, cluster_y, x, y, q, groups, ring_smem, full_smem, empty_smem, same_tiles):
        a_slice_rows = a_rows // cluster_y
        b_slice_rows = b_rows // cluster_x
        a_mask = 0
        for yy in range(cluster_y):
            a_mask |= 1 << (x + yy * cluster_x)
        b_mask = ((1 << cluster_x) - 1) << (y * cluster_x)
        k = 0
        while q < steps_total:
            s = k % stages
            full_bar = full_smem + uint32(s * MBARRIER_BYTES)
            if k >= stages:
                mbarrier_wait_parity(empty_smem + uint32(s * MBARRIER_BYTES), ((k // stages) - 1) & 1)
            mbarrier_arrive_expect_tx(full_bar, stage_bytes)
            stage = ring_smem + uint32(s * stage_bytes)
            t = int64(k) if same_tiles != 0 else q       # the tile sequence: the cluster's own, or shared
            a_row = int32(((t * cluster_x + x) % a_tiles) * a_rows)
            b_row = int32(((t * cluster_y + y) % b_tiles) * b_rows) if has_b else int32(0)
            if multicast:
                tma_load_2d_multicast(stage + uint32(y * a_slice_rows * ROW_BYTES), a_map, full_bar,
                                      0, a_row + y * a_slice_rows, uint16(a_mask))
                if has_b:
                    tma_load_2d_multicast(stage + uint32(a_tile_bytes + x * b_slice_rows * ROW_BYTES),
                                          b_map, full_bar, 0, b_row + x * b_slice_rows, uint16(b_mask))
            else:
                tma_load_2d(stage, a_map, full_bar, 0, a_row)
                if has_b:
                    tma_load_2d(stage + uint32(a_tile_bytes), b_map, full_bar, 0, b_row)
            q += groups
            k += 1

    return produce


def _consumer(multicast: bool, per_cta: bool, compute: bool):
    """A consumer thread's loop: fold each stage into the checksum (churning each word
    ``work_rounds`` times first when ``compute``), then release the stage in every CTA writing
    into it (warp ``"warp"`` release, or warp 0 for the CTA under ``"cta"``)."""

    @cuda.jit(device=True, inline=True)
    def consume(steps_total, stage_bytes, stages, cluster_x, x, y, has_b, size, tid, consumer_threads, q,
                groups, ring_smem, full_smem, empty_smem, work_rounds):
        checksum = uint64(0)
        lane = tid % WARP
        k = 0
        while q < steps_total:
            s = k % stages
            mbarrier_wait_parity(full_smem + uint32(s * MBARRIER_BYTES), (k // stages) & 1)
            if compute:
                checksum = consume_compute(ring_smem + uint32(s * stage_bytes), stage_bytes, tid,
                                           consumer_threads, checksum, work_rounds)
            else:
                checksum = consume_local(ring_smem + uint32(s * stage_bytes), stage_bytes, tid,
                                         consumer_threads, checksum)
            if per_cta:
                named_barrier_sync(CONSUMER_BARRIER, consumer_threads)
            else:
                cuda.syncwarp()
            empty_bar = empty_smem + uint32(s * MBARRIER_BYTES)
            if per_cta and tid >= WARP:
                pass                                # warp 0 releases for the whole CTA
            elif multicast:
                if lane < size and (lane % cluster_x == x or (has_b and lane // cluster_x == y)):
                    mbarrier_arrive_remote(empty_bar, uint32(lane))
            elif lane == 0:
                mbarrier_arrive(empty_bar)
            q += groups
            k += 1
        return checksum

    return consume
