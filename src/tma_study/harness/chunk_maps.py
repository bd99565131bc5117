"""The tensor map of a buffer of uint32 chunks whose TMA box is one chunk: the view the crossover
and tma_issue kernels' tensor loads use (a 2-D tensor of CHUNK_TENSOR_COLS uint32 a row; a chunk of
B bytes is a box of min(B/4, 256) columns by max(1, B/1024) rows, its B contiguous bytes)."""
from __future__ import annotations

import numpy as np

CHUNK_TENSOR_COLS = 256            # kernels/common/chase_steps.py, kernels/crossover/tma_tile.py
ELEMENT_BYTES = 4


def chunk_tensor_map(device_array, nbytes: int, bytes_per_transfer: int):
    """The device tensor map (``tma_kernels.tensor_map``) of ``nbytes`` of ``device_array``."""
    from tma_kernels import tensor_map
    elements = bytes_per_transfer // ELEMENT_BYTES
    spec = tensor_map.tiled_2d(device_array, np.uint32, rows=nbytes // (CHUNK_TENSOR_COLS * ELEMENT_BYTES),
                               cols=CHUNK_TENSOR_COLS, row_stride_bytes=CHUNK_TENSOR_COLS * ELEMENT_BYTES,
                               box_rows=max(1, elements // CHUNK_TENSOR_COLS),
                               box_cols=min(elements, CHUNK_TENSOR_COLS))
    return tensor_map.to_device(tensor_map.encode(spec), spec)
