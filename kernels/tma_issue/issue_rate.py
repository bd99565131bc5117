"""How fast one SM issues TMA-engine copies: no consumer, no chase, only issue and landing.

One CTA per SM (launch a grid of one CTA per SM with enough dynamic shared memory that no second
fits). Its first ``issue_threads`` threads issue every copy; nothing reads the data. A *round* is
``transfers_per_round`` copies of ``bytes_per_transfer`` bytes into one stage of ``stages``, each copy
in a slot of ``max(bytes_per_transfer, SLOT_ALIGN_BYTES)`` bytes (a tensor copy's shared-memory
destination must be 128-byte aligned); thread 0
arms the stage's mbarrier with the round's bytes, the CTA syncs, the issuing threads issue the
round's copies (thread ``t`` copies ``t``, ``t + issue_threads``, ...) and go on to the next stage;
before reusing a stage thread 0 waits for its previous round to land. So ``stages`` rounds are in
flight and the only work per copy is its issue: ``transfers / time`` is the SM's issue rate
whenever the bytes in flight cover the latency.

    tma_tile    cp.async.bulk.tensor.2d, a box of one chunk (a tensor of 256 uint32 a row)
    bulk_copy   cp.async.bulk, one chunk

Round ``r``'s copy ``j`` in CTA ``b`` reads chunk ``(b * CTA_CHUNK_STRIDE + r * transfers_per_round
+ j) & chunk_mask``. After the last round, thread 0 adds every word of every stage (each holds
the last round that used it; the copied bytes of each slot) into ``checksums[b]`` when ``check`` is 1 (the untimed check launch;
timed launches pass 0), and the host recomputes it.
"""
from numba import cuda, uint32, uint64

from tma_kernels.common.chase_steps import LOG2_ELEMENT_BYTES, LOG2_TENSOR_COLS, TENSOR_COLS
from tma_kernels.ptx import (
    bulk_load,
    fence_mbarrier_init_cluster,
    mbarrier_arrive_expect_tx,
    mbarrier_init,
    mbarrier_wait_parity,
    smem_u32,
    tma_load_2d,
)

CTA_CHUNK_STRIDE = 4099          # odd: CTAs start at chunks spread over the working set
MAX_STAGES = 8
MBARRIER_BYTES = 8
RING_ALIGN_BYTES = 128
SLOT_ALIGN_BYTES = 128           # a copy's shared-memory destination: 128-byte aligned (tensor copies)
LOG2_SLOT_ALIGN = 7
# (source_address, tensor_map, log2_bytes_per_transfer, chunk_mask, transfers_per_round, rounds,
#  stages, issue_threads, check, checksums)
ISSUE_RATE_SIGNATURE = "void(uint64, uint64, int32, int64, int32, int32, int32, int32, int32, uint64[::1])"
MECHANISMS = ("tma_tile", "bulk_copy")


def slot_bytes(bytes_per_transfer: int) -> int:
    return max(bytes_per_transfer, SLOT_ALIGN_BYTES)


def issue_rate_dynamic_shared_bytes(stages: int, transfers_per_round: int, bytes_per_transfer: int) -> int:
    return stages * transfers_per_round * slot_bytes(bytes_per_transfer) + RING_ALIGN_BYTES


@cuda.jit(device=True, inline=True)
def _copy_tma_tile(dst, bar, chunk, log2_bytes_per_transfer, source_address, tensor_map):
    element = chunk << uint32(log2_bytes_per_transfer - LOG2_ELEMENT_BYTES)
    tma_load_2d(dst, tensor_map, bar, element & uint32(TENSOR_COLS - 1), element >> uint32(LOG2_TENSOR_COLS))


@cuda.jit(device=True, inline=True)
def _copy_bulk(dst, bar, chunk, log2_bytes_per_transfer, source_address, tensor_map):
    bulk_load(dst, source_address + (uint64(chunk) << uint64(log2_bytes_per_transfer)),
              uint32(1) << uint32(log2_bytes_per_transfer), bar)


def _make_issue_rate(copy):
    def issue_rate(source_address, tensor_map, log2_bytes_per_transfer, chunk_mask, transfers_per_round,
                   rounds, stages, issue_threads, check, checksums):
        ring = cuda.shared.array(0, uint32)
        full = cuda.shared.array(MAX_STAGES, uint64)
        tid = cuda.threadIdx.x
        ring_base = smem_u32(ring)
        ring_smem = (ring_base + uint32(RING_ALIGN_BYTES - 1)) & ~uint32(RING_ALIGN_BYTES - 1)
        full_smem = smem_u32(full)
        stage_bytes = uint32(transfers_per_round) << uint32(log2_bytes_per_transfer)     # bytes a round lands
        log2_slot = max(log2_bytes_per_transfer, LOG2_SLOT_ALIGN)
        stage_stride = uint32(transfers_per_round) << uint32(log2_slot)                  # shared memory a stage takes
        if tid == 0:
            for s in range(stages):
                mbarrier_init(full_smem + uint32(s * MBARRIER_BYTES), 1)
            fence_mbarrier_init_cluster()
        cuda.syncthreads()
        first_chunk = uint32(cuda.blockIdx.x * CTA_CHUNK_STRIDE)
        for r in range(rounds):
            s = r % stages
            bar = full_smem + uint32(s * MBARRIER_BYTES)
            if tid == 0:
                if r >= stages:                      # the stage's previous round has landed
                    mbarrier_wait_parity(bar, uint32((r // stages - 1) & 1))
                mbarrier_arrive_expect_tx(bar, stage_bytes)
            cuda.syncthreads()
            if tid < issue_threads:
                stage_smem = ring_smem + uint32(s) * stage_stride
                round_chunk = first_chunk + uint32(r * transfers_per_round)
                for j in range(tid, transfers_per_round, issue_threads):
                    chunk = (round_chunk + uint32(j)) & uint32(chunk_mask)
                    copy(stage_smem + (uint32(j) << uint32(log2_slot)), bar, chunk,
                         log2_bytes_per_transfer, source_address, tensor_map)
        for r in range(max(0, rounds - stages), rounds):     # every copy has landed before any thread goes on
            mbarrier_wait_parity(full_smem + uint32((r % stages) * MBARRIER_BYTES), uint32((r // stages) & 1))
        if check != 0:
            first_word = (ring_smem - ring_base) >> 2
            words_per_copy = 1 << (log2_bytes_per_transfer - LOG2_ELEMENT_BYTES)
            words_per_slot = 1 << (log2_slot - LOG2_ELEMENT_BYTES)
            total = uint64(0)
            for w in range(tid, min(rounds, stages) * transfers_per_round * words_per_copy, cuda.blockDim.x):
                total += uint64(ring[first_word + (w // words_per_copy) * words_per_slot + w % words_per_copy])
            cuda.atomic.add(checksums, cuda.blockIdx.x, total)

    return issue_rate


_COPIES = {"tma_tile": _copy_tma_tile, "bulk_copy": _copy_bulk}


def issue_rate_kernel(mechanism: str):
    """The Python kernel function of ``mechanism``'s issue-rate probe (compile with ISSUE_RATE_SIGNATURE)."""
    kernel = _make_issue_rate(_COPIES[mechanism])
    kernel.__name__ = kernel.__qualname__ = f"issue_rate_{mechanism}"
    return kernel
