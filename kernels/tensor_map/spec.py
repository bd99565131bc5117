"""Describe and validate a ``CUtensorMap`` (pure Python, no GPU): the driver's documented limits,
``TensorMapSpec``, ``validate`` and the convenience specs ``tiled_2d`` and ``spec_for_array``.

The rules in ``validate`` are those the driver documents for
``cuTensorMapEncodeTiled`` (CUDA driver API, "Tensor Map Object Management";
the same text is the docstring of ``cuda.bindings.driver.cuTensorMapEncodeTiled``,
cuda-bindings 13.5), restricted to what this package supports: tiled,
non-interleaved maps of the plain data types below. A box larger than the global
tensor is *not* forbidden there; the out-of-bounds part is filled (zero or NaN).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import numpy as np

# ---------------------------------------------------------------- documented limits
MAX_RANK = 5  # "tensorRank must be non-zero and <= 5"
GLOBAL_ADDRESS_ALIGN_BYTES = 16  # "globalAddress ... must be 16 byte aligned"
MAX_GLOBAL_DIM = 2**32  # "globalDim ... must be non-zero and <= 2^32"
GLOBAL_STRIDE_MULTIPLE_BYTES = 16  # "globalStrides ... must be a multiple of 16"
GLOBAL_STRIDE_LIMIT_BYTES = 2**40  # "... and less than 2^40"
MAX_BOX_DIM = 256  # "boxDim ... must be non-zero and <= 256"
BOX_INNER_MULTIPLE_BYTES = 16  # "boxDim[0] * elementSize must be a multiple of 16 bytes"
MAX_ELEMENT_STRIDE = 8  # "elementStrides ... must be non-zero and <= 8"
TENSOR_MAP_BYTES = 128  # sizeof(CUtensorMap)
TENSOR_MAP_WORDS = TENSOR_MAP_BYTES // 8
TENSOR_MAP_ALIGN_BYTES = 64  # "tensorMap address must be aligned to 64 bytes"

# swizzle mode -> bytes the box's inner extent may span ("boxDim[0] * elementSize
# must be <= the swizzle size" when a swizzle is used); None: no such limit.
SWIZZLE_SPAN_BYTES = {"none": None, "32B": 32, "64B": 64, "128B": 128}
L2_PROMOTION_BYTES = (0, 64, 128, 256)
OOB_FILLS = ("none", "nan")  # "nan": CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
INTERLEAVES = ("none",)  # interleaved layouts (16B, 32B) are not supported here

# numpy dtype name -> CUtensorMapDataType member (suffix after CU_TENSOR_MAP_DATA_TYPE_)
_DRIVER_DTYPE_SUFFIX = {
    "uint8": "UINT8",
    "uint16": "UINT16",
    "uint32": "UINT32",
    "int32": "INT32",
    "uint64": "UINT64",
    "int64": "INT64",
    "float16": "FLOAT16",
    "bfloat16": "BFLOAT16",  # numpy knows it only through ml_dtypes
    "float32": "FLOAT32",
    "float64": "FLOAT64",
}
_FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")


def _bfloat16_dtype() -> np.dtype | None:
    try:
        import ml_dtypes
    except ImportError:
        return None
    return np.dtype(ml_dtypes.bfloat16)


BFLOAT16 = _bfloat16_dtype()  # None when ml_dtypes is not installed
SUPPORTED_DTYPES = tuple(
    name for name in _DRIVER_DTYPE_SUFFIX if name != "bfloat16" or BFLOAT16 is not None
)


class TensorMapError(ValueError):
    """A tensor map that TMA cannot use; the message names the rule and the value."""


def _int_tuple(name: str, values) -> tuple[int, ...]:
    try:
        return tuple(operator.index(v) for v in values)
    except TypeError as exc:
        raise TensorMapError(f"{name}={values!r} must be a sequence of integers") from exc


@dataclass(frozen=True)
class TensorMapSpec:
    """Everything ``cuTensorMapEncodeTiled`` needs, innermost dimension first.

    dtype: element type (one of ``SUPPORTED_DTYPES``).
    global_address: device address of element (0, ..., 0).
    global_dims: elements per dimension, innermost first.
    global_strides_bytes: byte stride of dims 1..rank-1 (dim 0 is contiguous).
    box_dims: elements per dimension of the box one TMA copy moves.
    element_strides: traversal step per dimension (default: all 1).
    swizzle: shared-memory bank swizzle: "none", "32B", "64B", "128B".
    l2_promotion_bytes: L2 fill granularity: 0, 64, 128 or 256.
    oob_fill: out-of-bounds elements read as "none" (zero) or "nan" (floats only).
    interleave: only "none".
    """

    dtype: np.dtype
    global_address: int
    global_dims: tuple[int, ...]
    global_strides_bytes: tuple[int, ...]
    box_dims: tuple[int, ...]
    element_strides: tuple[int, ...] | None = None
    swizzle: str = "none"
    l2_promotion_bytes: int = 128
    oob_fill: str = "none"
    interleave: str = "none"

    def __post_init__(self):
        set_ = object.__setattr__  # frozen: normalise once, here
        for name in ("global_dims", "global_strides_bytes", "box_dims"):
            set_(self, name, _int_tuple(name, getattr(self, name)))
        if self.element_strides is None:
            set_(self, "element_strides", (1,) * len(self.box_dims))
        else:
            set_(self, "element_strides", _int_tuple("element_strides", self.element_strides))
        try:
            set_(self, "global_address", operator.index(self.global_address))
        except TypeError as exc:
            raise TensorMapError(
                f"global_address={self.global_address!r} must be an integer address"
            ) from exc
        try:
            set_(self, "dtype", np.dtype(self.dtype))
        except TypeError:
            pass  # validate() reports it with the list of supported dtypes

    @property
    def rank(self) -> int:
        """Number of dimensions (``len(global_dims)``)."""
        return len(self.global_dims)


# ---------------------------------------------------------------- validation
def _dtype_name(dtype) -> str:
    if BFLOAT16 is not None and dtype == BFLOAT16:
        return "bfloat16"
    return getattr(dtype, "name", repr(dtype))


def _check_choices(spec: TensorMapSpec) -> None:
    name = _dtype_name(spec.dtype)
    if name not in SUPPORTED_DTYPES:
        raise TensorMapError(
            f"dtype {name} is not supported; supported: {', '.join(SUPPORTED_DTYPES)}"
        )
    if spec.interleave not in INTERLEAVES:
        raise TensorMapError(f"interleave {spec.interleave!r} is not supported; allowed: 'none'")
    if spec.swizzle not in SWIZZLE_SPAN_BYTES:
        allowed = ", ".join(repr(s) for s in SWIZZLE_SPAN_BYTES)
        raise TensorMapError(f"swizzle {spec.swizzle!r} is not one of {allowed}")
    if spec.l2_promotion_bytes not in L2_PROMOTION_BYTES:
        raise TensorMapError(
            f"l2_promotion_bytes={spec.l2_promotion_bytes} is not one of {L2_PROMOTION_BYTES}"
        )
    if spec.oob_fill not in OOB_FILLS:
        raise TensorMapError(f"oob_fill {spec.oob_fill!r} is not one of 'none', 'nan'")
    if spec.oob_fill == "nan" and name not in _FLOAT_DTYPES:
        raise TensorMapError(f"oob_fill 'nan' needs a floating-point dtype, got {name}")


def _check_rank(spec: TensorMapSpec) -> None:
    if not 1 <= spec.rank <= MAX_RANK:
        raise TensorMapError(f"rank {spec.rank} is outside 1..{MAX_RANK} (len(global_dims))")
    expected = {
        "global_strides_bytes": spec.rank - 1,
        "box_dims": spec.rank,
        "element_strides": spec.rank,
    }
    for name, count in expected.items():
        got = len(getattr(spec, name))
        if got != count:
            raise TensorMapError(f"{name} has {got} entries; rank {spec.rank} needs {count}")


def _check_global(spec: TensorMapSpec) -> None:
    if spec.global_address % GLOBAL_ADDRESS_ALIGN_BYTES:
        raise TensorMapError(
            f"global_address {spec.global_address:#x} is not "
            f"{GLOBAL_ADDRESS_ALIGN_BYTES}-byte aligned (TMA requires {GLOBAL_ADDRESS_ALIGN_BYTES})"
        )
    for i, dim in enumerate(spec.global_dims):
        if not 1 <= dim <= MAX_GLOBAL_DIM:
            raise TensorMapError(f"global_dims[{i}]={dim} is outside 1..2**32")
    for i, stride in enumerate(spec.global_strides_bytes):
        if stride % GLOBAL_STRIDE_MULTIPLE_BYTES:
            raise TensorMapError(
                f"global_strides_bytes[{i}]={stride} is not a multiple of "
                f"{GLOBAL_STRIDE_MULTIPLE_BYTES}"
            )
        if not 0 <= stride < GLOBAL_STRIDE_LIMIT_BYTES:
            raise TensorMapError(f"global_strides_bytes[{i}]={stride} is outside 0..2**40-1")


def _check_box(spec: TensorMapSpec) -> None:
    for i, dim in enumerate(spec.box_dims):
        if dim < 1:
            raise TensorMapError(f"box_dims[{i}]={dim} must be at least 1")
        if dim > MAX_BOX_DIM:
            raise TensorMapError(f"box_dims[{i}]={dim} exceeds {MAX_BOX_DIM}")
    inner_bytes = spec.box_dims[0] * spec.dtype.itemsize
    if inner_bytes % BOX_INNER_MULTIPLE_BYTES:
        raise TensorMapError(
            f"box_dims[0] * itemsize = {inner_bytes} B is not a multiple of "
            f"{BOX_INNER_MULTIPLE_BYTES}"
        )
    span = SWIZZLE_SPAN_BYTES[spec.swizzle]
    if span is not None and inner_bytes > span:
        raise TensorMapError(
            f"box inner extent {inner_bytes} B exceeds the {spec.swizzle} swizzle span "
            f"(box_dims[0] * itemsize must be <= {span})"
        )
    for i, step in enumerate(spec.element_strides):
        if not 1 <= step <= MAX_ELEMENT_STRIDE:
            raise TensorMapError(f"element_strides[{i}]={step} is outside 1..{MAX_ELEMENT_STRIDE}")


def validate(spec: TensorMapSpec) -> None:
    """Raise ``TensorMapError`` unless ``cuTensorMapEncodeTiled`` accepts ``spec``.

    Pure Python; checks the driver's documented rules (see the module docstring).
    """
    _check_choices(spec)
    _check_rank(spec)
    _check_global(spec)
    _check_box(spec)


# ---------------------------------------------------------------- convenience specs
def device_address(device_array_or_address) -> int:
    """The data address of a CUDA-array-interface object, or the int itself."""
    if hasattr(device_array_or_address, "__cuda_array_interface__"):
        return int(device_array_or_address.__cuda_array_interface__["data"][0])
    return operator.index(device_array_or_address)


def tiled_2d(
    device_array_or_address,
    dtype,
    rows: int,
    cols: int,
    row_stride_bytes: int,
    box_rows: int,
    box_cols: int,
    swizzle: str = "none",
    l2_promotion_bytes: int = 128,
    oob_fill: str = "none",
) -> TensorMapSpec:
    """Spec of a row-major (rows, cols) matrix read in (box_rows, box_cols) boxes.

    In the kernel, coordinate 0 is the column and coordinate 1 the row.
    """
    return TensorMapSpec(
        dtype=dtype,
        global_address=device_address(device_array_or_address),
        global_dims=(cols, rows),
        global_strides_bytes=(row_stride_bytes,),
        box_dims=(box_cols, box_rows),
        swizzle=swizzle,
        l2_promotion_bytes=l2_promotion_bytes,
        oob_fill=oob_fill,
    )


def spec_for_array(
    device_array,
    box_shape,
    swizzle: str = "none",
    l2_promotion_bytes: int = 128,
    oob_fill: str = "none",
) -> TensorMapSpec:
    """Spec of a C-contiguous device array (rank 1..5) read in boxes of ``box_shape``.

    ``box_shape`` is in the array's own axis order (outermost first, like
    ``device_array.shape``); the spec stores both reversed, innermost first.
    """
    interface = device_array.__cuda_array_interface__
    shape = tuple(interface["shape"])
    dtype = np.dtype(interface["typestr"])
    box_shape = tuple(box_shape)
    if not 1 <= len(shape) <= MAX_RANK:
        raise TensorMapError(f"array rank {len(shape)} is outside 1..{MAX_RANK}")
    if len(box_shape) != len(shape):
        raise TensorMapError(
            f"box_shape {box_shape} has {len(box_shape)} entries; the array's rank is {len(shape)}"
        )
    c_strides = [dtype.itemsize] * len(shape)
    for axis in range(len(shape) - 2, -1, -1):
        c_strides[axis] = c_strides[axis + 1] * shape[axis + 1]
    strides = interface.get("strides")
    if strides is not None and tuple(strides) != tuple(c_strides):
        raise TensorMapError(
            f"array strides {tuple(strides)} are not C-contiguous {tuple(c_strides)}"
        )
    return TensorMapSpec(
        dtype=dtype,
        global_address=int(interface["data"][0]),
        global_dims=shape[::-1],
        global_strides_bytes=tuple(c_strides[:-1])[::-1],
        box_dims=box_shape[::-1],
        swizzle=swizzle,
        l2_promotion_bytes=l2_promotion_bytes,
        oob_fill=oob_fill,
    )
