"""L2 cache policies for ``.L2::cache_hint`` operands (e.g.
``tma_load_2d_cache_hint``): no operands, uint64 opaque policy results."""

from numba.cuda.extending import intrinsic

from ._asm import U64, Effect, asm_intrinsic

#: Share of the accessed lines the policy applies to (all of them).
WHOLE_FRACTION = "1.0"


@intrinsic
def l2_policy_evict_first(typingctx):
    """``createpolicy.fractional.L2::evict_first.b64 policy, 1.0;``: lines are
    the first evicted (streaming data)."""
    return asm_intrinsic(
        f"createpolicy.fractional.L2::evict_first.b64 $0, {WHOLE_FRACTION};",
        (), (), result=U64, effect=Effect.PURE,
    )


@intrinsic
def l2_policy_evict_last(typingctx):
    """``createpolicy.fractional.L2::evict_last.b64 policy, 1.0;``: lines are
    the last evicted (data reused soon)."""
    return asm_intrinsic(
        f"createpolicy.fractional.L2::evict_last.b64 $0, {WHOLE_FRACTION};",
        (), (), result=U64, effect=Effect.PURE,
    )
