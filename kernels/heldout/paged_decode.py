"""Decode attention over a paged K/V cache: one query token per sequence, grouped query heads.

The cache holds pages of PAGE tokens: (pages x PAGE) rows of (KV_HEADS x D) elements, so one
KV head's page is a PAGE x D box whose rows are KV_HEADS x D elements apart (FlashAttention-3's
and vLLM's layout); bf16 or fp8 e4m3 (converted to bf16 for the MMA). A sequence's pages are
listed in its row of the page table. One CTA takes one sequence and one KV head: the query
heads of its group (padded to GROUP_PAD rows for the MMA) against every page, STAGES deep, with
the online softmax in fp32. The two kernels differ only in how a K or V page is loaded: a TMA
tensor descriptor (one box per page), or pointers.
"""
import triton
import triton.language as tl


@triton.jit
def _queries(q_ptr, sequence, head, Q_HEADS: tl.constexpr, KV_HEADS: tl.constexpr,
             GROUP_PAD: tl.constexpr, D: tl.constexpr):
    """(the group's query rows, zero-padded to GROUP_PAD, and which rows are real)."""
    group = Q_HEADS // KV_HEADS
    rows = tl.arange(0, GROUP_PAD)
    real = rows < group
    offsets = (sequence * Q_HEADS + head * group + rows)[:, None] * D + tl.arange(0, D)[None, :]
    return tl.load(q_ptr + offsets, mask=real[:, None], other=0.0), rows, real


@triton.jit
def _attend(q, k, v, acc, m_i, l_i, qk_scale):
    qk = tl.dot(q, k.to(tl.bfloat16).T) * qk_scale
    m_new = tl.maximum(m_i, tl.max(qk, 1))
    p = tl.math.exp2(qk - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p.to(tl.bfloat16), v.to(tl.bfloat16))
    return acc, m_new, l_i


@triton.jit
def _finish(o_ptr, acc, l_i, sequence, head, rows, real, Q_HEADS: tl.constexpr, KV_HEADS: tl.constexpr,
            D: tl.constexpr):
    group = Q_HEADS // KV_HEADS
    offsets = (sequence * Q_HEADS + head * group + rows)[:, None] * D + tl.arange(0, D)[None, :]
    tl.store(o_ptr + offsets, (acc / l_i[:, None]).to(tl.bfloat16), mask=real[:, None])


@triton.jit
def decode_tma(q_ptr,           # queries, (sequences x Q_HEADS) x D, bf16
               k_desc,          # TMA descriptor of the K cache, (pages x PAGE) x (KV_HEADS x D), block PAGE x D
               v_desc,          # the same for V
               table_ptr,       # page table, sequences x PAGES_PER_SEQ, int32
               o_ptr,           # output, like the queries
               qk_scale, PAGES_PER_SEQ,
               Q_HEADS: tl.constexpr, KV_HEADS: tl.constexpr, GROUP_PAD: tl.constexpr, D: tl.constexpr,
               PAGE: tl.constexpr, STAGES: tl.constexpr):
    sequence, head = tl.program_id(0), tl.program_id(1)
    q, rows, real = _queries(q_ptr, sequence, head, Q_HEADS, KV_HEADS, GROUP_PAD, D)
    m_i = tl.full([GROUP_PAD], float("-inf"), tl.float32)
    l_i = tl.zeros([GROUP_PAD], tl.float32)
    acc = tl.zeros([GROUP_PAD, D], tl.float32)
    for i in tl.range(0, PAGES_PER_SEQ, num_stages=STAGES):
        page = tl.load(table_ptr + sequence * PAGES_PER_SEQ + i)
        k = k_desc.load([page * PAGE, head * D])
        v = v_desc.load([page * PAGE, head * D])
        acc, m_i, l_i = _attend(q, k, v, acc, m_i, l_i, qk_scale)
    _finish(o_ptr, acc, l_i, sequence, head, rows, real, Q_HEADS, KV_HEADS, D)


@triton.jit
def decode_pointer(q_ptr, k_ptr, v_ptr,   # queries; K and V caches, (pages x PAGE) x (KV_HEADS x D)
                   table_ptr, o_ptr, qk_scale, PAGES_PER_SEQ,
                   Q_HEADS: tl.constexpr, KV_HEADS: tl.constexpr, GROUP_PAD: tl.constexpr, D: tl.constexpr,
                   PAGE: tl.constexpr, STAGES: tl.constexpr):
    sequence, head = tl.program_id(0), tl.program_id(1)
    q, rows, real = _queries(q_ptr, sequence, head, Q_HEADS, KV_HEADS, GROUP_PAD, D)
    m_i = tl.full([GROUP_PAD], float("-inf"), tl.float32)
    l_i = tl.zeros([GROUP_PAD], tl.float32)
    acc = tl.zeros([GROUP_PAD, D], tl.float32)
    tokens = tl.arange(0, PAGE)
    cols = head * D + tl.arange(0, D)
    for i in tl.range(0, PAGES_PER_SEQ, num_stages=STAGES):
        page = tl.load(table_ptr + sequence * PAGES_PER_SEQ + i)
        offsets = (page * PAGE + tokens)[:, None] * (KV_HEADS * D) + cols[None, :]
        k = tl.load(k_ptr + offsets)
        v = tl.load(v_ptr + offsets)
        acc, m_i, l_i = _attend(q, k, v, acc, m_i, l_i, qk_scale)
    _finish(o_ptr, acc, l_i, sequence, head, rows, real, Q_HEADS, KV_HEADS, D)
