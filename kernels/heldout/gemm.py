"""C = A @ B^T on tensor cores: A (M x K) and B (N x K) both K-major, C (M x N) bf16.

One CTA computes a BLOCK_M x BLOCK_N tile of C over K in BLOCK_K steps, its A and B tiles
pipelined STAGES deep; CTAs walk the tiles in groups of GROUP_M rows (L2 reuse), the same order
in both kernels. M, N and K are multiples of the tiles (no masks). The two kernels differ only in
how the A and B tiles are loaded: a TMA tensor descriptor, or pointers.
"""
import triton
import triton.language as tl

GROUP_M = 8


@triton.jit
def _tile_origin(M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP: tl.constexpr):
    """(row, column) of this CTA's C tile, grouped GROUP tile-rows at a time."""
    pid = tl.program_id(0)
    tiles_m, tiles_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
    per_group = GROUP * tiles_n
    first_m = (pid // per_group) * GROUP
    rows = min(tiles_m - first_m, GROUP)
    pid_m = first_m + (pid % per_group) % rows
    pid_n = (pid % per_group) // rows
    return pid_m * BLOCK_M, pid_n * BLOCK_N


@triton.jit
def _store_c(c_ptr, acc, off_m, off_n, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = off_m + tl.arange(0, BLOCK_M)
    cols = off_n + tl.arange(0, BLOCK_N)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.to(tl.bfloat16))


@triton.jit
def gemm_tma(a_desc,            # TMA descriptor of A (M x K), block BLOCK_M x BLOCK_K
             b_desc,            # TMA descriptor of B (N x K), block BLOCK_N x BLOCK_K
             c_ptr,             # C (M x N), bf16, row-major
             M, N, K,
             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
             STAGES: tl.constexpr, GROUP: tl.constexpr):
    off_m, off_n = _tile_origin(M, N, BLOCK_M, BLOCK_N, GROUP)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(0, K, BLOCK_K, num_stages=STAGES):
        a = a_desc.load([off_m, k])
        b = b_desc.load([off_n, k])
        acc = tl.dot(a, b.T, acc)
    _store_c(c_ptr, acc, off_m, off_n, N, BLOCK_M, BLOCK_N)


@triton.jit
def gemm_pointer(a_ptr,         # A (M x K), row-major
                 b_ptr,         # B (N x K), row-major
                 c_ptr,         # C (M x N), bf16, row-major
                 M, N, K,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                 STAGES: tl.constexpr, GROUP: tl.constexpr):
    off_m, off_n = _tile_origin(M, N, BLOCK_M, BLOCK_N, GROUP)
    rows_a = off_m + tl.arange(0, BLOCK_M)
    rows_b = off_n + tl.arange(0, BLOCK_N)
    cols = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(0, K, BLOCK_K, num_stages=STAGES):
        a = tl.load(a_ptr + rows_a[:, None] * K + (k + cols)[None, :])
        b = tl.load(b_ptr + rows_b[:, None] * K + (k + cols)[None, :])
        acc = tl.dot(a, b.T, acc)
    _store_c(c_ptr, acc, off_m, off_n, N, BLOCK_M, BLOCK_N)
