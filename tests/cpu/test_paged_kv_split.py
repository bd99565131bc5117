"""The split decode consumer (consumer_split.py), checked on the CPU: its warps are emulated
one after another between the points where the kernel has a named barrier, so each reads
only what the others wrote before that barrier. The 8 x warps query rows over two KV tiles
must equal a float64 softmax(Q K^T) V: a warp reading another's token or dim block, a
wrong offset in ``red`` / ``pbuf`` / ``qbuf``, or a running max that differs between warps
gives O(1) errors.

What this cannot see: causal masking, timing, and whether the barriers are where the
emulation assumes (the GPU tests run the kernel itself: tests/gpu/test_paged_kv_gpu.py).
"""
import numpy as np
import pytest
import warp_emulation
from tma_kernels.paged_kv import Variant, VariantError, consumer_kq, consumer_split
from warp_emulation import (
    LANES,
    LOG2_E,
    check_warp_attention,
    patch_consumer,
    shared_image,
)


@pytest.fixture
def emulated(monkeypatch):
    state = patch_consumer(monkeypatch, consumer_kq)
    monkeypatch.setattr(consumer_split, "uint32", lambda x: np.asarray(x, dtype=np.int64))
    monkeypatch.setattr(consumer_split, "max", np.maximum, raising=False)
    monkeypatch.setattr(consumer_split, "ex2_approx", consumer_kq.ex2_approx)      # the emulation
    monkeypatch.setattr(consumer_split, "named_barrier_sync", lambda barrier, threads: None)
    return state


def run_cta(state, variant, q_bits, k_bits, v_bits, scale):
    """Emulate the split consumer's warps over the K/V tiles; returns (block_m, head_dim).
    kq_wgmma_dual: each group over its tiles (g, g + 2, ...), with its own ``red`` and
    ``pbuf``, then group 1's state through the ring to group 0 (``merge_groups``). The
    emulation computes S^T with kq_split's mma.sync steps: the wgmma fills the same registers
    (checked on the GPU by tests/gpu/test_paged_kv_gpu.py), so what is checked here is the
    exchange, the groups' tiles and their merge."""
    parts = consumer_split.make_split_consumer(variant)
    steps, exchange = parts.steps, parts.exchange
    warps, block_m, head_dim = variant.tile_warps, variant.block_m, variant.head_dim
    groups = variant.consumer_groups
    columns = 2 * block_m // 8
    token_rows = variant.block_n // warps
    dim_blocks = head_dim // 16 // warps
    k_tiles, v_tiles = shared_image(state, variant, q_bits, k_bits, v_bits)
    lane_red = exchange.red_lane.py_func(0, LANES)
    p_words = block_m * variant.block_n // 2
    p_lane = LANES
    qf = np.zeros((steps.q_regs, 32), np.int64)
    steps.load_q_fragments.py_func(qf, 0, 0, LANES)
    scale_log2 = np.float32(scale * LOG2_E)
    finished = []                                   # per group: (O^T, maxima, sums) of each warp
    for g in range(groups):
        red = np.full(block_m * warps, np.nan, np.float32)
        words = np.zeros(p_words + steps.q_regs * 32, np.int64)
        q_lane = p_words + LANES
        if exchange.q_regs:                         # kq_split: Q's fragments through qbuf
            for w in range(warps):
                exchange.publish_q.py_func(words, q_lane, qf, w)
        else:                                       # the wgmma reads Q; the emulation's mmas read qf
            words[p_words:] = qf.reshape(-1)
        scores = np.zeros((warps, token_rows // 16 * block_m // 8 * 4, 32), np.float32)
        acc = np.zeros((warps, dim_blocks * block_m // 8 * 4, 32), np.float32)
        m = np.full((warps, columns, 32), -np.inf, np.float32)
        sums = np.zeros((warps, columns, 32), np.float32)

        def publish(values, w, red=red):
            for lane in range(4):
                exchange.publish.py_func(red, lane_red[lane], [v[lane] for v in values], w, lane)

        for t in range(g, warp_emulation.TILES, groups):
            for w in range(warps):                 # S^T of the warp's tokens, its maxima to red
                steps.scores_tile.py_func(scores[w], words, q_lane,
                                          k_tiles[t] + w * token_rows * variant.row_bytes, LANES)
                publish([steps.column_max.py_func(scores[w], c) for c in range(columns)], w)
            for w in range(warps):                 # barrier; softmax; P^T to pbuf
                for c in range(columns):
                    m[w, c], sums[w, c], correction = steps.softmax_finish.py_func(
                        scores[w], c, exchange.gather_max.py_func(red, lane_red, c), m[w, c], sums[w, c],
                        scale_log2)
                    for i in range(acc.shape[1]):
                        if 2 * ((i >> 2) % (block_m // 8)) + (i & 1) == c:
                            acc[w, i] *= correction
                pf_warp = np.zeros((exchange.p_regs_warp, 32), np.int64)
                steps.p_fragments.py_func(pf_warp, scores[w])
                exchange.publish_p.py_func(words, p_lane, pf_warp, w)
            for w in range(warps):                 # barrier; O^T of the warp's dims
                steps.pv_tile.py_func(acc[w], words, p_lane, v_tiles[t], w * dim_blocks, LANES)
        for w in range(warps):
            publish([consumer_kq.column_sum.py_func(sums[w, c]) for c in range(columns)], w)
        totals = np.array([[exchange.gather_sum.py_func(red, lane_red, c) for c in range(columns)]
                           for _ in range(warps)], np.float32)
        finished.append((acc, m, totals))
    acc, m, totals = finished[0]
    if groups > 1:                                  # group 1 writes (first), group 0 merges
        ring = np.full(consumer_split.merge_words(variant), np.nan, np.float32)
        for g in (1, 0):
            for w in range(warps):
                own, other = np.zeros((columns, 32), np.float32), np.zeros((columns, 32), np.float32)
                parts.merge_groups.py_func(ring, 0, finished[g][0][w], finished[g][1][w], finished[g][2][w],
                                           own, other, g, w * 32 + LANES)
    out = np.full(block_m * head_dim, np.nan, np.float32)
    for w in range(warps):
        for c in range(columns):
            row = 8 * (c >> 1) + 2 * (LANES & 3) + (c & 1)
            steps.store_acc_column.py_func(out, row * head_dim, acc[w], c, (1.0 / totals[w, c]).astype(np.float32),
                                           LANES >> 2, w * dim_blocks)
    return out.reshape(block_m, head_dim)


# (dtype, head dim, block_n, warps, rows per warp): 32, 16 and 8 query rows a CTA
CASES = [("bf16", 128, 64, 4, 8), ("e4m3", 128, 64, 4, 8), ("bf16", 64, 32, 2, 8), ("e4m3", 256, 64, 4, 8),
         ("e4m3", 128, 64, 4, 4), ("bf16", 256, 64, 4, 2), ("e4m3", 64, 128, 4, 2)]


@pytest.mark.parametrize("dtype, head_dim, block_n, warps, rows", CASES)
def test_emulated_split_cta_matches_float64_attention(emulated, dtype, head_dim, block_n, warps, rows):
    variant = Variant(dtype=dtype, head_dim=head_dim, block_n=block_n, consumer_warps=warps,
                      load_path="cp_async", producer_warps=4, score_layout="kq_split", rows_per_warp=rows)
    check_warp_attention(run_cta, emulated, variant, variant.block_m,
                         seed=head_dim * block_n + warps + rows)


# (dtype, head dim, rows per warp, tiles): the dual consumer's groups over an even and an odd
# count of tiles (group 0 takes one more)
DUAL_CASES = [("bf16", 128, 8, 2), ("e4m3", 128, 8, 3), ("e4m3", 256, 2, 3), ("bf16", 64, 4, 4),
              ("e4m3", 128, 2, 1)]


@pytest.mark.parametrize("dtype, head_dim, rows, tiles", DUAL_CASES)
def test_emulated_dual_cta_matches_float64_attention(emulated, monkeypatch, dtype, head_dim, rows, tiles):
    """kq_wgmma_dual: two groups of 4 warps over alternate tiles, merged at the end."""
    monkeypatch.setattr(warp_emulation, "TILES", tiles)
    variant = Variant(dtype=dtype, head_dim=head_dim, block_n=64, consumer_warps=8, load_path="cp_async",
                      producer_warps=4, score_layout="kq_wgmma_dual", rows_per_warp=rows)
    check_warp_attention(run_cta, emulated, variant, variant.block_m, seed=head_dim + rows + tiles)


def test_a_merge_that_drops_group_1_is_caught(emulated, monkeypatch):
    """The dual check can fail: group 0 writing its own state alone misses group 1's tiles."""
    make = consumer_split.make_split_consumer

    def unmerged(variant):
        parts = make(variant)
        parts.merge_groups = type("F", (), {"py_func": staticmethod(lambda *args: None)})
        return parts

    monkeypatch.setattr(consumer_split, "make_split_consumer", unmerged)
    with pytest.raises(AssertionError, match="max .error"):
        test_emulated_dual_cta_matches_float64_attention(emulated, monkeypatch, "bf16", 128, 8, 2)


def test_a_misplaced_p_block_is_caught(emulated, monkeypatch):
    """The check above can fail: warps that publish P^T over each other break it."""
    make = consumer_split.make_split_exchange

    def misplaced(*args):
        parts = make(*args)
        publish_p = parts.publish_p.py_func
        parts.publish_p = type("F", (), {"py_func": staticmethod(
            lambda pbuf, p_lane, pf_warp, warp: publish_p(pbuf, p_lane, pf_warp, 0))})
        return parts

    monkeypatch.setattr(consumer_split, "make_split_exchange", misplaced)
    with pytest.raises(AssertionError, match="max .error"):
        test_emulated_split_cta_matches_float64_attention(emulated, "bf16", 128, 64, 4, 8)


@pytest.mark.parametrize("fields, message", [
    ({"consumer_warps": 1}, "consumer_warps=1"),
    ({"block_n": 32, "consumer_warps": 4}, "block_n=32"),
    ({"rows_per_warp": 16}, "rows_per_warp=16"),
    ({"rows_per_warp": 2, "consumer_warps": 2}, "whole mma N blocks of 8 rows"),
])
def test_split_variants_it_cannot_divide_are_refused(fields, message):
    kwargs = {"dtype": "bf16", "head_dim": 128, "block_n": 64, "consumer_warps": 4,
              "score_layout": "kq_split", "rows_per_warp": 8, **fields}
    with pytest.raises(VariantError, match=message):
        Variant(**kwargs)


def test_split_scratch_is_in_the_shared_memory_budget():
    split = Variant(dtype="e4m3", head_dim=128, block_n=64, consumer_warps=4, score_layout="kq_split",
                    rows_per_warp=8)
    kq = Variant(dtype="e4m3", head_dim=128, block_n=64, consumer_warps=4, score_layout="kq",
                 rows_per_warp=8)
    # red: 32 rows x 4 warps floats; pbuf: 64 tokens x 32 rows fp16; qbuf: 32 rows x 128 dims fp16
    assert split.dynamic_shared_bytes - kq.dynamic_shared_bytes == 4 * 32 * 4 + 2 * 64 * 32 + 2 * 32 * 128


def _speculating_variant(head_dim=256):
    return Variant(dtype="e4m3", head_dim=head_dim, load_path="tma", consumer_warps=4, block_n=64,
                   score_layout="kq_wgmma_rs_lazy", rows_per_warp=8)


def test_speculation_only_from_its_head_dim():
    from tma_kernels.paged_kv.consumer_pv import p_buffer_bytes, p_tile_bytes
    from tma_kernels.paged_kv.geometry import SPECULATIVE_MIN_HEAD_DIM
    wide, narrow = _speculating_variant(SPECULATIVE_MIN_HEAD_DIM), _speculating_variant(64)
    assert wide.speculates and not narrow.speculates
    assert p_buffer_bytes(wide) == 2 * p_tile_bytes(wide)       # tile k's P^T in buffer k & 1
    assert p_buffer_bytes(narrow) == p_tile_bytes(narrow)
    assert not Variant(dtype="e4m3", head_dim=256, load_path="tma", consumer_warps=4, block_n=64,
                       score_layout="kq_wgmma_rs", rows_per_warp=8).speculates


def test_speculate_flags_exactly_the_moves_of_the_lazy_step(monkeypatch):
    """speculate against the exact lazy step (consumer_kq's softmax_finish) on one lane's 16
    scores (4 query blocks x 2 columns x 2 tokens), under running maxima that stay, that have
    no value yet (-inf), and that one score passes or nearly passes by the threshold: it flags
    a tile exactly where some column's max moves, and where none does its P and sums are the
    exact step's (whose corrections are then 1)."""
    monkeypatch.setattr(consumer_split, "ex2_approx", np.exp2)
    monkeypatch.setattr(consumer_kq, "ex2_approx", np.exp2)
    monkeypatch.setattr(consumer_kq, "select", np.where)
    monkeypatch.setattr(consumer_split, "uint32", lambda x: np.uint32(x))
    parts = consumer_split.make_split_consumer(_speculating_variant())
    speculate, softmax_finish = parts.speculate.py_func, parts.steps.softmax_finish.py_func
    scale_log2 = np.float32(0.5)
    raw = np.random.default_rng(0).uniform(-4, 4, 16).astype(np.float32)
    columns = [[j for j in range(16) if 2 * (j >> 2) + (j & 1) == c] for c in range(8)]
    standing = np.array([raw[cols].max() * scale_log2 for cols in columns], np.float32)
    lazy = np.float32(consumer_split.LAZY_RESCALE_LOG2)
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
