"""The shapes of the TMA path's K/V loads (``Variant.tma_box``): which box lands which part of a
K or V tile, how many ``cp.async.bulk.tensor`` instructions a tile takes, which lane issues them,
and the tensor map over the page pool each one needs. Pure Python: importing it compiles nothing.

Every shape fills the same shared-memory tile (geometry.py: chunk c of the tile, a dense
``(block_n, row_bytes)`` block, swizzled as TMA's ``SWIZZLE_128B`` / ``64B``), so the consumers
and the arrival's byte count (``kv_tile_bytes``) are the same for all. Pool layout
``[num_pages, page_size, kv_heads, head_dim]`` (FlashAttention-3's); one token's row of one head
is ``head_bytes`` long, rows of one head are ``kv_heads * head_bytes`` apart.

    chunk       rank 4 (head_dim, kv_heads, page_size, pages); one box per chunk per page
                slice: (row_bytes, 1, min(page_size, block_n), 1); lane 0 issues them, chunk by
                chunk (2 UTMALDG.4D a bf16 head-dim-128 tile at pages >= block_n)
    tile        FlashAttention-3's shape: rank 5 (row_bytes, page_size, chunks, kv_heads, pages),
                the chunk as a map dimension of stride row_bytes, so one box of
                (row_bytes, block_n, chunks, 1, 1) lands the whole tile in one UTMALDG.5D; lane 0
                issues it. Needs page_size >= block_n (FA3 asserts page_size % kBlockN == 0)
    tile_evict_last  ``tile`` with FlashAttention-3's L2 hint on its K/V loads
                (``CacheHintSm90::EVICT_LAST``; here ``createpolicy.fractional.L2::evict_last``)
    slot        rank 4 as ``chunk``; one box per swizzle atom of rows (``slot_rows``: 8 rows of
                128 B) per chunk, issued slot by slot with the chunks inner, so both halves of a
                token's row are requested back to back; lane 0 issues them all
    slot_lanes  as ``slot``, slot s issued by lane s of the producer warp (lane 0 arms the
                barrier first): the boxes' issue spread over lanes
"""
from __future__ import annotations

from dataclasses import dataclass

TILE_ALIGN_BYTES = 1024            # the SWIZZLE_128B pattern repeats every 1024 bytes (geometry.py)


@dataclass(frozen=True)
class TmaBox:
    """One load shape, the one record of it that the kernel, the sweeps (paged_kv's grid, the
    paged_kv_tma probe), the SASS checks and the raw-data schema read. name: ``Variant.tma_box`` and
    the raw data's ``tma_box``; rank: the tensor map's; per_slot: one box per swizzle atom of rows;
    lanes: each slot's boxes issued by a lane of its own; whole_tile: one box over every chunk (the
    page must hold the tile's rows: ``loads_page``); evict_last: the loads carry an L2 evict-last
    policy."""

    name: str
    rank: int
    per_slot: bool = False
    lanes: bool = False
    whole_tile: bool = False
    evict_last: bool = False

    @property
    def expected_sass(self) -> tuple[str, ...]:
        """The SASS its loads become: one ``cp.async.bulk.tensor.<rank>d`` is a ``UTMALDG.<rank>D``."""
        return (f"UTMALDG.{self.rank}D",)

    def loads_page(self, page_size: int, block_n: int) -> bool:
        """The page-size rule: a whole-tile box reads its ``block_n`` rows from one page."""
        return not self.whole_tile or page_size >= block_n


TMA_BOXES = {box.name: box for box in (
    TmaBox("chunk", 4),
    TmaBox("tile", 5, whole_tile=True),
    TmaBox("tile_evict_last", 5, whole_tile=True, evict_last=True),
    TmaBox("slot", 4, per_slot=True),
    TmaBox("slot_lanes", 4, per_slot=True, lanes=True),
)}
DEFAULT_TMA_BOX = "chunk"
FA3_TMA_BOX = "tile"               # FlashAttention-3's shape, the paged_kv sweep's where it loads the page
NO_TMA_BOX = "none"                # the raw data's tma_box on the cp.async path
#: the raw data's ``tma_box`` values (the paged_kv_tma schema's enum; a test binds them)
RAW_TMA_BOX_VALUES = (NO_TMA_BOX, *TMA_BOXES)


def sweep_tma_box(page_size: int, block_n: int) -> str:
    """The paged_kv sweep's load shape: FlashAttention-3's where it loads the page, else the default."""
    return FA3_TMA_BOX if TMA_BOXES[FA3_TMA_BOX].loads_page(page_size, block_n) else DEFAULT_TMA_BOX


def slot_rows(variant) -> int:
    """Rows of one swizzle atom (the smallest box the swizzle allows), at most the tile's."""
    return min(variant.block_n, TILE_ALIGN_BYTES // variant.row_bytes)


def box_rows(variant, page_size: int) -> int:
    """Rows (tokens) of one box of ``variant`` at ``page_size``."""
    if TMA_BOXES[variant.tma_box].per_slot:
        return slot_rows(variant)
    return min(page_size, variant.block_n)


def page_size_problem(variant, page_size: int) -> str | None:
    """Why ``variant``'s TMA boxes cannot load pages of ``page_size`` tokens, or None."""
    rows = min(page_size, variant.block_n)
    if (rows * variant.row_bytes) % TILE_ALIGN_BYTES:
        return (f"a TMA box of {rows} rows x {variant.row_bytes} B does not start on a "
                f"{TILE_ALIGN_BYTES}-byte swizzle atom; the tma path needs min(page_size, block_n) * "
                f"row_bytes to be a multiple of {TILE_ALIGN_BYTES}")
    if not TMA_BOXES[variant.tma_box].loads_page(page_size, variant.block_n):
        return (f"tma_box '{variant.tma_box}' lands a tile of {variant.block_n} rows in one box, from one page: "
                f"it needs page_size >= block_n")
    return None


def map_geometry(variant, page_size: int, kv_heads: int, num_pages: int):
    """(global_dims, global_strides_bytes, box_dims) of the tensor map over one pool, in elements
    (innermost first) and bytes; the kernel's coordinates follow the same order."""
    element_bytes = variant.element_bytes
    head_bytes = variant.head_bytes
    row_elements = variant.row_bytes // element_bytes
    token_stride = kv_heads * head_bytes
    page_stride = page_size * token_stride
    rows = box_rows(variant, page_size)
    if TMA_BOXES[variant.tma_box].whole_tile:
        return ((row_elements, page_size, variant.chunks, kv_heads, num_pages),
                (token_stride, variant.row_bytes, head_bytes, page_stride),
                (row_elements, rows, variant.chunks, 1, 1))
    return ((variant.head_dim, kv_heads, page_size, num_pages),
            (head_bytes, token_stride, page_stride),
            (row_elements, 1, rows, 1))
