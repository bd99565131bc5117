"""cp.async (Ampere-style LDGSTS): 16-byte asynchronous global -> shared copies
issued per thread, completed by commit groups or through an mbarrier.

Operands: ``dst`` / ``bar`` are uint32 shared-window addresses (``smem_u32``),
``src`` a uint64 generic global address (``addr_of``); both 16-byte aligned.
"""

import functools

from numba.cuda.extending import intrinsic

from ._asm import U32, U64, asm_intrinsic, make_asm_intrinsic

#: Bytes one cp.async moves here (the only size ``.cg`` accepts).
CP_ASYNC_BYTES = 16


@intrinsic
def cp_async_ca16(typingctx, dst, src):
    """``cp.async.ca.shared::cta.global [dst], [src], 16;`` (cached in L1 and L2)."""
    return asm_intrinsic(
        f"cp.async.ca.shared::cta.global [$0], [$1], {CP_ASYNC_BYTES};",
        (dst, src), (U32, U64),
    )


@intrinsic
def cp_async_cg16(typingctx, dst, src):
    """``cp.async.cg.shared::cta.global [dst], [src], 16;`` (L2 only, bypasses L1)."""
    return asm_intrinsic(
        f"cp.async.cg.shared::cta.global [$0], [$1], {CP_ASYNC_BYTES};",
        (dst, src), (U32, U64),
    )


@intrinsic
def cp_async_commit(typingctx):
    """``cp.async.commit_group;``: close this thread's group of prior cp.async."""
    return asm_intrinsic("cp.async.commit_group;", (), ())


@intrinsic
def cp_async_wait_all(typingctx):
    """``cp.async.wait_all;``: wait for all of this thread's cp.async."""
    return asm_intrinsic("cp.async.wait_all;", (), ())


@functools.cache
def cp_async_wait_group(pending_groups):
    """Intrinsic ``f()`` emitting ``cp.async.wait_group <pending_groups>;``: wait
    until at most ``pending_groups`` of this thread's committed groups are in
    flight. PTX wants an immediate, so there is one (cached) intrinsic per
    count; make it at module level: ``WAIT_STAGES = cp_async_wait_group(STAGES - 1)``.
    """
    pending_groups = int(pending_groups)
    if pending_groups < 0:
        raise ValueError(f"pending_groups must be >= 0, got {pending_groups}")
    return make_asm_intrinsic(
        f"cp_async_wait_group_{pending_groups}", f"cp.async.wait_group {pending_groups};"
    )


@intrinsic
def cp_async_mbarrier_arrive_noinc(typingctx, bar):
    """``cp.async.mbarrier.arrive.noinc.shared::cta.b64 [bar];``: mbarrier ``bar``
    receives this thread's arrival once its prior cp.async have completed
    (``noinc``: the arrival counts against the count given to mbarrier_init)."""
    return asm_intrinsic(
        "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [$0];", (bar,), (U32,)
    )
