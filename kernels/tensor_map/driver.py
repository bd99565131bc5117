"""Encode a validated ``TensorMapSpec`` with the CUDA driver (``cuTensorMapEncodeTiled``) and
upload the 128-byte map to global memory for a kernel's ``uint64`` argument."""

from __future__ import annotations

import numpy as np

from .spec import (
    _DRIVER_DTYPE_SUFFIX,
    TENSOR_MAP_ALIGN_BYTES,
    TENSOR_MAP_WORDS,
    TensorMapError,
    TensorMapSpec,
    _dtype_name,
    validate,
)


# ---------------------------------------------------------------- driver calls
def _driver_arguments(spec: TensorMapSpec) -> tuple:
    """The positional arguments of ``cuTensorMapEncodeTiled`` for a valid spec."""
    from cuda.bindings import driver as drv

    data_type = getattr(
        drv.CUtensorMapDataType,
        "CU_TENSOR_MAP_DATA_TYPE_" + _DRIVER_DTYPE_SUFFIX[_dtype_name(spec.dtype)],
    )
    swizzle = getattr(drv.CUtensorMapSwizzle, "CU_TENSOR_MAP_SWIZZLE_" + spec.swizzle.upper())
    l2 = (
        drv.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_NONE
        if spec.l2_promotion_bytes == 0
        else getattr(
            drv.CUtensorMapL2promotion,
            f"CU_TENSOR_MAP_L2_PROMOTION_L2_{spec.l2_promotion_bytes}B",
        )
    )
    oob = {
        "none": drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        "nan": drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA,
    }[spec.oob_fill]
    return (
        data_type,
        spec.rank,
        spec.global_address,
        [drv.cuuint64_t(d) for d in spec.global_dims],
        # rank 1 has no strides, but the driver rejects an empty (NULL) array: pass one it ignores
        [drv.cuuint64_t(s) for s in spec.global_strides_bytes or (_RANK1_STRIDE_PLACEHOLDER,)],
        [drv.cuuint32_t(b) for b in spec.box_dims],
        [drv.cuuint32_t(e) for e in spec.element_strides],
        drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        swizzle,
        l2,
        oob,
    )


_RANK1_STRIDE_PLACEHOLDER = 16  # read by no rank-1 map; any multiple of 16


def encode(spec: TensorMapSpec) -> np.ndarray:
    """Validate ``spec`` and encode it: 16 uint64 words (128 bytes). Needs the driver."""
    from cuda.bindings import driver as drv

    validate(spec)
    result, tensor_map = drv.cuTensorMapEncodeTiled(*_driver_arguments(spec))
    if result != drv.CUresult.CUDA_SUCCESS:
        raise TensorMapError(
            f"cuTensorMapEncodeTiled returned {result.name} ({int(result)}) for {spec}"
        )
    words = np.array([int(w) for w in tensor_map.opaque], dtype=np.uint64)
    return check_words(words)


# ---------------------------------------------------------------- on the device
def check_words(words) -> np.ndarray:
    """``words`` as a uint64 array of 16 entries (a whole CUtensorMap), or raise."""
    array = np.ascontiguousarray(words)
    if array.dtype != np.uint64 or array.shape != (TENSOR_MAP_WORDS,):
        raise TensorMapError(
            f"tensor map words must be uint64 of shape ({TENSOR_MAP_WORDS},), "
            f"got {array.dtype} of shape {array.shape}"
        )
    return array


def check_tensor_map_alignment(address: int) -> int:
    """``address`` if it is 64-byte aligned (CUtensorMap requirement), else raise."""
    if address % TENSOR_MAP_ALIGN_BYTES:
        raise TensorMapError(
            f"tensor map address {address:#x} is not {TENSOR_MAP_ALIGN_BYTES}-byte aligned"
        )
    return address


class TensorMapOnDevice:
    """A tensor map in global memory, ready to be a kernel's ``uint64`` argument.

    The kernel reads the map through ``address``; keep this object alive until
    every kernel launched with that address has finished, or the device memory
    may be freed (and reused) under the running kernel.
    """

    def __init__(self, device_words, spec: TensorMapSpec | None = None):
        interface = device_words.__cuda_array_interface__
        if (
            tuple(interface["shape"]) != (TENSOR_MAP_WORDS,)
            or np.dtype(interface["typestr"]) != np.uint64
        ):
            raise TensorMapError(
                f"device tensor map must be uint64 of shape ({TENSOR_MAP_WORDS},), "
                f"got {interface['typestr']} of shape {tuple(interface['shape'])}"
            )
        self.device_words = device_words
        self.address = check_tensor_map_alignment(int(interface["data"][0]))
        self.spec = spec

    def __repr__(self):
        return f"TensorMapOnDevice(address={self.address:#x}, spec={self.spec})"


def to_device(words, spec: TensorMapSpec | None = None) -> TensorMapOnDevice:
    """Copy 16 encoded words to device memory (numba allocation). Needs a GPU."""
    from numba import cuda

    return TensorMapOnDevice(cuda.to_device(check_words(words)), spec)
