"""The decode consumer's (consumer_kq.py and its steps, kq_steps.py: S^T = K Q^T) fragment
bookkeeping, checked on the CPU by emulating one warp (warp_emulation.py), as
test_paged_kv_fragments_qk.py does for
consumer_qk.py: its 8 or 16 query columns over two KV tiles must equal a float64
softmax(Q K^T) V. A wrong ldmatrix lane address, Q fragment index, movmatrix transpose,
fp8 byte gather or output dim gives O(1) errors; the bf16 / e4m3 rounding of P the small
ones bounded by the same tolerance as consumer_qk.py's.

What this cannot see: causal masking (a per-lane branch; the GPU tests cover it), timing,
barriers, and whether ptxas honours the asm.
"""
import numpy as np
import pytest
from tma_kernels.paged_kv import consumer_kq, kq_steps
from tma_kernels.paged_kv.geometry import Variant

from warp_emulation import (
    LANES,
    LOG2_E,
    TILES,
    check_warp_attention,
    patch_consumer,
    shared_image,
)


@pytest.fixture
def emulated(monkeypatch):
    return patch_consumer(monkeypatch, kq_steps)


def run_warp(state, variant, q_bits, k_bits, v_bits, scale):
    """Emulate kq consumer warp 0 over TILES K/V tiles; returns its (rows, head_dim) output."""
    parts = consumer_kq.make_consumer(variant)
    rows = variant.rows_per_warp
    q_blocks = rows // 8
    columns = 2 * q_blocks
    n = variant.block_n
    k_tiles, v_tiles = shared_image(state, variant, q_bits, k_bits, v_bits)
    k_steps = variant.head_bytes // 32
    qf = np.zeros((q_blocks * k_steps * (4 if variant.dtype == "e4m3" else 2), 32), np.int64)
    parts.load_q_fragments.py_func(qf, 0, 0, LANES)
    scores = np.zeros((n // 16 * q_blocks * 4, 32), np.float32)
    pf = np.zeros((len(scores) // 2, 32), np.int64)
    acc = np.zeros((variant.head_dim // 16 * q_blocks * 4, 32), np.float32)
    m = [np.full(32, -np.inf, np.float32) for _ in range(columns)]
    sums = [np.zeros(32, np.float32) for _ in range(columns)]
    scale_log2 = np.float32(scale * LOG2_E)
    for t in range(TILES):
        parts.scores_tile.py_func(scores, qf, 0, k_tiles[t], LANES)
        corrections = []
        for c in range(columns):
            m[c], sums[c], correction = parts.softmax_finish.py_func(
                scores, c, parts.column_max.py_func(scores, c), m[c], sums[c], scale_log2)
            corrections.append(correction)
        for i in range(len(acc)):
            acc[i] *= corrections[2 * ((i >> 2) % q_blocks) + (i & 1)]
        parts.p_fragments.py_func(pf, scores)
        parts.pv_tile.py_func(acc, pf, 0, v_tiles[t], 0, LANES)
    out = np.full(rows * variant.head_dim, np.nan, np.float32)
    for c in range(columns):
        total = parts.column_sum.py_func(sums[c])
        row = 8 * (c >> 1) + 2 * (LANES & 3) + (c & 1)
        parts.store_acc_column.py_func(out, row * variant.head_dim, acc, c,
                                       (1.0 / total).astype(np.float32), LANES >> 2, 0)
    return out.reshape(rows, variant.head_dim)


CASES = [("bf16", 128, 64, 8), ("bf16", 64, 32, 8), ("bf16", 256, 32, 8), ("bf16", 128, 64, 16),
         ("e4m3", 128, 64, 8), ("e4m3", 64, 32, 8), ("e4m3", 256, 32, 8), ("e4m3", 128, 32, 16)]


@pytest.mark.parametrize("dtype, head_dim, block_n, rows", CASES)
def test_emulated_kq_warp_matches_float64_attention(emulated, dtype, head_dim, block_n, rows):
    variant = Variant(dtype=dtype, head_dim=head_dim, block_n=block_n, consumer_warps=1,
                      load_path="cp_async", producer_warps=1, score_layout="kq", rows_per_warp=rows)
    check_warp_attention(run_warp, emulated, variant, rows, seed=head_dim * block_n + rows)


@pytest.mark.parametrize("dtype, name, value", [
    ("e4m3", "EVEN_BYTES", kq_steps.ODD_BYTES),          # V's even/odd dims swapped
    ("bf16", "movmatrix_trans", lambda reg: reg),           # P^T not transposed
])
def test_a_wrong_gather_is_caught(emulated, monkeypatch, dtype, name, value):
    """The check above can fail: a swapped fp8 dim gather or a missing transpose breaks it."""
    monkeypatch.setattr(kq_steps, name, value)
    with pytest.raises(AssertionError, match="max .error"):
        test_emulated_kq_warp_matches_float64_attention(emulated, dtype, 64, 32, 8)


@pytest.mark.parametrize("dtype, head_dim, block_n, rows", [c for c in CASES if c[0] == "e4m3"])
def test_the_lazy_rescale_matches_float64_attention(emulated, monkeypatch, dtype, head_dim, block_n, rows):
    """kq_wgmma_rs_lazy's softmax (make_kq_tiles ``lazy_rescale_log2``): a running max kept until a
    tile's exceeds it by more than the threshold gives the same attention within the same
    tolerance (P then runs up to 2 ** threshold, rounded to e4m3 as before)."""
    from tma_kernels.paged_kv.consumer_kq_wgmma_rs_lazy import LAZY_RESCALE_LOG2
    monkeypatch.setattr(kq_steps, "select", np.where)      # a lane's choice, over the 32 lanes at once
    exact = consumer_kq.make_kq_tiles
    monkeypatch.setattr(consumer_kq, "make_kq_tiles",
                        lambda *args, **kwargs: exact(*args, **kwargs, lazy_rescale_log2=LAZY_RESCALE_LOG2))
    test_emulated_kq_warp_matches_float64_attention(emulated, dtype, head_dim, block_n, rows)


def test_the_lazy_rescale_keeps_a_max_within_the_threshold(emulated, monkeypatch):
    """softmax_finish with the threshold: a tile max within it leaves the running max and gives a
    correction of exactly 1 (the kernel then skips O's rescale); beyond it, the max moves."""
    monkeypatch.setattr(kq_steps, "select", np.where)
    variant = Variant(dtype="e4m3", head_dim=128, block_n=64, consumer_warps=1, load_path="cp_async",
                      producer_warps=1, score_layout="kq", rows_per_warp=8)
    steps = kq_steps.make_kq_tiles(variant, 1, 4, 8, lazy_rescale_log2=8.0)
    one = np.float32(1.0)
    for tile_max, moves in ((5.0, False), (8.0, False), (9.0, True)):
        scores = np.zeros((16, 32), np.float32)
        m, _, correction = steps.softmax_finish.py_func(scores, 0, np.float32(tile_max), np.float32(0.0),
                                                         np.float32(1.0), one)
        assert (m == tile_max if moves else m == 0.0) and (correction < 1.0 if moves else correction == 1.0)
    m, _, _ = steps.softmax_finish.py_func(np.zeros((16, 32), np.float32), 0, np.float32(-3.0),
                                           np.float32(-np.inf), np.float32(0.0), one)
    assert m == -3.0                                                 # the first tile always sets it
