"""Issue-to-arrival latency of one transfer: the pointer chase as published microbenchmarks time it.

One thread (launch a one-thread CTA) chases the same chunks as :mod:`.latency`: per hop it issues
the transfer of chunk ``c`` with the mechanism's bare instructions, waits for it, and reads the
chunk's word 0, the next chunk. Nothing else: no CTA barrier, no other thread waiting or issuing,
no order multiplier, no producer loop. ``(clock64 after - before) / hops`` is then one
transfer's issue-to-arrival latency plus one shared-memory read of the word.

    tma_tile     mbarrier.arrive.expect_tx(bytes); one cp.async.bulk.tensor.2d box
    bulk_copy    mbarrier.arrive.expect_tx(bytes); one cp.async.bulk
    cp_async     bytes/16 cp.async.cg 16-byte copies; cp.async.mbarrier.arrive.noinc
    plain_loads  bytes/16 ld.global.v4 into registers, LOADS_IN_FLIGHT at a time, no mbarrier;
                 word 0 of the first vector is the next chunk, every word is added to a checksum

The mbarrier mechanisms wait in one of three forms (``WAITS``): ``try_wait`` (a loop on
``mbarrier.try_wait``, the hardware may suspend the thread for a system-dependent time, as the
other chase and the published one wait), ``try_wait_hint`` (the same with a suspend-time hint,
as CUTLASS waits) and ``test_wait`` (a loop on the never-suspending ``mbarrier.test_wait``).
A wait that sees no completion for ``WAIT_LIMIT_CYCLES`` gives up and ends the chase (result[3]
= 1), so a lost completion fails the run instead of hanging the GPU.

result (uint64[RESULT_WORDS]): cycles, nanoseconds, final chunk, waits given up, checksum.
"""
from numba import cuda, uint32, uint64

from tma_kernels.common.chase_steps import (WAIT_LIMIT_CYCLES, issue_bulk_copy, issue_tma_tile,
                                           make_engine_chase, store_result, wait_try)
from tma_kernels.ptx import (
    clock64,
    cp_async_cg16,
    cp_async_mbarrier_arrive_noinc,
    globaltimer,
    ld_global_v4_u32,
    mbarrier_test_wait_parity,
    mbarrier_try_wait_parity_hint,
)

from .latency import LATENCY_SIGNATURE

CHAIN_SIGNATURE = LATENCY_SIGNATURE     # the same arguments as the full chase; result holds RESULT_WORDS
RESULT_WORDS = 5
SUSPEND_TIME_HINT_NS = 0x989680         # CUTLASS ClusterBarrier::wait's hint (10 ms)
VECTOR_BYTES = 16
LOADS_IN_FLIGHT = 4                     # as the plain-loads producer (plain_loads.py)
WAITS = ("try_wait", "try_wait_hint", "test_wait")


# ---------------------------------------------------------------- waits: return 1 if given up

@cuda.jit(device=True, inline=True)
def _wait_try_hint(bar, parity):
    if mbarrier_try_wait_parity_hint(bar, parity, uint32(SUSPEND_TIME_HINT_NS)) != 0:
        return 0
    start = clock64()
    while mbarrier_try_wait_parity_hint(bar, parity, uint32(SUSPEND_TIME_HINT_NS)) == 0:
        if clock64() - start > WAIT_LIMIT_CYCLES:
            return 1
    return 0


@cuda.jit(device=True, inline=True)
def _wait_test(bar, parity):
    if mbarrier_test_wait_parity(bar, parity) != 0:
        return 0
    start = clock64()
    while mbarrier_test_wait_parity(bar, parity) == 0:
        if clock64() - start > WAIT_LIMIT_CYCLES:
            return 1
    return 0


_WAIT_FUNCTIONS = {"try_wait": wait_try, "try_wait_hint": _wait_try_hint, "test_wait": _wait_test}


# ---------------------------------------------------------------- issues: one transfer of chunk

@cuda.jit(device=True, inline=True)
def _issue_cp_async(stage_smem, bar, chunk, log2_bytes_per_transfer, source_address, tensor_map):
    source = source_address + (uint64(chunk) << uint64(log2_bytes_per_transfer))
    for offset in range(0, 1 << log2_bytes_per_transfer, VECTOR_BYTES):
        cp_async_cg16(stage_smem + uint32(offset), source + uint64(offset))
    cp_async_mbarrier_arrive_noinc(bar)


_ISSUE_FUNCTIONS = {"tma_tile": issue_tma_tile, "bulk_copy": issue_bulk_copy, "cp_async": _issue_cp_async}


@cuda.jit(device=True, inline=True)
def _vector_sum(v):
    return uint64(v[0]) + uint64(v[1]) + uint64(v[2]) + uint64(v[3])


def plain_loads_chase(source_address, tensor_map, log2_bytes_per_transfer, chunk_mask, start_chunk, hops,
                      issue_threads, result):
    """The plain-loads chase: registers only, so no wait form and no shared memory."""
    bytes_per_transfer = 1 << log2_bytes_per_transfer
    step = LOADS_IN_FLIGHT * VECTOR_BYTES
    chunk = uint32(start_chunk)
    checksum = uint64(0)
    start_cycles = clock64()
    start_ns = globaltimer()
    for hop in range(hops):
        address = source_address + (uint64(chunk) << uint64(log2_bytes_per_transfer))
        first = ld_global_v4_u32(address)
        offset = VECTOR_BYTES
        while offset + step <= bytes_per_transfer:
            a = ld_global_v4_u32(address + uint64(offset))
            b = ld_global_v4_u32(address + uint64(offset + VECTOR_BYTES))
            c = ld_global_v4_u32(address + uint64(offset + 2 * VECTOR_BYTES))
            d = ld_global_v4_u32(address + uint64(offset + 3 * VECTOR_BYTES))
            checksum += _vector_sum(a) + _vector_sum(b) + _vector_sum(c) + _vector_sum(d)
            offset += step
        while offset < bytes_per_transfer:
            checksum += _vector_sum(ld_global_v4_u32(address + uint64(offset)))
            offset += VECTOR_BYTES
        checksum += _vector_sum(first)
        chunk = first[0]
    end_cycles = clock64()
    end_ns = globaltimer()
    store_result(result, start_cycles, end_cycles, start_ns, end_ns, chunk, 0, checksum)


def chain_kernel(mechanism: str, wait: str = "try_wait"):
    """The Python kernel function of ``mechanism``'s issue-to-arrival chase with ``wait``'s form
    (compile with CHAIN_SIGNATURE; plain_loads has no wait form: pass the default)."""
    if mechanism == "plain_loads":
        if wait != "try_wait":
            raise ValueError("plain_loads waits on its registers, not on an mbarrier: no wait form")
        kernel = plain_loads_chase
    else:
        kernel = make_engine_chase(_ISSUE_FUNCTIONS[mechanism], _WAIT_FUNCTIONS[wait])
        kernel.__name__ = kernel.__qualname__ = f"issue_to_arrival_{mechanism}_{wait}"
    return kernel
