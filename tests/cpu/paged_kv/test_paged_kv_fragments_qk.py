"""The attention consumer's fragment bookkeeping, checked on the CPU by emulating one warp.

The kernel's steps (``make_consumer(variant)``: ``scores_tile``, ``softmax_row``,
``pv_tile_bf16`` / ``pv_tile_e4m3``, ``store_acc_row``) are run as plain Python
(``py_func``) with every per-lane value a numpy array over the 32 lanes, and the PTX
intrinsics they call replaced by emulations written from the PTX ISA's definitions
(``ldmatrix`` row distribution and ``.trans``; the m16n8k16 / m16n8k32 A, B, C fragment
layouts; ``cvt`` rounding; ``prmt``). Shared memory is a byte array written with the
same swizzled offsets the producers use. The warp's 16 output rows over two KV tiles
must equal a float64 softmax(Q K^T) V: a wrong ldmatrix lane address, swizzle, fragment
index, fp8 byte permutation or output column would give O(1) errors, while the
bf16 / e4m3 rounding of P gives the small ones bounded below.

What this cannot see: the TMA unit's own swizzle (assumed to be CUTLASS's
Swizzle<3,4,3> / <2,4,3>; the GPU tests compare the TMA and cp.async paths), timing,
barriers, and whether ptxas honours the asm.
"""
import numpy as np
import pytest
from tma_kernels.paged_kv import consumer_qk
from tma_kernels.paged_kv.geometry import Variant

from warp_emulation import (
    GROUP,
    LANES,
    LOG2_E,
    QUAD,
    TILES,
    check_warp_attention,
    mma_e4m3,
    mma_e4m3_via_f16,
    patch_consumer,
    shared_image,
)


@pytest.fixture
def emulated(monkeypatch):
    """consumer_qk.py's intrinsics emulated (warp_emulation.patch_consumer)."""
    return patch_consumer(monkeypatch, consumer_qk)


def run_warp(state, variant, q_bits, k_bits, v_bits, scale):
    """Emulate consumer warp 0 over TILES K/V tiles; returns its (16, head_dim) output."""
    parts = consumer_qk.make_consumer(variant)
    k_tiles, v_tiles = shared_image(state, variant, q_bits, k_bits, v_bits)
    n = variant.block_n
    acc = np.zeros((variant.head_dim // 2, 32), np.float32)
    scores = np.zeros((n // 2, 32), np.float32)
    m = [np.full(32, -np.inf, np.float32), np.full(32, -np.inf, np.float32)]
    sums = [np.zeros(32, np.float32), np.zeros(32, np.float32)]
    scale_log2 = np.float32(scale * LOG2_E)
    pv = parts.pv_tile_e4m3 if variant.dtype == "e4m3" else parts.pv_tile_bf16
    for t in range(TILES):
        parts.scores_tile.py_func(scores, 0, k_tiles[t], 0, LANES)
        for half in (0, 1):
            m[half], sums[half], correction = parts.softmax_row.py_func(scores, half, m[half], sums[half],
                                                                        scale_log2)
            acc[2 * half::4] *= correction
            acc[2 * half + 1::4] *= correction
        pv.py_func(acc, scores, v_tiles[t], LANES)
    out = np.full(16 * variant.head_dim, np.nan, np.float32)
    for half in (0, 1):
        total = sums[half] + sums[half][LANES ^ 1]
        total = total + total[LANES ^ 2]
        rows = GROUP + 8 * half
        parts.store_acc_row.py_func(out, rows * variant.head_dim, acc, half,
                                    (1.0 / total).astype(np.float32), QUAD)
    return out.reshape(16, variant.head_dim)


@pytest.mark.parametrize("dtype, head_dim, block_n", [
    ("bf16", 128, 64), ("bf16", 64, 32), ("bf16", 256, 16),
    ("e4m3", 128, 64), ("e4m3", 64, 32), ("e4m3", 256, 32),
])
def test_emulated_warp_matches_float64_attention(emulated, dtype, head_dim, block_n):
    variant = Variant(dtype=dtype, head_dim=head_dim, block_n=block_n, consumer_warps=1,
                      load_path="cp_async", producer_warps=1)
    check_warp_attention(run_warp, emulated, variant, 16, seed=head_dim * block_n)


def test_a_wrong_fp8_permutation_is_caught(emulated, monkeypatch):
    """The check above can fail: swapping the even/odd byte selectors breaks e4m3 P V."""
    monkeypatch.setattr(consumer_qk, "EVEN_BYTES", consumer_qk.ODD_BYTES)
    with pytest.raises(AssertionError, match="max .error"):
        test_emulated_warp_matches_float64_attention(emulated, "e4m3", 64, 32)


def test_e4m3_mma_via_f16_is_the_e4m3_mma():
    """The kernel's two-fp16-mma form of the e4m3 m16n8k32 computes the same product as the
    PTX ISA's e4m3 fragment layout (random finite e4m3 bytes; the sums differ only in order)."""
    rng = np.random.default_rng(7)
    finite = np.setdiff1d(np.arange(256), [0x7F, 0xFF])
    regs = [sum(rng.choice(finite, 32).astype(np.int64) << (8 * i) for i in range(4)) for _ in range(6)]
    c = [rng.standard_normal(32).astype(np.float32) for _ in range(4)]
    got = np.array(mma_e4m3_via_f16(*regs, *c), np.float64)
    want = np.array(mma_e4m3(*regs, *c), np.float64)
    assert np.allclose(got, want, rtol=1e-6, atol=1e-3)


def test_a_wrong_f16_slot_map_is_caught():
    """...and the comparison above sees a mapping that swaps the low and high byte pairs of B."""
    rng = np.random.default_rng(8)
    regs = [sum(rng.integers(0, 0x7F, 32).astype(np.int64) << (8 * i) for i in range(4)) for _ in range(6)]
    c = [np.zeros(32, np.float32)] * 4
    swapped = [(r >> 16) | ((r & 0xFFFF) << 16) if i >= 4 else r for i, r in enumerate(regs)]
    got = np.array(mma_e4m3_via_f16(*swapped, *c), np.float64)
    want = np.array(mma_e4m3(*regs, *c), np.float64)
    assert not np.allclose(got, want, rtol=1e-6, atol=1e-3)
