"""16-byte vector loads and stores (``.v4.u32``), the widest plain access, and the 4-byte
shared-memory ones (``ld_shared_u32`` / ``st_shared_u32``: by address, with none of an
array index's 64-bit arithmetic or negative-index wraparound).

Operands: global addresses are uint64 generic addresses (``addr_of``), shared
ones uint32 shared-window addresses (``smem_u32``); all 16-byte aligned. Loads
return ``UniTuple(uint32, 4)``; stores take the four words ``a, b, c, d``.
"""

from numba.cuda.extending import intrinsic

from ._asm import U32, U64, V4_U32, asm_intrinsic


@intrinsic
def ld_global_v4_u32(typingctx, addr):
    """``ld.global.v4.u32 {a, b, c, d}, [addr];``"""
    return asm_intrinsic(
        "ld.global.v4.u32 {$0, $1, $2, $3}, [$4];", (addr,), (U64,), result=V4_U32
    )


@intrinsic
def ld_global_nc_v4_u32(typingctx, addr):
    """``ld.global.nc.v4.u32 {a, b, c, d}, [addr];`` (read-only, non-coherent
    path: the data must not be written during the kernel)."""
    return asm_intrinsic(
        "ld.global.nc.v4.u32 {$0, $1, $2, $3}, [$4];", (addr,), (U64,), result=V4_U32
    )


@intrinsic
def st_global_v4_u32(typingctx, addr, a, b, c, d):
    """``st.global.v4.u32 [addr], {a, b, c, d};``"""
    return asm_intrinsic(
        "st.global.v4.u32 [$0], {$1, $2, $3, $4};",
        (addr, a, b, c, d), (U64, U32, U32, U32, U32),
    )


@intrinsic
def ld_shared_v4_u32(typingctx, addr):
    """``ld.shared::cta.v4.u32 {a, b, c, d}, [addr];``"""
    return asm_intrinsic(
        "ld.shared::cta.v4.u32 {$0, $1, $2, $3}, [$4];", (addr,), (U32,), result=V4_U32
    )


@intrinsic
def st_shared_v4_u32(typingctx, addr, a, b, c, d):
    """``st.shared::cta.v4.u32 [addr], {a, b, c, d};``"""
    return asm_intrinsic(
        "st.shared::cta.v4.u32 [$0], {$1, $2, $3, $4};",
        (addr, a, b, c, d), (U32, U32, U32, U32, U32),
    )


@intrinsic
def ld_shared_u32(typingctx, addr):
    """``ld.shared::cta.u32 a, [addr];``"""
    return asm_intrinsic("ld.shared::cta.u32 $0, [$1];", (addr,), (U32,), result=U32)


@intrinsic
def st_shared_u32(typingctx, addr, a):
    """``st.shared::cta.u32 [addr], a;``"""
    return asm_intrinsic("st.shared::cta.u32 [$0], $1;", (addr, a), (U32, U32))
