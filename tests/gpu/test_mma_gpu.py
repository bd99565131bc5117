"""GPU: the e4m3 tensor-core mma intrinsics compute A B + C for the PTX ISA's m16n8k32 layout.

One warp, fresh random finite e4m3 A (16 x 32) and B (32 x 8) and fp32 C (seed printed on
failure), packed into the fragments the PTX ISA defines ("Matrix Fragments for
mma.m16n8k32"): ``mma_e4m3_m16n8k32`` (ptxas's own fp16 emulation on sm_90a) and
``mma_e4m3_m16n8k32_via_f16`` (the paged attention kernel's: unpack and two fp16 mmas
chained through C) must both equal the float64 product up to fp32 summation order.
"""
import functools
import os

import numpy as np
import pytest
from numba import cuda
from tma_kernels.ptx.mma import mma_e4m3_m16n8k32, mma_e4m3_m16n8k32_via_f16

from tma_study.harness.kernel_builds import load_cached
from tma_study.studies.paged_kv.numerics import e4m3_bits_to_float

pytestmark = pytest.mark.gpu
SIGNATURE = "void(uint32[:, ::1], float32[:, ::1], float32[:, ::1])"
NAN_CODES = (0x7F, 0xFF)


def one_mma(mma):
    """A one-warp kernel: lane l's six fragment words and four C values in, D out."""
    def kernel(words, c_in, d_out):
        lane = cuda.threadIdx.x
        w, c = words[lane], c_in[lane]
        d = mma(w[0], w[1], w[2], w[3], w[4], w[5], c[0], c[1], c[2], c[3])
        for i in range(4):
            d_out[lane, i] = d[i]
    return kernel


#: kernel name -> (function, signature), compiled on first use; the CPU test
#: tests/cpu/kernels/test_gpu_test_kernels_compile.py compiles each for sm_90a without a GPU.
KERNELS = {"mma_e4m3": (one_mma(mma_e4m3_m16n8k32), SIGNATURE),
           "mma_e4m3_via_f16": (one_mma(mma_e4m3_m16n8k32_via_f16), SIGNATURE)}


@functools.cache
def jitted(name):
    """KERNELS[name] compiled through the kernel cache and loaded (as the measure step does)."""
    function, signature = KERNELS[name]
    return load_cached(name, function, signature)


def _pack(a_bits, b_bits):
    """Per lane (g = lane >> 2, q = lane & 3): a0 = A[g, 4q..4q+3], a1 = A[g+8, ..],
    a2 / a3 the same at k + 16; b0 = B[4q..4q+3, g], b1 = B[16+4q.., g]; byte k lowest first."""
    words = np.zeros((32, 6), np.uint32)
    for lane in range(32):
        g, q = lane >> 2, lane & 3
        rows = ((a_bits[g], 0), (a_bits[g + 8], 0), (a_bits[g], 16), (a_bits[g + 8], 16),
                (b_bits[:, g], 0), (b_bits[:, g], 16))
        for i, (vector, k0) in enumerate(rows):
            words[lane, i] = np.frombuffer(vector[k0 + 4 * q: k0 + 4 * q + 4].tobytes(), np.uint32)[0]
    return words


@pytest.mark.parametrize("name", list(KERNELS))
def test_e4m3_mma_equals_float64_product(name):
    seed = int.from_bytes(os.urandom(4), "little")
    rng = np.random.default_rng(seed)
    finite = np.setdiff1d(np.arange(256, dtype=np.uint8), NAN_CODES)
    a_bits = rng.choice(finite, (16, 32)).astype(np.uint8)
    b_bits = rng.choice(finite, (32, 8)).astype(np.uint8)
    c = rng.standard_normal((16, 8)).astype(np.float32)
    lanes = np.arange(32)
    g, q = lanes >> 2, lanes & 3
    c_in = np.stack([c[g, 2 * q], c[g, 2 * q + 1], c[g + 8, 2 * q], c[g + 8, 2 * q + 1]], axis=1)
    d_out = np.full((32, 4), np.nan, np.float32)
    kernel = jitted(name)
    d_device = cuda.to_device(d_out)
    kernel[1, 32](cuda.to_device(_pack(a_bits, b_bits)), cuda.to_device(np.ascontiguousarray(c_in)),
                  d_device)
    got = d_device.copy_to_host().astype(np.float64)
    product = e4m3_bits_to_float(a_bits) @ e4m3_bits_to_float(b_bits) + c
    want = np.stack([product[g, 2 * q], product[g, 2 * q + 1], product[g + 8, 2 * q],
                     product[g + 8, 2 * q + 1]], axis=1)
    scale = np.abs(e4m3_bits_to_float(a_bits)) @ np.abs(e4m3_bits_to_float(b_bits)) + np.abs(c)
    bound = 64 * np.finfo(np.float32).eps * np.stack(
        [scale[g, 2 * q], scale[g, 2 * q + 1], scale[g + 8, 2 * q], scale[g + 8, 2 * q + 1]], axis=1)
    error = np.abs(got - want)
    assert (error <= bound).all(), (
        f"seed {seed}: {name} max |error| {error.max():.4g} (bound {bound.max():.4g}) at lane, reg "
        f"{np.unravel_index(np.argmax(error - bound), error.shape)}")
