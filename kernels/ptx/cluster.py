"""Thread-block clusters: cluster special registers and the cluster barrier.

The register reads take no operands and return uint32 (pure, except the
volatile ``%smid``); the barriers take none and return nothing. ``barrier.cluster``
is used in its non-``.aligned`` form, valid in divergent code.
"""

from numba.cuda.extending import intrinsic

from ._asm import U32, Effect, asm_intrinsic, make_asm_intrinsic


def _special_register(register, effect=Effect.PURE):
    """Intrinsic ``f() -> uint32`` emitting ``mov.u32 value, <register>;``,
    named after the register (``%cluster_ctaid.x`` -> ``cluster_ctaid_x``)."""
    name = register.lstrip("%").replace(".", "_")
    return make_asm_intrinsic(name, f"mov.u32 $0, {register};", result=U32, effect=effect)


cluster_ctarank = _special_register("%cluster_ctarank")
cluster_nctarank = _special_register("%cluster_nctarank")
cluster_ctaid_x = _special_register("%cluster_ctaid.x")
cluster_nctaid_x = _special_register("%cluster_nctaid.x")
clusterid_x = _special_register("%clusterid.x")
nclusterid_x = _special_register("%nclusterid.x")
# The SM can change under the thread (preemption), so never merge two reads.
smid = _special_register("%smid", Effect.VOLATILE)


@intrinsic
def cluster_arrive(typingctx):
    """``barrier.cluster.arrive;`` (release semantics: prior writes become
    visible to the cluster's threads after their wait)."""
    return asm_intrinsic("barrier.cluster.arrive;", (), ())


@intrinsic
def cluster_arrive_relaxed(typingctx):
    """``barrier.cluster.arrive.relaxed;``: arrive without ordering memory."""
    return asm_intrinsic("barrier.cluster.arrive.relaxed;", (), ())


@intrinsic
def cluster_wait(typingctx):
    """``barrier.cluster.wait;`` (acquire semantics)."""
    return asm_intrinsic("barrier.cluster.wait;", (), ())


@intrinsic
def cluster_sync(typingctx):
    """``barrier.cluster.arrive; barrier.cluster.wait;``: a full cluster barrier."""
    return asm_intrinsic("barrier.cluster.arrive;\n\tbarrier.cluster.wait;", (), ())
