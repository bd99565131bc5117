"""tma_kernels.tensor_map without a GPU: every validation rule, spec helpers, and
the marshalling around cuTensorMapEncodeTiled (driver call replaced by a fake)."""

import dataclasses
import re
from types import SimpleNamespace

import numpy as np
import pytest
from cuda.bindings import driver as drv

import tma_kernels.tensor_map as tensor_map
from tma_kernels.tensor_map import (
    TensorMapError,
    TensorMapOnDevice,
    TensorMapSpec,
    encode,
    spec_for_array,
    tiled_2d,
    validate,
)

ADDRESS = 0x7F00_0000_0000  # 16-byte aligned, like a cudaMalloc result
VALID = TensorMapSpec(
    dtype=np.float32,
    global_address=ADDRESS,
    global_dims=(1000, 300),  # (cols, rows): innermost first
    global_strides_bytes=(4096,),
    box_dims=(32, 64),
)


def with_(**changes) -> TensorMapSpec:
    """VALID with some fields changed; element_strides re-defaults to all 1."""
    changes.setdefault("element_strides", None)
    return dataclasses.replace(VALID, **changes)


def rejects(spec: TensorMapSpec, message: str) -> None:
    with pytest.raises(TensorMapError, match=re.escape(message)):
        validate(spec)


class FakeDeviceArray:
    """Anything with a __cuda_array_interface__ (what numba device arrays have)."""

    def __init__(self, shape, dtype, address=ADDRESS, strides=None):
        self.__cuda_array_interface__ = {
            "shape": tuple(shape),
            "typestr": np.dtype(dtype).str,
            "data": (address, False),
            "strides": strides,
            "version": 3,
        }


# ---------------------------------------------------------------- accepted specs
def test_valid_spec_passes():
    validate(VALID)
    assert VALID.rank == 2
    assert VALID.element_strides == (1, 1)


@pytest.mark.parametrize("dtype_name", tensor_map.SUPPORTED_DTYPES)
def test_every_supported_dtype_passes(dtype_name):
    dtype = tensor_map.BFLOAT16 if dtype_name == "bfloat16" else np.dtype(dtype_name)
    box_inner = 128 // dtype.itemsize  # a 128-byte inner extent fits every rule
    validate(with_(dtype=dtype, box_dims=(box_inner, 8)))


def test_box_larger_than_tensor_is_allowed():
    # Not forbidden by the driver documentation: the excess is out-of-bounds filled.
    validate(with_(global_dims=(20, 3), box_dims=(32, 64)))


@pytest.mark.parametrize("swizzle, box_inner", [("32B", 8), ("64B", 16), ("128B", 32)])
def test_box_inner_extent_equal_to_swizzle_span_passes(swizzle, box_inner):
    validate(with_(swizzle=swizzle, box_dims=(box_inner, 64)))


def test_rank_5_and_rank_1_pass():
    validate(with_(global_dims=(64,), global_strides_bytes=(), box_dims=(32,)))
    validate(
        with_(
            global_dims=(64, 2, 2, 2, 2),
            global_strides_bytes=(256, 512, 1024, 2048),
            box_dims=(32, 1, 1, 1, 2),
        )
    )


def test_bfloat16_needs_ml_dtypes():
    if tensor_map.BFLOAT16 is None:
        assert "bfloat16" not in tensor_map.SUPPORTED_DTYPES
    else:
        validate(with_(dtype=tensor_map.BFLOAT16, box_dims=(64, 8)))


# ---------------------------------------------------------------- one test per rule
def test_unsupported_dtype_lists_supported_ones():
    rejects(with_(dtype=np.int8), "dtype int8 is not supported; supported: uint8, uint16")
    rejects(with_(dtype=np.complex64), "dtype complex64 is not supported")


def test_unknown_dtype_name_is_reported_not_crashed():
    rejects(with_(dtype="not_a_dtype"), "dtype 'not_a_dtype' is not supported")


def test_rank_outside_1_to_5():
    rejects(
        with_(global_dims=(2,) * 6, global_strides_bytes=(16,) * 5, box_dims=(4,) * 6),
        "rank 6 is outside 1..5",
    )
    rejects(with_(global_dims=(), global_strides_bytes=(), box_dims=()), "rank 0 is outside 1..5")


@pytest.mark.parametrize(
    "changes, message",
    [
        (
            {"global_strides_bytes": (4096, 16)},
            "global_strides_bytes has 2 entries; rank 2 needs 1",
        ),
        ({"box_dims": (32,), "element_strides": (1, 1)}, "box_dims has 1 entries; rank 2 needs 2"),
        ({"element_strides": (1, 1, 1)}, "element_strides has 3 entries; rank 2 needs 2"),
    ],
)
def test_per_dimension_lengths_match_rank(changes, message):
    rejects(with_(**changes), message)


def test_global_address_16_byte_aligned():
    rejects(
        with_(global_address=ADDRESS + 4),
        "global_address 0x7f0000000004 is not 16-byte aligned (TMA requires 16)",
    )


@pytest.mark.parametrize("dim", [0, 2**32 + 1])
def test_global_dims_within_1_to_2_pow_32(dim):
    rejects(with_(global_dims=(1000, dim)), f"global_dims[1]={dim} is outside 1..2**32")


def test_global_dim_of_2_pow_32_passes():
    validate(with_(global_dims=(2**32, 1)))


def test_global_stride_multiple_of_16():
    rejects(
        with_(global_strides_bytes=(1000,)), "global_strides_bytes[0]=1000 is not a multiple of 16"
    )


def test_global_stride_below_2_pow_40():
    rejects(
        with_(global_strides_bytes=(2**40,)),
        f"global_strides_bytes[0]={2**40} is outside 0..2**40-1",
    )


def test_box_dim_at_most_256():
    rejects(with_(box_dims=(32, 300)), "box_dims[1]=300 exceeds 256")


def test_box_dim_at_least_1():
    rejects(with_(box_dims=(32, 0)), "box_dims[1]=0 must be at least 1")


def test_box_inner_bytes_multiple_of_16():
    rejects(with_(box_dims=(6, 64)), "box_dims[0] * itemsize = 24 B is not a multiple of 16")
    rejects(
        with_(dtype=np.uint8, box_dims=(24, 64)),
        "box_dims[0] * itemsize = 24 B is not a multiple of 16",
    )


@pytest.mark.parametrize("swizzle, span", [("32B", 32), ("64B", 64), ("128B", 128)])
def test_box_inner_extent_within_swizzle_span(swizzle, span):
    rejects(
        with_(swizzle=swizzle, box_dims=(64, 64)),
        f"box inner extent 256 B exceeds the {swizzle} swizzle span "
        f"(box_dims[0] * itemsize must be <= {span})",
    )


@pytest.mark.parametrize("step", [0, 9])
def test_element_strides_within_1_to_8(step):
    rejects(with_(element_strides=(1, step)), f"element_strides[1]={step} is outside 1..8")


def test_swizzle_choices():
    rejects(with_(swizzle="16B"), "swizzle '16B' is not one of 'none', '32B', '64B', '128B'")


def test_l2_promotion_choices():
    rejects(with_(l2_promotion_bytes=32), "l2_promotion_bytes=32 is not one of (0, 64, 128, 256)")


def test_oob_fill_choices():
    rejects(with_(oob_fill="zero"), "oob_fill 'zero' is not one of 'none', 'nan'")


def test_oob_fill_nan_needs_a_float_dtype():
    rejects(
        with_(dtype=np.int32, oob_fill="nan"),
        "oob_fill 'nan' needs a floating-point dtype, got int32",
    )
    validate(with_(oob_fill="nan"))


def test_only_non_interleaved_maps():
    rejects(with_(interleave="32B"), "interleave '32B' is not supported; allowed: 'none'")


def test_non_integer_fields_are_rejected_at_construction():
    with pytest.raises(
        TensorMapError, match=re.escape("box_dims=(32.0, 64) must be a sequence of integers")
    ):
        with_(box_dims=(32.0, 64))
    with pytest.raises(TensorMapError, match="global_address=1.5 must be an integer address"):
        with_(global_address=1.5)


# ---------------------------------------------------------------- spec helpers
def test_tiled_2d_orders_dimensions_innermost_first():
    spec = tiled_2d(
        FakeDeviceArray((300, 1024), np.float32),
        np.float32,
        rows=300,
        cols=1000,
        row_stride_bytes=4096,
        box_rows=64,
        box_cols=32,
        swizzle="128B",
    )
    assert spec == with_(global_dims=(1000, 300), swizzle="128B")
    assert tiled_2d(ADDRESS, np.float32, 300, 1000, 4096, 64, 32).global_address == ADDRESS


def test_spec_for_array_reverses_numpy_order():
    spec = spec_for_array(FakeDeviceArray((4, 300, 1000), np.float32), box_shape=(1, 64, 32))
    assert spec.global_dims == (1000, 300, 4)
    assert spec.global_strides_bytes == (4000, 1_200_000)
    assert spec.box_dims == (32, 64, 1)
    validate(spec)


def test_spec_for_array_accepts_explicit_c_strides():
    array = FakeDeviceArray((300, 1000), np.float32, strides=(4000, 4))
    assert spec_for_array(array, (64, 32)).global_strides_bytes == (4000,)


def test_spec_for_array_rejects_non_c_contiguous():
    array = FakeDeviceArray((300, 1000), np.float32, strides=(4, 1200))
    with pytest.raises(
        TensorMapError, match=re.escape("array strides (4, 1200) are not C-contiguous (4000, 4)")
    ):
        spec_for_array(array, (64, 32))


def test_spec_for_array_rank_and_box_length():
    with pytest.raises(TensorMapError, match="array rank 6 is outside 1..5"):
        spec_for_array(FakeDeviceArray((2,) * 6, np.float32), (1,) * 6)
    with pytest.raises(
        TensorMapError, match=re.escape("box_shape (64,) has 1 entries; the array's rank is 2")
    ):
        spec_for_array(FakeDeviceArray((300, 1000), np.float32), (64,))


# ---------------------------------------------------------------- encode, with a fake driver
def fake_encoder(monkeypatch, result, words=None):
    calls = []

    def fake(*args):
        calls.append(args)
        return result, SimpleNamespace(opaque=list(words or []))

    monkeypatch.setattr(drv, "cuTensorMapEncodeTiled", fake)
    return calls


def test_encode_validates_before_calling_the_driver(monkeypatch):
    calls = fake_encoder(monkeypatch, drv.CUresult.CUDA_SUCCESS, range(16))
    with pytest.raises(TensorMapError, match="box_dims\\[1\\]=300 exceeds 256"):
        encode(with_(box_dims=(32, 300)))
    assert calls == []


def test_encode_passes_the_spec_innermost_first(monkeypatch):
    words = [2**64 - 1 - i for i in range(16)]
    calls = fake_encoder(monkeypatch, drv.CUresult.CUDA_SUCCESS, words)
    encoded = encode(
        with_(swizzle="64B", box_dims=(16, 64), l2_promotion_bytes=256, oob_fill="nan")
    )
    assert encoded.dtype == np.uint64 and encoded.tolist() == words
    (args,) = calls
    data_type, rank, address, dims, strides, box, steps, interleave, swizzle, l2, oob = args
    assert data_type == drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT32
    assert (rank, address) == (2, ADDRESS)
    assert [int(d) for d in dims] == [1000, 300]
    assert [int(s) for s in strides] == [4096]
    assert [int(b) for b in box] == [16, 64]
    assert [int(e) for e in steps] == [1, 1]
    assert interleave == drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE
    assert swizzle == drv.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_64B
    assert l2 == drv.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B
    assert oob == drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA


def test_encode_maps_l2_promotion_none(monkeypatch):
    calls = fake_encoder(monkeypatch, drv.CUresult.CUDA_SUCCESS, range(16))
    encode(with_(l2_promotion_bytes=0))
    assert calls[0][9] == drv.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_NONE


def test_encode_error_names_the_result_and_the_spec(monkeypatch):
    fake_encoder(monkeypatch, drv.CUresult.CUDA_ERROR_INVALID_VALUE)
    with pytest.raises(
        TensorMapError,
        match=r"CUDA_ERROR_INVALID_VALUE \(1\) for TensorMapSpec\(dtype=dtype\('float32'\)",
    ):
        encode(VALID)


# ---------------------------------------------------------------- the device copy
def test_check_words_needs_16_uint64():
    tensor_map.check_words(np.zeros(16, np.uint64))
    with pytest.raises(
        TensorMapError, match=re.escape("must be uint64 of shape (16,), got uint32 of shape (32,)")
    ):
        tensor_map.check_words(np.zeros(32, np.uint32))


def test_tensor_map_on_device_exposes_an_aligned_address():
    on_device = TensorMapOnDevice(FakeDeviceArray((16,), np.uint64, address=ADDRESS + 64))
    assert on_device.address == ADDRESS + 64


def test_tensor_map_on_device_rejects_misaligned_memory():
    with pytest.raises(
        TensorMapError, match="tensor map address 0x7f0000000010 is not 64-byte aligned"
    ):
        TensorMapOnDevice(FakeDeviceArray((16,), np.uint64, address=ADDRESS + 16))


def test_tensor_map_on_device_rejects_wrong_shape():
    with pytest.raises(
        TensorMapError, match=re.escape("uint64 of shape (16,), got <f4 of shape (16,)")
    ):
        TensorMapOnDevice(FakeDeviceArray((16,), np.float32))
