"""mbarrier: the shared-memory barriers that TMA, bulk copies and cp.async
complete on.

Every ``bar`` is the uint32 shared-window address of an 8-byte aligned uint64
in shared memory (``smem_u32(bars[i:])``); ``phase`` is the parity (0 or 1) of
the phase to wait for; ``tx_bytes`` is a byte count the barrier's current phase
additionally waits for. All emit ``side_effect`` asm with a ``~{memory}`` clobber.
"""

from numba.cuda.extending import intrinsic

from ._asm import U32, asm_intrinsic

# The spin loop's label lives in its own { } scope, so several inlined copies
# of the wait assemble side by side.
_WAIT_PARITY = """{
 .reg .pred done;
 wait_parity_retry:
 mbarrier.try_wait.parity.shared::cta.b64 done, [$0], $1;
 @!done bra wait_parity_retry;
}"""

_TRY_WAIT_PARITY = (
    "{ .reg .pred done; mbarrier.try_wait.parity.shared::cta.b64 done, [$1], $2;"
    " selp.u32 $0, 1, 0, done; }"
)

_TRY_WAIT_PARITY_HINT = (
    "{ .reg .pred done; mbarrier.try_wait.parity.shared::cta.b64 done, [$1], $2, $3;"
    " selp.u32 $0, 1, 0, done; }"
)

_TEST_WAIT_PARITY = (
    "{ .reg .pred done; mbarrier.test_wait.parity.shared::cta.b64 done, [$1], $2;"
    " selp.u32 $0, 1, 0, done; }"
)

_WAIT_PARITY_ACQUIRE_CLUSTER = """{
 .reg .pred done;
 wait_parity_cluster_retry:
 mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [$0], $1;
 @!done bra wait_parity_cluster_retry;
}"""

_ARRIVE_REMOTE = (
    "{ .reg .b32 remote_bar; mapa.shared::cluster.u32 remote_bar, $0, $1;"
    " mbarrier.arrive.shared::cluster.b64 _, [remote_bar]; }"
)

_ARRIVE_CLUSTER = (
    "{ .reg .b32 remote_bar; mapa.shared::cluster.u32 remote_bar, $0, $1;"
    " mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote_bar]; }"
)


@intrinsic
def mbarrier_init(typingctx, bar, count):
    """``mbarrier.init.shared::cta.b64 [bar], count;``: ``count`` arrivals
    complete a phase."""
    return asm_intrinsic(
        "mbarrier.init.shared::cta.b64 [$0], $1;", (bar, count), (U32, U32)
    )


@intrinsic
def mbarrier_arrive(typingctx, bar):
    """``mbarrier.arrive.shared::cta.b64 _, [bar];`` (release, CTA scope)."""
    return asm_intrinsic("mbarrier.arrive.shared::cta.b64 _, [$0];", (bar,), (U32,))


@intrinsic
def mbarrier_arrive_expect_tx(typingctx, bar, tx_bytes):
    """``mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], tx_bytes;``:
    arrive and make the phase also wait for ``tx_bytes`` bytes."""
    return asm_intrinsic(
        "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;",
        (bar, tx_bytes), (U32, U32),
    )


@intrinsic
def mbarrier_expect_tx(typingctx, bar, tx_bytes):
    """``mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [bar], tx_bytes;``:
    make the phase also wait for ``tx_bytes`` bytes, without arriving."""
    return asm_intrinsic(
        "mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [$0], $1;",
        (bar, tx_bytes), (U32, U32),
    )


@intrinsic
def mbarrier_wait_parity(typingctx, bar, phase):
    """Spin on ``mbarrier.try_wait.parity.shared::cta.b64 p, [bar], phase;``
    until the phase of parity ``phase`` has completed (acquire, CTA scope)."""
    return asm_intrinsic(_WAIT_PARITY, (bar, phase), (U32, U32))


@intrinsic
def mbarrier_try_wait_parity(typingctx, bar, phase):
    """One ``mbarrier.try_wait.parity.shared::cta.b64 p, [bar], phase;`` then
    ``selp.u32``: returns uint32 1 when the phase has completed, else 0."""
    return asm_intrinsic(_TRY_WAIT_PARITY, (bar, phase), (U32, U32), result=U32)


@intrinsic
def mbarrier_try_wait_parity_hint(typingctx, bar, phase, suspend_time_hint_ns):
    """One ``mbarrier.try_wait.parity.shared::cta.b64 p, [bar], phase, hint;``
    then ``selp.u32``: as :func:`mbarrier_try_wait_parity`, but the thread may
    stay suspended up to ``suspend_time_hint_ns`` nanoseconds (a hint; CUTLASS's
    ``ClusterBarrier::wait`` passes 0x989680) instead of the system-dependent
    limit. Returns uint32 1 when the phase has completed, else 0."""
    return asm_intrinsic(_TRY_WAIT_PARITY_HINT, (bar, phase, suspend_time_hint_ns), (U32, U32, U32), result=U32)


@intrinsic
def mbarrier_test_wait_parity(typingctx, bar, phase):
    """One ``mbarrier.test_wait.parity.shared::cta.b64 p, [bar], phase;`` (never
    suspends: a spin loop polls) then ``selp.u32``: uint32 1 when the phase has
    completed, else 0."""
    return asm_intrinsic(_TEST_WAIT_PARITY, (bar, phase), (U32, U32), result=U32)


@intrinsic
def mbarrier_arrive_cluster(typingctx, bar, cta_rank):
    """Arrive on the barrier at ``bar``'s offset in CTA ``cta_rank`` of the
    cluster: ``mapa.shared::cluster.u32 remote, bar, cta_rank;`` then
    ``mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];``."""
    return asm_intrinsic(_ARRIVE_CLUSTER, (bar, cta_rank), (U32, U32))


@intrinsic
def mbarrier_arrive_remote(typingctx, bar, cta_rank):
    """Arrive on the barrier at ``bar``'s offset in CTA ``cta_rank`` with the
    default semantics (release, CTA scope), as CUTLASS's ``ClusterBarrier::arrive
    (cta_id)`` does: ``mapa.shared::cluster.u32 remote, bar, cta_rank;`` then
    ``mbarrier.arrive.shared::cluster.b64 _, [remote];``.

    On sm_90a this is the bare ``SYNCS.ARRIVE`` with no fence, where the
    ``.release.cluster`` form (:func:`mbarrier_arrive_cluster`) adds
    ``MEMBAR.ALL.GPU``. Use it to release a buffer whose reads have completed
    (their values were used before the arrive), not to publish data.
    """
    return asm_intrinsic(_ARRIVE_REMOTE, (bar, cta_rank), (U32, U32))


@intrinsic
def mbarrier_wait_parity_acquire_cluster(typingctx, bar, phase):
    """Spin on ``mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p,
    [bar], phase;``: the wait that pairs with another CTA's
    ``.release.cluster`` arrive, so that CTA's writes (or what it observed)
    are visible here. On sm_90a it adds ``CCTL.IVALL`` after the wait."""
    return asm_intrinsic(_WAIT_PARITY_ACQUIRE_CLUSTER, (bar, phase), (U32, U32))
