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
import math
import types

import numpy as np
import pytest
from numba import cuda
from tma_kernels.paged_kv import Variant, consumer, geometry

from tma_study.studies.paged_kv.numerics import (
    float_to_bf16_bits,
    float_to_e4m3_bits,
    round_to,
)

LANES = np.arange(32)
GROUP, QUAD = LANES >> 2, LANES & 3
TILES = 2
LOG2_E = math.log2(math.e)


# ---------------------------------------------------------------- intrinsic emulations
class SharedMemory:
    def __init__(self, nbytes):
        self.bytes = np.zeros(nbytes, np.uint8)

    def word(self, address):
        b = self.bytes
        return (b[address].astype(np.int64) | (b[address + 1].astype(np.int64) << 8)
                | (b[address + 2].astype(np.int64) << 16) | (b[address + 3].astype(np.int64) << 24))

    def half(self, address):
        return self.bytes[address].astype(np.int64) | (self.bytes[address + 1].astype(np.int64) << 8)


def ldmatrix_emulations(smem):
    def ldmatrix_x4(address):
        """Matrix i's rows come from lanes 8i..8i+7; lane l gets row l >> 2, bytes 4(l & 3)..+3."""
        address = np.broadcast_to(np.asarray(address), (32,))
        return tuple(smem.word(address[8 * i + (LANES >> 2)] + 4 * (LANES & 3)) for i in range(4))

    def ldmatrix_x4_trans(address):
        """Transposed: lane l gets column l >> 2 (a 16-bit element) of rows 2(l & 3) and +1."""
        address = np.broadcast_to(np.asarray(address), (32,))
        regs = []
        for i in range(4):
            low = smem.half(address[8 * i + 2 * (LANES & 3)] + 2 * (LANES >> 2))
            high = smem.half(address[8 * i + 2 * (LANES & 3) + 1] + 2 * (LANES >> 2))
            regs.append(low | (high << 16))
        return tuple(regs)

    return ldmatrix_x4, ldmatrix_x4_trans


def _bf16_halves(reg):
    bits = np.stack([reg & 0xFFFF, reg >> 16], axis=-1).astype(np.uint32) << 16
    return bits.astype(np.uint32).view(np.float32).astype(np.float64)


def _e4m3_bytes(reg):
    from tma_study.studies.paged_kv.numerics import e4m3_bits_to_float
    return e4m3_bits_to_float(np.stack([(reg >> (8 * i)) & 0xFF for i in range(4)], axis=-1))


def _mma(a_regs, b_regs, c, k_per_reg, decode):
    """PTX ISA fragment layouts: A row g (a0, a2) / g + 8 (a1, a3), k = k_per_reg * q ..
    (+ K/2 for a2, a3); B column g, same k as a0 (b0) / a2 (b1); C/D row g (d0, d1) /
    g + 8 (d2, d3), columns 2q, 2q + 1."""
    k = 2 * 4 * k_per_reg
    a = np.zeros((16, k))
    b = np.zeros((k, 8))
    for lane in range(32):
        g, q = lane >> 2, lane & 3
        lo, hi = k_per_reg * q, k_per_reg * q + k // 2
        a[g, lo:lo + k_per_reg] = decode(a_regs[0][lane])
        a[g + 8, lo:lo + k_per_reg] = decode(a_regs[1][lane])
        a[g, hi:hi + k_per_reg] = decode(a_regs[2][lane])
        a[g + 8, hi:hi + k_per_reg] = decode(a_regs[3][lane])
        b[lo:lo + k_per_reg, g] = decode(b_regs[0][lane])
        b[hi:hi + k_per_reg, g] = decode(b_regs[1][lane])
    d = a @ b
    d[GROUP, 2 * QUAD] += c[0]
    d[GROUP, 2 * QUAD + 1] += c[1]
    d[GROUP + 8, 2 * QUAD] += c[2]
    d[GROUP + 8, 2 * QUAD + 1] += c[3]
    return tuple(np.float32(d[rows, 2 * QUAD + col]) for rows, col in
                 ((GROUP, 0), (GROUP, 1), (GROUP + 8, 0), (GROUP + 8, 1)))


def mma_bf16(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
    return _mma((a0, a1, a2, a3), (b0, b1), (c0, c1, c2, c3), 2, _bf16_halves)


def mma_e4m3(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
    return _mma((a0, a1, a2, a3), (b0, b1), (c0, c1, c2, c3), 4, _e4m3_bytes)


def mma_e4m3_via_f16(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
    """The kernel's e4m3 mma (``mma_e4m3_m16n8k32_via_f16``): each register's byte pairs
    unpacked to fp16 pairs, low half -> slot k' = 2q, high half -> k' = 8 + 2q of an
    m16n8k16, the first mma on (a0, a1, b0), the second on (a2, a3, b1) chained through C."""
    def low(reg):
        return np.asarray(reg, np.int64) & 0xFFFF

    def high(reg):
        return np.asarray(reg, np.int64) >> 16

    def pair(reg):
        return _e4m3_bytes(reg)[..., :2]

    d = _mma((low(a0), low(a1), high(a0), high(a1)), (low(b0), high(b0)), (c0, c1, c2, c3), 2, pair)
    return _mma((low(a2), low(a3), high(a2), high(a3)), (low(b1), high(b1)), d, 2, pair)


def cvt_bf16x2(hi, lo):
    return (float_to_bf16_bits(lo).astype(np.int64)
            | (float_to_bf16_bits(hi).astype(np.int64) << 16))


def cvt_e4m3x2(hi, lo):
    return float_to_e4m3_bits(lo).astype(np.int64) | (float_to_e4m3_bits(hi).astype(np.int64) << 8)


def prmt(a, b, selector):
    source = [(a >> (8 * i)) & 0xFF for i in range(4)] + [(b >> (8 * i)) & 0xFF for i in range(4)]
    return sum(source[(selector >> (4 * i)) & 7] << (8 * i) for i in range(4))


fake_cuda = types.SimpleNamespace(shfl_xor_sync=lambda mask, value, offset: value[LANES ^ offset],
                                  syncwarp=lambda: None, jit=cuda.jit)


@pytest.fixture
def emulated(monkeypatch):
    """Point the consumer's (and geometry's) globals at Python emulations; returns a setter
    for the shared-memory image the ldmatrix emulations read."""
    state = {}

    def ldm(address):
        return ldmatrix_emulations(state["smem"])[0](address)

    def ldm_t(address):
        return ldmatrix_emulations(state["smem"])[1](address)

    for name, value in {
        "ldmatrix_x4": ldm, "ldmatrix_x4_trans": ldm_t,
        "mma_bf16_m16n8k16": mma_bf16, "mma_e4m3_m16n8k32_via_f16": mma_e4m3_via_f16,
        "cvt_bf16x2_f32": cvt_bf16x2, "cvt_e4m3x2_f32": cvt_e4m3x2, "prmt": prmt,
        "ex2_approx": lambda x: np.exp2(np.asarray(x, np.float64)).astype(np.float32),
        "uint32": lambda x: np.asarray(x, dtype=np.int64), "max": np.maximum, "cuda": fake_cuda,
        "pack_e4m3": consumer.pack_e4m3.py_func,
        "tile_offset": geometry.tile_offset.py_func,
        "a_lane_row_col": geometry.a_lane_row_col.py_func,
        "k_lane_row_col": geometry.k_lane_row_col.py_func,
        "v_bf16_lane_row_col": geometry.v_bf16_lane_row_col.py_func,
        "v_e4m3_lane_row_col": geometry.v_e4m3_lane_row_col.py_func,
    }.items():
        monkeypatch.setattr(consumer, name, value, raising=False)
    monkeypatch.setattr(geometry, "swizzle", geometry.swizzle.py_func)
    return state


def write_tile(smem, base, bits, variant, tile_rows):
    """Rows of raw bits (tile_rows, head_dim) into the swizzled tile layout at ``base``."""
    raw = np.ascontiguousarray(bits).view(np.uint8).reshape(tile_rows, variant.head_bytes)
    for row in range(tile_rows):
        for piece in range(variant.head_bytes // 16):
            offset = geometry.tile_offset.py_func(row, piece * 16, tile_rows, variant.row_bytes,
                                                  variant.swizzle_mask)
            smem.bytes[base + offset: base + offset + 16] = raw[row, piece * 16: piece * 16 + 16]


def run_warp(state, variant, q_bits, k_bits, v_bits, scale):
    """Emulate consumer warp 0 over TILES K/V tiles; returns its (16, head_dim) output."""
    parts = consumer.make_consumer(variant)
    q_bytes, kv_bytes = variant.q_tile_bytes, variant.kv_tile_bytes
    smem = state["smem"] = SharedMemory(q_bytes + 2 * TILES * kv_bytes)
    q_rows = np.zeros((variant.block_m, variant.head_dim), q_bits.dtype)
    q_rows[:16] = q_bits
    write_tile(smem, 0, q_rows, variant, variant.block_m)
    n = variant.block_n
    for t in range(TILES):
        write_tile(smem, q_bytes + t * kv_bytes, k_bits[t * n:(t + 1) * n], variant, n)
        write_tile(smem, q_bytes + (TILES + t) * kv_bytes, v_bits[t * n:(t + 1) * n], variant, n)
    acc = np.zeros((variant.head_dim // 2, 32), np.float32)
    scores = np.zeros((n // 2, 32), np.float32)
    m = [np.full(32, -np.inf, np.float32), np.full(32, -np.inf, np.float32)]
    sums = [np.zeros(32, np.float32), np.zeros(32, np.float32)]
    scale_log2 = np.float32(scale * LOG2_E)
    pv = parts.pv_tile_e4m3 if variant.dtype == "e4m3" else parts.pv_tile_bf16
    for t in range(TILES):
        parts.scores_tile.py_func(scores, 0, q_bytes + t * kv_bytes, 0, LANES)
        for half in (0, 1):
            m[half], sums[half], correction = parts.softmax_row.py_func(scores, half, m[half], sums[half],
                                                                        scale_log2)
            acc[2 * half::4] *= correction
            acc[2 * half + 1::4] *= correction
        pv.py_func(acc, scores, q_bytes + (TILES + t) * kv_bytes, LANES)
    out = np.full(16 * variant.head_dim, np.nan, np.float32)
    for half in (0, 1):
        total = sums[half] + sums[half][LANES ^ 1]
        total = total + total[LANES ^ 2]
        rows = GROUP + 8 * half
        parts.store_acc_row.py_func(out, rows * variant.head_dim, acc, half,
                                    (1.0 / total).astype(np.float32), QUAD)
    return out.reshape(16, variant.head_dim)


# dtype -> largest |kernel - float64 reference| allowed for O (unit-variance inputs): P is
# rounded to the operand type before P V (bf16: 8 bits of mantissa; e4m3: 4). Seen here:
# about 1e-3 (bf16) and 1.5e-2 (e4m3).
TOLERANCE = {"bf16": 1e-2, "e4m3": 6e-2}


@pytest.mark.parametrize("dtype, head_dim, block_n", [
    ("bf16", 128, 64), ("bf16", 64, 32), ("bf16", 256, 16),
    ("e4m3", 128, 64), ("e4m3", 64, 32), ("e4m3", 256, 32),
])
def test_emulated_warp_matches_float64_attention(emulated, dtype, head_dim, block_n):
    variant = Variant(dtype=dtype, head_dim=head_dim, block_n=block_n, consumer_warps=1,
                      load_path="cp_async", producer_warps=1)
    rng = np.random.default_rng(head_dim * block_n)
    q_bits, q = round_to(dtype, rng.standard_normal((16, head_dim)))
    k_bits, k = round_to(dtype, rng.standard_normal((TILES * block_n, head_dim)))
    v_bits, v = round_to(dtype, rng.standard_normal((TILES * block_n, head_dim)))
    scale = 1.0 / math.sqrt(head_dim)
    out = run_warp(emulated, variant, q_bits, k_bits, v_bits, scale)
    scores = scale * q @ k.T
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    expected = (weights / weights.sum(axis=1, keepdims=True)) @ v
    error = np.abs(out - expected)
    worst = np.unravel_index(np.argmax(error), error.shape)
    assert not np.isnan(out).any(), "some output column was never written"
    assert error.max() < TOLERANCE[dtype], (
        f"max |error| {error.max():.3g} at row {worst[0]}, dim {worst[1]} "
        f"(got {out[worst]:.4f}, expected {expected[worst]:.4f})")


def test_a_wrong_fp8_permutation_is_caught(emulated, monkeypatch):
    """The check above can fail: swapping the even/odd byte selectors breaks e4m3 P V."""
    monkeypatch.setattr(consumer, "EVEN_BYTES", consumer.ODD_BYTES)
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
