"""Host-side bf16 / e4m3 rounding (checked against known bit patterns), the problem
generator's shuffled pool and poison page, and the float64 reference."""
import math

import numpy as np
import pytest

from tma_study.studies.paged_kv import numerics
from tma_study.studies.paged_kv.problem import (
    Problem,
    ProblemError,
    make_inputs,
    reference,
)


@pytest.mark.parametrize("value, bits", [
    (1.0, 0x3F80), (-2.0, 0xC000), (math.pi, 0x4049), (0.0, 0x0000),
    (np.float32(np.uint32(0x3F808000).view(np.float32)), 0x3F80),   # tie, even stays
    (np.float32(np.uint32(0x3F818000).view(np.float32)), 0x3F82),   # tie, odd rounds up
    (np.float32(np.uint32(0x3F808001).view(np.float32)), 0x3F81),   # just above the tie
    (np.inf, 0x7F80), (3.3895314e38, 0x7F7F),
])
def test_bf16_rounding(value, bits):
    assert numerics.float_to_bf16_bits([value])[0] == bits


def test_bf16_nan_and_round_trip():
    assert numerics.float_to_bf16_bits([np.nan])[0] == 0x7FC0
    codes = np.arange(0, 0x7F80, 7, dtype=np.uint16)
    assert np.array_equal(numerics.float_to_bf16_bits(numerics.bf16_bits_to_float(codes)), codes)


@pytest.mark.parametrize("value, bits", [
    (1.0, 0x38), (-2.0, 0xC0), (448.0, 0x7E), (-448.0, 0xFE), (0.5, 0x30),
    (2.0 ** -6, 0x08),            # smallest normal
    (2.0 ** -9, 0x01),            # smallest subnormal
    (2.0 ** -10, 0x00),           # half of it: tie to even (zero)
    (1.5 * 2.0 ** -9, 0x02),      # tie between codes 1 and 2: even
    (1.0625, 0x38),               # tie between 1.0 (0x38) and 1.125 (0x39): even
    (1.1875, 0x3A),               # tie between 1.125 and 1.25: even (0x3A)
    (500.0, 0x7E), (1e9, 0x7E), (-1e9, 0xFE),   # satfinite
    (-0.0, 0x80), (240.0, 0x77),
])
def test_e4m3_rounding(value, bits):
    assert numerics.float_to_e4m3_bits([value])[0] == bits


def test_e4m3_table_and_round_trip():
    values = numerics.E4M3_VALUES
    assert np.isnan(values[0x7F]) and np.isnan(values[0xFF])
    assert values[0x7E] == 448.0 and values[0x01] == 2.0 ** -9 and values[0x38] == 1.0
    finite = np.flatnonzero(~np.isnan(values)).astype(np.uint8)
    assert np.array_equal(numerics.float_to_e4m3_bits(values[finite]), finite)
    assert numerics.float_to_e4m3_bits([np.nan])[0] == 0x7F


def _nearest_e4m3(values):
    """The definition, by search: the nearest finite e4m3 value, ties to the even code."""
    x = np.asarray(values, dtype=np.float64)
    finite = numerics.E4M3_VALUES[:0x7F]                      # codes 0x00 .. 0x7E, increasing
    magnitude = np.minimum(np.abs(x), numerics.E4M3_MAX)
    upper = np.clip(np.searchsorted(finite, magnitude, side="left"), 0, 0x7E)
    lower = np.maximum(upper - 1, 0)
    gap_down, gap_up = magnitude - finite[lower], finite[upper] - magnitude
    take_upper = (gap_up < gap_down) | ((gap_up == gap_down) & (upper % 2 == 0))
    code = np.where(take_upper, upper, lower).astype(np.uint8)
    return np.where(np.signbit(x), code | 0x80, code).astype(np.uint8)


def test_e4m3_rounding_equals_the_nearest_value_search():
    finite = numerics.E4M3_VALUES[:0x7F]
    midpoints = (finite[1:] + finite[:-1]) / 2                 # every tie
    rng = np.random.default_rng(0)
    values = np.concatenate([finite, midpoints, np.nextafter(midpoints, 0), np.nextafter(midpoints, 1e9),
                             rng.standard_normal(200_000) * 4, rng.uniform(-500, 500, 100_000),
                             np.exp2(rng.uniform(-14, 9, 100_000)), [0.0, 448.0, 460.0, 464.0, 1e30]])
    values = np.concatenate([values, -values])
    assert np.array_equal(numerics.float_to_e4m3_bits(values), _nearest_e4m3(values))


def test_round_to_rejects_unknown_dtype():
    with pytest.raises(ValueError, match="'fp16' is not one of"):
        numerics.round_to("fp16", [1.0])


def small_problem(**fields):
    base = {"batch": 3, "seqlen_q": 4, "q_heads": 8, "kv_heads": 2, "head_dim": 64, "page_size": 16,
                "seqlens_k": (40, 4, 33), "dtype": "bf16", "causal": True}
    return Problem(**{**base, **fields})


def test_pool_is_shuffled_with_a_poison_page():
    inputs = make_inputs(small_problem(), np.random.default_rng(1))
    pages = inputs.problem.pages_per_sequence
    used = np.concatenate([inputs.page_table[b, :n] for b, n in enumerate(pages)])
    assert len(set(used.tolist())) == len(used) and inputs.poison_page not in used
    assert all((inputs.page_table[b, n:] == inputs.poison_page).all() for b, n in enumerate(pages))
    assert np.isnan(inputs.k_pool[inputs.poison_page]).all()
    assert np.isfinite(inputs.k_pool[used]).all()      # incl. rows past each sequence's end


def test_reference_matches_brute_force_softmax():
    inputs = make_inputs(small_problem(), np.random.default_rng(2))
    out, lse = reference(inputs)
    p = inputs.problem
    b, t, h = 0, 1, 5
    keys, values = inputs.keys(b)[:, h // p.group], inputs.values(b)[:, h // p.group]
    n = 40 - 4 + t + 1                                   # causal: bottom-right aligned
    scores = [p.scale * float(inputs.q[b, t, h] @ keys[j]) for j in range(n)]
    weights = [math.exp(s) for s in scores]
    expected = sum(w * values[j] for j, w in enumerate(weights)) / sum(weights)
    assert np.allclose(out[b, t, h], expected)
    assert math.isclose(lse[b, t, h], math.log2(sum(weights)))
    assert np.isfinite(out).all()                         # the poison page is never read


def test_problem_rejects_bad_shapes():
    with pytest.raises(ProblemError, match="not a multiple of kv_heads"):
        small_problem(q_heads=6, kv_heads=4)
    with pytest.raises(ProblemError, match="power of two"):
        small_problem(page_size=24)
    with pytest.raises(ProblemError, match="seqlens_k"):
        small_problem(seqlens_k=(40, 2, 33))


def test_flops_and_bytes():
    p = small_problem(causal=False, seqlens_k=(40, 8, 16), dtype="e4m3")
    assert p.kv_bytes_read() == 2 * 64 * 2 * 64 * 1
    assert p.flops() == 4 * 4 * 64 * 8 * 64
