"""Bulk copies without a tensor map (``cp.async.bulk``, the TMA engine moving
a contiguous byte range).

Operands: shared-memory addresses are uint32 (``smem_u32``, or ``mapa_shared``
for another CTA's ``shared::cluster`` window), global ones uint64 generic
addresses (``addr_of``); ``nbytes`` is a uint32 multiple of 16, and both ends
must be 16-byte aligned. Loads complete on an mbarrier (``complete_tx::bytes``);
stores through the bulk group (``bulk_commit_group`` and a bulk wait in :mod:`.tma`).
"""

from numba.cuda.extending import intrinsic

from ._asm import U32, U64, asm_intrinsic


@intrinsic
def bulk_load(typingctx, dst, src, nbytes, bar):
    """``cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes
    [dst], [src], nbytes, [bar];``: global ``src`` -> shared ``dst``,
    ``nbytes`` counted on mbarrier ``bar``."""
    return asm_intrinsic(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [$0], [$1], $2, [$3];",
        (dst, src, nbytes, bar), (U32, U64, U32, U32),
    )


@intrinsic
def bulk_store(typingctx, dst_global, src_smem, nbytes):
    """``cp.async.bulk.global.shared::cta.bulk_group [dst_global], [src_smem],
    nbytes;``: shared ``src_smem`` -> global ``dst_global``."""
    return asm_intrinsic(
        "cp.async.bulk.global.shared::cta.bulk_group [$0], [$1], $2;",
        (dst_global, src_smem, nbytes), (U64, U32, U32),
    )


@intrinsic
def bulk_copy_to_peer(typingctx, dst_cluster, src_smem, nbytes, remote_bar):
    """``cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes
    [dst_cluster], [src_smem], nbytes, [remote_bar];``: this CTA's shared
    ``src_smem`` -> a peer CTA's shared memory, counted on the peer's mbarrier.
    ``dst_cluster`` and ``remote_bar`` are ``shared::cluster`` addresses from
    ``mapa_shared``."""
    return asm_intrinsic(
        "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes"
        " [$0], [$1], $2, [$3];",
        (dst_cluster, src_smem, nbytes, remote_bar), (U32, U32, U32, U32),
    )
