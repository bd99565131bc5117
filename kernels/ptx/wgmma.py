"""Warpgroup tensor-core MMA (``wgmma.mma_async``, sm_90a only) with both operands in
shared memory: ``D = A * B`` over the 4 warps of an aligned warpgroup (warps 4i .. 4i+3
of the CTA), fp32 accumulation. SASS on sm_90a (ptxas 13.0): one ``HGMMA`` (bf16) or
``QGMMA`` (e4m3) per k-step, between ``WARPGROUP.ARRIVE`` and ``WARPGROUP.DEPBAR`` (checked
in tests/cpu/kernels/test_ptx_mma_sass.py). Unlike ``mma.sync`` (tma_kernels.ptx.mma), e4m3
operands reach the tensor cores as they are, with no unpack to fp16; the tensor cores then
keep fewer bits of each fp8 sum than fp32 (tests/gpu/test_wgmma_gpu.py states the bound).

Operands (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"):
A is M x K with M = 64, B is K x N (N a multiple of 8 up to 256), both *K-major*
(each row of A, each column of B, contiguous over K) in the layout TMA's
``SWIZZLE_128B`` / ``SWIZZLE_64B`` writes: rows of ``row_bytes`` (128 or 64) bytes, 8-row
atoms of ``8 * row_bytes`` bytes, 16-byte pieces XOR-swizzled within each atom, every atom
1024-byte aligned. For K wider than one row (e.g. 256 bytes of a bf16 head of 128), the
caller stores K in column *chunks* of ``row_bytes`` (tma_kernels.paged_kv.geometry's tile
layout) and moves the descriptor to the next chunk. e4m3 needs K-major for A and B alike;
only 16-bit types may be transposed.

Each operand is named by a 64-bit *matrix descriptor* (:func:`k_major_descriptor`; bit
fields as CUTLASS ``GmmaDescriptor``, include/cute/arch/mma_sm90_desc.hpp, and
``make_gmma_desc<Major::K>``, include/cute/atom/mma_traits_sm90_gmma.hpp, NVIDIA/cutlass
@7107b05): start address / 16 in bits 0-13, leading byte offset / 16 in 16-29 (unused by
the swizzled K-major layouts, set to 1 as CUTLASS does), stride byte offset / 16 (one
8-row atom) in 32-45, base offset 0 (atoms 1024-aligned) in 49-51, layout type in 62-63
(1: 128-byte swizzle, 2: 64-byte). One k-step of an mma reads 32 bytes of each row (16
bf16 or 32 e4m3); the next k-step is the descriptor plus 32 / 16, as CUTLASS's descriptor
iterator adds it, within a 128-byte row (the swizzle is applied to the address bits).

Results (fp32): warp ``w`` of the warpgroup holds rows ``16 w + g`` and ``16 w + g + 8``
(``g = lane >> 2``) of D; register ``4 j + r`` is column ``8 j + 2 (lane & 3) + (r & 1)``,
row ``+ 8`` for r = 2, 3: per 8-column block, the C fragment of ``mma.sync.m16n8``.
"""
from numba import cuda, uint32, uint64
from numba.cuda.extending import intrinsic

from ._asm import U32, U64, Effect
from ._float_asm import F32, float_asm_intrinsic

M = 64                                  # rows of A (and of D) per wgmma
K_STEP_BYTES = 32                       # bytes of each row one wgmma reads (k16 bf16, k32 e4m3)
ATOM_ROWS = 8                           # rows of one swizzle atom
_K = {"bf16": 16, "e4m3": 32}           # elements per k-step
_TRANSPOSE = {"bf16": ", 0, 0", "e4m3": ""}   # 16-bit types take imm-trans-a, -b (0: K-major)
N_VALUES = (8, 16, 32, 64)              # N this module builds (any multiple of 8 to 256 is legal)


@cuda.jit(device=True, inline=True)
def k_major_descriptor(address, row_bytes):
    """The matrix descriptor of a K-major swizzled operand at shared-window ``address``
    (uint32) with rows of ``row_bytes`` (128 or 64) bytes."""
    layout = uint64(1) if row_bytes == 128 else uint64(2)
    return (uint64((address & uint32(0x3FFFF)) >> uint32(4)) | (uint64(1) << uint64(16))
            | (uint64(ATOM_ROWS * row_bytes >> 4) << uint64(32)) | (layout << uint64(62)))


def make_wgmma_ss(dtype: str, n: int, steps, a_blocks=(0,)):
    """An intrinsic ``wgmma(desc_a, desc_b) -> len(a_blocks) * n // 2 float32`` running, for
    each entry of ``a_blocks`` (a byte offset of A: one 64-row block of a taller A), one whole
    ``D = A B`` over ``len(steps)`` k-steps: ``wgmma.fence``, then for each block and step
    ``(a_bytes, b_bytes)`` one ``wgmma.mma_async...m64n{n}k*`` on the descriptors advanced by
    the block's offset plus those byte offsets (a block's first with scale-d false: its D starts
    at zero), then one ``commit_group`` and ``wait_group 0`` for them all, so the results are
    ready when it returns and the operands' shared memory may be refilled. Block b's D is
    results ``b * n // 2 ..``. Offsets must be multiples of 16 bytes."""
    if dtype not in _K:
        raise ValueError(f"dtype={dtype!r}: wgmma here takes {sorted(_K)}")
    if n not in N_VALUES:
        raise ValueError(f"n={n}: wgmma here takes N in {N_VALUES}")
    if not steps or any(a % 16 or b % 16 or a < 0 or b < 0 for a, b in steps):
        raise ValueError(f"steps={steps!r}: at least one (a_bytes, b_bytes), each a multiple of 16")
    if not a_blocks or any(a % 16 or a < 0 for a in a_blocks):
        raise ValueError(f"a_blocks={a_blocks!r}: at least one A byte offset, each a multiple of 16")
    per_block = n // 2
    results = per_block * len(a_blocks)
    a, b = f"${results}", f"${results + 1}"
    shape = f"m{M}n{n}k{_K[dtype]}.f32.{dtype}.{dtype}"
    lines = ["{", ".reg .pred p<2>;", ".reg .b32 t;", ".reg .b64 da, db;",
             "mov.b32 t, 0;", "setp.ne.b32 p0, t, 0;", "setp.eq.b32 p1, t, 0;",
             "wgmma.fence.sync.aligned;"]
    for block, block_bytes in enumerate(a_blocks):
        d = ", ".join(f"${block * per_block + i}" for i in range(per_block))
        for i, (a_bytes, b_bytes) in enumerate(steps):
            lines += [f"add.s64 da, {a}, {(block_bytes + a_bytes) >> 4};",
                      f"add.s64 db, {b}, {b_bytes >> 4};",
                      (f"wgmma.mma_async.sync.aligned.{shape} {{{d}}}, da, db, p{min(i, 1)}, 1, 1"
                       f"{_TRANSPOSE[dtype]};")]
    lines += ["wgmma.commit_group.sync.aligned;", "wgmma.wait_group.sync.aligned 0;", "}"]
    ptx = "\n".join(lines)

    def typer(typingctx, desc_a, desc_b):
        return float_asm_intrinsic(ptx, (desc_a, desc_b), (U64, U64), (F32,) * results, Effect.MEMORY)

    blocks = f"_a{len(a_blocks)}" if len(a_blocks) > 1 else ""
    typer.__name__ = typer.__qualname__ = f"wgmma_ss_{dtype}_n{n}_k{len(steps)}{blocks}"
    typer.__doc__ = f"``{ptx}``"
    wgmma = intrinsic(typer)
    wgmma.ptx = ptx
    return wgmma


def make_wgmma_rs(n: int, steps, a_blocks=1, accumulate=False):
    """An e4m3 intrinsic ``wgmma(desc_b, a_0, ..., a_{4 s - 1}) -> a_blocks * n // 2 float32``
    with A from *registers*: for each of ``a_blocks`` 64-row blocks of A, ``len(steps)``
    k-steps of ``wgmma.mma_async...m64n{n}k32.f32.e4m3.e4m3`` (``s = a_blocks * len(steps)``
    A fragments of 4 registers, block-major), B's descriptor advanced by each step's byte
    offset; the block's first step with scale-d false; one ``commit_group`` and ``wait_group
    0`` for them all. A fragment (CUTLASS ``GMMA::ALayout_64x32``): warp w's lane with g =
    lane >> 2, c = lane & 3 holds in byte j of register r row ``16 w + g + 8 (r & 1)``, k
    ``4 c + j + 16 (r >> 1)`` of the 64 x 32 block (the A fragment of ``mma.m16n8k32``, per
    warp). The caller writes the A registers with ordinary instructions: ``wgmma.fence``
    first orders them before the wgmmas, as the PTX ISA requires.

    ``accumulate``: ``wgmma(desc_b, a_0, ..., c_0, ..., c_{results - 1})``, D = C + A B in place:
    the accumulators are passed in after the A registers (tied to the results' registers,
    float_asm_intrinsic's ``tied``) and every step has scale-d true, so no fresh result
    registers live beside them."""
    if n not in N_VALUES:
        raise ValueError(f"n={n}: wgmma here takes N in {N_VALUES}")
    if not steps or any(b % 16 or b < 0 for b in steps):
        raise ValueError(f"steps={steps!r}: at least one B byte offset, each a multiple of 16")
    per_block = n // 2
    results = per_block * a_blocks
    fragments = a_blocks * len(steps)
    b = f"${results}"
    lines = ["{", ".reg .pred p<2>;", ".reg .b32 t;", ".reg .b64 db;",
             "mov.b32 t, 0;", "setp.ne.b32 p0, t, 0;", "setp.eq.b32 p1, t, 0;",
             "wgmma.fence.sync.aligned;"]
    for block in range(a_blocks):
        d = ", ".join(f"${block * per_block + i}" for i in range(per_block))
        for i, b_bytes in enumerate(steps):
            first = results + 1 + 4 * (block * len(steps) + i)
            a = ", ".join(f"${first + r}" for r in range(4))
            lines += [f"add.s64 db, {b}, {b_bytes >> 4};",
                      f"wgmma.mma_async.sync.aligned.m{M}n{n}k32.f32.e4m3.e4m3 {{{d}}}, {{{a}}}, db, "
                      f"p{1 if accumulate else min(i, 1)}, 1, 1;"]
    lines += ["wgmma.commit_group.sync.aligned;", "wgmma.wait_group.sync.aligned 0;", "}"]
    ptx = "\n".join(lines)
    names = ", ".join([f"a{i}" for i in range(4 * fragments)] + [f"c{i}" for i in range(results if accumulate else 0)])
    c_types = f" + (F32,) * {results}" if accumulate else ""
    namespace = {"float_asm_intrinsic": float_asm_intrinsic, "ptx": ptx, "U64": U64, "U32": U32,
                 "F32": F32, "Effect": Effect}
    exec(f"def typer(typingctx, desc_b, {names}):\n"                   # noqa: S102 (the A count)
         f"    return float_asm_intrinsic(ptx, (desc_b, {names}), (U64,) + (U32,) * {4 * fragments}{c_types}, "
         f"(F32,) * {results}, Effect.MEMORY, tied={results if accumulate else 0})", namespace)
    typer = namespace["typer"]
    typer.__name__ = typer.__qualname__ = (f"wgmma_rs_e4m3_n{n}_k{len(steps)}_a{a_blocks}"
                                           + ("_acc" if accumulate else ""))
    typer.__doc__ = f"``{ptx}``"
    wgmma = intrinsic(typer)
    wgmma.ptx = ptx
    return wgmma
