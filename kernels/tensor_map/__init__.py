"""TMA tensor maps: describe, validate, encode and upload a ``CUtensorMap``.

A TMA copy (``cp.async.bulk.tensor``) reads a box of a global tensor described by
a 128-byte tensor map. This package builds that map in four steps:

1. describe it: ``TensorMapSpec`` (or ``tiled_2d`` / ``spec_for_array``);
2. ``validate(spec)``: pure Python, raises ``TensorMapError`` naming the broken
   rule and the offending value (no GPU needed);
3. ``encode(spec)``: ``cuda.bindings.driver.cuTensorMapEncodeTiled`` -> 16 uint64
   words (needs the CUDA driver);
4. ``to_device(words)``: copy the words to global memory; pass
   ``TensorMapOnDevice.address`` to the kernel as its ``uint64`` argument.

Dimension order follows the driver: index 0 is the innermost (contiguous)
dimension. A row-major (rows, cols) matrix has ``global_dims = (cols, rows)``.
Steps 1 and 2 live in ``spec``, steps 3 and 4 in ``driver``.
"""

from .driver import TensorMapOnDevice, check_tensor_map_alignment, check_words, encode, to_device  # noqa: F401
from .spec import (  # noqa: F401
    BFLOAT16, BOX_INNER_MULTIPLE_BYTES, GLOBAL_ADDRESS_ALIGN_BYTES, GLOBAL_STRIDE_LIMIT_BYTES,
    GLOBAL_STRIDE_MULTIPLE_BYTES, INTERLEAVES, L2_PROMOTION_BYTES, MAX_BOX_DIM, MAX_ELEMENT_STRIDE,
    MAX_GLOBAL_DIM, MAX_RANK, OOB_FILLS, SUPPORTED_DTYPES, SWIZZLE_SPAN_BYTES, TENSOR_MAP_ALIGN_BYTES,
    TENSOR_MAP_BYTES, TENSOR_MAP_WORDS, TensorMapError, TensorMapSpec, device_address, spec_for_array,
    tiled_2d, validate,
)
