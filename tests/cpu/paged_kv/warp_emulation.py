"""Emulations of the PTX a paged-attention consumer warp runs, for the CPU tests
(test_paged_kv_fragments_qk.py: consumer_qk.py; test_paged_kv_fragments_kq.py: consumer_kq.py;
test_paged_kv_shared_tile.py: consumer_kq_wgmma.py).

Every per-lane value is a numpy array over the 32 lanes; each intrinsic is written from
the PTX ISA's definition (``ldmatrix`` row distribution and ``.trans``, ``movmatrix``,
the m16n8k16 / m16n8k32 A, B, C fragment layouts, ``cvt`` rounding, ``prmt``). Shared
memory is a byte array written with the swizzled offsets the producers use.
``patch_consumer(monkeypatch, module)`` points a consumer module's globals at them.
"""
import math
import types

import numpy as np
from numba import cuda
from tma_kernels.paged_kv import consumer_qk, geometry

from tma_study.studies.paged_kv.numerics import (
    float_to_bf16_bits,
    float_to_e4m3_bits,
    round_to,
)

LANES = np.arange(32)
GROUP, QUAD = LANES >> 2, LANES & 3
TILES = 2
# dtype -> largest |kernel - float64 reference| allowed for a warp's O (unit-variance inputs): P
# is rounded to the operand type before P V (bf16: 8 bits of mantissa; e4m3: 4). Seen with
# consumer_qk.py: about 1e-3 (bf16) and 1.5e-2 (e4m3).
TOLERANCE = {"bf16": 1e-2, "e4m3": 6e-2}
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


def mma_f16(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
    return _mma((a0, a1, a2, a3), (b0, b1), (c0, c1, c2, c3), 2, _f16_halves)


def _f16_halves(reg):
    reg = np.asarray(reg, np.int64)
    return np.stack([reg & 0xFFFF, reg >> 16], axis=-1).astype(np.uint16).view(np.float16).astype(np.float64)


def cvt_f16x2_e4m3x2_low(reg):
    """Bytes 0, 1 of each lane's register -> fp16 pair (exact: every e4m3 is an fp16)."""
    pair = _e4m3_bytes(np.asarray(reg, np.int64))[..., :2].astype(np.float16).view(np.uint16)
    return pair[..., 0].astype(np.int64) | (pair[..., 1].astype(np.int64) << 16)


def cvt_f16x2_e4m3x2_high(reg):
    return cvt_f16x2_e4m3x2_low(np.asarray(reg, np.int64) >> 16)


def movmatrix_trans(reg):
    """Lane l holds row l >> 2, 16-bit elements 2(l & 3), +1 of an 8 x 8 matrix; after the
    transpose, column l >> 2, rows 2(l & 3) (low half) and +1."""
    reg = np.asarray(reg, np.int64)
    matrix = np.zeros((8, 8), np.int64)
    matrix[GROUP, 2 * QUAD] = reg & 0xFFFF
    matrix[GROUP, 2 * QUAD + 1] = reg >> 16
    return matrix[2 * QUAD, GROUP] | (matrix[2 * QUAD + 1, GROUP] << 16)


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


def write_tile(smem, base, bits, variant, tile_rows):
    """Rows of raw bits (tile_rows, head_dim) into the swizzled tile layout at ``base``."""
    raw = np.ascontiguousarray(bits).view(np.uint8).reshape(tile_rows, variant.head_bytes)
    for row in range(tile_rows):
        for piece in range(variant.head_bytes // 16):
            offset = geometry.tile_offset.py_func(row, piece * 16, tile_rows, variant.row_bytes,
                                                  variant.swizzle_mask)
            smem.bytes[base + offset: base + offset + 16] = raw[row, piece * 16: piece * 16 + 16]




def patch_consumer(monkeypatch, module):
    """Point ``module``'s (and geometry's) intrinsics at the emulations; returns a dict
    whose "smem" entry (a SharedMemory) the ldmatrix emulations read."""
    state = {}

    def ldm(address):
        return ldmatrix_emulations(state["smem"])[0](address)

    def ldm_t(address):
        return ldmatrix_emulations(state["smem"])[1](address)

    for name, value in {
        "ldmatrix_x4": ldm, "ldmatrix_x4_trans": ldm_t, "movmatrix_trans": movmatrix_trans,
        "mma_bf16_m16n8k16": mma_bf16, "mma_e4m3_m16n8k32_via_f16": mma_e4m3_via_f16,
        "mma_f16_m16n8k16": mma_f16,
        "cvt_bf16x2_f32": cvt_bf16x2, "cvt_e4m3x2_f32": cvt_e4m3x2, "prmt": prmt,
        "cvt_f16x2_e4m3x2_low": cvt_f16x2_e4m3x2_low, "cvt_f16x2_e4m3x2_high": cvt_f16x2_e4m3x2_high,
        "ex2_approx": lambda x: np.exp2(np.asarray(x, np.float64)).astype(np.float32),
        "uint32": lambda x: np.asarray(x, dtype=np.int64), "max": np.maximum, "cuda": fake_cuda,
        "pack_e4m3": consumer_qk.pack_e4m3.py_func,
        "tile_offset": geometry.tile_offset.py_func,
        "a_lane_row_col": geometry.a_lane_row_col.py_func,
        "k_lane_row_col": geometry.k_lane_row_col.py_func,
        "q_b_lane_row_col": geometry.q_b_lane_row_col.py_func,
        "v_bf16_lane_row_col": geometry.v_bf16_lane_row_col.py_func,
        "vt_bf16_lane_row_col": geometry.vt_bf16_lane_row_col.py_func,
        "v_e4m3_lane_row_col": geometry.v_e4m3_lane_row_col.py_func,
    }.items():
        monkeypatch.setattr(module, name, value, raising=False)
    monkeypatch.setattr(geometry, "swizzle", geometry.swizzle.py_func)
    return state


def shared_image(state, variant, q_bits, k_bits, v_bits):
    """The shared memory one consumer warp reads: its Q rows (zero-padded to the Q tile) at 0,
    then TILES K tiles and TILES V tiles; returns the K and V tiles' addresses."""
    q_bytes, kv_bytes, n = variant.q_tile_bytes, variant.kv_tile_bytes, variant.block_n
    smem = state["smem"] = SharedMemory(q_bytes + 2 * TILES * kv_bytes)
    q_rows = np.zeros((variant.block_m, variant.head_dim), q_bits.dtype)
    q_rows[:len(q_bits)] = q_bits
    write_tile(smem, 0, q_rows, variant, variant.block_m)
    k_tiles = [q_bytes + t * kv_bytes for t in range(TILES)]
    v_tiles = [q_bytes + (TILES + t) * kv_bytes for t in range(TILES)]
    for t in range(TILES):
        write_tile(smem, k_tiles[t], k_bits[t * n:(t + 1) * n], variant, n)
        write_tile(smem, v_tiles[t], v_bits[t * n:(t + 1) * n], variant, n)
    return k_tiles, v_tiles


def check_warp_attention(run_warp, state, variant, rows, seed):
    """Fresh unit-variance Q (``rows`` rows), K and V rounded to the variant's dtype over TILES
    tiles; ``run_warp``'s output must match float64 softmax(Q K^T / sqrt(d)) V within TOLERANCE."""
    dtype, head_dim = variant.dtype, variant.head_dim
    rng = np.random.default_rng(seed)
    q_bits, q = round_to(dtype, rng.standard_normal((rows, head_dim)))
    k_bits, k = round_to(dtype, rng.standard_normal((TILES * variant.block_n, head_dim)))
    v_bits, v = round_to(dtype, rng.standard_normal((TILES * variant.block_n, head_dim)))
    scale = 1.0 / math.sqrt(head_dim)
    out = run_warp(state, variant, q_bits, k_bits, v_bits, scale)
    scores = scale * q @ k.T
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    expected = (weights / weights.sum(axis=1, keepdims=True)) @ v
    error = np.abs(out - expected)
    worst = np.unravel_index(np.argmax(error), error.shape)
    assert not np.isnan(out).any(), "some output element was never written"
    assert error.max() < TOLERANCE[dtype], (
        f"max |error| {error.max():.3g} at row {worst[0]}, dim {worst[1]} "
        f"(got {out[worst]:.4f}, expected {expected[worst]:.4f})")
