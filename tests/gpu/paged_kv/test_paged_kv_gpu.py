"""GPU: the paged attention kernel equals a float64 reference, both load paths, both dtypes.

Every case makes fresh random inputs (the seed is printed on failure) in a shuffled page
pool with a NaN *poison page* behind every unused page-table entry
(``tma_study.studies.paged_kv.problem``), poisons the outputs with NaN, launches, and
compares with the float64 reference on the same bf16- / e4m3-rounded inputs:

- ``lse`` (log2 of each row's softmax denominator) first: a mismatch there is in
  S = Q K^T, the mask or the softmax (stage "scores");
- then O: a mismatch with correct ``lse`` is in P V or the output columns ("pv");
- NaN left in the output: rows never written, or a read of the poison page ("coverage");
- on a mismatch of a causal case, whether the output matches the *non-causal* reference
  (the mask was not applied) is reported too.
Tolerances: lse 1e-2 (log2 units); O per element ``problem.expected``'s tolerance: the bound on
what rounding P to the operand type before P V moves O (as FA3 does; about 6e-2 for e4m3 on long
rows, up to twice that on a causal row of a few keys), plus 1e-2.

The cases cover GQA (32/8, 64/8, 8/1) and multi-head (32/32, 16/16), decode (1 and 4
query tokens, packed into M of S = Q K^T, and into N of decode's S^T = K Q^T) and causal prefill (130-200 tokens over longer caches),
ragged cache lengths with a partial last page, page sizes 1, 8 (cp.async only), 16, 32
(TMA: one box per page, several per tile), 64 (= block_n) and 128, 256 (one box per
tile), head dims 64, 128, 256, split-KV (3 splits) with the combine kernel (and the combine alone at 2 to 128 splits), one
non-causal variant and one cp.async variant with a single producer warp (two shared
page-table entries per thread). ``test_tma_and_cp_async_agree_bitwise``: the two paths fill the same
shared-memory tiles for the same consumer, so their outputs must be bit-identical; a TMA
mismatch there with a passing cp.async reference check points at the tensor map, box
coordinates or swizzle.

``KERNELS`` lists every kernel with its signature for
tests/cpu/kernels/test_gpu_test_kernels_compile.py (the attention variants + the combine kernel;
numba compiles each in a few seconds on first use).
"""
import functools
import os

import numpy as np
import pytest
from tma_kernels.paged_kv.combine import COMBINE_SIGNATURE, make_combine
from tma_kernels.paged_kv.geometry import Variant
from tma_kernels.paged_kv.kernel import SIGNATURE, make_attention_kernel

from tma_study.studies.paged_kv.grid import BLOCK_N
from tma_study.studies.paged_kv.numerics import round_to
from tma_study.studies.paged_kv.problem import (
    Problem,
    expected,
    make_inputs,
    reference,
)

pytestmark = pytest.mark.gpu


def _variant(dtype, head_dim, path, warps, causal=True):
    return Variant(dtype=dtype, head_dim=head_dim, load_path=path, block_n=BLOCK_N,
                   consumer_warps=warps, stages=2, producer_warps=1 if path == "tma" else 4,
                   causal=causal)


VARIANTS = {
    f"{dtype}_d{d}_{path}_w{w}": _variant(dtype, d, path, w)
    for dtype in ("bf16", "e4m3")
    for d, warps in ((128, (4, 1)), (64, (4,)), (256, (2,)))
    for w in warps
    for path in ("tma", "cp_async")
    if not (dtype == "e4m3" and w == 1)
}
VARIANTS["bf16_d128_tma_w4_noncausal"] = _variant("bf16", 128, "tma", 4, causal=False)
# One cp.async producer warp: 16 rows per thread, two page-table entries per thread shared
# across the row group (the 4-warp producer above has one; producers.GatherPlan).
VARIANTS["e4m3_d128_cp_async_w4_p1"] = Variant(dtype="e4m3", head_dim=128, load_path="cp_async",
                                               block_n=64, consumer_warps=4, stages=2,
                                               producer_warps=1)

# Decode kernels as the sweep builds them: head dim 256 with 32-row tiles (grid.block_n) and
# an e4m3 kernel with launch bounds for its shared-memory residency (measure.fit_residency).
for _dtype in ("bf16", "e4m3"):
    for _path in ("tma", "cp_async"):
        VARIANTS[f"{_dtype}_d256_{_path}_w1_n32"] = Variant(dtype=_dtype, head_dim=256, load_path=_path,
                                                            block_n=32, consumer_warps=1, stages=2,
                                                            producer_warps=1)
for _path in ("tma", "cp_async"):
    VARIANTS[f"e4m3_d128_{_path}_w1_m6"] = Variant(dtype="e4m3", head_dim=128, load_path=_path, block_n=64,
                                                   consumer_warps=1, stages=2, producer_warps=1,
                                                   min_ctas_per_sm=6)

# Decode's S^T = K Q^T consumer (consumer_kq.py), as the sweep builds it: 8 query rows a warp,
# 1 warp (up to 8 rows) or 4 (32 rows), tiles of grid.SweepConfig.block_n. Plus its 16-row form.
KQ_BLOCK_N = {("bf16", 64): 64, ("bf16", 128): 64, ("bf16", 256): 32,
              ("e4m3", 64): 128, ("e4m3", 128): 64, ("e4m3", 256): 32}
for _dtype in ("bf16", "e4m3"):
    for _path in ("tma", "cp_async"):
        for _d, _w in ((128, 1), (128, 4), (256, 4), (64, 1)):
            VARIANTS[f"{_dtype}_d{_d}_{_path}_kq_w{_w}"] = Variant(
                dtype=_dtype, head_dim=_d, load_path=_path, block_n=KQ_BLOCK_N[_dtype, _d],
                consumer_warps=_w, stages=2, producer_warps=1 if _path == "tma" else 4,
                score_layout="kq", rows_per_warp=8)
    VARIANTS[f"{_dtype}_d128_cp_async_kq16_w1"] = Variant(
        dtype=_dtype, head_dim=128, load_path="cp_async", block_n=64, consumer_warps=1, stages=2,
        producer_warps=4, score_layout="kq", rows_per_warp=16)

# Decode's warps sharing each tile, S^T as one warpgroup wgmma a tile (score_layout "kq_wgmma",
# consumer_kq_wgmma.py): 4 warps, block_n 64; head dim 64 e4m3 takes the 64-byte swizzle (its own
# wgmma descriptor layout).
KQW_SHAPES = ((128, 8), (256, 8), (128, 4), (128, 2), (256, 2), (64, 2), (64, 8))
for _dtype in ("bf16", "e4m3"):
    for _path in ("tma", "cp_async"):
        for _d, _r in KQW_SHAPES:
            VARIANTS[f"{_dtype}_d{_d}_{_path}_kqw{_r}"] = Variant(
                dtype=_dtype, head_dim=_d, load_path=_path, block_n=64, consumer_warps=4, stages=2,
                producer_warps=1 if _path == "tma" else 4, score_layout="kq_wgmma", rows_per_warp=_r)

# P V as a wgmma too, V^T as its A from registers, accumulating in place, O^T rescaled only when a
# running max moves by more than consumer_kq_wgmma_rs_lazy.LAZY_RESCALE_LOG2 (score_layout
# "kq_wgmma_rs_lazy", e4m3 only); built for one CTA an SM (kqwrl: every M block of P V in one wgmma
# call) and under two CTAs' launch bounds as the sweep builds it where two fit (kqwrlm2: at most
# pv_wgmma.RS_MAX_BLOCKS blocks a call, 168 registers).
for _path in ("tma", "cp_async"):
    for _d, _r in KQW_SHAPES:
        for _suffix, _ctas in (("kqwrl", 1), ("kqwrlm2", 2)):
            VARIANTS[f"e4m3_d{_d}_{_path}_{_suffix}{_r}"] = Variant(
                dtype="e4m3", head_dim=_d, load_path=_path, block_n=64, consumer_warps=4, stages=2,
                producer_warps=1 if _path == "tma" else 4, score_layout="kq_wgmma_rs_lazy", rows_per_warp=_r,
                min_ctas_per_sm=_ctas)

# Two kq_wgmma_rs_lazy warpgroups on every tile, half the CTA's query rows each (score_layout
# "kq_wgmma_rs_lazy_rowsplit", e4m3 only): 8 warps, each group its own Q tile, both releasing a stage.
KQWRLS_SHAPES = ((256, 4, 4), (128, 4, 2), (128, 2, 4), (64, 2, 2))
for _path in ("tma", "cp_async"):
    for _d, _r, _s in KQWRLS_SHAPES:
        VARIANTS[f"e4m3_d{_d}_{_path}_kqwrls{_r}"] = Variant(
            dtype="e4m3", head_dim=_d, load_path=_path, block_n=64, consumer_warps=8, stages=_s,
            producer_warps=1 if _path == "tma" else 4, score_layout="kq_wgmma_rs_lazy_rowsplit", rows_per_warp=_r)

# the combine alone (test_combine_matches_numpy) at split counts the sweep takes, and 128: FA3's
# cap, where the unrolled loads no longer fit in registers (a local-memory array)
COMBINE_SPLITS = (2, 3, 8, 43, 128)

KERNELS = {v.name: (make_attention_kernel(v), SIGNATURE) for v in VARIANTS.values()}
KERNELS.update({f"combine_splits_{n}": (make_combine(n), COMBINE_SIGNATURE) for n in COMBINE_SPLITS})

# The default run checks one build of each consumer the sweep runs (S = Q K^T; decode's kq,
# kq_wgmma, kq_wgmma_rs_lazy with and without two CTAs' launch bounds, and its rowsplit form), on
# both load paths and both dtypes where it exists, and the special builds (non-causal, one
# producer warp, launch bounds, decode at head dim 256). `pytest -m exhaustive` runs every case.
_BOTH = [(dtype, path) for dtype in ("bf16", "e4m3") for path in ("tma", "cp_async")]
REPRESENTATIVE = {
    *(f"{dtype}_d128_{path}_{suffix}" for dtype, path in _BOTH for suffix in ("w4", "kq_w4", "kqw8")),
    *(f"{dtype}_d256_{path}_w1_n32" for dtype, path in _BOTH),
    *(f"e4m3_d{d}_{path}_{suffix}" for path in ("tma", "cp_async")
      for d, suffix in ((128, "w1_m6"), (256, "kqwrl8"), (128, "kqwrlm28"), (256, "kqwrls4"))),
    "bf16_d128_tma_w4_noncausal", "e4m3_d128_cp_async_w4_p1",
}
assert REPRESENTATIVE <= set(VARIANTS), REPRESENTATIVE - set(VARIANTS)
EXHAUSTIVE_KERNELS = {v.name for key, v in VARIANTS.items() if key not in REPRESENTATIVE}


def _params(cases, keys_of=lambda case: (case[0],)):
    """pytest params of ``cases``, marked exhaustive where a variant they run is not representative."""
    return [pytest.param(c, id=_case_id(c), marks=() if set(keys_of(c)) <= REPRESENTATIVE
                         else pytest.mark.exhaustive) for c in cases]


def _problem(dtype, d, shape, seqlen_q, lens, page, causal=True):
    q_heads, kv_heads = shape
    return Problem(batch=len(lens), seqlen_q=seqlen_q, q_heads=q_heads, kv_heads=kv_heads,
                   head_dim=d, page_size=page, seqlens_k=lens, dtype=dtype, causal=causal)


def _cases():
    """(variant key, problem, num_splits) for every case."""
    cases = []
    for dtype in ("bf16", "e4m3"):
        for path in ("tma", "cp_async"):
            w4 = f"{dtype}_d128_{path}_w4"
            pages = (16, 64, 256) if path == "tma" else (1, 8, 16, 64, 256)
            for page in pages:
                cases.append((w4, _problem(dtype, 128, (32, 8), 1, (1000, 37, 515), page), 1))
            cases.append((w4, _problem(dtype, 128, (32, 8), 1, (1000, 37, 515), 32), 3))
            cases.append((w4, _problem(dtype, 128, (64, 8), 4, (700, 129), 128), 1))
            cases.append((w4, _problem(dtype, 128, (32, 8), 200, (333, 200), 64), 1))
            if dtype == "bf16":
                w1 = f"bf16_d128_{path}_w1"
                cases.append((w1, _problem(dtype, 128, (32, 32), 1, (257, 64, 1100), 32), 1))
                cases.append((w1, _problem(dtype, 128, (32, 8), 4, (96, 4000), 16), 2))
            cases.append((f"{dtype}_d64_{path}_w4", _problem(dtype, 64, (16, 16), 130, (190, 131), 32), 1))
            cases.append((f"{dtype}_d256_{path}_w2", _problem(dtype, 256, (8, 1), 4, (600, 1025), 128), 1))
            cases.append((f"{dtype}_d256_{path}_w2", _problem(dtype, 256, (8, 1), 1, (77, 300), 16), 3))
    for page in (1, 16):
        cases.append(("e4m3_d128_cp_async_w4_p1",
                      _problem("e4m3", 128, (32, 8), 1, (1000, 37, 515), page), 3))
    for dtype in ("bf16", "e4m3"):
        for path in ("tma", "cp_async"):
            key = f"{dtype}_d256_{path}_w1_n32"
            cases.append((key, _problem(dtype, 256, (8, 1), 1, (77, 300, 1000), 16), 3))
            cases.append((key, _problem(dtype, 256, (8, 1), 1, (600, 1025), 64), 1))
    for path in ("tma", "cp_async"):
        cases.append((f"e4m3_d128_{path}_w1_m6", _problem("e4m3", 128, (32, 8), 1, (1000, 37, 515), 256), 2))
    for dtype in ("bf16", "e4m3"):
        for path in ("tma", "cp_async"):
            w1, w4 = f"{dtype}_d128_{path}_kq_w1", f"{dtype}_d128_{path}_kq_w4"
            for page in ((16, 64, 256) if path == "tma" else (1, 16, 64)):
                cases.append((w1, _problem(dtype, 128, (32, 8), 1, (1000, 37, 515), page), 1))
            cases.append((w1, _problem(dtype, 128, (32, 8), 1, (1000, 37, 515), 32), 3))
            cases.append((w1, _problem(dtype, 128, (64, 8), 1, (700, 129), 128), 1))
            cases.append((w1, _problem(dtype, 128, (32, 32), 4, (257, 64, 1100), 32), 2))
            cases.append((w4, _problem(dtype, 128, (64, 8), 4, (700, 129), 128), 1))
            cases.append((w4, _problem(dtype, 128, (32, 8), 4, (96, 4000), 16), 2))
            d256 = f"{dtype}_d256_{path}_kq_w4"
            cases.append((d256, _problem(dtype, 256, (8, 1), 4, (600, 1025), 128), 1))
            cases.append((d256, _problem(dtype, 256, (8, 1), 1, (77, 300, 1000), 16), 3))
            d64 = f"{dtype}_d64_{path}_kq_w1"
            cases.append((d64, _problem(dtype, 64, (16, 16), 4, (190, 131), 32), 1))
            cases.append((d64, _problem(dtype, 64, (16, 16), 1, (190, 131, 2000), 64), 2))
        cases.append((f"{dtype}_d128_cp_async_kq16_w1", _problem(dtype, 128, (32, 8), 4, (700, 129), 64), 1))
    for dtype in ("bf16", "e4m3"):
        for path in ("tma", "cp_async"):
            kqw = {(d, r): f"{dtype}_d{d}_{path}_kqw{r}" for d, r in KQW_SHAPES}
            cases.append((kqw[128, 4], _problem(dtype, 128, (32, 8), 4, (700, 129), 64), 1))
            cases.append((kqw[128, 4], _problem(dtype, 128, (16, 8), 1, (1000, 37, 515), 16), 3))
            cases.append((kqw[128, 2], _problem(dtype, 128, (32, 8), 1, (1000, 37, 515), 64), 2))
            cases.append((kqw[128, 2], _problem(dtype, 128, (32, 32), 4, (257, 64, 1100), 32), 1))
            cases.append((kqw[256, 2], _problem(dtype, 256, (8, 1), 1, (77, 300, 1000), 16), 3))
            cases.append((kqw[256, 8], _problem(dtype, 256, (8, 1), 4, (600, 1025), 128), 1))
            cases.append((kqw[256, 8], _problem(dtype, 256, (8, 1), 4, (77, 300, 1000), 16), 3))
            cases.append((kqw[128, 8], _problem(dtype, 128, (64, 8), 4, (1000, 37, 515), 64), 3))
            cases.append((kqw[128, 8], _problem(dtype, 128, (32, 8), 4, (96, 4000), 16), 2))
            cases.append((kqw[64, 2], _problem(dtype, 64, (16, 16), 1, (190, 131, 2000), 64), 2))
            cases.append((kqw[64, 8], _problem(dtype, 64, (16, 16), 4, (190, 131), 32), 1))
    # the P V wgmma consumer's cases, by (head dim, rows a warp)
    pv_problems = [
        ((128, 4), _problem("e4m3", 128, (32, 8), 4, (700, 129), 64), 1),
        ((128, 4), _problem("e4m3", 128, (16, 8), 1, (1000, 37, 515), 16), 3),
        ((128, 2), _problem("e4m3", 128, (32, 8), 1, (1000, 37, 515), 64), 2),
        ((128, 2), _problem("e4m3", 128, (32, 32), 4, (257, 64, 1100), 32), 1),
        ((256, 2), _problem("e4m3", 256, (8, 1), 1, (77, 300, 1000), 16), 3),
        ((256, 8), _problem("e4m3", 256, (8, 1), 4, (600, 1025), 128), 1),
        ((256, 8), _problem("e4m3", 256, (8, 1), 4, (77, 300, 1000), 16), 3),
        ((128, 8), _problem("e4m3", 128, (64, 8), 4, (1000, 37, 515), 64), 3),
        ((128, 8), _problem("e4m3", 128, (32, 8), 4, (96, 4000), 16), 2),
        ((64, 2), _problem("e4m3", 64, (16, 16), 1, (190, 131, 2000), 64), 2),
        ((64, 8), _problem("e4m3", 64, (16, 16), 4, (190, 131), 32), 1),
    ]
    for path in ("tma", "cp_async"):
        for suffix in ("kqwrl", "kqwrlm2"):        # one CTA an SM, two CTAs' launch bounds
            for (d, r), problem, splits in pv_problems:
                cases.append((f"e4m3_d{d}_{path}_{suffix}{r}", problem, splits))
    # the rowsplit consumer: 32 rows a CTA (16 a group), 16 (8 a group), group 1 with no valid row
    # (16 packed rows under kqwrls4), two m-blocks (32 rows under kqwrls2), the 64-byte swizzle
    rowsplit_problems = [
        ((256, 4), _problem("e4m3", 256, (8, 1), 4, (600, 1025), 128), 1),
        ((256, 4), _problem("e4m3", 256, (8, 1), 4, (77, 300, 1000), 16), 3),
        ((128, 4), _problem("e4m3", 128, (64, 8), 4, (1000, 37, 515), 64), 3),
        ((128, 4), _problem("e4m3", 128, (32, 8), 4, (96, 4000), 16), 2),
        ((128, 2), _problem("e4m3", 128, (32, 8), 4, (700, 129), 64), 1),
        ((128, 2), _problem("e4m3", 128, (64, 8), 4, (1000, 37, 515), 64), 2),
        ((64, 2), _problem("e4m3", 64, (16, 4), 4, (190, 131, 2000), 32), 2),
    ]
    for path in ("tma", "cp_async"):
        for (d, r), problem, splits in rowsplit_problems:
            cases.append((f"e4m3_d{d}_{path}_kqwrls{r}", problem, splits))
    cases.append(("bf16_d128_tma_w4_noncausal",
                  _problem("bf16", 128, (32, 8), 150, (333, 150), 64, causal=False), 1))
    return cases


CASES = _cases()


def _case_id(case):
    key, p, splits = case
    return (f"{key}-h{p.q_heads}/{p.kv_heads}-q{p.seqlen_q}-page{p.page_size}-b{p.batch}"
            f"-splits{splits}")


@functools.cache
def _runner(key):
    from tma_kernels.paged_kv.runner import AttentionRunner

    from tma_study.harness.kernel_builds import kernel_cache
    return AttentionRunner(VARIANTS[key], kernel_cache())


def _run(key, problem, splits, seed, key_growth=0.0):
    from numba import cuda
    from tma_kernels.paged_kv.runner import DeviceProblem
    inputs = make_inputs(problem, np.random.default_rng(seed))
    if key_growth:
        _grow_keys(inputs, key_growth)
    device = DeviceProblem(inputs, max_splits=splits)
    device.poison_outputs()
    _runner(key).launch(device, splits)
    cuda.synchronize()
    return inputs, device.output(splits), device.split_lse(splits)


def _grow_keys(inputs, growth):
    """Scale key t of each sequence by 1 + growth * t / (its length) and round again: the scores'
    spread, and so each column's running max, rises tile after tile (with growth 3, by some 10
    log2 units over a sequence of 600 to 1025 keys: in most rows a move past
    consumer_kq_wgmma_rs_lazy.LAZY_RESCALE_LOG2 after the first tile, which inputs of one spread rarely make)."""
    p = inputs.problem
    for b, n in enumerate(inputs.seqlens_k):
        tokens = np.arange(int(n))
        pages = inputs.page_table[b, tokens // p.page_size]
        slots = tokens % p.page_size
        grown = inputs.k_pool[pages, slots] * (1.0 + growth * tokens / n)[:, None, None]
        inputs.k_pool_bits[pages, slots], inputs.k_pool[pages, slots] = round_to(p.dtype, grown)


def _where(index, shape, names):
    return ", ".join(f"{n}={i}" for n, i in zip(names, np.unravel_index(index, shape)))


def _diagnose(inputs, out, split_lse, seed, key, splits):
    """Empty string when the output matches; else what differs, where, and which stage."""
    p = inputs.problem
    expected_out, expected_lse, allowed, lse_allowed = expected(inputs)
    with np.errstate(invalid="ignore"):
        lse = np.logaddexp2.reduce(split_lse, axis=0)
    problems = []
    nan_out = np.isnan(out)
    if nan_out.any():
        rows = np.argwhere(nan_out.any(axis=-1))
        problems.append(f"[coverage] {len(rows)} output rows hold NaN (never written, or read the "
                        f"poison page), first at (batch, token, head) = {tuple(rows[0])}; "
                        f"lse of that row {lse[tuple(rows[0])]:.4g}")
    lse_error = np.abs(lse - expected_lse)
    if not np.all(lse_error <= lse_allowed):
        i = int(np.nanargmax(np.where(np.isnan(lse_error), np.inf, lse_error - lse_allowed)))
        problems.append(f"[scores] lse (log2 softmax denominator) max |error| "
                        f"{np.nanmax(lse_error):.4g}, at {_where(i, lse.shape, ('batch', 'token', 'head'))} "
                        f"{lse_error.flat[i]:.4g} (allowed there {lse_allowed.flat[i]:.3g}): "
                        f"got {lse.flat[i]:.5g}, expected {expected_lse.flat[i]:.5g} "
                        f"(S = Q K^T, mask or softmax)")
    error = np.abs(out - expected_out)
    if not np.all(error <= allowed):
        i = int(np.argmax(np.where(np.isnan(error), np.inf, error)))
        where = _where(i, out.shape, ("batch", "token", "head", "dim"))
        stage = "[pv]" if np.all(lse_error <= lse_allowed) else "[after scores]"
        problems.append(f"{stage} O max |error| {np.nanmax(error):.4g} at {where}: got "
                        f"{out.flat[i]:.5g}, expected {expected_out.flat[i]:.5g} (allowed there "
                        f"{allowed.flat[i]:.3g}); rows over tolerance: "
                        f"{int(np.any(error > allowed, axis=-1).sum())} of "
                        f"{p.batch * p.seqlen_q * p.q_heads}")
        if p.causal:
            unmasked, _ = reference(inputs, causal=False)
            if np.all(np.abs(out - unmasked) <= allowed):
                problems.append("[mask] the output matches the NON-causal reference: no mask applied")
    if not problems:
        return ""
    return (f"{key}, splits={splits}, {p}, seed={seed}:\n  " + "\n  ".join(problems))


def _check(case, key_growth=0.0):
    key, problem, splits = case
    seed = int.from_bytes(os.urandom(4), "little")
    inputs, out, split_lse = _run(key, problem, splits, seed, key_growth)
    message = _diagnose(inputs, out, split_lse, seed, key, splits)
    assert not message, f"keys grown by {key_growth}: {message}" if key_growth else message


@pytest.mark.parametrize("case", _params(CASES))
def test_matches_float64_reference(case):
    _check(case)


# Scores whose running max keeps rising (_grow_keys): kq_wgmma_rs_lazy rescales O^T only on a move
# past its threshold, so these take that branch mid-sequence, split and unsplit.
RISING = [(f"e4m3_d{d}_{path}_{suffix}{r}", _problem("e4m3", d, shape, q, lens, page), splits)
          for path in ("tma", "cp_async") for suffix in ("kqwrl", "kqwrlm2")
          for d, r, shape, q, lens, page, splits in ((128, 8, (32, 8), 4, (1000, 37, 515), 64, 1),
                                                     (128, 2, (32, 8), 1, (1000, 37, 515), 64, 2),
                                                     (256, 8, (8, 1), 4, (600, 1025), 128, 3))]
RISING += [(f"e4m3_d{d}_{path}_kqwrls{r}", _problem("e4m3", d, shape, 4, lens, page), splits)
           for path in ("tma", "cp_async")
           for d, r, shape, lens, page, splits in ((128, 4, (64, 8), (1000, 37, 515), 64, 1),
                                                   (256, 4, (8, 1), (600, 1025), 128, 3))]
KEY_GROWTH = 3.0


@pytest.mark.parametrize("case", _params(RISING))
def test_rising_scores_match_float64_reference(case):
    _check(case, KEY_GROWTH)


PAIRED = [c for c in CASES if "_tma_" in c[0] and "noncausal" not in c[0]]


@pytest.mark.parametrize("case", _params(PAIRED, lambda c: (c[0], c[0].replace("_tma_", "_cp_async_"))))
def test_tma_and_cp_async_agree_bitwise(case):
    key, problem, splits = case
    seed = int.from_bytes(os.urandom(4), "little")
    _, tma_out, _ = _run(key, problem, splits, seed)
    _, gather_out, _ = _run(key.replace("_tma_", "_cp_async_"), problem, splits, seed)
    differs = ~((tma_out == gather_out) | (np.isnan(tma_out) & np.isnan(gather_out)))
    if differs.any():
        first = tuple(np.argwhere(differs)[0])
        pytest.fail(f"{key} vs cp_async, seed={seed}: {int(differs.sum())} of {differs.size} output "
                    f"values differ, first at (batch, token, head, dim) = {first}: tma "
                    f"{tma_out[first]:.6g}, cp_async {gather_out[first]:.6g} (same tiles must give "
                    "the same bits: suspect the tensor map, box coordinates or swizzle)")


@pytest.mark.parametrize("num_splits", COMBINE_SPLITS)
@pytest.mark.parametrize("head_dim", [64, 256])
def test_combine_matches_numpy(num_splits, head_dim):
    """The split combine alone, on random partial outputs and lse (one row with every split
    empty, lse -inf, must come out zero; others with some splits empty), against float64."""
    from numba import cuda
    from tma_kernels.paged_kv.combine import launch_combine

    from tma_study.harness.kernel_builds import kernel_cache
    seed = int.from_bytes(os.urandom(4), "little")
    rng = np.random.default_rng(seed)
    rows = 37
    partial = rng.standard_normal((num_splits, rows, head_dim)).astype(np.float32)
    lse = rng.uniform(-20, 20, (num_splits, rows)).astype(np.float32)
    lse[:, 0] = -np.inf
    lse[rng.random((num_splits, rows)) < 0.3] = -np.inf
    lse[0, 1:] = rng.uniform(-20, 20, rows - 1)          # every other row: at least one split
    final = cuda.device_array(rows * head_dim, np.float32)
    launch_combine(cuda.to_device(partial.ravel()), cuda.to_device(lse.ravel()), final, num_splits,
                   rows, head_dim, cache=kernel_cache())
    got = final.copy_to_host().reshape(rows, head_dim)
    lse64 = lse.astype(np.float64)
    top = lse64.max(axis=0)
    weights = np.exp2(lse64 - np.where(np.isfinite(top), top, 0.0))       # row 0: all zero
    total = weights.sum(axis=0)
    want = np.einsum("sr,srd->rd", weights, partial) / np.where(total > 0, total, 1.0)[:, None]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5,
                               err_msg=f"combine of {num_splits} splits, head_dim {head_dim}, seed={seed}")


def test_cached_build_reports_its_resources():
    """measure.fit_residency reads the registers and static shared memory of a kernel loaded
    from the kernel cache (tma_kernels.loaded); the registers are ptxas's for that cubin."""
    from tma_kernels.paged_kv.runner import AttentionRunner

    from tma_study.harness.kernel_builds import kernel_cache
    from tma_study.studies.paged_kv.measure import kernel_columns, resident_ctas
    variant = VARIANTS["bf16_d128_tma_w4"]
    runner = AttentionRunner(variant, kernel_cache())
    compiled = kernel_cache().compile(variant.name, make_attention_kernel(variant), SIGNATURE)
    assert runner.kernel.get_regs_per_thread() == compiled.registers
    assert isinstance(runner.kernel.get_regs_per_thread(), int)
    assert isinstance(runner.kernel.get_shared_mem_per_block(), int)
    assert resident_ctas(runner) >= 1
    assert isinstance(kernel_columns(runner)["registers"], int)
