"""Run the paged attention kernel on the GPU: device buffers, tensor maps, launch shape.

``DeviceProblem`` uploads one problem's inputs (raw bf16 / e4m3 bits); ``AttentionRunner``
compiles one :class:`~.geometry.Variant` and launches it (plus the split combine) on a
``DeviceProblem``. For the TMA path it encodes one tensor map per pool (K and V) of the
variant's load shape (``tma_boxes.map_geometry``; the default ``chunk``: rank 4, innermost
first ``(head_dim, kv_heads, page_size, num_pages)``, box
``(row_bytes / element_bytes, 1, min(page_size, block_n), 1)``), swizzle matching the
tile layout, L2 promotion ``TMA_L2_PROMOTION_BYTES``; the kernel passes the physical page as
the outermost coordinate.
"""
from __future__ import annotations

import math

import numpy as np

from .geometry import Variant, VariantError
from .tma_boxes import map_geometry, page_size_problem

LOG2_E = math.log2(math.e)
# The K/V tensor maps' L2 promotion, as CUTLASS's make_tma_copy sets it, which FA3's K/V maps
# use (NVIDIA/cutlass@7107b05535f8977f5ecb9d01ee203205b1fd9bc4
# include/cute/atom/copy_traits_sm90_tma.hpp line 1040: CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
# the other promotions measured: docs/paged_kv_history.md.
TMA_L2_PROMOTION_BYTES = 128
_RAW_DTYPE = {"bf16": np.uint16, "e4m3": np.uint8}


def check_page_size(variant: Variant, page_size: int) -> None:
    """Raise VariantError unless ``variant`` can load pages of ``page_size`` tokens."""
    if page_size < 1 or page_size & (page_size - 1):
        raise VariantError(f"page_size={page_size} must be a power of two")
    if variant.load_path == "tma":
        problem = page_size_problem(variant, page_size)
        if problem:
            raise VariantError(f"page_size={page_size}: {problem}")


class DeviceProblem:
    """One problem's inputs on the device, plus output buffers sized for ``max_splits``."""

    def __init__(self, inputs, max_splits: int = 1):
        from numba import cuda
        p = inputs.problem
        self.problem = p
        self.q = cuda.to_device(np.ascontiguousarray(inputs.q_bits))
        self.k_pool = cuda.to_device(np.ascontiguousarray(inputs.k_pool_bits))
        self.v_pool = cuda.to_device(np.ascontiguousarray(inputs.v_pool_bits))
        self.page_table = cuda.to_device(inputs.page_table)
        self.seqlens_k = cuda.to_device(inputs.seqlens_k)
        self.rows = p.batch * p.seqlen_q * p.q_heads
        self.max_splits = max_splits
        self.partial = cuda.device_array(max_splits * self.rows * p.head_dim, np.float32)
        self.lse = cuda.device_array(max_splits * self.rows, np.float32)
        self.final = cuda.device_array(self.rows * p.head_dim, np.float32)
        self._maps = {}

    @staticmethod
    def address(array) -> int:
        return int(array.__cuda_array_interface__["data"][0])

    def tensor_maps(self, variant: Variant):
        """(K map, V map) device objects for ``variant``'s box (cached; keep self alive)."""
        from tma_kernels import tensor_map
        p = self.problem
        geometry = map_geometry(variant, p.page_size, p.kv_heads, self.k_pool.shape[0])
        key = (geometry, variant.row_bytes)
        if key not in self._maps:
            maps = []
            for pool in (self.k_pool, self.v_pool):
                global_dims, strides, box_dims = map_geometry(variant, p.page_size, p.kv_heads, pool.shape[0])
                spec = tensor_map.TensorMapSpec(
                    dtype=_RAW_DTYPE[p.dtype], global_address=self.address(pool),
                    global_dims=global_dims, global_strides_bytes=strides, box_dims=box_dims,
                    swizzle=variant.tma_swizzle, l2_promotion_bytes=TMA_L2_PROMOTION_BYTES)
                maps.append(tensor_map.to_device(tensor_map.encode(spec), spec))
            self._maps[key] = tuple(maps)
        return self._maps[key]

    def output(self, num_splits: int) -> np.ndarray:
        """The attention output (batch, seqlen_q, q_heads, head_dim), float32, on the host."""
        p = self.problem
        source = self.final if num_splits > 1 else self.partial[: self.rows * p.head_dim]
        return source.copy_to_host().reshape(p.batch, p.seqlen_q, p.q_heads, p.head_dim)

    def split_lse(self, num_splits: int) -> np.ndarray:
        """(num_splits, batch, seqlen_q, q_heads) log2-sum-exp of each split, on the host."""
        p = self.problem
        return self.lse[: num_splits * self.rows].copy_to_host().reshape(
            num_splits, p.batch, p.seqlen_q, p.q_heads)

    def poison_outputs(self) -> None:
        """NaN into every output buffer (a row the kernel does not write stays NaN)."""
        for buffer in (self.partial, self.lse, self.final):
            buffer.copy_to_device(np.full(buffer.size, np.nan, dtype=np.float32))


def compile_attention(variant: Variant, cache=None):
    """``variant``'s attention kernel for this GPU: from ``cache`` (a tma_kernels.cache.KernelCache:
    compiled there once per machine, its cubin loaded) or, without one, compiled by numba."""
    from numba import cuda

    from .kernel import SIGNATURE, make_attention_kernel
    if cache is None:
        return cuda.jit(SIGNATURE, launch_bounds=variant.launch_bounds)(make_attention_kernel(variant))
    from ..loaded import load
    return load(cache.compile(variant.name, make_attention_kernel(variant), SIGNATURE), SIGNATURE)


class AttentionRunner:
    """One compiled variant, launched on DeviceProblems (with splits, followed by the combine
    for that split count: combine.combine_kernel, compiled on first use). ``kernel``: the
    variant's kernel, already loaded; else compiled through ``cache`` (see compile_attention),
    which the combines use too."""

    def __init__(self, variant: Variant, cache=None, kernel=None):
        from tma_kernels import launch

        self.variant = variant
        self.cache = cache
        self.kernel = kernel if kernel is not None else compile_attention(variant, cache)
        launch.set_max_dynamic_shared_bytes(self.kernel, variant.dynamic_shared_bytes)

    def grid(self, problem, num_splits: int) -> tuple[int, int]:
        """(CTAs, m_blocks) of a launch."""
        m_blocks = -(-(problem.seqlen_q * problem.group) // self.variant.block_m)
        return problem.batch * problem.kv_heads * num_splits * m_blocks, m_blocks

    def check(self, device: DeviceProblem, num_splits: int) -> None:
        p = device.problem
        v = self.variant
        if p.head_dim != v.head_dim or p.dtype != v.dtype or p.causal != v.causal:
            raise VariantError(f"problem (head_dim={p.head_dim}, dtype={p.dtype}, causal={p.causal}) "
                               f"does not match variant {v.name}")
        check_page_size(v, p.page_size)
        if not 1 <= num_splits <= device.max_splits:
            raise VariantError(f"num_splits={num_splits} is outside 1..{device.max_splits} "
                               "(the DeviceProblem's output buffers)")

    def launch(self, device: DeviceProblem, num_splits: int = 1, stream=0) -> None:
        """Enqueue the attention (and, with splits, the combine, as its programmatic
        dependent launch: combine.launch_combine) on ``stream``."""
        from .combine import launch_combine
        self.check(device, num_splits)
        p = device.problem
        ctas, m_blocks = self.grid(p, num_splits)
        k_map = v_map = 0
        if self.variant.load_path == "tma":
            maps = device.tensor_maps(self.variant)
            k_map, v_map = maps[0].address, maps[1].address
        self.kernel[ctas, self.variant.threads, stream, self.variant.dynamic_shared_bytes](
            device.address(device.q), device.address(device.k_pool), device.address(device.v_pool),
            k_map, v_map, device.page_table, device.seqlens_k, device.partial, device.lse,
            p.seqlen_q, p.q_heads, p.kv_heads, p.page_size.bit_length() - 1, num_splits, m_blocks,
            np.float32(p.scale * LOG2_E))
        if num_splits > 1:
            launch_combine(device.partial, device.lse, device.final, num_splits, device.rows, p.head_dim,
                           stream, cache=self.cache)
