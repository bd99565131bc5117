"""Distributed shared memory (DSM): another cluster CTA's shared memory.

Operands: ``addr`` is a uint32 ``shared::cluster`` address (from
:func:`mapa_shared`; a CTA's own shared-window addresses are valid ones too);
values are uint32, vector forms 16-byte aligned and ``UniTuple(uint32, 4)``.
"""

from numba.cuda.extending import intrinsic

from ._asm import U32, V4_U32, Effect, asm_intrinsic


@intrinsic
def mapa_shared(typingctx, addr, cta_rank):
    """``mapa.shared::cluster.u32 remote, addr, cta_rank;``: the
    ``shared::cluster`` address of ``addr``'s offset in CTA ``cta_rank`` (pure)."""
    return asm_intrinsic(
        "mapa.shared::cluster.u32 $0, $1, $2;", (addr, cta_rank), (U32, U32),
        result=U32, effect=Effect.PURE,
    )


@intrinsic
def ld_shared_cluster_u32(typingctx, addr):
    """``ld.shared::cluster.u32 value, [addr];``"""
    return asm_intrinsic("ld.shared::cluster.u32 $0, [$1];", (addr,), (U32,), result=U32)


@intrinsic
def ld_shared_cluster_v4_u32(typingctx, addr):
    """``ld.shared::cluster.v4.u32 {a, b, c, d}, [addr];``"""
    return asm_intrinsic(
        "ld.shared::cluster.v4.u32 {$0, $1, $2, $3}, [$4];", (addr,), (U32,),
        result=V4_U32,
    )


@intrinsic
def st_shared_cluster_u32(typingctx, addr, value):
    """``st.shared::cluster.u32 [addr], value;``"""
    return asm_intrinsic("st.shared::cluster.u32 [$0], $1;", (addr, value), (U32, U32))


@intrinsic
def st_shared_cluster_v4_u32(typingctx, addr, a, b, c, d):
    """``st.shared::cluster.v4.u32 [addr], {a, b, c, d};``"""
    return asm_intrinsic(
        "st.shared::cluster.v4.u32 [$0], {$1, $2, $3, $4};",
        (addr, a, b, c, d), (U32, U32, U32, U32, U32),
    )
