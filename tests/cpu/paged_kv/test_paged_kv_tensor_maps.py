"""The TMA path's K/V tensor maps, built on the CPU (the driver's encode faked): one map per
pool over (head_dim, kv_heads, page_size, pages), a box of one tile's rows of one KV head,
and CUTLASS's L2 promotion (runner.TMA_L2_PROMOTION_BYTES, the value FA3's maps get; 256 B
ran TMA decode slower on the H200)."""
from types import SimpleNamespace

import pytest
from tma_kernels import tensor_map
from tma_kernels.paged_kv import runner
from tma_kernels.paged_kv.geometry import Variant

from tma_study.studies.paged_kv.problem import Problem


def fake_pool(address: int, pages: int):
    return SimpleNamespace(__cuda_array_interface__={"data": (address, False)}, shape=(pages,))


@pytest.mark.parametrize("dtype, page_size", [("bf16", 64), ("bf16", 16), ("e4m3", 256)])
def test_maps_cover_the_pool_with_a_tile_box_and_128_byte_promotion(monkeypatch, dtype, page_size):
    monkeypatch.setattr(tensor_map, "encode", lambda spec: spec)
    monkeypatch.setattr(tensor_map, "to_device", lambda encoded, spec: spec)
    variant = Variant(dtype=dtype, head_dim=128, load_path="tma", block_n=64, consumer_warps=4, stages=2,
                      producer_warps=1, causal=True, score_layout="kq", rows_per_warp=8)
    device = runner.DeviceProblem.__new__(runner.DeviceProblem)
    device.problem = Problem(batch=1, seqlen_q=1, q_heads=32, kv_heads=8, head_dim=128, page_size=page_size,
                             seqlens_k=(256,), dtype=dtype)
    device.k_pool, device.v_pool = fake_pool(1 << 20, 40), fake_pool(1 << 24, 40)
    device._maps = {}
    k_map, v_map = device.tensor_maps(variant)
    head_bytes = 128 * (2 if dtype == "bf16" else 1)
    for spec, address in ((k_map, 1 << 20), (v_map, 1 << 24)):
        assert spec.global_address == address
        assert spec.global_dims == (128, 8, page_size, 40)
        assert spec.global_strides_bytes == (head_bytes, 8 * head_bytes, page_size * 8 * head_bytes)
        assert spec.box_dims == (variant.row_bytes // (head_bytes // 128), 1, min(page_size, 64), 1)
        assert spec.l2_promotion_bytes == runner.TMA_L2_PROMOTION_BYTES == 128
    assert device.tensor_maps(variant) == (k_map, v_map)        # cached per box
