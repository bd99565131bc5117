"""The two K/V load paths of the paged attention kernel; the only code that differs
between a ``tma`` and a ``cp_async`` kernel.

Both fill one K (or V) tile: ``block_n`` consecutive tokens ``first_row ..`` of KV
head ``kv_head`` of sequence ``batch``, from the page pool
``[num_pages, page_size, kv_heads, head_dim]`` (FlashAttention-3's layout), into the
swizzled tile layout of :mod:`.geometry`, completing on mbarrier ``full``.
Token ``row`` lives in page ``page_table[batch, row >> log2_page_size]`` at row
``row & (page_size - 1)``. Rows past the sequence's last page read the last page
instead (finite data that the consumers mask out), so no page-table entry past the
sequence is ever read.

Each path is ``look_up`` + ``produce`` (``make_producer``). The kernel's producer loop
(``kernel.py``, step 3) calls, per tile k: ``look_up`` of tile k + 1 into ``next_pages``
(before it waits on ``empty``), the wait, ``produce`` K and V of tile k from ``pages``
(looked up one iteration earlier), then ``pages = next_pages``.

- ``tma`` (the default load shape, ``tma_box`` ``chunk``; the others: tma_boxes.py, ``tile``
  one rank-5 box a tile as FA3 (``tile_evict_last``: with its L2 evict-last hint), ``slot`` / ``slot_lanes`` one box per swizzle atom and chunk,
  from lane 0 or from a lane per slot): ``look_up`` (lane 0 of the producer warp) loads one page-table entry per
  *slot* of the tile, a slot being the smallest box the swizzle allows
  (``TILE_ALIGN_BYTES / row_bytes`` rows: 8 for 128-byte rows), all issued before any is
  used, a tile ahead like the cp.async path's (FA3's TMA path loads its page index before
  acquiring the stage too: ``load_page_table_TMA``, ``paged_kv.h``:157-168, called at
  ``mainloop_fwd_sm90_tma_gmma_ws.hpp``:868 before ``load_K``'s ``producer_acquire`` at
  :750). In
  ``produce`` lane 0 arms ``full`` with the tile's bytes, then issues one
  ``cp.async.bulk.tensor.4d`` (``UTMALDG.4D``) per chunk per *page slice*: a box of
  ``min(page_size, block_n)`` tokens x ``row_bytes``, at coordinates (chunk column,
  kv_head, row in page, physical page) of a tensor map over the whole pool, the page
  being the entry of the slot where the box starts. With ``page_size >= block_n`` (FA3's
  condition ``page_size % kBlockN == 0``) that is one box per chunk per tile; with
  smaller pages, one per page. Slots inside a box are looked up too (one entry each,
  the same page): a fixed count keeps the entries in registers.
- ``cp_async``: every producer thread copies ``rows_per_thread`` 16-byte pieces of a
  tile with ``cp.async.cg`` (``LDGSTS``), one per row, always the same piece column
  (:class:`GatherPlan`), then ``cp.async.mbarrier.arrive.noinc`` (the barrier expects
  every producer thread). The ``pieces_per_row`` threads that copy one row (one *row
  group*, inside one warp) share its page lookup as FlashAttention-3's PagedKVManager
  does (Dao-AILab/flash-attention 0251105a, ``hopper/paged_kv.h``:68-75): ``look_up``
  loads ``page_entries`` page-table entries per thread, each for one row of its group,
  all issued before any is used (``paged_kv.h``:135-151, ``load_page_table``);
  ``produce`` turns each entry into the row's pool row ``(page * page_size + row in
  page) * kv_heads + kv_head`` (32-bit: a pool of 2**32 rows of at least 64 bytes would
  not fit in GPU memory) and hands it to the thread that copies that row with one
  ``shfl.sync`` per copy (FA3 shuffles the row's K / V pointer, ``paged_kv.h``:233 and
  270). K and V share the entries (FA3 ``compute_K_ptr`` /
  ``compute_V_ptr``, ``paged_kv.h``:188-205). FA3 also loads the page table of
  tile n before acquiring its K stage (``load_page_table`` at
  ``mainloop_fwd_sm90_tma_gmma_ws.hpp``:866, ``producer_acquire`` inside ``load_K`` at
  :750 and :871); this kernel loads them one tile earlier still, since ptxas hoists the
  entries' arithmetic above the wait (it touches no memory) and would stall there on
  a load issued just before it. The data written to shared memory is the same as a
  per-piece lookup writes: piece ``rank + i * producer_threads`` of the tile at its
  swizzled offset (tests/cpu/paged_kv/test_paged_kv_producer.py; the SASS ordering:
  tests/cpu/paged_kv/test_paged_kv_producer_sass.py).
"""
from __future__ import annotations

import types
from dataclasses import dataclass

from numba import cuda, int32, uint32, uint64
from tma_kernels.ptx import (
    cp_async_cg16,
    cp_async_mbarrier_arrive_noinc,
    mbarrier_arrive_expect_tx,
    l2_policy_evict_last,
    tma_load_4d,
    tma_load_5d,
    tma_load_5d_cache_hint,
)

from .geometry import PIECE_BYTES, tile_offset
from .tma_boxes import TMA_BOXES
from .tma_boxes import slot_rows as tma_slot_rows

FULL_MASK = 0xFFFFFFFF
WARP_LANES = 32


@dataclass(frozen=True)
class GatherPlan:
    """Which pieces of a K/V tile each cp.async producer thread copies.

    Thread ``rank`` (0 .. producer_threads - 1) copies, for ``copy`` in
    ``range(rows_per_thread)``, piece ``rank + copy * producer_threads`` of the tile:
    tile row ``(rank >> log2(pieces_per_row)) + copy * rows_per_pass`` (its *row
    group* plus a pass), piece column ``rank & (pieces_per_row - 1)``. The
    ``pieces_per_row`` threads of one row group copy the same rows; lane ``j`` of the
    group looks up the pages of copies ``j, j + pieces_per_row, ..`` (``page_entries``
    of them). Variant validation guarantees ``pieces_per_row`` divides 32 (a row group
    is inside one warp) and ``producer_threads`` divides the tile's pieces.
    """

    pieces_per_row: int
    rows_per_pass: int
    rows_per_thread: int

    @classmethod
    def of(cls, variant) -> GatherPlan:
        pieces_per_row = variant.head_bytes // PIECE_BYTES
        rows_per_pass = variant.producer_threads // pieces_per_row
        return cls(pieces_per_row, rows_per_pass, variant.block_n // rows_per_pass)

    @property
    def log2_pieces_per_row(self) -> int:
        return self.pieces_per_row.bit_length() - 1

    @property
    def page_entries(self) -> int:
        """Page-table entries each thread loads per tile: its group's rows / group size."""
        return -(-self.rows_per_thread // self.pieces_per_row)


# ---------------------------------------------------------------- gather index math
# Plain integer functions (the CPU test runs their py_func over every producer thread).
@cuda.jit(device=True, inline=True)
def copy_tile_row(rank, copy, log2_pieces_per_row, rows_per_pass):
    """Tile row of thread ``rank``'s ``copy``-th piece."""
    return (rank >> log2_pieces_per_row) + copy * rows_per_pass


@cuda.jit(device=True, inline=True)
def entry_copy(rank, entry, pieces_per_row, rows_per_thread):
    """The copy (of every thread in the row group) whose page thread ``rank``'s page-table
    ``entry`` holds; past the group's last copy, the last copy again (a row in the tile)."""
    return min((rank & (pieces_per_row - 1)) + entry * pieces_per_row, rows_per_thread - 1)


@cuda.jit(device=True, inline=True)
def copy_source_lane(lane, copy, pieces_per_row):
    """Lane whose page-table entry ``copy >> log2(pieces_per_row)`` holds ``copy``'s page:
    lane ``copy % pieces_per_row`` of the caller's row group."""
    return (lane & ~(pieces_per_row - 1)) | (copy & (pieces_per_row - 1))


# ---------------------------------------------------------------- the two paths
def make_tma_producer(variant):
    """``look_up`` and ``produce`` (same arguments as the cp.async ones) for the TMA path of
    ``variant``, in the load shape of ``variant.tma_box`` (tma_boxes.py; here the default,
    ``chunk``): ``pages`` holds the entries of the tile's ``page_entries`` slots."""
    box = TMA_BOXES[variant.tma_box]
    if box.whole_tile:
        return _make_tile_box_producer(variant)
    if box.per_slot:
        return _make_slot_box_producer(variant, box.lanes)
    block_n = variant.block_n
    log2_block_n = block_n.bit_length() - 1
    row_bytes = variant.row_bytes
    chunks = variant.chunks
    chunk_bytes = block_n * row_bytes
    chunk_elements = row_bytes // variant.element_bytes
    tile_bytes = variant.kv_tile_bytes
    slot_rows = tma_slot_rows(variant)          # runner.check_page_size: a page holds whole slots
    page_entries = block_n // slot_rows

    @cuda.jit(device=True, inline=True)
    def look_up(pages, page_table, batch, first_row, kv_len, log2_page_size, producer_rank):
        if producer_rank == 0:
            last_page = (kv_len - 1) >> log2_page_size
            for slot in range(page_entries):
                row = first_row + slot * slot_rows
                pages[slot] = page_table[batch, min(row >> log2_page_size, last_page)]

    @cuda.jit(device=True, inline=True)
    def produce(dst, tensor_map, pool, full, page_table, pages, batch, kv_head, first_row, kv_len,
                log2_page_size, kv_heads, producer_rank):
        if producer_rank == 0:
            mbarrier_arrive_expect_tx(full, tile_bytes)
            box_rows_mask = (1 << min(log2_page_size, log2_block_n)) - 1
            row_mask = (1 << log2_page_size) - 1
            for slot in range(page_entries):
                tile_row = slot * slot_rows
                if tile_row & box_rows_mask == 0:                   # a box starts here
                    box_dst = dst + uint32(tile_row * row_bytes)
                    for chunk in range(chunks):
                        tma_load_4d(box_dst + uint32(chunk * chunk_bytes), tensor_map, full,
                                    chunk * chunk_elements, kv_head, (first_row + tile_row) & row_mask,
                                    pages[slot])

    return types.SimpleNamespace(page_entries=page_entries, look_up=look_up, produce=produce)


def _make_slot_box_producer(variant, spread: bool):
    """tma_box ``slot`` / ``slot_lanes``: a box of one swizzle atom of rows per chunk, slot by
    slot with the chunks inner (both halves of a token's row requested back to back). ``slot``:
    lane 0 looks every slot's page up and issues every box. ``slot_lanes`` (``spread``): lane s
    looks up slot s's page alone (one entry a lane, kept in a register) and, after lane 0 armed
    the barrier and the warp converged, issues slot s's boxes."""
    row_bytes = variant.row_bytes
    chunks = variant.chunks
    chunk_bytes = variant.block_n * row_bytes
    chunk_elements = row_bytes // variant.element_bytes
    tile_bytes = variant.kv_tile_bytes
    slot_rows = tma_slot_rows(variant)
    slots = variant.block_n // slot_rows             # <= 16: a lane each
    page_entries = 1 if spread else slots

    @cuda.jit(device=True, inline=True)
    def look_up(pages, page_table, batch, first_row, kv_len, log2_page_size, producer_rank):
        last_page = (kv_len - 1) >> log2_page_size
        if spread:
            if producer_rank < slots:
                row = first_row + producer_rank * slot_rows
                pages[0] = page_table[batch, min(row >> log2_page_size, last_page)]
        elif producer_rank == 0:
            for slot in range(slots):
                row = first_row + slot * slot_rows
                pages[slot] = page_table[batch, min(row >> log2_page_size, last_page)]

    @cuda.jit(device=True, inline=True)
    def produce(dst, tensor_map, pool, full, page_table, pages, batch, kv_head, first_row, kv_len,
                log2_page_size, kv_heads, producer_rank):
        if producer_rank == 0:
            mbarrier_arrive_expect_tx(full, tile_bytes)
        row_mask = (1 << log2_page_size) - 1
        if spread:
            cuda.syncwarp()                     # armed before any lane's box can complete on it
            if producer_rank < slots:
                tile_row = producer_rank * slot_rows
                for chunk in range(chunks):
                    tma_load_4d(dst + uint32(chunk * chunk_bytes + tile_row * row_bytes), tensor_map, full,
                                chunk * chunk_elements, kv_head, (first_row + tile_row) & row_mask, pages[0])
        elif producer_rank == 0:
            for slot in range(slots):
                tile_row = slot * slot_rows
                for chunk in range(chunks):
                    tma_load_4d(dst + uint32(chunk * chunk_bytes + tile_row * row_bytes), tensor_map, full,
                                chunk * chunk_elements, kv_head, (first_row + tile_row) & row_mask,
                                pages[slot])

    return types.SimpleNamespace(page_entries=page_entries, look_up=look_up, produce=produce)


def _make_tile_box_producer(variant):
    """tma_box ``tile`` (FlashAttention-3's shape): one rank-5 box, (row_bytes, block_n, chunks, 1,
    1) at (0, row in page, 0, kv_head, page), lands the whole tile; lane 0 looks up its one page
    (runner.check_page_size: the page holds the tile's rows) and issues it; ``tile_evict_last``
    with an L2 evict-last policy, as FA3's K/V loads."""
    tile_bytes = variant.kv_tile_bytes
    evict_last = TMA_BOXES[variant.tma_box].evict_last

    @cuda.jit(device=True, inline=True)
    def look_up(pages, page_table, batch, first_row, kv_len, log2_page_size, producer_rank):
        if producer_rank == 0:
            last_page = (kv_len - 1) >> log2_page_size
            pages[0] = page_table[batch, min(first_row >> log2_page_size, last_page)]

    @cuda.jit(device=True, inline=True)
    def produce(dst, tensor_map, pool, full, page_table, pages, batch, kv_head, first_row, kv_len,
                log2_page_size, kv_heads, producer_rank):
        if producer_rank == 0:
            mbarrier_arrive_expect_tx(full, tile_bytes)
            row_in_page = first_row & ((1 << log2_page_size) - 1)
            if evict_last:
                tma_load_5d_cache_hint(dst, tensor_map, full, 0, row_in_page, 0, kv_head, pages[0],
                                       l2_policy_evict_last())
            else:
                tma_load_5d(dst, tensor_map, full, 0, row_in_page, 0, kv_head, pages[0])

    return types.SimpleNamespace(page_entries=1, look_up=look_up, produce=produce)


def make_cp_async_producer(variant):
    """``look_up`` and ``produce`` (same arguments as the TMA ones) for the cp.async path."""
    plan = GatherPlan.of(variant)
    pieces_per_row = plan.pieces_per_row
    log2_pieces_per_row = plan.log2_pieces_per_row
    rows_per_pass = plan.rows_per_pass
    rows_per_thread = plan.rows_per_thread
    page_entries = plan.page_entries
    copies_per_entry = min(pieces_per_row, rows_per_thread)   # rows_per_thread / page_entries
    block_n = variant.block_n
    row_bytes = variant.row_bytes
    mask = variant.swizzle_mask
    head_bytes = variant.head_bytes

    @cuda.jit(device=True, inline=True)
    def look_up(pages, page_table, batch, first_row, kv_len, log2_page_size, producer_rank):
        """pages[e] = physical page of this thread's entry e (loads only: nothing here waits)."""
        last_page = (kv_len - 1) >> log2_page_size
        for entry in range(page_entries):
            copy = entry_copy(producer_rank, entry, pieces_per_row, rows_per_thread)
            row = first_row + copy_tile_row(producer_rank, copy, log2_pieces_per_row, rows_per_pass)
            pages[entry] = page_table[batch, uint32(min(row >> log2_page_size, last_page))]

    @cuda.jit(device=True, inline=True)
    def produce(dst, tensor_map, pool, full, page_table, pages, batch, kv_head, first_row, kv_len,
                log2_page_size, kv_heads, producer_rank):
        row_mask = (1 << log2_page_size) - 1
        lane = producer_rank & (WARP_LANES - 1)
        piece_bytes = (producer_rank & (pieces_per_row - 1)) * PIECE_BYTES
        for entry in range(page_entries):
            # this lane's entry -> the pool row of the row it looked up (same for K and V)
            entry_row = first_row + copy_tile_row(
                producer_rank, entry_copy(producer_rank, entry, pieces_per_row, rows_per_thread),
                log2_pieces_per_row, rows_per_pass)
            entry_pool_row = ((uint32(pages[entry]) << uint32(log2_page_size))
                              + uint32(entry_row & row_mask)) * uint32(kv_heads) + uint32(kv_head)
            for member in range(copies_per_entry):
                # copy `entry * pieces_per_row + member`: its row was looked up by lane
                # `member` of this row group, as that lane's `entry`
                copy = entry * pieces_per_row + member
                pool_row = uint32(cuda.shfl_sync(FULL_MASK, int32(entry_pool_row),
                                                 copy_source_lane(lane, member, pieces_per_row)))
                source = pool + uint64(pool_row) * uint64(head_bytes) + uint64(piece_bytes)
                tile_row = copy_tile_row(producer_rank, copy, log2_pieces_per_row, rows_per_pass)
                offset = tile_offset(tile_row, piece_bytes, block_n, row_bytes, mask)
                cp_async_cg16(dst + uint32(offset), source)
        cp_async_mbarrier_arrive_noinc(full)

    return types.SimpleNamespace(page_entries=page_entries, look_up=look_up, produce=produce)


def make_producer(variant):
    """The producer of ``variant.load_path``: ``.page_entries`` (int32 registers per thread
    for the page lookups), ``.look_up(...)`` and ``.produce(...)`` device functions."""
    if variant.load_path == "tma":
        return make_tma_producer(variant)
    return make_cp_async_producer(variant)
