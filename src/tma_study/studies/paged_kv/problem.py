"""One paged-attention problem on the host: its shape, fresh random inputs in a shuffled
page pool, and the float64 reference output.

The pool holds every sequence's pages in a random (non-contiguous) order, a few spare
pages of random data no sequence uses, and one *poison page* of NaNs; page-table
entries past each sequence's last page point at the poison page, so a kernel that reads
a page it should not turns its output into NaN. Rows of a sequence's last page past its
length hold finite random data (the kernel reads and masks them, as FA3's TMA path does).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .numerics import nan_bits, round_to

SPARE_PAGES = 3
EXTRA_PAGE_TABLE_COLUMNS = 1        # entries past every sequence's pages (poison)


class ProblemError(ValueError):
    """A problem shape the kernel does not take; the message names the field."""


@dataclass(frozen=True)
class Problem:
    """Shape of one attention call over a paged KV cache (FA3's layouts)."""

    batch: int
    seqlen_q: int
    q_heads: int
    kv_heads: int
    head_dim: int
    page_size: int
    seqlens_k: tuple[int, ...]
    dtype: str = "bf16"
    causal: bool = True
    softmax_scale: float | None = None

    def __post_init__(self):
        object.__setattr__(self, "seqlens_k", tuple(int(n) for n in self.seqlens_k))
        if len(self.seqlens_k) != self.batch:
            raise ProblemError(f"seqlens_k has {len(self.seqlens_k)} entries; batch is {self.batch}")
        if self.q_heads % self.kv_heads:
            raise ProblemError(f"q_heads={self.q_heads} is not a multiple of kv_heads={self.kv_heads}")
        if self.page_size < 1 or self.page_size & (self.page_size - 1):
            raise ProblemError(f"page_size={self.page_size} is not a power of two")
        short = [n for n in self.seqlens_k if n < self.seqlen_q]
        if short:
            raise ProblemError(f"seqlens_k {short} < seqlen_q={self.seqlen_q}: every cache must hold "
                               "at least the query tokens (they are its last tokens)")

    @property
    def group(self) -> int:
        return self.q_heads // self.kv_heads

    @property
    def scale(self) -> float:
        return self.softmax_scale if self.softmax_scale is not None else 1.0 / math.sqrt(self.head_dim)

    @property
    def pages_per_sequence(self) -> list[int]:
        return [-(-n // self.page_size) for n in self.seqlens_k]

    @property
    def element_bytes(self) -> int:
        return 2 if self.dtype == "bf16" else 1

    def kv_bytes_read(self) -> int:
        """K and V bytes every sequence's cache holds (what a decode step must read)."""
        return 2 * sum(self.seqlens_k) * self.kv_heads * self.head_dim * self.element_bytes

    def flops(self) -> int:
        """2 matmuls x 2 flops per multiply-add over the (causally) visible key range."""
        visible = 0
        for n in self.seqlens_k:
            first = n - self.seqlen_q + 1
            visible += (self.seqlen_q * first + self.seqlen_q * (self.seqlen_q - 1) // 2
                        if self.causal else self.seqlen_q * n)
        return 4 * visible * self.q_heads * self.head_dim


@dataclass
class HostInputs:
    """Bits the kernel reads and exact float64 values for the reference."""

    problem: Problem
    q_bits: np.ndarray              # (batch, seqlen_q, q_heads, head_dim) uint16 / uint8
    k_pool_bits: np.ndarray         # (num_pages, page_size, kv_heads, head_dim)
    v_pool_bits: np.ndarray
    page_table: np.ndarray          # int32 (batch, max_pages)
    seqlens_k: np.ndarray           # int32 (batch,)
    q: np.ndarray                   # float64 values of q_bits
    k_pool: np.ndarray              # float64 values of the pools (poison page: NaN)
    v_pool: np.ndarray
    poison_page: int

    def keys(self, b: int) -> np.ndarray:
        """(seqlen_k[b], kv_heads, head_dim) float64 K of sequence b, gathered through its pages."""
        return self._gather(self.k_pool, b)

    def values(self, b: int) -> np.ndarray:
        return self._gather(self.v_pool, b)

    def _gather(self, pool, b):
        n = int(self.seqlens_k[b])
        tokens = np.arange(n)
        pages = self.page_table[b, tokens // self.problem.page_size]
        return pool[pages, tokens % self.problem.page_size]


def make_inputs(problem: Problem, rng: np.random.Generator) -> HostInputs:
    """Fresh random inputs (standard normal, rounded to the dtype) in a shuffled pool."""
    p = problem
    pages = p.pages_per_sequence
    data_pages = sum(pages) + SPARE_PAGES
    num_pages = data_pages + 1
    order = rng.permutation(num_pages)
    poison_page = int(order[-1])
    max_pages = max(pages) + EXTRA_PAGE_TABLE_COLUMNS
    page_table = np.full((p.batch, max_pages), poison_page, dtype=np.int32)
    cursor = 0
    for b, count in enumerate(pages):
        page_table[b, :count] = order[cursor:cursor + count]
        cursor += count
    q_bits, q = round_to(p.dtype, rng.standard_normal((p.batch, p.seqlen_q, p.q_heads, p.head_dim)))
    pool_shape = (num_pages, p.page_size, p.kv_heads, p.head_dim)
    k_bits, k_pool = round_to(p.dtype, rng.standard_normal(pool_shape))
    v_bits, v_pool = round_to(p.dtype, rng.standard_normal(pool_shape))
    for bits, values in ((k_bits, k_pool), (v_bits, v_pool)):
        bits[poison_page] = nan_bits(p.dtype)
        values[poison_page] = np.nan
    return HostInputs(p, q_bits, k_bits, v_bits, page_table, np.array(p.seqlens_k, dtype=np.int32),
                      q, k_pool, v_pool, poison_page)


# How far the kernel may stray from the float64 reference (``output_tolerance``). The kernel
# rounds the softmax weights P to the MMA operand type before O += P V, as FA3 does, while the
# row sum l adds the unrounded fp32 weights. A weight in e4m3's normal range carries a relative
# error of at most its unit roundoff; below the smallest normal (2**-6) the spacing is 2**-9,
# an absolute error of at most 2**-10 (bf16 shares float32's exponent range: no such term).
P_UNIT_ROUNDOFF = {"bf16": 2.0 ** -8, "e4m3": 2.0 ** -4}
P_SUBNORMAL_ERROR = {"bf16": 0.0, "e4m3": 2.0 ** -10}
# Everything else: fp32 accumulation order, ex2.approx, the output's rounding to bf16
# (inputs are standard normal: |O| stays below a few units).
OTHER_OUTPUT_ERROR = 1e-2
LSE_TOLERANCE = 1e-2                # log2 units; l adds unrounded fp32 weights
# e4m3 scores from Hopper's fp8 wgmma (the kq_wgmma consumers' S^T = K Q^T): its accumulator keeps
# about 14 mantissa bits (DeepSeek-V3 technical report, section 3.3.2, on the H800), so a score is
# modelled as moving by up to SCORE_ACCUMULATION_ROUNDOFF * sum_i |q_i k_i| at each of its
# head_dim / FP8_K_STEP k-steps (a bound: the H200's errors stayed within a quarter of it). On
# unit-variance inputs that is under 1e-2 (log2 units); on keys grown 9-fold along a sequence
# (scores up to some 50 log2 units) the H200's lse strayed by up to 2.3e-2, past LSE_TOLERANCE alone.
SCORE_ACCUMULATION_ROUNDOFF = {"bf16": 0.0, "e4m3": 2.0 ** -13}
FP8_K_STEP = 32                     # elements of one fp8 wgmma k-step (32 bytes of K and of Q)


def _rows(inputs: HostInputs, causal: bool):
    """(b, h, softmax weights normalized (seqlen_q, n), visible mask, row max, row sum, V (n, d),
    K (n, d)) of every (sequence, query head), in float64."""
    p = inputs.problem
    for b in range(p.batch):
        keys, values = inputs.keys(b), inputs.values(b)          # (n, kv_heads, d)
        n = keys.shape[0]
        visible = np.ones((p.seqlen_q, n), dtype=bool)
        if causal:
            visible = np.arange(n)[None, :] <= (n - p.seqlen_q + np.arange(p.seqlen_q))[:, None]
        for h in range(p.q_heads):
            kv = h // p.group
            scores = p.scale * inputs.q[b, :, h, :] @ keys[:, kv, :].T        # (seqlen_q, n)
            scores = np.where(visible, scores, -np.inf)
            top = scores.max(axis=1, keepdims=True)
            weights = np.exp(scores - top)
            total = weights.sum(axis=1, keepdims=True)
            yield b, h, weights / total, visible, top, total, values[:, kv, :], keys[:, kv, :]


def reference(inputs: HostInputs, causal: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """float64 attention: (out (batch, seqlen_q, q_heads, head_dim), lse_log2 (batch, seqlen_q,
    q_heads)) where lse_log2 = log2(sum_j exp(scale * q . k_j)). ``causal`` overrides the
    problem's own (a diagnostic: does the kernel mask?)."""
    p = inputs.problem
    causal = p.causal if causal is None else causal
    out = np.empty((p.batch, p.seqlen_q, p.q_heads, p.head_dim))
    lse = np.empty((p.batch, p.seqlen_q, p.q_heads))
    for b, h, weights, _, top, total, values, _ in _rows(inputs, causal):
        out[b, :, h, :] = weights @ values
        lse[b, :, h] = (top[:, 0] + np.log(total[:, 0])) / math.log(2.0)
    return out, lse


class Expected(NamedTuple):
    """What a kernel must produce: the float64 reference and how far it may stray from it."""

    out: np.ndarray           # (batch, seqlen_q, q_heads, head_dim)
    lse: np.ndarray           # (batch, seqlen_q, q_heads), log2 units
    tolerance: np.ndarray     # largest |O - out| allowed per element (output_tolerance)
    lse_tolerance: np.ndarray  # largest |lse - lse| allowed per row, log2 units


def score_error_log2(p: Problem, queries: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """(seqlen_q,) the most a score of a row's ``queries`` (seqlen_q, d) against its ``keys``
    (n, d) may move through the tensor cores' accumulation (SCORE_ACCUMULATION_ROUNDOFF), in log2
    units, over all of the keys (a causal row's masked ones included: a bound); zero for bf16."""
    roundoff = SCORE_ACCUMULATION_ROUNDOFF[p.dtype]
    if not roundoff:
        return np.zeros(p.seqlen_q)
    magnitude = np.abs(queries) @ np.abs(keys).T                                        # (seqlen_q, n)
    k_steps = -(-p.head_dim // FP8_K_STEP)
    return k_steps * roundoff * p.scale / math.log(2.0) * magnitude.max(axis=1)


def expected(inputs: HostInputs) -> Expected:
    """The reference and its per-element tolerance, from one pass over the softmax rows.

    Rounding each weight P_j to the operand type moves O_d by at most
    u * sum_j P_j |V_jd| + e * sum_j |V_jd| / l (u, e: P_UNIT_ROUNDOFF, P_SUBNORMAL_ERROR;
    l >= 1: the row sum relative to the row max); OTHER_OUTPUT_ERROR covers the rest. For
    e4m3 this is about 0.06 on long rows, more on rows of a few keys, where one weight's
    rounding is not averaged out (a causal prefill's first rows); a wrong page, tile or mask
    moves O by order one.

    e4m3 scores may also move by up to ``score_error_log2`` (the fp8 tensor cores'
    accumulation): lse, a smooth maximum of the scores, by as much, and each normalised weight
    by a factor within 2 ** (+-2 of it), so O_d by (2 ** (2 s) - 1) * sum_j P_j |V_jd| more."""
    p = inputs.problem
    u, e = P_UNIT_ROUNDOFF[p.dtype], P_SUBNORMAL_ERROR[p.dtype]
    out = np.empty((p.batch, p.seqlen_q, p.q_heads, p.head_dim))
    lse = np.empty((p.batch, p.seqlen_q, p.q_heads))
    bound = np.empty_like(out)
    lse_bound = np.empty_like(lse)
    for b, h, weights, visible, top, total, values, keys in _rows(inputs, p.causal):
        magnitude = np.abs(values)
        score_error = score_error_log2(p, inputs.q[b, :, h, :], keys)
        out[b, :, h, :] = weights @ values
        lse[b, :, h] = (top[:, 0] + np.log(total[:, 0])) / math.log(2.0)
        lse_bound[b, :, h] = LSE_TOLERANCE + score_error
        moved = np.expm1(2.0 * math.log(2.0) * score_error)[:, None]
        bound[b, :, h, :] = (u + moved) * (weights @ magnitude) + e * (visible @ magnitude) / total
    return Expected(out, lse, bound + OTHER_OUTPUT_ERROR, lse_bound)


def output_tolerance(inputs: HostInputs) -> np.ndarray:
    """Largest |O - reference| allowed per output element (``expected``'s tolerance)."""
    return expected(inputs).tolerance


def timed_problem(config) -> Problem:
    """The timed problem of ``config`` (a grid.SweepConfig): every sequence holds the phase's context."""
    p, s = config.phase, config.shape
    return Problem(batch=p.batch, seqlen_q=p.seqlen_q, q_heads=s.q_heads, kv_heads=s.kv_heads,
                   head_dim=s.head_dim, page_size=config.page_size, seqlens_k=(p.context,) * p.batch,
                   dtype=config.dtype)
