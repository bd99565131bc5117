"""Decode kernels fit the CTAs per SM that the split-KV grid assumes (``decode_min_ctas_per_sm``).

The H200 smoke run measured e4m3 cp.async decode at 848 GB/s against 2718 (e4m3 TMA) and
2783 (bf16 cp.async). Cause: the 5-warp cp.async CTA (1 consumer + 4 producer warps) at
176 registers fits once per SM (registers go per sub-partition: 2 warps of 5632 each), so
its 512 CTAs ran in 4 waves of 1 CTA per SM; bf16 (168 registers) fits 2, e4m3 TMA (2
warps) fits 4. Every variant does about 64 KV tiles per CTA at ~2.5-3 us a tile, so the
time follows waves: 632 / 197 us = 3.2 = 4 waves / 1 wave. This test pins the cause on
the SASS (ptxas's register count, CUDA's occupancy rule) and that launch bounds
(``Variant.min_ctas_per_sm``) fix it for that kernel. The grid does not set them yet: on
other sweep variants they cost spills without a residency gain (bf16 head_dim 256 is
shared-memory bound) or let ptxas take more registers and lose residency (bf16 head_dim
64 cp.async: 128 -> 151 registers, 3 -> 2 CTAs); see the report on branch paged_kv.
"""
import functools

import pytest
from tma_kernels.build import compile_for_sm90a
from tma_kernels.paged_kv import SIGNATURE, Variant, make_attention_kernel
from tma_kernels.paged_kv.geometry import resident_ctas_per_sm

# Spilled bytes tolerated for a launch-bounded variant: e4m3 cp.async decode needs 176
# registers and is capped at 168 (the most that fits two 5-warp CTAs), ptxas spills 216 B
# (172 B before the cp.async producer's page lookups were batched; the consumer's loop holds
# 6 STL / 19 LDL, 5 / 17 before; to L1) in exchange for twice the resident CTAs.
BOUNDED_SPILL_ALLOWANCE_BYTES = 256
STATIC_SHARED_BYTES = 96


@functools.cache
def compiled(variant):
    return compile_for_sm90a(make_attention_kernel(variant), SIGNATURE, name=variant.name)


def resident(variant):
    kernel = compiled(variant)
    return resident_ctas_per_sm(kernel.registers, variant.threads,
                                variant.dynamic_shared_bytes + kernel.shared_bytes_static)


@pytest.mark.parametrize("registers, threads, shared, expected", [
    (176, 160, 35 * 1024, 1),    # e4m3 cp.async decode, unbounded: the measured 848 GB/s
    (168, 160, 35 * 1024, 2),    # same, capped by launch bounds (160, 2)
    (168, 160, 69 * 1024, 2),    # bf16 cp.async decode
    (176, 64, 35 * 1024, 4),     # e4m3 TMA decode: 2 warps per sub-partition
    (168, 64, 69 * 1024, 3),     # bf16 TMA decode: shared memory bound
])
def test_occupancy_rule(registers, threads, shared, expected):
    assert resident_ctas_per_sm(registers, threads, shared) == expected


def test_unbounded_e4m3_cp_async_decode_fits_once():
    """The cause, on the SASS: without launch bounds the kernel fits one CTA per SM."""
    variant = Variant(dtype="e4m3", head_dim=128, load_path="cp_async", block_n=64,
                      consumer_warps=1, stages=2, producer_warps=4)
    assert variant.launch_bounds is None
    assert resident(variant) == 1, f"{compiled(variant).registers} registers"


def test_launch_bounds_fit_two_e4m3_cp_async_decode_ctas():
    """The fix, on the SASS: launch bounds (160, 2) cap registers at 168, two CTAs per SM."""
    variant = Variant(dtype="e4m3", head_dim=128, load_path="cp_async", block_n=64,
                      consumer_warps=1, stages=2, producer_warps=4, min_ctas_per_sm=2)
    kernel = compiled(variant)
    assert variant.launch_bounds == (160, 2)
    assert ".minnctapersm 2" in kernel.ptx, "launch bounds did not reach the PTX"
    assert resident(variant) == 2, f"{kernel.registers} registers"
    assert kernel.spill_store_bytes <= BOUNDED_SPILL_ALLOWANCE_BYTES, (
        f"{variant.name}: {kernel.spill_store_bytes} B spilled")
