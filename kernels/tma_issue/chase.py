"""One thread's dependent chase, the same chunks in four forms: what one transfer costs from issue
to arrival, with nothing else in the loop that the form does not need.

The chase buffer: chunk ``c``'s word 0 holds its successor's index, words 2-3 its successor's
address (host: tma_study.studies.tma_issue.measure). Per hop:

    tma_tile       arrive.expect_tx + one cp.async.bulk.tensor.2d box of the chunk, a try_wait loop,
                   then the chunk's word 0 (shared memory) is the next chunk
    bulk_copy      the same with one cp.async.bulk
    plain_indexed  one ld.global.v4 of the chunk; its word 0 is the next chunk, whose address is
                   computed (base + index << log2 size): the published chase's form on indices
    plain_minimal  one ld.global of the chunk's words 2-3, which are the next load's address: nothing
                   but the dependent load (ptxas narrows the 16-byte load to the 8 bytes used)

``(clock64 after - before) / hops`` is one hop. result: cycles, nanoseconds, the final chunk, waits
given up (a lost completion ends the chase instead of hanging the GPU).
"""
from numba import cuda, uint32, uint64

from tma_kernels.common.chase_steps import issue_bulk_copy, issue_tma_tile, wait_try
from tma_kernels.ptx import (
    clock64,
    fence_mbarrier_init_cluster,
    globaltimer,
    ld_global_v4_u32,
    mbarrier_init,
    smem_u32,
)

# (source_address, tensor_map, log2_bytes_per_transfer, start_chunk, hops, result)
CHASE_SIGNATURE = "void(uint64, uint64, int32, int64, int32, uint64[::1])"
RESULT_WORDS = 4
STAGE_ALIGN_BYTES = 128
FORMS = ("tma_tile", "bulk_copy", "plain_indexed", "plain_minimal")


def chase_dynamic_shared_bytes(bytes_per_transfer: int) -> int:
    return bytes_per_transfer + STAGE_ALIGN_BYTES


def _make_engine_chase(issue):
    def chase(source_address, tensor_map, log2_bytes_per_transfer, start_chunk, hops, result):
        stage = cuda.shared.array(0, uint32)
        full = cuda.shared.array(1, uint64)
        stage_base = smem_u32(stage)
        stage_smem = (stage_base + uint32(STAGE_ALIGN_BYTES - 1)) & ~uint32(STAGE_ALIGN_BYTES - 1)
        first_word = (stage_smem - stage_base) >> 2
        bar = smem_u32(full)
        mbarrier_init(bar, 1)
        fence_mbarrier_init_cluster()
        chunk = uint32(start_chunk)
        given_up = 0
        start_cycles = clock64()
        start_ns = globaltimer()
        for hop in range(hops):
            issue(stage_smem, bar, chunk, log2_bytes_per_transfer, source_address, tensor_map)
            if wait_try(bar, uint32(hop & 1)) != 0:
                given_up = 1
                break
            chunk = stage[first_word]
        end_cycles = clock64()
        end_ns = globaltimer()
        result[0] = end_cycles - start_cycles
        result[1] = end_ns - start_ns
        result[2] = chunk
        result[3] = given_up

    return chase


def chase_plain_indexed(source_address, tensor_map, log2_bytes_per_transfer, start_chunk, hops, result):
    chunk = uint32(start_chunk)
    start_cycles = clock64()
    start_ns = globaltimer()
    for hop in range(hops):
        v = ld_global_v4_u32(source_address + (uint64(chunk) << uint64(log2_bytes_per_transfer)))
        chunk = v[0]
    end_cycles = clock64()
    end_ns = globaltimer()
    result[0] = end_cycles - start_cycles
    result[1] = end_ns - start_ns
    result[2] = chunk
    result[3] = 0


def chase_plain_minimal(source_address, tensor_map, log2_bytes_per_transfer, start_chunk, hops, result):
    address = source_address + (uint64(start_chunk) << uint64(log2_bytes_per_transfer))
    start_cycles = clock64()
    start_ns = globaltimer()
    for hop in range(hops):
        v = ld_global_v4_u32(address)
        address = uint64(v[2]) | (uint64(v[3]) << uint64(32))
    end_cycles = clock64()
    end_ns = globaltimer()
    result[0] = end_cycles - start_cycles
    result[1] = end_ns - start_ns
    result[2] = (address - source_address) >> uint64(log2_bytes_per_transfer)
    result[3] = 0


def chase_kernel(form: str):
    """The Python kernel function of one chase form (compile with CHASE_SIGNATURE)."""
    if form == "plain_indexed":
        return chase_plain_indexed
    if form == "plain_minimal":
        return chase_plain_minimal
    kernel = _make_engine_chase({"tma_tile": issue_tma_tile, "bulk_copy": issue_bulk_copy}[form])
    kernel.__name__ = kernel.__qualname__ = f"chase_{form}"
    return kernel
