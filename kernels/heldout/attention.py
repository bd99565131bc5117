"""Attention forward over dense K and V: O = softmax(Q K^T * scale) V, bf16, head dim D.

Q, K, V and O are (batch x heads x tokens) x D, row-major. One CTA takes BLOCK_M query rows of
one head and walks its K and V in BLOCK_N-row tiles, STAGES deep, with FlashAttention's online
softmax in fp32 (causal: keys after the query are masked and the walk stops at the diagonal).
Q is loaded once by pointers and O stored by pointers in both kernels; they differ only in how
the K and V tiles are loaded: a TMA tensor descriptor, or pointers.
"""
import triton
import triton.language as tl

MASKED = tl.constexpr(-1.0e6)   # a masked score: exp2 of it is 0, and a row never holds only masked scores


@triton.jit
def _attend(q, k, v, acc, m_i, l_i, rows, start_n, qk_scale,
            BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    """One K/V tile of the online softmax: the running maximum, sum and output."""
    qk = tl.dot(q, k.T) * qk_scale
    if CAUSAL:
        keys = start_n + tl.arange(0, BLOCK_N)
        qk = tl.where(rows[:, None] >= keys[None, :], qk, MASKED)
    m_new = tl.maximum(m_i, tl.max(qk, 1))
    p = tl.math.exp2(qk - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p.to(tl.bfloat16), v)
    return acc, m_new, l_i


@triton.jit
def _query(q_ptr, base, rows, D: tl.constexpr):
    return tl.load(q_ptr + (base + rows)[:, None] * D + tl.arange(0, D)[None, :])


@triton.jit
def _finish(o_ptr, acc, l_i, base, rows, D: tl.constexpr):
    tl.store(o_ptr + (base + rows)[:, None] * D + tl.arange(0, D)[None, :], (acc / l_i[:, None]).to(tl.bfloat16))


@triton.jit
def attention_tma(q_ptr,        # Q, (batch x heads x tokens) x D, bf16
                  k_desc,       # TMA descriptor of K, same shape, block BLOCK_N x D
                  v_desc,       # TMA descriptor of V, same shape, block BLOCK_N x D
                  o_ptr,        # O, like Q
                  N_CTX, qk_scale,   # tokens per head; softmax scale x log2(e)
                  D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  STAGES: tl.constexpr, CAUSAL: tl.constexpr):
    base = tl.program_id(1) * N_CTX
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    q = _query(q_ptr, base, rows, D)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    end = (tl.program_id(0) + 1) * BLOCK_M if CAUSAL else N_CTX
    for start_n in tl.range(0, end, BLOCK_N, num_stages=STAGES):
        k = k_desc.load([base + start_n, 0])
        v = v_desc.load([base + start_n, 0])
        acc, m_i, l_i = _attend(q, k, v, acc, m_i, l_i, rows, start_n, qk_scale, BLOCK_N, CAUSAL)
    _finish(o_ptr, acc, l_i, base, rows, D)


@triton.jit
def attention_pointer(q_ptr, k_ptr, v_ptr, o_ptr,   # Q, K, V, O: (batch x heads x tokens) x D, bf16
                      N_CTX, qk_scale,
                      D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      STAGES: tl.constexpr, CAUSAL: tl.constexpr):
    base = tl.program_id(1) * N_CTX
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    q = _query(q_ptr, base, rows, D)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    keys = tl.arange(0, BLOCK_N)
    cols = tl.arange(0, D)
    end = (tl.program_id(0) + 1) * BLOCK_M if CAUSAL else N_CTX
    for start_n in tl.range(0, end, BLOCK_N, num_stages=STAGES):
        offsets = (base + start_n + keys)[:, None] * D + cols[None, :]
        k = tl.load(k_ptr + offsets)
        v = tl.load(v_ptr + offsets)
        acc, m_i, l_i = _attend(q, k, v, acc, m_i, l_i, rows, start_n, qk_scale, BLOCK_N, CAUSAL)
    _finish(o_ptr, acc, l_i, base, rows, D)
