"""The decode consumer's (consumer_kq.py: S^T = K Q^T) fragment bookkeeping, checked on the
CPU by emulating one warp (warp_emulation.py), as test_paged_kv_fragments.py does for
consumer.py: its 8 or 16 query columns over two KV tiles must equal a float64
softmax(Q K^T) V. A wrong ldmatrix lane address, Q fragment index, movmatrix transpose,
fp8 byte gather or output dim gives O(1) errors; the bf16 / e4m3 rounding of P the small
ones bounded by the same tolerance as consumer.py's.

What this cannot see: causal masking (a per-lane branch; the GPU tests cover it), timing,
barriers, and whether ptxas honours the asm.
"""

import numpy as np
import pytest
from tma_kernels.paged_kv import Variant, consumer_kq
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
    return patch_consumer(monkeypatch, consumer_kq)


def run_warp(state, variant, q_bits, k_bits, v_bits, scale):
    """Emulate kq consumer warp 0 over TILES K/V tiles; returns its (rows, head_dim) output."""
    parts = consumer_kq.make_kq_consumer(variant)
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
    cta_unpack = variant.kv_unpack == "per_cta"
    pv = parts.pv_tile_e4m3 if variant.dtype == "e4m3" and not cta_unpack else parts.pv_tile_16bit
    k_unpacked = state["unpacked"]
    v_unpacked = k_unpacked + variant.unpacked_tile_bytes
    for t in range(TILES):
        k_tile, v_tile = k_tiles[t], v_tiles[t]
        if cta_unpack:      # the warp is the CTA's only consumer: it unpacks every piece
            parts.unpack_tile.py_func(k_unpacked, k_tile, LANES, False)
            parts.unpack_tile.py_func(v_unpacked, v_tile, LANES, True)
            k_tile, v_tile = k_unpacked, v_unpacked
        parts.scores_tile.py_func(scores, qf, k_tile, LANES)
        corrections = []
        for c in range(columns):
            m[c], sums[c], correction = parts.softmax_column.py_func(scores, c, m[c], sums[c], scale_log2)
            corrections.append(correction)
        for i in range(len(acc)):
            acc[i] *= corrections[2 * ((i >> 2) % q_blocks) + (i & 1)]
        parts.p_fragments.py_func(pf, scores)
        pv.py_func(acc, pf, v_tile, LANES)
    out = np.full(rows * variant.head_dim, np.nan, np.float32)
    for c in range(columns):
        total = parts.column_sum.py_func(sums[c])
        row = 8 * (c >> 1) + 2 * (LANES & 3) + (c & 1)
        parts.store_acc_column.py_func(out, row * variant.head_dim, acc, c,
                                       (1.0 / total).astype(np.float32), LANES >> 2)
    return out.reshape(rows, variant.head_dim)


CASES = [("bf16", 128, 64, 8, "per_warp"), ("bf16", 64, 32, 8, "per_warp"), ("bf16", 256, 32, 8, "per_warp"),
         ("bf16", 128, 64, 16, "per_warp"), ("e4m3", 128, 64, 8, "per_warp"), ("e4m3", 64, 32, 8, "per_warp"),
         ("e4m3", 256, 32, 8, "per_warp"), ("e4m3", 128, 32, 16, "per_warp"),
         ("e4m3", 128, 64, 8, "per_cta"), ("e4m3", 64, 128, 8, "per_cta"), ("e4m3", 256, 32, 8, "per_cta"),
         ("e4m3", 128, 64, 16, "per_cta")]


@pytest.mark.parametrize("dtype, head_dim, block_n, rows, kv_unpack", CASES)
def test_emulated_kq_warp_matches_float64_attention(emulated, dtype, head_dim, block_n, rows, kv_unpack):
    variant = Variant(dtype=dtype, head_dim=head_dim, block_n=block_n, consumer_warps=1,
                      load_path="cp_async", producer_warps=1, score_layout="kq", rows_per_warp=rows,
                      kv_unpack=kv_unpack)
    check_warp_attention(run_warp, emulated, variant, rows, seed=head_dim * block_n + rows)


@pytest.mark.parametrize("dtype, kv_unpack, name, value", [
    ("e4m3", "per_warp", "EVEN_BYTES", consumer_kq.ODD_BYTES),      # V's even/odd dims swapped
    ("bf16", "per_warp", "movmatrix_trans", lambda reg: reg),       # P^T not transposed
])
def test_a_wrong_gather_is_caught(emulated, monkeypatch, dtype, kv_unpack, name, value):
    """The check above can fail: a swapped fp8 dim gather or a missing transpose breaks it."""
    monkeypatch.setattr(consumer_kq, name, value)
    with pytest.raises(AssertionError, match="max .error"):
        test_emulated_kq_warp_matches_float64_attention(emulated, dtype, 64, 32, 8, kv_unpack)


@pytest.mark.parametrize("k_natural, v_natural", [(True, True), (False, False)])
def test_a_wrong_unpack_order_is_caught(emulated, monkeypatch, k_natural, v_natural):
    """kv_unpack "per_cta" must unpack K in the Q fragments' slot-map order and V in dim
    order: either one in the other's order breaks the check."""
    make = consumer_kq.make_kq_consumer

    def make_swapped(variant):
        parts = make(variant)
        unpack = parts.unpack_tile.py_func
        parts.unpack_tile.py_func = lambda dst, src, thread, natural: unpack(
            dst, src, thread, v_natural if natural else k_natural)
        return parts
    monkeypatch.setattr(consumer_kq, "make_kq_consumer", make_swapped)
    with pytest.raises(AssertionError, match="max .error"):
        test_emulated_kq_warp_matches_float64_attention(emulated, "e4m3", 128, 64, 8, "per_cta")
