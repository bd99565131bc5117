"""Rung 5 (``kq_wgmma_rs_lazy_rowsplit``) adds over rung 4: a second warpgroup, each over half the rows.

``score_layout="kq_wgmma_rs_lazy_rowsplit"`` (layouts.py; e4m3 only): two rung-4 warpgroups
(consumer_kq_wgmma_rs_lazy.py) on *every* tile, each over its own half of the CTA's query rows, as
FlashAttention-3's consumer warpgroups split their M tile:

    group g = 0, 1 (consumer warps 4 g .. 4 g + 3), rows m_start + g group_m .. + group_m:
    S^T_g = K Q_g^T                 Q_g: (group_m, head_dim), a Q tile of its own
    P^T_g = exp2(S^T_g scale_log2 - m_g)
    O^T_g += V^T P^T_g              O^T_g: (head_dim, group_m) in the group's registers

What it adds over rung 4: a second warpgroup, 8 consumer warps (``Variant.row_groups`` = 2). Each
group has its own Q tile (``Variant.group_q_tile_bytes`` apart), P^T buffers, ``red`` and named
barrier (CONSUMER_BARRIER + g), and writes its own rows: nothing is merged. A stage's ``empty``
barrier counts both groups' threads (``Variant.release_threads``: a stage is free once both have
read it). Both groups read every K tile (each its own S^T wgmma) and gather every V tile's V^T for
its own rows.

Why: at 32 rows of head dim 256 one rung-4 warpgroup holds O^T in 64 registers a thread, so one
CTA of 5 warps fits an SM, one consumer warp a sub-partition, waiting on its own latencies; two
groups of 16 rows fit the 168 registers that 9 warps allow (with the wide P V calls,
pv_wgmma.RS_WIDE_GROUP_ROWS) and give each sub-partition two consumer warps. The sweep runs it
where a KV head has 16 or more packed query rows (grid.ROWSPLIT_MIN_ROWS), each group then one
mma N block of 8 rows or more.
"""
from numba import cuda

from . import consumer_kq_wgmma_rs_lazy
from .geometry import WARPGROUP_WARPS


@cuda.jit(device=True, inline=True)
def warpgroup_of(warp):
    """The group of consumer warp ``warp``: its warpgroup, warps 4 g .. 4 g + 3."""
    return warp // WARPGROUP_WARPS


def make_consumer(variant):
    """Rung 4's consumer for ``variant.row_groups`` (2) groups, each warpgroup its own."""
    return consumer_kq_wgmma_rs_lazy.make_consumer(variant, group_of=warpgroup_of)
