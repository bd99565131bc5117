"""Paged attention kernels compile for sm_90a with the SASS their names promise, no spills.

- every variant: HMMA (bf16: ``HMMA.16816.F32.BF16``; e4m3: fp8 unpacked to fp16,
  ``F2FP.F16.E4M3.UNPACK_B`` + ``HMMA.16816.F32``), ``LDSM.16.M88.4`` (Q, K) and
  ``LDSM.16.MT88.4`` (V), ``MUFU.EX2`` (softmax), mbarrier waits, ``PREEXIT`` (the
  trigger of the split combine's programmatic dependent launch); the decode consumer
  (S^T = K Q^T) also ``MOVM.16.MT88`` (P^T), and the consumers whose warps share each tile
  (consumer_kq_wgmma.py and up) the named barriers between its warps (every other variant only
  ``__syncthreads``);
- TMA path: ``UTMALDG.4D`` and no ``LDGSTS``; cp.async path: ``LDGSTS.E.BYPASS.128`` and no
  ``UTMALDG``;
- no local memory: the S and O register arrays stay in registers (stack frame 0, no spills;
  e4m3 at head_dim 256, the largest, fits in 254 registers since its mma chains two fp16
  mmas through the accumulator instead of ptxas's FADDs of an e4m3 ``mma.sync``).
- the decode consumer's K ldmatrix of token blocks after the first carry immediate offsets
  (consumer_kq.py steps them from block 0's address by a constant).
The study's compile step (``tma-study compile paged_kv``) checks every variant of the sweep
the same way; this test compiles one of each (dtype, head_dim, path) and the decode shape.
Plus the split combine (its loads unroll at a compile-time split count) and the host-side
rules of a variant and of a page size.
"""
import functools
import re

import pytest
from tma_kernels.paged_kv.combine import COMBINE_SIGNATURE, make_combine
from tma_kernels.paged_kv.geometry import STATIC_SHARED_BYTES, Variant, VariantError
from tma_kernels.paged_kv.kernel import SIGNATURE, make_attention_kernel
from tma_kernels.paged_kv.runner import check_page_size

from tma_study.harness.kernel_builds import kernel_cache

MMA_SASS = {"bf16": ("HMMA.16816.F32.BF16",), "e4m3": ("F2FP.F16.E4M3.UNPACK_B", "HMMA.16816.F32")}
PATH_SASS = {"tma": ("UTMALDG.4D",), "cp_async": ("LDGSTS.E.BYPASS.128",)}
PATH_ABSENT = {"tma": "LDGSTS", "cp_async": "UTMALDG"}
#: ... and ``PREEXIT`` (griddepcontrol.launch_dependents: the split combine may be scheduled)
COMMON_SASS = ("LDSM.16.M88.4", "LDSM.16.MT88.4", "MUFU.EX2", "SYNCS.PHASECHK", "PREEXIT")

VARIANTS = [
    Variant(dtype=dtype, head_dim=d, load_path=path, consumer_warps=w,
            producer_warps=1 if path == "tma" else 4, block_n=64)
    for dtype, d, w in (("bf16", 128, 4), ("bf16", 128, 1), ("bf16", 64, 4), ("bf16", 256, 2),
                        ("e4m3", 128, 4), ("e4m3", 64, 4), ("e4m3", 256, 1))
    for path in ("tma", "cp_async")
] + [
    # decode's S^T = K Q^T consumer (consumer_kq.py): P^T through movmatrix
    Variant(dtype=dtype, head_dim=d, load_path=path, consumer_warps=w, block_n=n,
            producer_warps=1 if path == "tma" else 4, score_layout="kq", rows_per_warp=8)
    for dtype, d, w, n in (("bf16", 128, 1, 64), ("e4m3", 128, 1, 64), ("bf16", 256, 4, 32),
                           ("e4m3", 256, 1, 32), ("e4m3", 64, 1, 128))
    for path in ("tma", "cp_async")
] + [
    # decode's warps sharing each tile, S^T as one warpgroup wgmma (consumer_kq_wgmma.py): head dim
    # 64 e4m3 takes the 64-byte swizzle
    Variant(dtype=dtype, head_dim=d, load_path=path, consumer_warps=4, block_n=64,
            producer_warps=1 if path == "tma" else 4, score_layout="kq_wgmma", rows_per_warp=r)
    for dtype, d, r in (("bf16", 128, 8), ("e4m3", 128, 8), ("e4m3", 64, 2), ("e4m3", 256, 2))
    for path in ("tma", "cp_async")
]
KQ_SASS = ("MOVM.16.MT88",)
#: __syncthreads, plus kq_wgmma's named barriers: after Q, two per tile (maxima, P^T), one before
#: the output
SPLIT_BARRIERS = {"kq_wgmma": 4}
#: kq_wgmma: S^T on the tensor cores' own instruction (e4m3: QGMMA, bf16: HGMMA), K never
#: through ldmatrix (LDSM.16.M88.4; V still is, transposed)
WGMMA_SASS = {"bf16": "HGMMA.64", "e4m3": "QGMMA.64"}


@functools.cache
def compiled(variant):
    return kernel_cache().compile(variant.name, make_attention_kernel(variant), SIGNATURE)


#: checked by default: one build of each consumer the sweep runs on each load path (S = Q K^T at
#: head dims 128 and 256, kq at 64-, 128- and 256-wide heads, kq_wgmma with both swizzles); every
#: other variant under -m exhaustive
DEFAULT_SASS_CHECKED = {
    "paged_attention_tma_bf16_d128_n64_w4_s2_p1_causal", "paged_attention_cp_async_e4m3_d128_n64_w4_s2_p4_causal",
    "paged_attention_tma_e4m3_d256_n64_w1_s2_p1_causal",
    "paged_attention_tma_bf16_d128_n64_w1_s2_p1_causal_kq8", "paged_attention_cp_async_e4m3_d128_n64_w1_s2_p4_causal_kq8",
    "paged_attention_tma_e4m3_d64_n128_w1_s2_p1_causal_kq8", "paged_attention_cp_async_bf16_d256_n32_w4_s2_p4_causal_kq8",
    "paged_attention_tma_bf16_d128_n64_w4_s2_p1_causal_kqw8", "paged_attention_cp_async_e4m3_d128_n64_w4_s2_p4_causal_kqw8",
    "paged_attention_tma_e4m3_d64_n64_w4_s2_p1_causal_kqw2",
}
assert DEFAULT_SASS_CHECKED <= {v.name for v in VARIANTS}


def _sass_params(variants):
    return [pytest.param(v, id=v.name, marks=() if v.name in DEFAULT_SASS_CHECKED else pytest.mark.exhaustive)
            for v in variants]


@pytest.mark.parametrize("variant", _sass_params(VARIANTS))
def test_variant_sass(variant):
    kernel = compiled(variant)
    counts = kernel.opcode_counts()
    wgmma = variant.layout.uses_wgmma
    expected = MMA_SASS[variant.dtype] + PATH_SASS[variant.load_path] + COMMON_SASS
    expected += KQ_SASS if variant.score_layout != "qk" else ()
    if wgmma:
        expected = tuple(m for m in expected if m != "LDSM.16.M88.4")
        assert not kernel.has_instruction("LDSM.16.M88.4"), f"{variant.name}: K read through ldmatrix"
        assert [op for op in counts if op.startswith(WGMMA_SASS[variant.dtype])], (
            f"{variant.name}: SASS lacks {WGMMA_SASS[variant.dtype]}*; has {sorted(counts)}")
    missing = [m for m in expected if not kernel.has_instruction(m)]
    assert not missing, f"{variant.name}: SASS lacks {missing}"
    assert not kernel.has_instruction(PATH_ABSENT[variant.load_path]), (
        f"{variant.name}: SASS has {PATH_ABSENT[variant.load_path]}: the other load path leaked in")
    if variant.dtype == "bf16":
        assert not kernel.has_instruction("F2FP.F16.E4M3"), f"{variant.name}: fp8 code in a bf16 kernel"
    assert max(kernel.stack_frame_bytes, kernel.spill_store_bytes) == 0, (
        f"{variant.name}: {kernel.stack_frame_bytes} B stack frame, {kernel.spill_store_bytes} B "
        f"spilled ({kernel.registers} registers): the score/accumulator arrays left registers")
    assert counts["UTMALDG.4D" if variant.load_path == "tma" else "LDGSTS.E.BYPASS.128"] >= 1
    assert 0 < kernel.shared_bytes_static <= STATIC_SHARED_BYTES, (
        f"{variant.name}: {kernel.shared_bytes_static} B of static shared memory; the dynamic limit "
        f"(geometry.MAX_DYNAMIC_SHARED_BYTES) reserves {STATIC_SHARED_BYTES}")
    barriers = sum(n for opcode, n in counts.items() if opcode.startswith("BAR.SYNC"))
    if variant.score_layout in SPLIT_BARRIERS:
        assert barriers >= 1 + SPLIT_BARRIERS[variant.score_layout], f"{variant.name}: {barriers} BAR.SYNC"
    else:
        assert barriers == 1, f"{variant.name}: {barriers} BAR.SYNC (only __syncthreads expected)"


KQ_VARIANTS = [v for v in VARIANTS if v.score_layout == "kq"]
LDSM_ADDRESS = re.compile(r"LDSM\.16\.M88\.4 R\d+, \[R\d+(\+0x[0-9a-f]+)?\]")


@pytest.mark.parametrize("variant", _sass_params(KQ_VARIANTS))
def test_kq_token_blocks_step_by_an_immediate(variant):
    """consumer_kq addresses token block tb of a K step as block 0's address plus a constant,
    which ptxas folds into the ldmatrix (``[R+0x800]``): of each K step's block_n / 16 loads,
    all but the first carry an immediate offset and need no address arithmetic of their own."""
    k_steps = variant.head_bytes // 32
    loads = LDSM_ADDRESS.findall(compiled(variant).sass)
    stepped = sum(1 for offset in loads if offset)
    assert stepped >= k_steps * (variant.block_n // 16 - 1), (
        f"{variant.name}: {stepped} of {len(loads)} K ldmatrix carry an immediate offset")


@pytest.mark.parametrize("fields, message", [
    ({"dtype": "fp16"}, "dtype='fp16' is not one of"),
    ({"head_dim": 96}, "head_dim=96 is not one of"),
    ({"load_path": "bulk"}, "load_path='bulk'"),
    ({"dtype": "e4m3", "block_n": 16}, "e4m3 needs block_n >= 32"),
    ({"head_dim": 256, "block_n": 128, "stages": 4}, "more than the"),
    ({"min_ctas_per_sm": 33}, "min_ctas_per_sm=33 is not an integer from 1 to 32"),
    ({"min_ctas_per_sm": 0}, "min_ctas_per_sm=0 is not an integer from 1 to 32"),
    ({"score_layout": "kq_wgmma_rs_lazy_rowsplit", "dtype": "e4m3", "rows_per_warp": 4},
     "consumer_warps=4: score_layout 'kq_wgmma_rs_lazy_rowsplit' runs two warpgroups, 8 warps"),
    ({"score_layout": "kq_wgmma_rs_lazy_rowsplit", "dtype": "e4m3", "consumer_warps": 8, "rows_per_warp": 4,
      "block_n": 128}, "runs one warpgroup"),
    ({"score_layout": "kq_wgmma_rs_lazy", "rows_per_warp": 8},
     "dtype='bf16': score_layout 'kq_wgmma_rs_lazy' is e4m3 only"),
    ({"score_layout": "kq_split", "rows_per_warp": 8}, "score_layout='kq_split' is not one of"),
])
def test_variant_rejects(fields, message):
    with pytest.raises(VariantError, match=message):
        Variant(**fields)


def test_shared_memory_budget():
    v = Variant(dtype="bf16", head_dim=128, block_n=64, consumer_warps=4, stages=2)
    assert v.dynamic_shared_bytes == 64 * 256 + 2 * 2 * 64 * 256 + 1024


@pytest.mark.parametrize("variant, page_size, ok", [
    (Variant(load_path="tma"), 16, True),        # 16 rows x 128 B: two swizzle atoms
    (Variant(load_path="tma"), 8, True),         # 8 x 128 B = one atom
    (Variant(load_path="tma"), 4, False),
    (Variant(load_path="tma", dtype="e4m3", head_dim=64), 8, False),   # 8 x 64 B
    (Variant(load_path="tma", dtype="e4m3", head_dim=64), 16, True),
    (Variant(load_path="cp_async", producer_warps=4), 1, True),
    (Variant(load_path="cp_async", producer_warps=4), 12, False),      # not a power of two
])
def test_page_size_rules(variant, page_size, ok):
    if ok:
        check_page_size(variant, page_size)
    else:
        with pytest.raises(VariantError, match=f"page_size={page_size}"):
            check_page_size(variant, page_size)


@pytest.mark.parametrize("num_splits", [2, 3, 8, 85])
def test_combine_loads_unroll(num_splits):
    """The split combine at a compile-time split count: both loops unroll, so each thread's
    loads (one lse and one partial per split) are all in the SASS, issued without a loop
    between them, with no local memory; exp2 runs on MUFU.EX2, not powf. It waits for the
    attention's grid first (griddepcontrol.wait: ACQBULK), as a dependent launch must."""
    kernel = kernel_cache().compile(f"combine_splits_{num_splits}", make_combine(num_splits), COMBINE_SIGNATURE)
    opcodes = kernel.opcode_counts()
    assert opcodes.get("LDG.E", 0) == 2 * num_splits, opcodes
    assert opcodes.get("MUFU.EX2", 0) == num_splits, opcodes
    assert opcodes.get("ACQBULK", 0) == 1, opcodes
    assert kernel.spill_store_bytes == 0 and "STL" not in opcodes and "LDL" not in opcodes, opcodes


def test_combine_refuses_one_split():
    with pytest.raises(ValueError, match="num_splits=1"):
        make_combine(1)


@pytest.mark.parametrize("path", ["tma", "cp_async"])
def test_wgmma_consumer_unpacks_only_v(path):
    """e4m3 kq_wgmma converts V alone to fp16 (K reaches the tensor cores as e4m3, by one wgmma a
    k-step), over its warp's quarter of the head dims: fewer unpacks than kq's warp, which
    unpacks all of K and V."""
    kq, wgmma = (Variant(dtype="e4m3", head_dim=128, load_path=path, consumer_warps=w, block_n=64,
                         producer_warps=1 if path == "tma" else 4, score_layout=layout, rows_per_warp=8)
                 for layout, w in (("kq", 1), ("kq_wgmma", 4)))
    unpacks = {v.score_layout: compiled(v).opcode_counts()["F2FP.F16.E4M3.UNPACK_B"] for v in (kq, wgmma)}
    assert 2 * unpacks["kq_wgmma"] < unpacks["kq"], unpacks
    qgmma = sum(n for op, n in compiled(wgmma).opcode_counts().items() if op.startswith("QGMMA"))
    assert qgmma == 128 // 32        # one wgmma per 32-byte k-step of a 128-byte e4m3 row


@pytest.mark.parametrize("threads, ctas, registers", [
    (160, 1, 255),      # one CTA of 5 warps: 2 warps on one sub-partition
    (160, 2, 168),      # two: 3 warps on some sub-partitions
    (288, 1, 168),      # one of 9 warps (the row_split consumer with a producer warp)
    (128, 4, 128),
])
def test_register_budget(threads, ctas, registers):
    """geometry.register_budget: the largest count at which resident_ctas_per_sm fits ``ctas``."""
    from tma_kernels.paged_kv.geometry import register_budget, resident_ctas_per_sm
    assert register_budget(threads, ctas) == registers
    assert resident_ctas_per_sm(registers, threads, 0) >= ctas
    if registers < 255:
        assert resident_ctas_per_sm(registers + 1, threads, 0) < ctas


ROWSPLIT = Variant(dtype="e4m3", head_dim=256, load_path="tma", consumer_warps=8, block_n=64, stages=4,
                  score_layout="kq_wgmma_rs_lazy_rowsplit", rows_per_warp=4)


def test_rowsplit_geometry():
    """kq_wgmma_rs_lazy_rowsplit: the CTA's 32 rows in two groups of 16, each with a Q tile of its
    own; both groups release every stage; 9 warps with the producer, so launch bounds."""
    single = Variant(dtype="e4m3", head_dim=256, load_path="tma", consumer_warps=4, block_n=64, stages=4,
                     score_layout="kq_wgmma_rs_lazy", rows_per_warp=8)
    assert (ROWSPLIT.block_m, ROWSPLIT.group_m, ROWSPLIT.tile_warps) == (32, 16, 4)
    assert (single.block_m, single.group_m, single.release_threads) == (32, 32, 128)
    assert ROWSPLIT.release_threads == 256 and ROWSPLIT.row_groups == 2 and single.row_groups == 1
    assert ROWSPLIT.q_tile_bytes == 2 * ROWSPLIT.group_q_tile_bytes == 2 * 16 * 256
    assert ROWSPLIT.launch_bounds == (288, 1) and ROWSPLIT.speculates
    assert ROWSPLIT.name.endswith("_w8_s4_p1_causal_kqwrls4")
    # a group's rows at head dim 64 (8 x 64 B) round up to a swizzle period each
    small = Variant(dtype="e4m3", head_dim=64, load_path="tma", consumer_warps=8, block_n=64,
                    score_layout="kq_wgmma_rs_lazy_rowsplit", rows_per_warp=2)
    assert small.q_tile_bytes == 2 * 1024
    with pytest.raises(VariantError, match="runs two warpgroups, 8 warps"):
        Variant(dtype="e4m3", head_dim=256, consumer_warps=4, block_n=64,
                score_layout="kq_wgmma_rs_lazy_rowsplit", rows_per_warp=8)
    with pytest.raises(VariantError, match="is e4m3 only"):
        Variant(dtype="bf16", head_dim=128, consumer_warps=8, block_n=64,
                score_layout="kq_wgmma_rs_lazy_rowsplit", rows_per_warp=4)


def test_rowsplit_sass():
    """Both groups' S^T and P V on QGMMA (the same count of wgmma instructions as one group: the
    groups run the same code), no spill at the 168 registers 9 warps may take, a named barrier
    per group around Q, the speculation's BAR.RED and the exact step's barriers."""
    from tma_kernels.paged_kv.geometry import register_budget
    kernel = compiled(ROWSPLIT)
    counts = kernel.opcode_counts()
    assert max(kernel.stack_frame_bytes, kernel.spill_store_bytes) == 0, kernel.registers
    assert kernel.registers <= register_budget(ROWSPLIT.threads, 1)
    assert sum(n for op, n in counts.items() if op.startswith("QGMMA.64")) > 0
    assert [op for op in counts if op.startswith("BAR.RED.OR")], sorted(counts)
    assert sum(n for op, n in counts.items() if op.startswith("BAR.SYNC")) >= 1 + SPLIT_BARRIERS["kq_wgmma"]
    assert not kernel.has_instruction("F2FP.F16.E4M3.UNPACK_B") and not kernel.has_instruction("HMMA")
    assert kernel.has_instruction("UTMALDG.4D") and kernel.has_instruction("PREEXIT")


def test_rs_takes_wide_pv_calls_only_where_registers_allow():
    """kq_wgmma_rs_lazy: 32 results a P V wgmma call at one CTA of 5 warps an SM, 16 under two
    CTAs' launch bounds."""
    from tma_kernels.paged_kv.pv_wgmma import RS_MAX_RESULTS, RS_WIDE_RESULTS, rs_max_results
    common = dict(dtype="e4m3", head_dim=256, block_n=64, rows_per_warp=8, stages=4)
    assert rs_max_results(Variant(**common, consumer_warps=4, score_layout="kq_wgmma_rs_lazy")) == RS_WIDE_RESULTS
    assert rs_max_results(Variant(**common, consumer_warps=4, score_layout="kq_wgmma_rs_lazy",
                                  min_ctas_per_sm=2)) == RS_MAX_RESULTS
    # the rowsplit groups of 16 rows fit the wide calls in the 168 registers of 9 warps
    assert rs_max_results(ROWSPLIT) == RS_WIDE_RESULTS
