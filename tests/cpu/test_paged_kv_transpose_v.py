"""kq_wgmma_pv's shared-memory operands, checked on the CPU (transpose_v.py, consumer_pv.py).

The producer warps' V transpose runs (``transpose.py_func``, every producer thread as a numpy
lane) over a V tile written in the layout TMA and cp.async leave it in; the consumer warps'
P^T stores run (``store_p.py_func``) from S^T registers in the wgmma result layout. Then a
K-major read of both, as the wgmma takes its operands (rows of 64 bytes, 64-byte swizzle:
the layout tests/gpu/test_wgmma_gpu.py checks the tensor cores read), must give V^T P^T.
Also: the positions are a permutation the two sides share, and the transpose's loads and
stores hit distinct banks. What this cannot see: the barriers, the async-proxy fence and the
wgmma itself (tests/gpu/test_paged_kv_gpu.py runs the kernel).
"""
import types

import numpy as np
import pytest
from numba import cuda
from tma_kernels.paged_kv import Variant, VariantError, consumer_pv, geometry, transpose_v
from warp_emulation import GROUP, LANES, QUAD, SharedMemory, cvt_e4m3x2, write_tile

from tma_study.studies.paged_kv.numerics import e4m3_bits_to_float, round_to

BLOCK_N = 64
DEVICE_FUNCTIONS = ("position_token", "token_position", "kmajor_offset", "rotation_selector", "transpose_4x4",
                    "load_row", "load_column", "store_row", "store_swizzle", "transpose_step")
PY = {name: getattr(transpose_v, name).py_func for name in DEVICE_FUNCTIONS}   # callees: ``emulated``
kmajor_offset, position_token, token_position = PY["kmajor_offset"], PY["position_token"], PY["token_position"]


def _variant(head_dim, rows_per_warp=8, path="tma"):
    return Variant(dtype="e4m3", head_dim=head_dim, load_path=path, block_n=BLOCK_N, consumer_warps=4,
                   stages=2, producer_warps=1, score_layout="kq_wgmma_pv",
                   rows_per_warp=rows_per_warp)


def _as_int(x):
    return np.asarray(x, dtype=np.int64)


def prmt(a, b, selector):
    """``prmt.b32`` with a per-lane selector (the rotation's is a register, not an immediate)."""
    a, b, selector = np.broadcast_arrays(_as_int(a), _as_int(b), _as_int(selector))
    source = np.stack([(a >> (8 * i)) & 0xFF for i in range(4)] + [(b >> (8 * i)) & 0xFF for i in range(4)])
    picked = [np.take_along_axis(source, ((selector >> (4 * i)) & 7)[None], 0)[0] for i in range(4)]
    return sum(byte << (8 * i) for i, byte in enumerate(picked))


@pytest.fixture
def emulated(monkeypatch):
    """transpose_v's and consumer_pv's device functions as numpy code over the 32 lanes (or a
    warp's threads); returns the state: ``smem``, the shared memory the fake loads, stores and
    ``cuda.shared.array`` use, and ``accesses``, each load's or store's lane addresses."""
    state = types.SimpleNamespace(smem=None, accesses=[])
    for name in DEVICE_FUNCTIONS:
        monkeypatch.setattr(transpose_v, name, PY[name])
    swizzle = geometry.swizzle.py_func
    monkeypatch.setattr(geometry, "swizzle", swizzle)
    monkeypatch.setattr(transpose_v, "swizzle", swizzle)
    monkeypatch.setattr(consumer_pv, "kmajor_offset", transpose_v.kmajor_offset)

    def load(address):
        state.accesses.append(("load", np.asarray(address)))
        return state.smem.word(np.asarray(address))

    def store(address, value):
        state.accesses.append(("store", np.asarray(address)))
        words = state.smem.bytes.view(np.uint32)
        address = np.asarray(address)
        assert np.all(address % 4 == 0) and len(set(address.tolist())) == address.size, "lanes store one word each"
        words[address // 4] = np.asarray(value) & 0xFFFFFFFF

    monkeypatch.setattr(transpose_v, "ld_shared_u32", load)
    monkeypatch.setattr(transpose_v, "st_shared_u32", store)
    # consumer_pv views the dynamic shared memory as 16-bit halves (from address 0)
    fake = types.SimpleNamespace(jit=cuda.jit, shared=types.SimpleNamespace(
        array=lambda n, dtype: state.smem.bytes.view(np.uint16)))
    monkeypatch.setattr(consumer_pv, "cuda", fake)
    monkeypatch.setattr(consumer_pv, "smem_u32", lambda array: 0)
    for module in (transpose_v, consumer_pv):
        monkeypatch.setattr(module, "prmt", prmt, raising=False)
        monkeypatch.setattr(module, "uint32", _as_int)
    monkeypatch.setattr(consumer_pv, "uint16", lambda x: np.asarray(x, dtype=np.int64) & 0xFFFF)
    monkeypatch.setattr(consumer_pv, "cvt_e4m3x2_f32", cvt_e4m3x2)
    for name in ("mbarrier_wait_parity", "mbarrier_arrive", "fence_proxy_async_shared"):
        monkeypatch.setattr(transpose_v, name, lambda *args: None)
    return state


def _transposed(state, variant, v_bits):
    """Run the producer's transpose of one V tile; returns the V^T tile's bytes."""
    v_tile, vt_tile = 0, variant.kv_tile_bytes
    state.smem = SharedMemory(2 * variant.kv_tile_bytes)
    write_tile(state.smem, v_tile, v_bits, variant, BLOCK_N)
    transposer = transpose_v.make_transposer(variant)
    transposer.transpose.py_func(vt_tile, v_tile, 0, 0, 0, np.arange(variant.transpose_threads))
    return state.smem.bytes[vt_tile:].copy()


def _kmajor_read(image, rows):
    """(rows, 64) bytes of a K-major operand as the wgmma reads it."""
    offsets = np.array([[kmajor_offset(r, k) for k in range(BLOCK_N)] for r in range(rows)])
    return image[offsets]


def test_positions_are_a_permutation_both_sides_share():
    positions = [token_position(t) for t in range(BLOCK_N)]
    assert sorted(positions) == list(range(BLOCK_N))
    assert all(position_token(token_position(t)) == t for t in range(BLOCK_N))
    for warp in range(4):               # a lane's two tokens of S^T sit side by side
        for g in range(8):
            assert token_position(16 * warp + g) + 1 == token_position(16 * warp + g + 8)
            assert token_position(16 * warp + g) == 16 * warp + 2 * g


@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_transpose_writes_every_byte_of_v_transposed(emulated, head_dim):
    variant = _variant(head_dim)
    rng = np.random.default_rng(head_dim)
    v_bits = rng.integers(0, 256, (BLOCK_N, head_dim), dtype=np.uint8)
    assert np.array_equal(_transposed(emulated, variant, v_bits), _want(v_bits))


def _want(v_bits):
    """The V^T tile image of V tile ``v_bits`` (tokens, head dims)."""
    head_dim = v_bits.shape[1]
    want = np.zeros(BLOCK_N * head_dim, np.uint8)
    for d in range(head_dim):
        for position in range(BLOCK_N):
            want[kmajor_offset(d, position)] = v_bits[position_token(position), d]
    return want


def test_a_transpose_without_the_byte_rotation_is_caught(emulated, monkeypatch):
    """The stores go to dims 4 dg + (j + rot) & 3; unrotated bytes land in the wrong rows."""
    monkeypatch.setattr(transpose_v, "rotation_selector", lambda rot: _as_int(0x3210))
    v_bits = np.random.default_rng(1).integers(0, 256, (BLOCK_N, 128), dtype=np.uint8)
    assert not np.array_equal(_transposed(emulated, _variant(128), v_bits), _want(v_bits))


def _banks(addresses):
    return len(set(((np.asarray(addresses) >> 2) & 31).tolist()))


@pytest.mark.parametrize("head_dim, conflict_free_loads", [(64, False), (128, True), (256, True)])
def test_transpose_banks(emulated, head_dim, conflict_free_loads):
    """Each of the transpose's stores, and with 128-byte V rows each of its loads, takes 32
    distinct banks over the warp; with 64-byte rows (head dim 64) the loads are 2-way conflicted."""
    variant = _variant(head_dim)
    _transposed(emulated, variant, np.zeros((BLOCK_N, head_dim), np.uint8))
    loads = [a for kind, a in emulated.accesses if kind == "load"]
    stores = [a for kind, a in emulated.accesses if kind == "store"]
    assert len(loads) == len(stores) == 4 * transpose_v.transpose_steps(variant)
    assert all(_banks(a) == 32 for a in stores)
    assert all(_banks(a) == (32 if conflict_free_loads else 16) for a in loads)


@pytest.mark.parametrize("head_dim, rows_per_warp", [(64, 2), (128, 8), (256, 8), (256, 2)])
def test_wgmma_operands_give_v_transposed_times_p_transposed(emulated, head_dim, rows_per_warp):
    """V^T from the transpose and P^T from store_p, read K-major, multiply to V^T P^T."""
    variant = _variant(head_dim, rows_per_warp=rows_per_warp)
    block_m = variant.block_m
    rng = np.random.default_rng(head_dim * rows_per_warp)
    v_bits, v = round_to("e4m3", rng.standard_normal((BLOCK_N, head_dim)))
    p = rng.uniform(0.0, 1.0, (BLOCK_N, block_m)).astype(np.float32)      # P of (token, query row)
    vt_image = _transposed(emulated, variant, v_bits)

    emulated.smem = SharedMemory(block_m * BLOCK_N)
    store_p = consumer_pv.make_pv_steps(variant).store_p.py_func
    for warp in range(4):
        # S^T's wgmma registers: 4 qb + r -> token 16 w + g + 8 (r >> 1), column 8 qb + 2 q + (r & 1)
        scores = np.array([p[16 * warp + GROUP + 8 * (r >> 1), 8 * qb + 2 * QUAD + (r & 1)]
                           for qb in range(block_m // 8) for r in range(4)])
        store_p(0, scores, warp, LANES)
    pt_image = emulated.smem.bytes.copy()

    a = e4m3_bits_to_float(_kmajor_read(vt_image, head_dim))      # (head dims, positions)
    b = e4m3_bits_to_float(_kmajor_read(pt_image, block_m))       # (query rows, positions)
    _, p_rounded = round_to("e4m3", p)
    np.testing.assert_allclose(a @ b.T, v.T @ p_rounded, rtol=1e-12, atol=1e-12)


def test_what_the_transpose_cannot_serve_is_refused():
    with pytest.raises(VariantError, match="e4m3 only"):
        Variant(dtype="bf16", head_dim=128, block_n=64, consumer_warps=4, score_layout="kq_wgmma_pv",
                rows_per_warp=8)
    with pytest.raises(VariantError, match="block_n"):
        Variant(dtype="e4m3", head_dim=128, block_n=32, consumer_warps=4, score_layout="kq_wgmma_pv",
                rows_per_warp=8)


def test_the_v_transposed_ring_is_in_the_shared_memory_budget():
    variant = _variant(256, rows_per_warp=8)
    ring = 2 * variant.stages * variant.kv_tile_bytes
    assert variant.scratch_bytes == (variant.stages * variant.kv_tile_bytes + variant.block_m * BLOCK_N
                                     + 4 * variant.block_m * variant.tile_warps)
    assert variant.dynamic_shared_bytes == (variant.q_tile_bytes + ring + variant.scratch_bytes
                                            + geometry.TILE_ALIGN_BYTES)


def _a_fragment_matrix(registers):
    """The 64 x 32 A block a warpgroup's wgmma reads from registers: ``registers[w][r]`` (32
    lanes each) of warp w, register r, laid out as CUTLASS GMMA::ALayout_64x32 (byte j of
    register r of lane (g, c): row 16 w + g + 8 (r & 1), k 4 c + j + 16 (r >> 1))."""
    a = np.zeros((64, 32), np.int64)
    for w in range(4):
        for r in range(4):
            for j in range(4):
                a[16 * w + GROUP + 8 * (r & 1), 4 * QUAD + j + 16 * (r >> 1)] = (registers[w][r] >> (8 * j)) & 0xFF
    return a


@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_register_fragments_of_v_transposed(monkeypatch, head_dim):
    """kq_wgmma_rs: one ldmatrix.x4.trans at rs_v_offset and the EVEN / ODD byte permutes give,
    per M block and k-step, the A fragment of V^T whose rows are dims 64 mb + 16 w + 2 g (+ 1)
    and whose k is transpose_v's position order: the order store_p writes P^T in. So a K-major
    P^T times these A blocks is O^T with those rows (store_acc_column's dims)."""
    from warp_emulation import ldmatrix_emulations
    variant = Variant(dtype="e4m3", head_dim=head_dim, block_n=BLOCK_N, consumer_warps=4,
                      score_layout="kq_wgmma_rs", rows_per_warp=8)
    monkeypatch.setattr(geometry, "swizzle", geometry.swizzle.py_func)
    monkeypatch.setattr(consumer_pv, "tile_offset", geometry.tile_offset.py_func)
    v_bits = np.random.default_rng(head_dim).integers(0, 256, (BLOCK_N, head_dim), dtype=np.uint8)
    smem = SharedMemory(variant.kv_tile_bytes)
    write_tile(smem, 0, v_bits, variant, BLOCK_N)
    ldmatrix_x4_trans = ldmatrix_emulations(smem)[1]
    offset = consumer_pv.rs_v_offset.py_func
    for mb in range(head_dim // 64):
        for ks in range(BLOCK_N // 32):
            registers = []
            for w in range(4):
                x = ldmatrix_x4_trans(np.array([offset(mb, ks, w, lane, BLOCK_N, variant.row_bytes,
                                                       variant.swizzle_mask) for lane in range(32)]))
                even, odd = consumer_pv.EVEN_DIM_TOKENS, consumer_pv.ODD_DIM_TOKENS
                registers.append([prmt(x[0], x[1], even), prmt(x[0], x[1], odd),
                                  prmt(x[2], x[3], even), prmt(x[2], x[3], odd)])
            a = _a_fragment_matrix(registers)
            rows = [64 * mb + 16 * (m // 16) + 2 * (m % 8) + (m % 16) // 8 for m in range(64)]
            tokens = [position_token(32 * ks + k) for k in range(32)]
            assert np.array_equal(a, v_bits[np.ix_(tokens, rows)].T), (mb, ks)
