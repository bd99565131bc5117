"""Every ``tma_kernels.ptx`` intrinsic compiles for sm_90a to the SASS it promises.

No GPU needed: each kernel goes numba -> PTX -> ptxas -> nvdisasm through
``tma_kernels.build.compile_for_sm90a``. The table ``CASES`` lists, per public
intrinsic, a small kernel using it and what its SASS must hold. Kernels write
their results out, so nothing is eliminated as dead code. The mnemonics were
read from nvdisasm 13 output of ptxas 13.0 for sm_90a.
"""

import collections
import dataclasses
import functools
import itertools
import operator
import re

import numba
import pytest
from numba import cuda
from numba.cuda.extending import intrinsic

import tma_kernels.ptx as ptx
from tma_kernels.build import (
    WHEEL_TOOL_DIR,
    CudaToolError,
    ToolNotFoundError,
    compile_for_sm90a,
    find_cuda_tool,
)
from tma_kernels.ptx._asm import asm_intrinsic

# Every kernel: (uint32 results, uint64 results, a global address: a buffer or a tensor map).
SIGNATURE = "void(uint32[:], uint64[:], uint64)"
TILE_BYTES = 1024
VECTOR_BYTES = 16
ONE_ARRIVAL = 1
PEER_RANK = 1
FIRST_TWO_CTAS = 0b11  # multicast mask: CTA ranks 0 and 1
TENSOR_RANKS = (1, 2, 3, 4, 5)
WAIT_ONE_GROUP = ptx.cp_async_wait_group(1)

# Slots of the sm_90 constant bank (c[0x0][...]) where the driver puts the cluster
# shape; ptxas 13.0 reads these registers from there instead of with S2R.
CBANK_CLUSTER_NCTAID_X = r"c\[0x0\]\[0x144\]"
CBANK_NCLUSTERID_X = r"c\[0x0\]\[0x15c\]"
CBANK_CLUSTER_NCTARANK = r"c\[0x0\]\[0x188\]"
# mapa: ptxas swaps the CTA rank into the top byte of the shared-window address.
MAPA_PRMT = r"^PRMT R\d+, R\d+, 0x654, R\d+$"
# A shared::cluster access is a generic LD/ST on a register address (no desc[...]).
CLUSTER_ADDRESS = r"\[R\d+(\+0x[0-9a-f]+)?\]"


# ---------------------------------------------------------------- expectations
@dataclasses.dataclass(frozen=True)
class Op:
    """The SASS holds an instruction with exactly this mnemonic (and modifiers)."""

    mnemonic: str

    def found_in(self, kernel):
        return self.mnemonic in kernel.opcode_counts()


@dataclasses.dataclass(frozen=True)
class Line:
    """Some SASS instruction (predicate included) matches this regex."""

    pattern: str

    def found_in(self, kernel):
        return any(re.search(self.pattern, line) for line in kernel.instructions())


@dataclasses.dataclass(frozen=True)
class Absent:
    """No SASS mnemonic starts with this prefix."""

    prefix: str

    def found_in(self, kernel):
        return not kernel.has_instruction(self.prefix)


@dataclasses.dataclass(frozen=True)
class InPtx:
    """The PTX holds this text (for instructions that leave no SASS of their own)."""

    text: str

    def found_in(self, kernel):
        return self.text in kernel.ptx


@dataclasses.dataclass(frozen=True)
class OneNopMoreThan:
    """The code (padding NOPs stripped) is ``baseline``'s plus exactly one NOP."""

    baseline: object  # the same kernel without the instruction under test

    def found_in(self, kernel):
        expected = _body_opcodes(compiled(self.baseline))
        expected["NOP"] += 1
        return _body_opcodes(kernel) == expected


def _body_opcodes(kernel):
    """Mnemonic counts without the NOPs that pad the code after its last instruction."""
    is_padding = functools.partial(operator.eq, "NOP")
    padding = sum(1 for _ in itertools.takewhile(is_padding, reversed(kernel.instructions())))
    return kernel.opcode_counts() - collections.Counter({"NOP": padding})


@functools.cache
def compiled(kernel):
    return compile_for_sm90a(kernel, SIGNATURE)


# ---------------------------------------------------------------- kernels
BARRIER_WORDS = 1  # one mbarrier: a uint64 in shared memory


def shared_address(out_u32, out_u64, global_address):
    out_u32[0] = ptx.smem_u32(cuda.shared.array(TILE_BYTES, numba.uint8))


def mbarrier_arrivals(out_u32, out_u64, global_address):
    bar = ptx.smem_u32(cuda.shared.array(BARRIER_WORDS, numba.uint64))
    ptx.mbarrier_init(bar, ONE_ARRIVAL)
    ptx.mbarrier_arrive(bar)
    ptx.mbarrier_arrive_expect_tx(bar, TILE_BYTES)
    ptx.mbarrier_expect_tx(bar, TILE_BYTES)


def mbarrier_wait(out_u32, out_u64, global_address):
    bar = ptx.smem_u32(cuda.shared.array(BARRIER_WORDS, numba.uint64))
    ptx.mbarrier_wait_parity(bar, out_u32[0])


def mbarrier_try_wait(out_u32, out_u64, global_address):
    bar = ptx.smem_u32(cuda.shared.array(BARRIER_WORDS, numba.uint64))
    out_u32[1] = ptx.mbarrier_try_wait_parity(bar, out_u32[0])


def mbarrier_try_wait_hint(out_u32, out_u64, global_address):
    bar = ptx.smem_u32(cuda.shared.array(BARRIER_WORDS, numba.uint64))
    out_u32[1] = ptx.mbarrier_try_wait_parity_hint(bar, out_u32[0], out_u32[2])


def mbarrier_test_wait(out_u32, out_u64, global_address):
    bar = ptx.smem_u32(cuda.shared.array(BARRIER_WORDS, numba.uint64))
    out_u32[1] = ptx.mbarrier_test_wait_parity(bar, out_u32[0])


def mbarrier_remote_arrive(out_u32, out_u64, global_address):
    bar = ptx.smem_u32(cuda.shared.array(BARRIER_WORDS, numba.uint64))
    ptx.mbarrier_arrive_cluster(bar, out_u32[0])


def mbarrier_remote_arrive_cta_scope(out_u32, out_u64, global_address):
    bar = ptx.smem_u32(cuda.shared.array(BARRIER_WORDS, numba.uint64))
    ptx.mbarrier_arrive_remote(bar, out_u32[0])


def mbarrier_wait_cluster_scope(out_u32, out_u64, global_address):
    bar = ptx.smem_u32(cuda.shared.array(BARRIER_WORDS, numba.uint64))
    ptx.mbarrier_wait_parity_acquire_cluster(bar, out_u32[0])


def consumer_warps_barrier(out_u32, out_u64, global_address):
    ptx.named_barrier_sync(1, 256)


def consumer_warps_vote(out_u32, out_u64, global_address):
    out_u32[0] = ptx.named_barrier_red_or(1, 256, out_u32[1])


def multicast_after_init(out_u32, out_u64, global_address):
    tile = ptx.smem_u32(cuda.shared.array(TILE_BYTES, numba.uint8))
    bar = ptx.smem_u32(cuda.shared.array(BARRIER_WORDS, numba.uint64))
    ptx.mbarrier_init(bar, ONE_ARRIVAL)
    ptx.tma_load_2d_multicast(tile, global_address, bar, 0, 0, FIRST_TWO_CTAS)


def multicast_after_fenced_init(out_u32, out_u64, global_address):
    tile = ptx.smem_u32(cuda.shared.array(TILE_BYTES, numba.uint8))
    bar = ptx.smem_u32(cuda.shared.array(BARRIER_WORDS, numba.uint64))
    ptx.mbarrier_init(bar, ONE_ARRIVAL)
    ptx.fence_mbarrier_init_cluster()
    ptx.tma_load_2d_multicast(tile, global_address, bar, 0, 0, FIRST_TWO_CTAS)


def proxy_fence(out_u32, out_u64, global_address):
    ptx.fence_proxy_async_shared()


def grid_dependency(out_u32, out_u64, global_address):
    ptx.griddepcontrol_launch_dependents()
    ptx.griddepcontrol_wait()
    out_u32[0] = out_u32[1]


def tma_loads(out_u32, out_u64, global_address):
    tile = ptx.smem_u32(cuda.shared.array(TILE_BYTES, numba.uint8))
    bar = ptx.smem_u32(cuda.shared.array(BARRIER_WORDS, numba.uint64))
    ptx.tma_prefetch_descriptor(global_address)
    ptx.tma_load_1d(tile, global_address, bar, 0)
    ptx.tma_load_2d(tile, global_address, bar, 0, 1)
    ptx.tma_load_3d(tile, global_address, bar, 0, 1, 2)
    ptx.tma_load_4d(tile, global_address, bar, 0, 1, 2, 3)
    ptx.tma_load_5d(tile, global_address, bar, 0, 1, 2, 3, 4)


def tma_multicast_loads(out_u32, out_u64, global_address):
    tile = ptx.smem_u32(cuda.shared.array(TILE_BYTES, numba.uint8))
    bar = ptx.smem_u32(cuda.shared.array(BARRIER_WORDS, numba.uint64))
    mask = out_u32[0]
    ptx.tma_load_1d_multicast(tile, global_address, bar, 0, mask)
    ptx.tma_load_2d_multicast(tile, global_address, bar, 0, 1, mask)
    ptx.tma_load_3d_multicast(tile, global_address, bar, 0, 1, 2, mask)
    ptx.tma_load_4d_multicast(tile, global_address, bar, 0, 1, 2, 3, mask)
    ptx.tma_load_5d_multicast(tile, global_address, bar, 0, 1, 2, 3, 4, mask)


def tma_load_hinted(out_u32, out_u64, global_address):
    tile = ptx.smem_u32(cuda.shared.array(TILE_BYTES, numba.uint8))
    bar = ptx.smem_u32(cuda.shared.array(BARRIER_WORDS, numba.uint64))
    ptx.tma_load_2d_cache_hint(tile, global_address, bar, 0, 1, out_u64[0])


def tma_load_hinted_5d(out_u32, out_u64, global_address):
    tile = ptx.smem_u32(cuda.shared.array(TILE_BYTES, numba.uint8))
    bar = ptx.smem_u32(cuda.shared.array(BARRIER_WORDS, numba.uint64))
    ptx.tma_load_5d_cache_hint(tile, global_address, bar, 0, 1, 2, 3, 4, out_u64[0])


def tma_load_evict_first(out_u32, out_u64, global_address):
    tile = ptx.smem_u32(cuda.shared.array(TILE_BYTES, numba.uint8))
    bar = ptx.smem_u32(cuda.shared.array(BARRIER_WORDS, numba.uint64))
    ptx.tma_load_2d_cache_hint(tile, global_address, bar, 0, 1, ptx.l2_policy_evict_first())


def tma_load_evict_last(out_u32, out_u64, global_address):
    tile = ptx.smem_u32(cuda.shared.array(TILE_BYTES, numba.uint8))
    bar = ptx.smem_u32(cuda.shared.array(BARRIER_WORDS, numba.uint64))
    ptx.tma_load_2d_cache_hint(tile, global_address, bar, 0, 1, ptx.l2_policy_evict_last())


def tma_stores(out_u32, out_u64, global_address):
    tile = ptx.smem_u32(cuda.shared.array(TILE_BYTES, numba.uint8))
    ptx.tma_store_1d(global_address, tile, 0)
    ptx.tma_store_2d(global_address, tile, 0, 1)
    ptx.bulk_commit_group()
    ptx.bulk_wait_group_read0()


def bulk_copies(out_u32, out_u64, global_address):
    tile = ptx.smem_u32(cuda.shared.array(TILE_BYTES, numba.uint8))
    bar = ptx.smem_u32(cuda.shared.array(BARRIER_WORDS, numba.uint64))
    ptx.bulk_load(tile, global_address, TILE_BYTES, bar)
    ptx.bulk_copy_to_peer(
        ptx.mapa_shared(tile, PEER_RANK), tile, TILE_BYTES, ptx.mapa_shared(bar, PEER_RANK)
    )
    ptx.bulk_store(global_address, tile, TILE_BYTES)
    ptx.bulk_commit_group()
    ptx.bulk_wait_group0()


def cp_async_groups(out_u32, out_u64, global_address):
    tile = ptx.smem_u32(cuda.shared.array(TILE_BYTES, numba.uint8))
    ptx.cp_async_ca16(tile, global_address)
    next_vector = global_address + numba.uint64(VECTOR_BYTES)
    ptx.cp_async_cg16(tile + numba.uint32(VECTOR_BYTES), next_vector)
    ptx.cp_async_commit()
    WAIT_ONE_GROUP()


def cp_async_all(out_u32, out_u64, global_address):
    ptx.cp_async_cg16(ptx.smem_u32(cuda.shared.array(TILE_BYTES, numba.uint8)), global_address)
    ptx.cp_async_wait_all()


def cp_async_into_mbarrier(out_u32, out_u64, global_address):
    tile = ptx.smem_u32(cuda.shared.array(TILE_BYTES, numba.uint8))
    bar = ptx.smem_u32(cuda.shared.array(BARRIER_WORDS, numba.uint64))
    ptx.cp_async_cg16(tile, global_address)
    ptx.cp_async_mbarrier_arrive_noinc(bar)


def vectors(out_u32, out_u64, global_address):
    tile = ptx.smem_u32(cuda.shared.array(TILE_BYTES, numba.uint8))
    source = ptx.addr_of(out_u32)
    a, b, c, d = ptx.ld_global_v4_u32(source)
    ptx.st_shared_v4_u32(tile, a, b, c, d)
    e, f, g, h = ptx.ld_shared_v4_u32(tile + numba.uint32(VECTOR_BYTES))
    ptx.st_global_v4_u32(global_address, e, f, g, h)
    i, j, k, m = ptx.ld_global_nc_v4_u32(source + numba.uint64(VECTOR_BYTES))
    out_u32[0] = i + j + k + m


def scalar_shared(out_u32, out_u64, global_address):
    tile = ptx.smem_u32(cuda.shared.array(TILE_BYTES, numba.uint8))
    ptx.st_shared_u32(tile, out_u32[0])
    out_u32[1] = ptx.ld_shared_u32(tile + numba.uint32(4 * (out_u32[2] & 7)))


def cluster_shape(out_u32, out_u64, global_address):
    out_u32[0] = ptx.cluster_ctarank()
    out_u32[1] = ptx.cluster_nctarank()
    out_u32[2] = ptx.cluster_nctaid_x()
    out_u32[3] = ptx.nclusterid_x()
    out_u32[4] = ptx.smid()


def cluster_index(out_u32, out_u64, global_address):
    out_u32[0] = ptx.clusterid_x()


def cta_index_in_cluster(out_u32, out_u64, global_address):
    out_u32[0] = ptx.cluster_ctaid_x()


def cluster_arrive(out_u32, out_u64, global_address):
    ptx.cluster_arrive()


def cluster_arrive_relaxed(out_u32, out_u64, global_address):
    ptx.cluster_arrive_relaxed()


def cluster_wait(out_u32, out_u64, global_address):
    ptx.cluster_wait()


def cluster_sync(out_u32, out_u64, global_address):
    ptx.cluster_sync()


def distributed_shared(out_u32, out_u64, global_address):
    tile = ptx.smem_u32(cuda.shared.array(TILE_BYTES, numba.uint8))
    remote = ptx.mapa_shared(tile, out_u32[0])
    out_u32[1] = ptx.ld_shared_cluster_u32(remote)
    a, b, c, d = ptx.ld_shared_cluster_v4_u32(remote + numba.uint32(VECTOR_BYTES))
    ptx.st_shared_cluster_u32(remote + numba.uint32(2 * VECTOR_BYTES), a)
    ptx.st_shared_cluster_v4_u32(remote + numba.uint32(3 * VECTOR_BYTES), a, b, c, d)


def timers(out_u32, out_u64, global_address):
    out_u64[0] = ptx.clock64()
    out_u64[1] = ptx.globaltimer()


# ---------------------------------------------------------------- the table
HINTED_TMA_LOAD = Line(r"^UTMALDG\.2D \[UR\d+\], \[UR\d+\], desc\[UR\d+\]$")  # policy operand
DEPBAR_ALL_DONE = Line(r"^DEPBAR\.LE SB0, 0x0$")

CASES = [
    ("addr_of", vectors, [Op("LDG.E.128")]),
    # A shared-window address carries the CTA's rank in its top byte.
    ("smem_u32", shared_address, [Line(r"^S2U?R \w+, SR_CgaCtaId$"), Line(r"^U?LEA .*, 0x18$")]),
    ("mbarrier_init", mbarrier_arrivals, [Op("SYNCS.EXCH.64")]),
    ("mbarrier_arrive", mbarrier_arrivals, [Op("SYNCS.ARRIVE.TRANS64.A1T0")]),
    ("mbarrier_arrive_expect_tx", mbarrier_arrivals, [Op("SYNCS.ARRIVE.TRANS64")]),
    ("mbarrier_expect_tx", mbarrier_arrivals, [Op("SYNCS.ARRIVE.TRANS64.RED.A0TR")]),
    ("mbarrier_wait_parity", mbarrier_wait,
     [Op("SYNCS.PHASECHK.TRANS64.TRYWAIT"), Line(r"^@!P\d+ BRA ")]),
    ("mbarrier_try_wait_parity", mbarrier_try_wait,
     [Op("SYNCS.PHASECHK.TRANS64.TRYWAIT"), Op("SEL")]),
    # the hint: a TRYWAIT, then a NANOSLEEP.SYNCS and a re-check while not done
    ("mbarrier_try_wait_parity_hint", mbarrier_try_wait_hint,
     [Op("SYNCS.PHASECHK.TRANS64.TRYWAIT"), Op("NANOSLEEP.SYNCS"), Op("SEL")]),
    # test_wait: the bare phase check, no TRYWAIT (never suspends)
    ("mbarrier_test_wait_parity", mbarrier_test_wait,
     [Line(r"^SYNCS\.PHASECHK\.TRANS64 P\d+, "), Absent("SYNCS.PHASECHK.TRANS64.TRYWAIT"), Op("SEL")]),
    # .release.cluster costs a GPU-wide fence; the default (.release.cta) form has none.
    ("mbarrier_arrive_cluster", mbarrier_remote_arrive,
     [Line(MAPA_PRMT), Op("SYNCS.ARRIVE.TRANS64.RED.A1T0"), Op("MEMBAR.ALL.GPU")]),
    ("mbarrier_arrive_remote", mbarrier_remote_arrive_cta_scope,
     [Line(MAPA_PRMT), Op("SYNCS.ARRIVE.TRANS64.RED.A1T0"), Absent("MEMBAR")]),
    # acquire at cluster scope invalidates L1 after the wait succeeds.
    ("mbarrier_wait_parity_acquire_cluster", mbarrier_wait_cluster_scope,
     [Op("SYNCS.PHASECHK.TRANS64.TRYWAIT"), Op("CCTL.IVALL")]),
    # ptxas lowers fence.mbarrier_init.release.cluster to a single NOP.
    ("fence_mbarrier_init_cluster", multicast_after_fenced_init,
     [InPtx("fence.mbarrier_init.release.cluster;"), OneNopMoreThan(multicast_after_init)]),
    ("fence_proxy_async_shared", proxy_fence, [Op("FENCE.VIEW.ASYNC.S")]),
    # programmatic dependent launch: the trigger and the wait for the prerequisite grid
    ("griddepcontrol_launch_dependents", grid_dependency, [Op("PREEXIT")]),
    ("griddepcontrol_wait", grid_dependency, [Op("ACQBULK")]),
    ("named_barrier_sync", consumer_warps_barrier, [Line(r"^BAR\.SYNC(\.DEFER_BLOCKING)? 0x1, 0x100$")]),
    ("named_barrier_red_or", consumer_warps_vote,
     [Line(r"^BAR\.RED\.OR(\.DEFER_BLOCKING)? 0x1, 0x100, P\d+$"), Op("B2R.RESULT")]),
    *[(f"tma_load_{rank}d", tma_loads, [Op(f"UTMALDG.{rank}D")]) for rank in TENSOR_RANKS],
    *[(f"tma_load_{rank}d_multicast", tma_multicast_loads, [Op(f"UTMALDG.{rank}D.MULTICAST")])
      for rank in TENSOR_RANKS],
    ("tma_load_2d_cache_hint", tma_load_hinted, [HINTED_TMA_LOAD]),
    ("tma_load_5d_cache_hint", tma_load_hinted_5d, [Line(r"^UTMALDG\.5D \[UR\d+\], \[UR\d+\], desc\[UR\d+\]$")]),
    # createpolicy with an immediate fraction folds to a constant: no instruction of its own.
    ("l2_policy_evict_first", tma_load_evict_first,
     [InPtx("createpolicy.fractional.L2::evict_first.b64"), HINTED_TMA_LOAD]),
    ("l2_policy_evict_last", tma_load_evict_last,
     [InPtx("createpolicy.fractional.L2::evict_last.b64"), HINTED_TMA_LOAD]),
    ("tma_store_1d", tma_stores, [Op("UTMASTG.1D")]),
    ("tma_store_2d", tma_stores, [Op("UTMASTG.2D")]),
    ("tma_prefetch_descriptor", tma_loads, [Op("UTMACCTL.PF")]),
    ("bulk_commit_group", tma_stores, [Op("UTMACMDFLUSH")]),
    # Waiting for reads only needs no L1 invalidate; waiting for completion does.
    ("bulk_wait_group_read0", tma_stores, [DEPBAR_ALL_DONE, Absent("CCTL.IVALL")]),
    ("bulk_wait_group0", bulk_copies, [DEPBAR_ALL_DONE, Op("CCTL.IVALL")]),
    ("bulk_load", bulk_copies, [Op("UBLKCP.S.G")]),
    ("bulk_store", bulk_copies, [Op("UBLKCP.G.S")]),
    ("bulk_copy_to_peer", bulk_copies, [Op("UBLKCP.S.S")]),
    ("cp_async_ca16", cp_async_groups, [Op("LDGSTS.E.128")]),
    ("cp_async_cg16", cp_async_groups, [Op("LDGSTS.E.BYPASS.128")]),
    ("cp_async_commit", cp_async_groups, [Op("LDGDEPBAR")]),
    ("cp_async_wait_group", cp_async_groups, [Line(r"^DEPBAR\.LE SB0, 0x1$")]),
    # wait_all commits the open group itself, then waits for none in flight.
    ("cp_async_wait_all", cp_async_all, [Op("LDGDEPBAR"), DEPBAR_ALL_DONE]),
    ("cp_async_mbarrier_arrive_noinc", cp_async_into_mbarrier,
     [Op("ARRIVES.LDGSTSBAR.64.ARVCNT")]),
    ("ld_global_v4_u32", vectors, [Op("LDG.E.128")]),
    ("ld_global_nc_v4_u32", vectors, [Op("LDG.E.128.CONSTANT")]),
    ("st_global_v4_u32", vectors, [Op("STG.E.128")]),
    ("ld_shared_v4_u32", vectors, [Op("LDS.128")]),
    ("st_shared_v4_u32", vectors, [Op("STS.128")]),
    ("ld_shared_u32", scalar_shared, [Op("LDS"), Absent("LDS.128")]),
    ("st_shared_u32", scalar_shared, [Op("STS"), Absent("STS.128")]),
    ("cluster_ctarank", cluster_shape, [Line(r"^S2U?R \w+, SR_CgaCtaId$")]),
    ("cluster_nctarank", cluster_shape, [Line(rf"^U?LDC \w+, {CBANK_CLUSTER_NCTARANK}$")]),
    ("cluster_nctaid_x", cluster_shape, [Line(rf"^U?LDC \w+, {CBANK_CLUSTER_NCTAID_X}$")]),
    ("nclusterid_x", cluster_shape, [Line(rf"^U?LDC \w+, {CBANK_NCLUSTERID_X}$")]),
    ("smid", cluster_shape, [Line(r"^S2U?R \w+, SR_VIRTUALSMID$")]),
    # clusterid.x = ctaid.x / cluster_nctaid.x, by a float reciprocal from the constant bank.
    ("clusterid_x", cluster_index, [Line(r"^S2U?R \w+, SR_CTAID\.X$"), Op("F2I.U32.TRUNC.NTZ")]),
    # cluster_ctaid.x = ctaid.x - clusterid.x * cluster_nctaid.x.
    ("cluster_ctaid_x", cta_index_in_cluster,
     [Line(r"^S2U?R \w+, SR_CTAID\.X$"), Op("F2I.U32.TRUNC.NTZ"),
      Line(rf"^U?LDC \w+, {CBANK_CLUSTER_NCTAID_X}$")]),
    ("cluster_arrive", cluster_arrive, [Op("UCGABAR_ARV"), Op("MEMBAR.ALL.GPU")]),
    ("cluster_arrive_relaxed", cluster_arrive_relaxed, [Op("UCGABAR_ARV"), Absent("MEMBAR")]),
    ("cluster_wait", cluster_wait, [Op("UCGABAR_WAIT")]),
    ("cluster_sync", cluster_sync, [Op("UCGABAR_ARV"), Op("UCGABAR_WAIT")]),
    ("mapa_shared", distributed_shared, [Line(MAPA_PRMT)]),
    ("ld_shared_cluster_u32", distributed_shared, [Line(rf"^LD\.E R\d+, {CLUSTER_ADDRESS}$")]),
    ("ld_shared_cluster_v4_u32", distributed_shared,
     [Line(rf"^LD\.E\.128 R\d+, {CLUSTER_ADDRESS}$")]),
    ("st_shared_cluster_u32", distributed_shared, [Line(rf"^ST\.E {CLUSTER_ADDRESS}, R\d+$")]),
    ("st_shared_cluster_v4_u32", distributed_shared,
     [Line(rf"^ST\.E\.128 {CLUSTER_ADDRESS}, R\d+$")]),
    ("clock64", timers, [Line(r"^CS2R R\d+, SR_CLOCKLO$")]),
    ("globaltimer", timers, [Line(r"^CS2R R\d+, SR_GLOBALTIMERLO$")]),
]


@pytest.mark.parametrize(
    ("intrinsic", "kernel", "expected"), CASES, ids=[case[0] for case in CASES]
)
def test_intrinsic_compiles_to_promised_sass(intrinsic, kernel, expected):
    result = compiled(kernel)
    missing = [expectation for expectation in expected if not expectation.found_in(result)]
    assert not missing, (
        f"{intrinsic}: {missing} not satisfied by kernel {kernel.__name__}; SASS:\n"
        + "\n".join(result.instructions())
    )


def test_every_public_name_has_a_case():
    assert sorted(case[0] for case in CASES) == sorted(ptx.__all__)


def test_cp_async_wait_group_is_cached_per_count_and_rejects_negative_counts():
    assert ptx.cp_async_wait_group(1) is WAIT_ONE_GROUP
    assert ptx.cp_async_wait_group(2) is not WAIT_ONE_GROUP
    with pytest.raises(ValueError, match="-1"):
        ptx.cp_async_wait_group(-1)


# ---------------------------------------------------------------- build helpers
SHARED_WORDS = 4096  # 16 KiB of uint32


def shared_round_trip(out_u32, out_u64, global_address):
    words = cuda.shared.array(SHARED_WORDS, numba.uint32)
    thread = cuda.threadIdx.x
    words[thread] = out_u32[thread]
    cuda.syncthreads()
    out_u32[thread] = words[SHARED_WORDS - 1 - thread]


def test_ptxas_resources_are_parsed():
    result = compiled(shared_round_trip)
    assert result.registers > 0
    assert result.shared_bytes_static == SHARED_WORDS * numba.uint32.bitwidth // 8
    assert result.stack_frame_bytes == 0
    assert result.spill_store_bytes == result.spill_load_bytes == 0
    assert result.name == "shared_round_trip"
    assert ".target sm_90a" in result.ptx
    assert result.cubin.startswith(b"\x7fELF")


def test_opcode_counts_count_each_instruction():
    result = compiled(tma_loads)
    counts = result.opcode_counts()
    assert sum(counts.values()) == len(result.instructions())
    assert counts["UTMALDG.3D"] == 1
    assert result.has_instruction("UTMALDG") and not result.has_instruction("UTMASTG")


@intrinsic
def not_an_instruction(typingctx):
    """Emits PTX that ptxas rejects."""
    return asm_intrinsic("not_an_instruction;", (), ())


def rejected_by_ptxas(out_u32, out_u64, global_address):
    not_an_instruction()


def test_failing_ptxas_raises_with_its_stderr():
    with pytest.raises(CudaToolError, match="ptxas") as failure:
        compile_for_sm90a(rejected_by_ptxas, SIGNATURE)
    assert "not_an_instruction" in str(failure.value)


def test_find_cuda_tool_prefers_the_nvidia_wheels():
    ptxas = find_cuda_tool("ptxas")
    assert ptxas.is_file()
    assert ptxas.parent.parts[-2:] == WHEEL_TOOL_DIR.parts


def test_find_cuda_tool_names_a_missing_tool():
    with pytest.raises(ToolNotFoundError, match="no-such-cuda-tool"):
        find_cuda_tool("no-such-cuda-tool")


@pytest.fixture
def no_cuda_tools(monkeypatch, tmp_path):
    """Hide the nvidia wheels, $CUDA_HOME and PATH from find_cuda_tool."""
    import nvidia

    monkeypatch.setattr(nvidia, "__path__", [str(tmp_path / "wheels")])
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    return tmp_path


@pytest.mark.parametrize(
    ("tool", "packages"),
    [("ptxas", ["nvidia-cuda-nvcc", "cuda-toolkit[nvcc]"]), ("nvdisasm", ["nvidia-cuda-nvdisasm"])],
)
def test_missing_tool_error_names_its_pip_packages(no_cuda_tools, tool, packages):
    with pytest.raises(ToolNotFoundError) as failure:
        find_cuda_tool(tool)
    assert tool in str(failure.value)
    assert all(package in str(failure.value) for package in packages)


def test_find_cuda_tool_falls_back_to_cuda_home(no_cuda_tools, monkeypatch):
    tool = no_cuda_tools / "cuda" / "bin" / "ptxas"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.setenv("CUDA_HOME", str(no_cuda_tools / "cuda"))
    assert find_cuda_tool("ptxas") == tool
