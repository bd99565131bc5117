"""Tile geometry of the paged-KV attention kernel: what one kernel variant is, how
its tiles sit in shared memory, and which row / byte each lane hands to ``ldmatrix``.

Shared-memory tile layout (Q, every K stage and every V stage alike): a tile of
``rows`` rows of ``head_dim`` elements is cut into column *chunks* of
``row_bytes = min(128, head_dim * element_bytes)`` bytes; chunk c is a dense
``(rows, row_bytes)`` block at byte ``c * rows * row_bytes`` of the tile, and inside a
chunk the 16-byte pieces are swizzled exactly as TMA's ``SWIZZLE_128B`` (row_bytes 128)
or ``SWIZZLE_64B`` (row_bytes 64) mode writes them: byte offset ``o`` of the dense block
is stored at ``o ^ (((o >> 7) & mask) << 4)`` with mask 7 (128B) or 3 (64B) (CUTLASS
``Swizzle<3,4,3>`` / ``Swizzle<2,4,3>``). One TMA box per chunk lands a chunk of a K or
V tile; the cp.async producer and the Q loader write the same swizzled offsets by hand.
Every tile starts 1024-byte aligned, so these offsets are also the address bits the
TMA unit swizzles on. Without the swizzle, the 8 row addresses of an ``ldmatrix`` 8x8
matrix (rows 256 bytes apart for head_dim 128 bf16) would all hit the same banks.

The ``*_lane_*`` device functions return, for a lane, the (row, byte column) of the
16-byte row it supplies to one ``ldmatrix.x4``; they are plain integer code, so the CPU
test (tests/cpu/paged_kv/test_paged_kv_fragments_qk.py) calls their ``py_func`` to emulate a warp.
"""
from __future__ import annotations

from dataclasses import dataclass

from numba import cuda
from tma_kernels.ptx.wgmma import M as WGMMA_M

from .layouts import BF16, E4M3, LAYOUTS, SCORE_LAYOUTS, Layout
from .tma_boxes import DEFAULT_TMA_BOX, TMA_BOXES
ELEMENT_BYTES = {BF16: 2, E4M3: 1}
LOAD_PATHS = ("tma", "cp_async")
HEAD_DIMS = (64, 128, 256)
BLOCK_NS = (16, 32, 64, 128)
CONSUMER_WARP_COUNTS = (1, 2, 4)
MAX_STAGES = 6                     # the deepest K/V ring (kernel.py sizes its mbarrier arrays by it)
STAGE_COUNTS = tuple(range(2, MAX_STAGES + 1))
PRODUCER_WARP_COUNTS = (1, 2, 4)
ROW_SPLIT_CONSUMER_WARPS = 8       # the row_split layouts: two warpgroups
WARPGROUP_WARPS = 4                # the wgmma layouts' group: one warpgroup over a tile of WGMMA_M tokens
# kq_wgmma_rs_lazy speculates its softmax from this head dim up; below, its few more registers
# cost a resident CTA an SM (docs/paged_kv_consumers.md)
SPECULATIVE_MIN_HEAD_DIM = 128
P_ROW_BYTES = 64                   # the register_v layouts' P^T in shared memory: 64 e4m3 tokens a row

ROWS_PER_WARP = 16                 # qk: one mma.sync M extent, a consumer warp owns 16 query rows
MAX_ROW_BYTES = 128                # chunk width: the SWIZZLE_128B span
PIECE_BYTES = 16                   # one cp.async / one ldmatrix row / one swizzle unit
TILE_ALIGN_BYTES = 1024            # the SWIZZLE_128B pattern repeats every 1024 bytes
MMA_K_BYTES = 32                   # one mma k-step: 16 bf16 or 32 e4m3 of each row
SWIZZLE_MASK = {128: 7, 64: 3}     # row_bytes -> bits 7.. XORed into bits 4..
SWIZZLE_MODE = {128: "128B", 64: "64B"}
MBARRIER_BYTES = 8
# static shared memory reserved for kernel.py's mbarriers: full_k, full_v and empty (MAX_STAGES each),
# and MAX_STAGES more to spare (the sweep's variants are sized under this reserve)
STATIC_SHARED_BYTES = 4 * MAX_STAGES * MBARRIER_BYTES
MAX_DYNAMIC_SHARED_BYTES = 232_448 - STATIC_SHARED_BYTES   # sm_90 opt-in limit less the static mbarriers

# sm_90 residency limits (CUDA's cuda_occupancy.h, cudaOccMaxBlocksPerSMRegsLimit and friends)
SM90_REGISTERS_PER_SM = 65_536
SM90_SUB_PARTITIONS = 4            # registers are allocated per sub-partition: 16384 each
SM90_REGISTER_UNIT = 256           # per-warp allocation granularity
SM90_SHARED_BYTES_PER_SM = 233_472
SM90_SHARED_BYTES_RESERVED_PER_CTA = 1024
SM90_MAX_WARPS_PER_SM = 64
SM90_MAX_CTAS_PER_SM = 32


class VariantError(ValueError):
    """A kernel variant that this kernel cannot build; the message names the field."""


@dataclass(frozen=True)
class Variant:
    """Everything fixed when one attention kernel is compiled (all else is a run-time argument).

    dtype: "bf16" or "e4m3" (Q, K and V alike; fp32 accumulation and output).
    head_dim: 64, 128 or 256 elements per head.
    load_path: "tma" (TMA boxes of ``tma_box``'s shape) or "cp_async" (16-byte gather).
    block_n: KV tokens per tile (the ring's unit).
    consumer_warps: ``rows_per_warp`` query rows each; block_m = rows_per_warp * tile_warps
        (the warps of one group: all consumer warps, or for the row_split layouts 8 warps in 2
        groups of 4), times 2 for the row_split layouts (each group its own rows).
    stages: tiles in flight in the K and V rings (2 to 6; the sweep runs 2 and 4).
    producer_warps: warps issuing loads (TMA: lane 0 of warp 0 issues; cp.async: all lanes).
    causal: mask keys after each query's position (bottom-right aligned, as FlashAttention).
    score_layout: the consumer, one of layouts.LAYOUTS (the ladder: layouts.py; each its own
        file, consumer_<score_layout>.py).
    tma_box: the TMA path's load shape, one of tma_boxes.TMA_BOXES (box per chunk, FA3's one box
        per tile, boxes per swizzle atom from one lane or spread over lanes); cp_async: "chunk".
    rows_per_warp: query rows per consumer warp (the layout's ``rows_per_warp``): 16 for qk; 8
        or 16 for kq; 2, 4 or 8 for the shares_tile layouts (each warp of a group loads that many
        of the group_m = rows_per_warp x tile_warps rows, and every warp of the group computes
        with all of them).
    min_ctas_per_sm: CTAs that must fit on one SM at once; above 1 the kernel is compiled
        with launch bounds ``(threads, min_ctas_per_sm)`` (CUDA's ``__launch_bounds__``, as
        FA3 does), so ptxas caps registers to fit. Without it, a 5-warp cp.async decode CTA
        at 176 registers (e4m3) fits once per SM, as registers are allocated per sub-partition
        (:func:`resident_ctas_per_sm`), while the split-KV grid assumes 2.
    """

    dtype: str = BF16
    head_dim: int = 128
    load_path: str = "tma"
    block_n: int = 64
    consumer_warps: int = 4
    stages: int = 2
    producer_warps: int = 1
    causal: bool = True
    min_ctas_per_sm: int = 1
    score_layout: str = "qk"
    rows_per_warp: int = ROWS_PER_WARP
    tma_box: str = DEFAULT_TMA_BOX

    def __post_init__(self):
        _require("dtype", self.dtype, tuple(ELEMENT_BYTES))
        _require("head_dim", self.head_dim, HEAD_DIMS)
        _require("load_path", self.load_path, LOAD_PATHS)
        _require("block_n", self.block_n, BLOCK_NS)
        _require("score_layout", self.score_layout, SCORE_LAYOUTS)
        if self.layout.row_split:
            if self.consumer_warps != ROW_SPLIT_CONSUMER_WARPS:
                raise VariantError(f"consumer_warps={self.consumer_warps!r}: score_layout '{self.score_layout}' runs "
                                   f"two warpgroups, {ROW_SPLIT_CONSUMER_WARPS} warps")
        else:
            _require("consumer_warps", self.consumer_warps, CONSUMER_WARP_COUNTS)
        _require("stages", self.stages, STAGE_COUNTS)
        _require("producer_warps", self.producer_warps, PRODUCER_WARP_COUNTS)
        _require("rows_per_warp", self.rows_per_warp, self.layout.rows_per_warp)
        _require("tma_box", self.tma_box, tuple(TMA_BOXES) if self.load_path == "tma" else (DEFAULT_TMA_BOX,))
        if not (isinstance(self.min_ctas_per_sm, int) and 1 <= self.min_ctas_per_sm <= SM90_MAX_CTAS_PER_SM):
            raise VariantError(f"min_ctas_per_sm={self.min_ctas_per_sm!r} is not an integer from 1 to "
                               f"{SM90_MAX_CTAS_PER_SM} (CTAs per SM on sm_90)")
        if self.dtype == E4M3 and self.block_n < 32:
            raise VariantError(f"block_n={self.block_n}: e4m3 needs block_n >= 32 (one mma k-step "
                               "of P.V covers 32 tokens)")
        if self.load_path == "cp_async":
            _require_gather_split(self)
        if self.layout.uses_wgmma and (self.tile_warps, self.block_n) != (WARPGROUP_WARPS, WGMMA_M):
            raise VariantError(f"consumer_warps={self.consumer_warps}, block_n={self.block_n}: score_layout "
                               f"'{self.score_layout}' runs one warpgroup ({WARPGROUP_WARPS} warps) over a tile "
                               f"of {WGMMA_M} tokens (the wgmma's M)")
        if self.dtype not in self.layout.dtypes:
            raise VariantError(f"dtype={self.dtype!r}: score_layout '{self.score_layout}' is "
                               f"{' and '.join(self.layout.dtypes)} only (bf16 V reaches mma.sync with no unpack)")
        if self.dynamic_shared_bytes > MAX_DYNAMIC_SHARED_BYTES:
            raise VariantError(f"{self}: needs {self.dynamic_shared_bytes} B of shared memory, more "
                               f"than the {MAX_DYNAMIC_SHARED_BYTES} B a block may have")

    @property
    def layout(self) -> Layout:
        """The consumer's record (layouts.py)."""
        return LAYOUTS[self.score_layout]

    @property
    def element_bytes(self) -> int:
        return ELEMENT_BYTES[self.dtype]

    @property
    def head_bytes(self) -> int:
        """Bytes of one token's K (or V, or one query's Q) row of one head."""
        return self.head_dim * self.element_bytes

    @property
    def row_bytes(self) -> int:
        """Chunk width in shared memory (the swizzle span)."""
        return min(MAX_ROW_BYTES, self.head_bytes)

    @property
    def chunks(self) -> int:
        return self.head_bytes // self.row_bytes

    @property
    def swizzle_mask(self) -> int:
        return SWIZZLE_MASK[self.row_bytes]

    @property
    def tma_swizzle(self) -> str:
        return SWIZZLE_MODE[self.row_bytes]

    @property
    def row_groups(self) -> int:
        """Groups of consumer warps, each with its own rows, scratch and named barrier: 2 for the
        row_split layouts (every tile, half the rows each), else 1."""
        return 2 if self.layout.row_split else 1

    @property
    def speculates(self) -> bool:
        """Whether the softmax first assumes no running max moves, and checks that with one
        barrier a tile (the lazy_rescale layouts from head dim SPECULATIVE_MIN_HEAD_DIM)."""
        return self.layout.lazy_rescale and self.head_dim >= SPECULATIVE_MIN_HEAD_DIM

    @property
    def tile_warps(self) -> int:
        """Consumer warps of one group: they share a KV tile's work (and its group barrier)."""
        return self.consumer_warps // self.row_groups

    @property
    def release_threads(self) -> int:
        """Consumer threads that arrive on a stage's ``empty`` barrier: every group's."""
        return 32 * self.tile_warps * self.row_groups

    @property
    def group_m(self) -> int:
        """Query rows one consumer group computes with: rows_per_warp x tile_warps."""
        return self.rows_per_warp * self.tile_warps

    @property
    def block_m(self) -> int:
        """Query rows of the CTA (an m-block): the groups' rows together."""
        return self.group_m * self.row_groups

    @property
    def consumer_threads(self) -> int:
        return 32 * self.consumer_warps

    @property
    def producer_threads(self) -> int:
        return 32 * self.producer_warps

    @property
    def threads(self) -> int:
        return self.consumer_threads + self.producer_threads

    @property
    def q_tile_bytes(self) -> int:
        """The Q tile, rounded up so the K ring after it starts on a swizzle period (the row_split
        layouts: one such tile a row group, each group's rows at a swizzle period of their own)."""
        return self.row_groups * self.group_q_tile_bytes

    @property
    def group_q_tile_bytes(self) -> int:
        """One row group's Q tile (group_m rows), rounded up to a swizzle period."""
        return -(-self.group_m * self.head_bytes // TILE_ALIGN_BYTES) * TILE_ALIGN_BYTES

    @property
    def kv_tile_bytes(self) -> int:
        """Bytes of one K (or one V) tile: block_n tokens of one head."""
        return self.block_n * self.head_bytes

    @property
    def red_bytes(self) -> int:
        """A group's ``red`` (shares_tile layouts): one float per query row and warp."""
        return 4 * self.group_m * self.tile_warps

    @property
    def p_tile_bytes(self) -> int:
        """A group's P^T of one tile in shared memory (shares_tile layouts): fp16 / bf16 B
        fragments, 2 bytes per token and query row; register_v: e4m3, a P_ROW_BYTES row each."""
        return self.group_m * (P_ROW_BYTES if self.layout.register_v else 2 * self.block_n)

    @property
    def p_buffer_bytes(self) -> int:
        """A group's P^T buffers: one tile's, or where the softmax speculates two, tile k using
        buffer ``k & 1`` (it writes a tile's P^T with no barrier since the previous tile's P V,
        whose wgmma may still be reading the other buffer)."""
        return self.p_tile_bytes * (2 if self.speculates else 1)

    @property
    def scratch_bytes(self) -> int:
        """Shared memory past the V ring: each group's P^T buffers and ``red`` (shares_tile
        layouts; their consumers lay it out), else 0."""
        if not self.layout.shares_tile:
            return 0
        return (self.p_buffer_bytes + self.red_bytes) * self.row_groups

    @property
    def dynamic_shared_bytes(self) -> int:
        """Q tile + K ring + V ring (+ scratch), plus slack to align the start to 1024 bytes."""
        return (self.q_tile_bytes + 2 * self.stages * self.kv_tile_bytes + self.scratch_bytes
                + TILE_ALIGN_BYTES)

    @property
    def launch_bounds(self) -> tuple[int, int] | None:
        """``(max threads, min CTAs per SM)`` for ``cuda.jit``/``cuda.compile``; None at 1 CTA
        of at most 256 threads (above, 255 registers a thread would not fit in an SM's 65536)."""
        bounded = self.min_ctas_per_sm > 1 or self.threads > SM90_REGISTERS_PER_SM // 255
        return (self.threads, self.min_ctas_per_sm) if bounded else None

    @property
    def name(self) -> str:
        return (f"paged_attention_{self.load_path}_{self.dtype}_d{self.head_dim}_n{self.block_n}"
                f"_w{self.consumer_warps}_s{self.stages}_p{self.producer_warps}"
                + ("_causal" if self.causal else "")
                + (f"_m{self.min_ctas_per_sm}" if self.min_ctas_per_sm > 1 else "")
                + (f"{self.layout.suffix}{self.rows_per_warp}" if self.layout.suffix else "")
                + (f"_box{self.tma_box}" if self.tma_box != DEFAULT_TMA_BOX else ""))


def resident_ctas_per_sm(registers: int, threads: int, shared_bytes: int) -> int:
    """CTAs of a kernel that fit on one sm_90 SM at once (CUDA's occupancy rule).

    ``registers`` per thread (ptxas -v), ``threads`` per CTA, ``shared_bytes`` (dynamic +
    static) per CTA. Registers go to warps in units of 256 *per sub-partition* (16384
    registers each), so a warp count that is not a multiple of 4 can waste a quarter of the
    file: 5 warps at 176 registers (5632 per warp) fit 2 per sub-partition, 8 per SM, so
    one 5-warp CTA, where 168 registers (5376) fit 3, 12 per SM, two CTAs.
    """
    warps = -(-threads // 32)
    per_warp = -(-registers * 32 // SM90_REGISTER_UNIT) * SM90_REGISTER_UNIT
    warps_by_registers = (SM90_REGISTERS_PER_SM // SM90_SUB_PARTITIONS // per_warp) * SM90_SUB_PARTITIONS
    by_registers = warps_by_registers // warps
    by_shared = SM90_SHARED_BYTES_PER_SM // (shared_bytes + SM90_SHARED_BYTES_RESERVED_PER_CTA)
    return min(by_registers, by_shared, SM90_MAX_WARPS_PER_SM // warps, SM90_MAX_CTAS_PER_SM)


def register_budget(threads: int, ctas_per_sm: int) -> int:
    """The most registers a thread may take (ptxas's cap, at most 255) for ``ctas_per_sm`` CTAs of
    ``threads`` to reside on one SM by resident_ctas_per_sm's rule: 255 for one CTA of 5 warps,
    168 for two (or for one of 9 warps)."""
    for registers in range(255, 0, -1):
        if resident_ctas_per_sm(registers, threads, 0) >= ctas_per_sm:
            return registers
    raise VariantError(f"{ctas_per_sm} CTAs of {threads} threads do not fit on one SM")


def _require(field: str, value, allowed) -> None:
    if value not in allowed:
        raise VariantError(f"{field}={value!r} is not one of {allowed}")


def _require_gather_split(variant: Variant) -> None:
    """The cp.async producer's fixed split (producers.GatherPlan): every thread copies the
    same number of pieces (a compile-time trip count, so the page lookups are unrolled and
    issued together) and the threads sharing a row's page lookup sit in one warp (shfl)."""
    pieces_per_row = variant.head_bytes // PIECE_BYTES
    pieces = variant.block_n * pieces_per_row
    if pieces % variant.producer_threads:
        raise VariantError(f"producer_warps={variant.producer_warps}: the cp_async path needs the "
                           f"{pieces} 16-byte pieces of a K/V tile to be a multiple of the "
                           f"{variant.producer_threads} producer threads")
    if 32 % pieces_per_row or variant.producer_threads % pieces_per_row:
        raise VariantError(f"head_dim={variant.head_dim} ({variant.dtype}): the cp_async path needs "
                           f"a row's {pieces_per_row} pieces to divide a warp's 32 lanes")


# ---------------------------------------------------------------- device index math
@cuda.jit(device=True, inline=True)
def swizzle(offset, mask):
    """Byte ``offset`` of a dense (rows, row_bytes) chunk -> its swizzled offset."""
    return offset ^ (((offset >> 7) & mask) << 4)


@cuda.jit(device=True, inline=True)
def tile_offset(row, byte_col, tile_rows, row_bytes, mask):
    """Swizzled byte offset of (row, byte column) in a tile of ``tile_rows`` rows."""
    chunk = byte_col // row_bytes
    return chunk * (tile_rows * row_bytes) + swizzle(row * row_bytes + byte_col % row_bytes, mask)


@cuda.jit(device=True, inline=True)
def a_lane_row_col(lane):
    """A operand (Q rows x head bytes), ``ldmatrix.x4``: matrices (rows 0-7, bytes 0-15),
    (rows 8-15, bytes 0-15), (rows 0-7, bytes 16-31), (rows 8-15, bytes 16-31) of a
    16-row x 32-byte block = fragments a0, a1, a2, a3."""
    return lane & 15, (lane >> 4) * 16


@cuda.jit(device=True, inline=True)
def k_lane_row_col(lane):
    """B operand of S = Q K^T (K rows are tokens = mma columns), ``ldmatrix.x4``:
    matrices (tokens 0-7, bytes 0-15), (tokens 0-7, bytes 16-31), (tokens 8-15,
    bytes 0-15), (tokens 8-15, bytes 16-31) = b0, b1 of token block 0, b0, b1 of
    token block 1."""
    return (lane & 7) + ((lane >> 4) << 3), ((lane >> 3) & 1) * 16


@cuda.jit(device=True, inline=True)
def v_bf16_lane_row_col(lane):
    """B operand of O += P V for bf16, ``ldmatrix.x4.trans`` over 16 tokens x 16 dims:
    matrices (tokens 0-7, dims 0-7), (tokens 8-15, dims 0-7), (tokens 0-7, dims 8-15),
    (tokens 8-15, dims 8-15) = b0, b1 of dim block 0, b0, b1 of dim block 1."""
    return (lane & 7) + ((lane >> 3) & 1) * 8, (lane >> 4) * 16


@cuda.jit(device=True, inline=True)
def v_e4m3_lane_row_col(lane):
    """B operand of O += P V for e4m3, ``ldmatrix.x4.trans`` on byte pairs over 32
    tokens x 16 dims: matrix i holds tokens 8i .. 8i+7 (rows) x 8 dim pairs."""
    return (lane & 7) + (lane >> 3) * 8, 0


@cuda.jit(device=True, inline=True)
def q_b_lane_row_col(lane):
    """B operand of S^T = K Q^T (consumer_kq.py; Q rows are the mma's N), ``ldmatrix.x4``
    over 8 query rows x 64 bytes: matrix i holds bytes 16i .. 16i+15 = b0, b1 of one
    32-byte k-step, then b0, b1 of the next."""
    return lane & 7, (lane >> 3) * 16


@cuda.jit(device=True, inline=True)
def vt_bf16_lane_row_col(lane):
    """A operand of O^T += V^T P^T for bf16 (consumer_kq.py; head dims are the mma's M),
    ``ldmatrix.x4.trans`` over 16 tokens x 16 dims: matrices (tokens 0-7, dims 0-7),
    (tokens 0-7, dims 8-15), (tokens 8-15, dims 0-7), (tokens 8-15, dims 8-15) = a0..a3."""
    return (lane & 7) + (lane >> 4) * 8, ((lane >> 3) & 1) * 16
