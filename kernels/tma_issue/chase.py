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

``(clock64 after - before) / hops`` is one hop. Every form takes the arguments of
:func:`tma_kernels.common.chase_steps.make_engine_chase` (CHASE_SIGNATURE; the chunk mask and issuing
threads unused) and writes its result: cycles, nanoseconds, the final chunk, waits given up (a lost
completion ends the chase instead of hanging the GPU), 0.
"""
from numba import uint32, uint64

from tma_kernels.common.chase_steps import (CHASE_SIGNATURE, RESULT_WORDS, STAGE_ALIGN_BYTES, issue_bulk_copy,  # noqa: F401
                                           issue_tma_tile, make_engine_chase, store_result, wait_try)
from tma_kernels.ptx import clock64, globaltimer, ld_global_v4_u32

FORMS = ("tma_tile", "bulk_copy", "plain_indexed", "plain_minimal")


def chase_dynamic_shared_bytes(bytes_per_transfer: int) -> int:
    return bytes_per_transfer + STAGE_ALIGN_BYTES


def chase_plain_indexed(source_address, tensor_map, log2_bytes_per_transfer, chunk_mask, start_chunk, hops,
                        issue_threads, result):
    chunk = uint32(start_chunk)
    start_cycles = clock64()
    start_ns = globaltimer()
    for hop in range(hops):
        v = ld_global_v4_u32(source_address + (uint64(chunk) << uint64(log2_bytes_per_transfer)))
        chunk = v[0]
    end_cycles = clock64()
    end_ns = globaltimer()
    store_result(result, start_cycles, end_cycles, start_ns, end_ns, chunk, 0, 0)


def chase_plain_minimal(source_address, tensor_map, log2_bytes_per_transfer, chunk_mask, start_chunk, hops,
                        issue_threads, result):
    address = source_address + (uint64(start_chunk) << uint64(log2_bytes_per_transfer))
    start_cycles = clock64()
    start_ns = globaltimer()
    for hop in range(hops):
        v = ld_global_v4_u32(address)
        address = uint64(v[2]) | (uint64(v[3]) << uint64(32))
    end_cycles = clock64()
    end_ns = globaltimer()
    store_result(result, start_cycles, end_cycles, start_ns, end_ns,
                 (address - source_address) >> uint64(log2_bytes_per_transfer), 0, 0)


def chase_kernel(form: str):
    """The Python kernel function of one chase form (compile with CHASE_SIGNATURE)."""
    if form == "plain_indexed":
        return chase_plain_indexed
    if form == "plain_minimal":
        return chase_plain_minimal
    kernel = make_engine_chase({"tma_tile": issue_tma_tile, "bulk_copy": issue_bulk_copy}[form], wait_try)
    kernel.__name__ = kernel.__qualname__ = f"chase_{form}"
    return kernel
