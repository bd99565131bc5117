"""The ``dsm`` study's broadcast rings: one CTA (rank 0, the *leader*) loads each tile from
global memory with TMA and the other CTAs of the cluster get it through distributed shared
memory. (The third variant, TMA multicast, is the ``multicast`` study's kernel run with
cluster shape (1, n): same consumer, same ring, same tiles.)

Warps: consumers [0, consumer_threads), a producer warp, a relay warp (the leader's only).
CTA of group g runs steps q = g, g + groups, ...; tile q mod a_tiles; stage s = k % stages.
The operand is the ``multicast`` study's A tensor (rows of 256 B), so the same reference
checksums hold.

``dsm_pull``  peers read the leader's stage with 128-bit ``ld.shared::cluster``.
    leader producer   wait empty[s] -> arm full[s] with the tile bytes -> TMA tile
    leader relay      lane p (1 <= p < n) waits full[s], then arrives on peer p's full[s]
                      with ``.release.cluster`` (publishes the tile the leader observed)
    peer consumers    wait own full[s] with ``.acquire.cluster`` -> read the leader's stage
                      -> each warp releases the leader's empty[s] (default ``.release.cta``
                      remote arrive: the reads' values were used first)
    leader empty[s] counts consumer_warps * n arrivals; a peer's full[s] counts 1.

``dsm_push``  the leader copies each tile into every peer with a bulk shared::cta ->
    shared::cluster copy completing on the peer's full[s] (``complete_tx``).
    every producer    wait own empty[s] -> arm own full[s] with the tile bytes; the leader's
                      also issues the TMA tile
    leader relay      lane p waits full[s], copies the stage to peer p's stage (completing
                      on p's full[s]), waits for the copy's reads (``bulk_wait_group_read``),
                      then the warp releases the leader's empty[s] once
    peer consumers    wait own full[s] -> read own stage -> release own empty[s] and the
                      leader's empty[s] (so the leader never pushes into a busy stage)
    leader empty[s] counts consumer_warps * n + 1; a peer's counts consumer_warps.

Both: barrier init published by ``fence.mbarrier_init.release.cluster`` + cluster barrier;
a cluster barrier before exit.
"""
from numba import cuda, int32, int64, uint32, uint64
from tma_kernels.common.cluster_consume import make_consume
from tma_kernels.common.cluster_tiles import (
    LOG2_ROW_BYTES,
    MBARRIER_BYTES,
    RING_ALIGN_BYTES,
    WARP,
)
from tma_kernels.ptx import (
    bulk_commit_group,
    bulk_copy_to_peer,
    bulk_wait_group_read0,
    cluster_ctarank,
    cluster_nctarank,
    cluster_sync,
    clusterid_x,
    fence_mbarrier_init_cluster,
    ld_shared_cluster_v4_u32,
    ld_shared_v4_u32,
    mapa_shared,
    mbarrier_arrive,
    mbarrier_arrive_cluster,
    mbarrier_arrive_expect_tx,
    mbarrier_arrive_remote,
    mbarrier_init,
    mbarrier_wait_parity,
    mbarrier_wait_parity_acquire_cluster,
    nclusterid_x,
    smem_u32,
    tma_load_2d,
)

MAX_STAGES = 8
LEADER = 0
VARIANTS = ("dsm_pull", "dsm_push")

# (a_map, a_tiles, steps_total, tile_bytes, stages, consumer_threads, checksums)
SIGNATURE = "void(uint64, int64, int64, int32, int32, int32, uint64[::1])"

consume_local = make_consume(ld_shared_v4_u32)
consume_remote = make_consume(ld_shared_cluster_v4_u32)


def threads_per_cta(consumer_threads: int) -> int:
    """Consumers, a producer warp and a relay warp."""
    return consumer_threads + 2 * WARP


def make_broadcast(variant: str):
    """The Python kernel function of one variant (compile with SIGNATURE)."""
    if variant not in VARIANTS:
        raise ValueError(f"DSM broadcast variant {variant!r} is not one of {VARIANTS}")
    pull = variant == "dsm_pull"
    init_ring, produce, relay, release = _ring_init(pull), _producer(), _relay(pull), _release(pull)

    def broadcast(a_map, a_tiles, steps_total, tile_bytes, stages, consumer_threads, checksums):
        ring = cuda.shared.array(0, uint32)
        full = cuda.shared.array(MAX_STAGES, uint64)
        empty = cuda.shared.array(MAX_STAGES, uint64)
        tid = cuda.threadIdx.x
        size = cluster_nctarank()
        rank = cluster_ctarank()
        leader = rank == LEADER
        consumer_warps = consumer_threads // WARP
        ring_smem = (smem_u32(ring) + uint32(RING_ALIGN_BYTES - 1)) & ~uint32(RING_ALIGN_BYTES - 1)
        full_smem = smem_u32(full)
        empty_smem = smem_u32(empty)
        if tid == 0:
            init_ring(leader, size, consumer_warps, stages, full_smem, empty_smem)
        cluster_sync()

        rows = tile_bytes >> LOG2_ROW_BYTES
        checksum = uint64(0)
        k = 0
        q = int64(clusterid_x())
        groups = nclusterid_x()
        producer = tid == consumer_threads
        relay_lane = tid - consumer_threads - WARP          # relay warp: lanes 0..31
        if producer and (leader or not pull):
            produce(leader, a_map, a_tiles, rows, steps_total, tile_bytes, stages, q, k, groups, ring_smem,
                    full_smem, empty_smem)
        elif leader and relay_lane >= 0:
            relay(uint32(relay_lane), size, steps_total, tile_bytes, stages, q, k, groups, ring_smem, full_smem,
                  empty_smem)
        elif tid < consumer_threads:      # inline: as a helper returning the checksum, its SASS differs
            lane = tid % WARP
            source = mapa_shared(ring_smem, LEADER) if pull else ring_smem
            while q < steps_total:
                s = k % stages
                full_bar = full_smem + uint32(s * MBARRIER_BYTES)
                empty_bar = empty_smem + uint32(s * MBARRIER_BYTES)
                if pull and not leader:
                    mbarrier_wait_parity_acquire_cluster(full_bar, (k // stages) & 1)
                    checksum = consume_remote(source + uint32(s * tile_bytes), tile_bytes, tid,
                                              consumer_threads, checksum)
                else:
                    mbarrier_wait_parity(full_bar, (k // stages) & 1)
                    checksum = consume_local(ring_smem + uint32(s * tile_bytes), tile_bytes, tid,
                                             consumer_threads, checksum)
                release(leader, lane, empty_bar)
                q += groups
                k += 1
        cluster_sync()
        checksums[cuda.blockIdx.x * cuda.blockDim.x + tid] = checksum

    return broadcast


def _relay(pull: bool):
    """The leader's relay warp: lane ``peer`` hands each stage to CTA ``peer`` once it landed
    (``dsm_pull``: arrives on the peer's full barrier; ``dsm_push``: copies the stage into the
    peer, then the warp releases the leader's stage)."""

    @cuda.jit(device=True, inline=True)
    def relay(peer, size, steps_total, tile_bytes, stages, q, k, groups, ring_smem, full_smem, empty_smem):
        while q < steps_total:
            s = k % stages
            full_bar = full_smem + uint32(s * MBARRIER_BYTES)
            stage = ring_smem + uint32(s * tile_bytes)
            if peer != LEADER and peer < size:
                mbarrier_wait_parity(full_bar, (k // stages) & 1)
                if pull:
                    mbarrier_arrive_cluster(full_bar, peer)
                else:
                    bulk_copy_to_peer(mapa_shared(stage, peer), stage, tile_bytes, mapa_shared(full_bar, peer))
                    bulk_commit_group()
                    bulk_wait_group_read0()
            if not pull:
                cuda.syncwarp()
                if peer == LEADER:
                    mbarrier_arrive(empty_smem + uint32(s * MBARRIER_BYTES))
            q += groups
            k += 1

    return relay


def _producer():
    """A producer's ring: each stage armed with the tile's bytes once free; the leader's also
    loads the tile by TMA (``dsm_push``: every CTA's producer arms its own stages)."""

    @cuda.jit(device=True, inline=True)
    def produce(leader, a_map, a_tiles, rows, steps_total, tile_bytes, stages, q, k, groups, ring_smem,
                full_smem, empty_smem):
        while q < steps_total:
            s = k % stages
            full_bar = full_smem + uint32(s * MBARRIER_BYTES)
            if k >= stages:
                mbarrier_wait_parity(empty_smem + uint32(s * MBARRIER_BYTES), ((k // stages) - 1) & 1)
            mbarrier_arrive_expect_tx(full_bar, tile_bytes)
            if leader:
                tma_load_2d(ring_smem + uint32(s * tile_bytes), a_map, full_bar, 0, int32((q % a_tiles) * rows))
            q += groups
            k += 1

    return produce



def _ring_init(pull: bool):
    """Thread 0's barrier init: full[s] counts one arrival; empty[s] every consumer warp's release
    (the leader's: every CTA's, and ``dsm_push``'s relay warp once), published to the cluster."""

    @cuda.jit(device=True, inline=True)
    def init_ring(leader, size, consumer_warps, stages, full_smem, empty_smem):
        if leader:
            releases = consumer_warps * size + (0 if pull else 1)
        else:
            releases = consumer_warps
        for s in range(stages):
            mbarrier_init(full_smem + uint32(s * MBARRIER_BYTES), 1)
            mbarrier_init(empty_smem + uint32(s * MBARRIER_BYTES), releases)
        fence_mbarrier_init_cluster()

    return init_ring


def _release(pull: bool):
    """A consumer warp's release of a stage it read: the leader's own; a peer's the leader's
    (remote arrive) and, in ``dsm_push``, its own too."""

    @cuda.jit(device=True, inline=True)
    def release(leader, lane, empty_bar):
        cuda.syncwarp()
        if lane == 0:
            if leader:
                mbarrier_arrive(empty_bar)
            else:
                mbarrier_arrive_remote(empty_bar, uint32(LEADER))
                if not pull:
                    mbarrier_arrive(empty_bar)

    return release
