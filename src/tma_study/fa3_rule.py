"""FlashAttention-3's rule for loading paged K/V with TMA or gathering it with cp.async
(forward pass, Hopper), and the tile sizes it runs with, transcribed from its source.

Source: github.com/Dao-AILab/flash-attention, commit
0251105a2fb19d2957484b7f023cd8c115286ced (2026-08-15), directory ``hopper/``. Citations
are ``file:line`` at that commit.

The rule (``flash_api.cpp:415-424``, ``get_pagedkv_tma``)::

    if arch < 90 or no page_table or leftpad_k or appending new K/V: cp.async
    kBlockM, kBlockN = tile_size_fwd_sm90(d_rounded, dv_rounded, is_causal, is_local,
                                          element_size, v_colmajor=False,
                                          paged_kv_non_TMA=False, softcap)
    TMA  iff  page_size % kBlockN == 0  and  seqlen_q * (h / h_k) > kBlockM

(the second clause: "when seqlen_q <= kBlockM, we're not compute bound, and somehow using
TMA is slower, at least for MLA"). The TMA kernel asserts the first clause
(``mainloop_fwd_sm90_tma_gmma_ws.hpp:535-538``) and indexes the page table once per
kBlockN tile: ``page = page_table[n_block / (page_size / kBlockN)]``, tile
``n_block % (page_size / kBlockN)`` inside it (``paged_kv.h:157-161``), over a K/V tensor
of shape (page_size, d, h_k, num_pages) (``flash_fwd_launch_template.h:98-99``; pool
layout (num_pages, page_size, h_k, d), ``flash_api.cpp:823-824``). Otherwise the kernel is
instantiated with ``PagedKVNonTMA`` (``flash_api.cpp:374``) and re-derives its tile with
``paged_kv_non_TMA=True``, which shrinks kBlockN for some head dims; it then always packs
GQA (``flash_api.cpp:429``) and loads with a producer warpgroup (128 threads) instead of one
warp (``mainloop_fwd_sm90_tma_gmma_ws.hpp:121``). Both run 2 K/V stages on sm90
(``flash_fwd_launch_template.h:47``).

Inputs to the rule as FA3 computes them:
- ``d_rounded``: head dim rounded up to 64, 96, 128, 192, 256 (``flash_api.cpp:492-509``);
- ``is_causal`` for decode: with ``seqlen_q == 1`` and no window, causal is switched off
  unless the KV cache is paged and 64 < head_dim <= 128 ("special case of hdim 128 where
  we want causal to have kBlockN=128, better for pagedKV and TMA",
  ``flash_api.cpp:799-804``).
"""
from __future__ import annotations

from dataclasses import dataclass

FA3_REPOSITORY = "Dao-AILab/flash-attention"
FA3_COMMIT = "0251105a2fb19d2957484b7f023cd8c115286ced"
# (file, first line, last line) at FA3_COMMIT, as catalog/fa3_forward.yaml cites them (a test checks)
RULE_CITATION = ("hopper/flash_api.cpp", 415, 424)               # get_pagedkv_tma
KV_STAGES_SM90 = 2                                                # K/V pipeline stages on sm90, both paths
KV_STAGES_CITATION = ("hopper/flash_fwd_launch_template.h", 47, 47)
ELEMENT_BYTES = {"bf16": 2, "fp16": 2, "e4m3": 1}


@dataclass(frozen=True)
class TileSize:
    """``tile_size_fwd_sm90``'s result (``tile_size.h:9``): {kBlockM, kBlockN, MmaPV_is_RS,
    IntraWGOverlap}."""

    block_m: int
    block_n: int
    mma_pv_is_rs: bool
    intra_wg_overlap: bool


def round_up_headdim(head_dim: int) -> int:
    """``flash_api.cpp:492-509`` (all head dims compiled in)."""
    for rounded in (64, 96, 128, 192, 256):
        if head_dim <= rounded:
            return rounded
    return 256


def tile_size_fwd_sm90(head_dim: int, head_dim_v: int, is_causal: bool, is_local: bool,
                       element_size: int = 2, v_colmajor: bool = False,
                       paged_kv_non_tma: bool = False, softcap: bool = False) -> TileSize:
    """``tile_size.h:10-54``, line for line."""
    if element_size == 2:
        if head_dim <= 64:                                                    # tile_size.h:14
            if head_dim_v == 512:
                return TileSize(64, 64, False, False)
            if head_dim_v == 256:
                return TileSize(128, 96, True, False)
            use_block_n_128 = is_causal or is_local or paged_kv_non_tma       # tile_size.h:24
            return TileSize(192, 128 if use_block_n_128 else 192, use_block_n_128, True)
        if head_dim <= 96:                                                    # tile_size.h:29
            return TileSize(192, 128 if (is_local or paged_kv_non_tma) else 144, False, True)
        if head_dim <= 128:                                                   # tile_size.h:31
            use_block_n_128 = is_causal or is_local or paged_kv_non_tma
            return TileSize(128, 128 if use_block_n_128 else 176, True, True)
        if head_dim <= 192:                                                   # tile_size.h:36
            block_n = 96 if (paged_kv_non_tma or is_local) else (128 if head_dim_v <= 128 else 112)
            return TileSize(128, block_n, True, True)
        return TileSize(128, 64 if is_local else 80, True, True)             # tile_size.h:39
    if head_dim <= 64:                                                        # tile_size.h:42
        return TileSize(192, 160, True, True)
    if head_dim <= 96:
        return TileSize(192, 128, True, True)
    if head_dim <= 128:                                                       # tile_size.h:46
        block_n = 160 if paged_kv_non_tma else (192 if (v_colmajor or (softcap and is_local)) else 224)
        return TileSize(128, block_n, True, True)
    if head_dim <= 192:                                                       # tile_size.h:48
        return TileSize(128, 128 if ((paged_kv_non_tma or softcap) and is_local) else 160, True, True)
    return TileSize(128, 64 if is_local else 128, True, not paged_kv_non_tma)  # tile_size.h:51


def effective_causal(causal: bool, seqlen_q: int, head_dim: int, paged: bool = True) -> bool:
    """``is_causal`` as FA3's ``mha_fwd`` passes it on (``flash_api.cpp:799-804``): a
    one-token query has nothing to mask, so causal is dropped, except for a paged cache
    with 64 < head_dim <= 128, where it is kept to get kBlockN = 128."""
    if causal and seqlen_q == 1 and (head_dim <= 64 or head_dim > 128 or not paged):
        return False
    return causal


@dataclass(frozen=True)
class Fa3Choice:
    """What FA3 would run for one paged-KV forward call."""

    uses_tma: bool
    tma_tile: TileSize           # the tile the rule tests the page size against
    kernel_tile: TileSize        # the tile of the kernel FA3 then runs (non-TMA: re-derived)
    is_causal: bool              # after effective_causal
    reason: str

    @property
    def load_path(self) -> str:
        return "tma" if self.uses_tma else "cp_async"


def fa3_choice(page_size: int, seqlen_q: int, q_heads: int, kv_heads: int, head_dim: int,
               dtype: str, causal: bool, leftpad_k: bool = False, append_kv: bool = False,
               arch: int = 90) -> Fa3Choice:
    """FA3's load path and tiles for a paged-KV forward (``flash_api.cpp:415-424``)."""
    if dtype not in ELEMENT_BYTES:
        raise ValueError(f"dtype {dtype!r} is not one of {', '.join(ELEMENT_BYTES)}")
    element_size = ELEMENT_BYTES[dtype]
    is_causal = effective_causal(causal, seqlen_q, head_dim)
    d_rounded = round_up_headdim(head_dim)
    tma_tile = tile_size_fwd_sm90(d_rounded, d_rounded, is_causal, False, element_size)
    non_tma_tile = tile_size_fwd_sm90(d_rounded, d_rounded, is_causal, False, element_size,
                                      paged_kv_non_tma=True)
    if arch < 90 or leftpad_k or append_kv:
        return Fa3Choice(False, tma_tile, non_tma_tile, is_causal,
                         "no TMA for paged KV before sm90, with leftpad_k or when appending K/V")
    packed_rows = seqlen_q * (q_heads // kv_heads)
    if page_size % tma_tile.block_n:
        return Fa3Choice(False, tma_tile, non_tma_tile, is_causal,
                         f"page_size {page_size} is not a multiple of kBlockN {tma_tile.block_n}")
    if packed_rows <= tma_tile.block_m:
        return Fa3Choice(False, tma_tile, non_tma_tile, is_causal,
                         f"seqlen_q x heads per KV head = {packed_rows} <= kBlockM {tma_tile.block_m}")
    return Fa3Choice(True, tma_tile, tma_tile, is_causal,
                     f"page_size {page_size} % kBlockN {tma_tile.block_n} == 0 and "
                     f"{packed_rows} query rows per KV head > kBlockM {tma_tile.block_m}")
