"""The consumers of the paged attention kernel, one record each: the one list of them that the
kernel (geometry.Variant, kernel.py), the sweep (tma_study.studies.paged_kv.grid) and the config
schema (workflow/schemas/studies/paged_kv.schema.yaml, checked against it by a test) read.

The consumers form a ladder, each file one step up from the one before it:

    qk                         consumer_qk.py: S = Q K^T, query rows as the mma.sync M (prefill)
    kq                         consumer_kq.py: S^T = K Q^T, KV tokens as M (decode)
    kq_wgmma                   consumer_kq_wgmma.py: 4 warps share each tile, S^T by one wgmma
    kq_wgmma_rs_lazy           consumer_kq_wgmma_rs_lazy.py: P V by wgmma too, V^T from
                               registers, accumulating in place, O rescaled lazily (e4m3)
    kq_wgmma_rs_lazy_rowsplit  consumer_kq_wgmma_rs_lazy_rowsplit.py: two such warpgroups on
                               every tile, half the query rows each (e4m3)

The consumers measured and removed from the tree are kept at a git tag
(docs/paged_kv_consumers.md). Pure Python: importing it compiles nothing.
"""
from __future__ import annotations

from dataclasses import dataclass

BF16, E4M3 = "bf16", "e4m3"


@dataclass(frozen=True)
class Layout:
    """One consumer (``Variant.score_layout``).

    name: the layout's name in a Variant, in config ``decode_consumers`` and in the raw data.
    suffix: the kernel name's, before rows_per_warp ("" for qk: its kernels carry none).
    rows_per_warp: the query rows a consumer warp may load.
    decode: a decode consumer (config ``decode_consumers`` lists it); else prefill's.
    shares_tile: the warps of a group share each K/V tile, exchanging row maxima and P through
        shared memory between named barriers (kq_wgmma and up).
    uses_wgmma: S^T = K Q^T as one warpgroup ``wgmma`` a tile of 64 tokens, 4 warps.
    register_v: P V as ``wgmma`` too, V^T gathered from the V tile into the wgmma's A registers.
    lazy_rescale: P V accumulates into O^T in place, O^T rescaled only when a running max moves
        by more than a threshold (and from head dim 128 the softmax speculates none does).
    row_split: two warpgroups (8 warps) on every tile, each over half the CTA's query rows.
    dtypes: the dtypes it is built for.
    """

    name: str
    suffix: str
    rows_per_warp: tuple[int, ...]
    decode: bool = True
    shares_tile: bool = False
    uses_wgmma: bool = False
    register_v: bool = False
    lazy_rescale: bool = False
    row_split: bool = False
    dtypes: tuple[str, ...] = (BF16, E4M3)

    @property
    def module(self) -> str:
        """The consumer's file: kernels/paged_kv/<module>.py."""
        return f"consumer_{self.name}"


SHARED_TILE_ROWS_PER_WARP = (2, 4, 8)   # each warp of a group loads that many; all compute with all

LAYOUTS = {layout.name: layout for layout in (
    Layout("qk", "", (16,), decode=False),
    Layout("kq", "_kq", (8, 16)),
    Layout("kq_wgmma", "_kqw", SHARED_TILE_ROWS_PER_WARP, shares_tile=True, uses_wgmma=True),
    Layout("kq_wgmma_rs_lazy", "_kqwrl", SHARED_TILE_ROWS_PER_WARP, shares_tile=True, uses_wgmma=True,
           register_v=True, lazy_rescale=True, dtypes=(E4M3,)),
    Layout("kq_wgmma_rs_lazy_rowsplit", "_kqwrls", SHARED_TILE_ROWS_PER_WARP, shares_tile=True,
           uses_wgmma=True, register_v=True, lazy_rescale=True, row_split=True, dtypes=(E4M3,)),
)}
SCORE_LAYOUTS = tuple(LAYOUTS)
DECODE_CONSUMERS = tuple(name for name, layout in LAYOUTS.items() if layout.decode)
