"""TMA: tensor-map copies (``cp.async.bulk.tensor``) and the bulk-group
completion they and :mod:`.bulk` stores share.

Operands: ``dst`` / ``src`` and ``bar`` are uint32 shared-window addresses
(the box lands at, or is read from, ``dst`` / ``src``; ``bar`` is the mbarrier
that counts the loaded bytes); ``tmap`` is the uint64 global address of a
128-byte, 64-byte aligned ``CUtensorMap``; ``c0`` (innermost) .. ``c4`` are
int32 element coordinates of the box; ``cta_mask`` is the uint16 set of cluster
CTA ranks a multicast box lands in (same smem offsets in each); ``policy`` is a
uint64 L2 cache policy from :mod:`.cache_policy`.

The rank variants of ``tma_load_<r>d`` and ``tma_store_<r>d`` each come from
one factory.

A tile load whose box starts off a 16-byte boundary in global memory (innermost
coordinate x element size not a multiple of 16) faults the kernel with
CUDA_ERROR_ILLEGAL_INSTRUCTION (tests/gpu/test_ptx_data_gpu.py); keep the
innermost coordinate 16-byte aligned, as tile-aligned kernels do.
"""

from numba.cuda.extending import intrinsic

from ._asm import I32, U16, U32, U64, asm_intrinsic, make_asm_intrinsic

_LOAD_OPERANDS = (("dst", U32), ("tmap", U64), ("bar", U32))
_STORE_OPERANDS = (("tmap", U64), ("src", U32))


def _operand_refs(first, last):
    """``$first, .., $last-1``: inline-asm references of a run of operands."""
    return ", ".join(f"${index}" for index in range(first, last))


def _tensor_load(rank, *, multicast=False, cache_hint=False):
    """``tma_load_<rank>d[_multicast][_cache_hint]``: a global -> shared::cluster
    box load completing on ``bar``, rank ``rank``."""
    coordinates = [(f"c{axis}", I32) for axis in range(rank)]
    extras = [("cta_mask", U16)] * multicast + [("policy", U64)] * cache_hint
    operands = [*_LOAD_OPERANDS, *coordinates, *extras]
    first_coordinate = len(_LOAD_OPERANDS)
    first_extra = first_coordinate + rank
    qualifiers = ".multicast::cluster" * multicast + ".L2::cache_hint" * cache_hint
    extra_refs = f", {_operand_refs(first_extra, len(operands))}" if extras else ""
    ptx = (
        f"cp.async.bulk.tensor.{rank}d.shared::cluster.global"
        f".mbarrier::complete_tx::bytes{qualifiers}"
        f" [$0], [$1, {{{_operand_refs(first_coordinate, first_extra)}}}], [$2]{extra_refs};"
    )
    name = f"tma_load_{rank}d" + "_multicast" * multicast + "_cache_hint" * cache_hint
    return make_asm_intrinsic(name, ptx, operands)


def _tensor_store(rank):
    """``tma_store_<rank>d``: a shared::cta -> global box store (bulk_group
    completion: :func:`bulk_commit_group`, then a bulk wait)."""
    operands = [*_STORE_OPERANDS, *[(f"c{axis}", I32) for axis in range(rank)]]
    first_coordinate = len(_STORE_OPERANDS)
    ptx = (
        f"cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group"
        f" [$0, {{{_operand_refs(first_coordinate, len(operands))}}}], [$1];"
    )
    return make_asm_intrinsic(f"tma_store_{rank}d", ptx, operands)


tma_load_1d = _tensor_load(1)
tma_load_2d = _tensor_load(2)
tma_load_3d = _tensor_load(3)
tma_load_4d = _tensor_load(4)
tma_load_5d = _tensor_load(5)
tma_load_1d_multicast = _tensor_load(1, multicast=True)
tma_load_2d_multicast = _tensor_load(2, multicast=True)
tma_load_3d_multicast = _tensor_load(3, multicast=True)
tma_load_4d_multicast = _tensor_load(4, multicast=True)
tma_load_5d_multicast = _tensor_load(5, multicast=True)
tma_load_2d_cache_hint = _tensor_load(2, cache_hint=True)
tma_load_5d_cache_hint = _tensor_load(5, cache_hint=True)
tma_store_1d = _tensor_store(1)
tma_store_2d = _tensor_store(2)


@intrinsic
def tma_prefetch_descriptor(typingctx, tmap):
    """``prefetch.tensormap [tmap];``: pull the tensor map into the TMA unit's cache."""
    return asm_intrinsic("prefetch.tensormap [$0];", (tmap,), (U64,))


@intrinsic
def bulk_commit_group(typingctx):
    """``cp.async.bulk.commit_group;``: close this thread's group of bulk_group
    copies (TMA and bulk stores)."""
    return asm_intrinsic("cp.async.bulk.commit_group;", (), ())


@intrinsic
def bulk_wait_group_read0(typingctx):
    """``cp.async.bulk.wait_group.read 0;``: wait until every committed bulk
    group has finished reading its shared-memory source (buffer reusable)."""
    return asm_intrinsic("cp.async.bulk.wait_group.read 0;", (), ())


@intrinsic
def bulk_wait_group0(typingctx):
    """``cp.async.bulk.wait_group 0;``: wait until every committed bulk group
    has completed (writes performed)."""
    return asm_intrinsic("cp.async.bulk.wait_group 0;", (), ())
