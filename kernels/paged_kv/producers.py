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

- ``tma``: lane 0 of the producer warp arms ``full`` with the tile's bytes, then issues
  one ``cp.async.bulk.tensor.4d`` (``UTMALDG.4D``) per chunk per *page slice*: a box of
  ``min(page_size, block_n)`` tokens x ``row_bytes``, at coordinates (chunk column,
  kv_head, row in page, physical page) of a tensor map over the whole pool. With
  ``page_size >= block_n`` (FA3's condition ``page_size % kBlockN == 0``) that is one
  box per chunk per tile; with smaller pages, one per page.
- ``cp_async``: every producer thread issues 16-byte ``cp.async.cg`` (``LDGSTS``) for
  its share of the tile's pieces, looking up each piece's page in the page table, then
  ``cp.async.mbarrier.arrive.noinc`` (the barrier expects every producer thread).
"""
from numba import cuda, uint32, uint64
from tma_kernels.ptx import (
    cp_async_cg16,
    cp_async_mbarrier_arrive_noinc,
    mbarrier_arrive_expect_tx,
    tma_load_4d,
)

from .geometry import PIECE_BYTES, tile_offset


def make_tma_producer(variant):
    """``produce(dst, tensor_map, pool, full, page_table, batch, kv_head, first_row, kv_len,
    log2_page_size, kv_heads, producer_rank)`` for the TMA path of ``variant``."""
    block_n = variant.block_n
    log2_block_n = block_n.bit_length() - 1
    row_bytes = variant.row_bytes
    chunks = variant.chunks
    chunk_bytes = block_n * row_bytes
    chunk_elements = row_bytes // variant.element_bytes
    tile_bytes = variant.kv_tile_bytes

    @cuda.jit(device=True, inline=True)
    def produce(dst, tensor_map, pool, full, page_table, batch, kv_head, first_row, kv_len,
                log2_page_size, kv_heads, producer_rank):
        if producer_rank == 0:
            mbarrier_arrive_expect_tx(full, tile_bytes)
            log2_box_rows = min(log2_page_size, log2_block_n)
            last_page = (kv_len - 1) >> log2_page_size
            row_mask = (1 << log2_page_size) - 1
            for box in range(block_n >> log2_box_rows):
                row = first_row + (box << log2_box_rows)
                page = page_table[batch, min(row >> log2_page_size, last_page)]
                box_dst = dst + uint32((box << log2_box_rows) * row_bytes)
                for chunk in range(chunks):
                    tma_load_4d(box_dst + uint32(chunk * chunk_bytes), tensor_map, full,
                                chunk * chunk_elements, kv_head, row & row_mask, page)

    return produce


def make_cp_async_producer(variant):
    """``produce(...)`` (same arguments as the TMA one) for the cp.async path of ``variant``."""
    block_n = variant.block_n
    row_bytes = variant.row_bytes
    mask = variant.swizzle_mask
    head_bytes = variant.head_bytes
    pieces_per_row = head_bytes // PIECE_BYTES
    log2_pieces_per_row = pieces_per_row.bit_length() - 1
    pieces = block_n * pieces_per_row
    producer_threads = variant.producer_threads

    @cuda.jit(device=True, inline=True)
    def produce(dst, tensor_map, pool, full, page_table, batch, kv_head, first_row, kv_len,
                log2_page_size, kv_heads, producer_rank):
        last_page = (kv_len - 1) >> log2_page_size
        row_mask = (1 << log2_page_size) - 1
        for piece in range(producer_rank, pieces, producer_threads):
            tile_row = piece >> log2_pieces_per_row
            piece_in_row = piece & (pieces_per_row - 1)
            row = first_row + tile_row
            page = page_table[batch, min(row >> log2_page_size, last_page)]
            token = (uint64(page) << uint64(log2_page_size)) + uint64(row & row_mask)
            source = (pool + (token * uint64(kv_heads) + uint64(kv_head)) * uint64(head_bytes)
                      + uint64(piece_in_row * PIECE_BYTES))
            offset = tile_offset(tile_row, piece_in_row * PIECE_BYTES, block_n, row_bytes, mask)
            cp_async_cg16(dst + uint32(offset), source)
        cp_async_mbarrier_arrive_noinc(full)

    return produce


def make_producer(variant):
    """The producer device function of ``variant.load_path``."""
    if variant.load_path == "tma":
        return make_tma_producer(variant)
    return make_cp_async_producer(variant)
