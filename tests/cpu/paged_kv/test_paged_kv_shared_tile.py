"""Rung 3's tile sharing (consumer_kq_wgmma.py), checked on the CPU: its 4 warps are emulated
one after another between the points where the kernel has a named barrier, so each reads
only what the others wrote before that barrier. The CTA's query rows over two KV tiles must
equal a float64 softmax(Q K^T) V: a warp reading another's token or dim block, a wrong offset in
``red`` / ``pbuf``, or a running max that differs between warps gives O(1) errors. The emulation
computes S^T with rung 2's mma.sync steps: the wgmma fills the same registers (checked on the GPU
by tests/gpu/paged_kv/test_paged_kv_gpu.py), so what is checked here is the exchange. Also rung 4's
speculative softmax (consumer_kq_wgmma_rs_lazy.py) against its exact lazy step.

What this cannot see: causal masking, timing, and whether the barriers are where the
emulation assumes (the GPU tests run the kernel itself).
"""
import numpy as np
import pytest
from tma_kernels.paged_kv import consumer_kq_wgmma, consumer_kq_wgmma_rs_lazy, kq_steps
from tma_kernels.paged_kv.geometry import Variant, VariantError

import warp_emulation
from warp_emulation import (
    LANES,
    LOG2_E,
    check_warp_attention,
    patch_consumer,
    shared_image,
)


@pytest.fixture
def emulated(monkeypatch):
    state = patch_consumer(monkeypatch, kq_steps)
    monkeypatch.setattr(consumer_kq_wgmma, "uint32", lambda x: np.asarray(x, dtype=np.int64))
    monkeypatch.setattr(consumer_kq_wgmma, "max", np.maximum, raising=False)
    return state


def run_cta(state, variant, q_bits, k_bits, v_bits, scale):
    """Emulate the consumer's warps over the K/V tiles; returns (block_m, head_dim)."""
    parts = consumer_kq_wgmma.make_consumer(variant)
    steps, exchange = parts.steps, parts.exchange
    warps, block_m, head_dim = variant.tile_warps, variant.block_m, variant.head_dim
    columns = 2 * block_m // 8
    token_rows = variant.block_n // warps
    dim_blocks = head_dim // 16 // warps
    k_tiles, v_tiles = shared_image(state, variant, q_bits, k_bits, v_bits)
    lane_red = exchange.red_lane.py_func(0, LANES)
    p_lane = LANES
    qf = np.zeros((steps.q_regs, 32), np.int64)        # the emulation's mmas read Q from registers
    steps.load_q_fragments.py_func(qf, 0, 0, LANES)
    scale_log2 = np.float32(scale * LOG2_E)
    red = np.full(block_m * warps, np.nan, np.float32)
    words = np.zeros(block_m * variant.block_n // 2, np.int64)
    scores = np.zeros((warps, token_rows // 16 * block_m // 8 * 4, 32), np.float32)
    acc = np.zeros((warps, dim_blocks * block_m // 8 * 4, 32), np.float32)
    m = np.full((warps, columns, 32), -np.inf, np.float32)
    sums = np.zeros((warps, columns, 32), np.float32)

    def publish(values, w):
        for lane in range(4):
            exchange.publish.py_func(red, lane_red[lane], [v[lane] for v in values], w, lane)

    for t in range(warp_emulation.TILES):
        for w in range(warps):                 # S^T of the warp's tokens, its maxima to red
            steps.scores_tile.py_func(scores[w], qf, 0, k_tiles[t] + w * token_rows * variant.row_bytes, LANES)
            publish([steps.column_max.py_func(scores[w], c) for c in range(columns)], w)
        for w in range(warps):                 # barrier; softmax; P^T to pbuf
            for c in range(columns):
                m[w, c], sums[w, c], correction = steps.softmax_finish.py_func(
                    scores[w], c, exchange.gather_max.py_func(red, lane_red, c), m[w, c], sums[w, c], scale_log2)
                for i in range(acc.shape[1]):
                    if 2 * ((i >> 2) % (block_m // 8)) + (i & 1) == c:
                        acc[w, i] *= correction
            pf_warp = np.zeros((exchange.p_regs_warp, 32), np.int64)
            steps.p_fragments.py_func(pf_warp, scores[w])
            exchange.publish_p.py_func(words, p_lane, pf_warp, w)
        for w in range(warps):                 # barrier; O^T of the warp's dims
            steps.pv_tile.py_func(acc[w], words, p_lane, v_tiles[t], w * dim_blocks, LANES)
    for w in range(warps):
        publish([kq_steps.column_sum.py_func(sums[w, c]) for c in range(columns)], w)
    totals = np.array([[exchange.gather_sum.py_func(red, lane_red, c) for c in range(columns)]
                       for _ in range(warps)], np.float32)
    out = np.full(block_m * head_dim, np.nan, np.float32)
    for w in range(warps):
        for c in range(columns):
            row = 8 * (c >> 1) + 2 * (LANES & 3) + (c & 1)
            steps.store_acc_column.py_func(out, row * head_dim, acc[w], c, (1.0 / totals[w, c]).astype(np.float32),
                                           LANES >> 2, w * dim_blocks)
    return out.reshape(block_m, head_dim)


# (dtype, head dim, rows per warp): 32, 16 and 8 query rows a CTA
CASES = [("bf16", 128, 8), ("e4m3", 128, 8), ("bf16", 64, 8), ("e4m3", 256, 8), ("e4m3", 128, 4),
         ("bf16", 256, 2), ("e4m3", 64, 2)]


@pytest.mark.parametrize("dtype, head_dim, rows", CASES)
def test_emulated_shared_tile_cta_matches_float64_attention(emulated, dtype, head_dim, rows):
    variant = Variant(dtype=dtype, head_dim=head_dim, block_n=64, consumer_warps=4, load_path="cp_async",
                      producer_warps=4, score_layout="kq_wgmma", rows_per_warp=rows)
    check_warp_attention(run_cta, emulated, variant, variant.block_m, seed=head_dim * 64 + rows)


def test_a_misplaced_p_block_is_caught(emulated, monkeypatch):
    """The check above can fail: warps that publish P^T over each other break it."""
    make = consumer_kq_wgmma.make_exchange

    def misplaced(*args):
        parts = make(*args)
        publish_p = parts.publish_p.py_func
        parts.publish_p = type("F", (), {"py_func": staticmethod(
            lambda pbuf, p_lane, pf_warp, warp: publish_p(pbuf, p_lane, pf_warp, 0))})
        return parts

    monkeypatch.setattr(consumer_kq_wgmma, "make_exchange", misplaced)
    with pytest.raises(AssertionError, match="max .error"):
        test_emulated_shared_tile_cta_matches_float64_attention(emulated, "bf16", 128, 8)


@pytest.mark.parametrize("fields, message", [
    ({"consumer_warps": 2}, "runs one warpgroup"),
    ({"block_n": 32}, "runs one warpgroup"),
    ({"rows_per_warp": 16}, "rows_per_warp=16"),
    ({"consumer_warps": 8}, "consumer_warps=8"),
])
def test_shared_tile_variants_it_cannot_divide_are_refused(fields, message):
    kwargs = {"dtype": "bf16", "head_dim": 128, "block_n": 64, "consumer_warps": 4,
              "score_layout": "kq_wgmma", "rows_per_warp": 8, **fields}
    with pytest.raises(VariantError, match=message):
        Variant(**kwargs)


def test_shared_tile_scratch_is_in_the_shared_memory_budget():
    shared = Variant(dtype="e4m3", head_dim=128, block_n=64, consumer_warps=4, score_layout="kq_wgmma",
                     rows_per_warp=8)
    kq = Variant(dtype="e4m3", head_dim=128, block_n=64, consumer_warps=4, score_layout="kq",
                 rows_per_warp=8)
    # red: 32 rows x 4 warps floats; pbuf: 64 tokens x 32 rows fp16
    assert shared.dynamic_shared_bytes - kq.dynamic_shared_bytes == 4 * 32 * 4 + 2 * 64 * 32
    lazy = Variant(dtype="e4m3", head_dim=128, block_n=64, consumer_warps=4, score_layout="kq_wgmma_rs_lazy",
                   rows_per_warp=8)
    # red, and two P^T buffers of 32 rows x 64 e4m3 tokens (it speculates at head dim 128)
    assert lazy.dynamic_shared_bytes - kq.dynamic_shared_bytes == 4 * 32 * 4 + 2 * 32 * 64


def _speculating_variant(head_dim=256):
    return Variant(dtype="e4m3", head_dim=head_dim, load_path="tma", consumer_warps=4, block_n=64,
                   score_layout="kq_wgmma_rs_lazy", rows_per_warp=8)


def test_speculation_only_from_its_head_dim():
    from tma_kernels.paged_kv.geometry import SPECULATIVE_MIN_HEAD_DIM
    wide, narrow = _speculating_variant(SPECULATIVE_MIN_HEAD_DIM), _speculating_variant(64)
    assert wide.speculates and not narrow.speculates
    assert wide.p_buffer_bytes == 2 * wide.p_tile_bytes       # tile k's P^T in buffer k & 1
    assert narrow.p_buffer_bytes == narrow.p_tile_bytes
    assert not Variant(dtype="e4m3", head_dim=256, load_path="tma", consumer_warps=4, block_n=64,
                       score_layout="kq_wgmma", rows_per_warp=8).speculates


def test_speculate_flags_exactly_the_moves_of_the_lazy_step(monkeypatch):
    """speculate against the exact lazy step (kq_steps' softmax_finish) on one lane's 16
    scores (4 query blocks x 2 columns x 2 tokens), under running maxima that stay, that have
    no value yet (-inf), and that one score passes or nearly passes by the threshold: it flags
    a tile exactly where some column's max moves, and where none does its P and sums are the
    exact step's (whose corrections are then 1)."""
    rung4 = consumer_kq_wgmma_rs_lazy
    monkeypatch.setattr(rung4, "ex2_approx", np.exp2)
    monkeypatch.setattr(kq_steps, "ex2_approx", np.exp2)
    monkeypatch.setattr(kq_steps, "select", np.where)
    monkeypatch.setattr(rung4, "uint32", lambda x: np.uint32(x))
    parts = rung4.make_consumer(_speculating_variant())
    speculate, softmax_finish = parts.speculate.py_func, parts.steps.softmax_finish.py_func
    scale_log2 = np.float32(0.5)
    raw = np.random.default_rng(0).uniform(-4, 4, 16).astype(np.float32)
    columns = [[j for j in range(16) if 2 * (j >> 2) + (j & 1) == c] for c in range(8)]
    standing = np.array([raw[cols].max() * scale_log2 for cols in columns], np.float32)
    lazy = np.float32(rung4.LAZY_RESCALE_LOG2)
    j, c = 5, 2 * (5 >> 2) + (5 & 1)            # score 5 is of column 3
    past, within = raw.copy(), raw.copy()
    past[j] = (standing[c] + lazy + 1) / scale_log2
    within[j] = (standing[c] + lazy - 1) / scale_log2
    cases = [(raw, standing, False), (raw, np.full(8, -np.inf, np.float32), True),
             (past, standing, True), (within, standing, False)]
    for tile, m_run, moves in cases:
        exact = tile.copy()
        steps = [softmax_finish(exact, k, tile[cols].max(), m_run[k], np.float32(0), scale_log2)
                 for k, cols in enumerate(columns)]
        assert any(m_new != m_old for (m_new, _, _), m_old in zip(steps, m_run)) == moves
        scores, sums = tile.copy(), np.zeros(8, np.float32)
        with np.errstate(over="ignore"):        # no max yet: P overflows, and is discarded
            assert speculate(scores, sums, m_run, scale_log2) == moves
        if not moves:
            np.testing.assert_array_equal(scores, exact)
            np.testing.assert_array_equal(sums, [l_new for _, l_new, _ in steps])
            assert all(correction == 1 for _, _, correction in steps)
