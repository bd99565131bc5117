"""GPU: a tensor map from tma_kernels.tensor_map drives a TMA tile load.

Operation: ``out = src`` padded to whole boxes, one (BOX_ROWS, BOX_COLS) box
per block, loaded by ``cp.async.bulk.tensor.2d`` into shared memory and
written back by the block's threads. Layout: ``src`` is a row-major fp32
(rows, cols) matrix; ``out`` is (rows, cols) rounded up to whole boxes. The
part of a box outside ``src`` must arrive as the map's out-of-bounds fill (0
or NaN). Checked on fresh random data with ``out`` poisoned beforehand.

Kernels are plain functions compiled on first use (``jitted``), so this module
imports without a GPU; tests/cpu/kernels/test_gpu_test_kernels_compile.py compiles
every entry of ``KERNELS`` for sm_90a on any machine.
"""

import functools
import secrets

import numpy as np
import pytest
from numba import cuda, float32, uint64
from tma_kernels.ptx import (
    fence_mbarrier_init_cluster,
    mbarrier_arrive_expect_tx,
    mbarrier_init,
    mbarrier_wait_parity,
    smem_u32,
    tma_load_2d,
)
from tma_kernels.tensor_map import (
    TENSOR_MAP_ALIGN_BYTES,
    TENSOR_MAP_WORDS,
    encode,
    spec_for_array,
    tiled_2d,
    to_device,
)

from tma_study.harness.kernel_builds import load_cached

pytestmark = pytest.mark.gpu

BOX_ROWS, BOX_COLS = 64, 32  # one TMA box: 64 rows x 32 fp32 columns = 8 KiB
BOX_BYTES = BOX_ROWS * BOX_COLS * np.dtype(np.float32).itemsize
THREADS = 128
POISON = np.float32(-12345.0)  # never produced by the data or by a fill
FIRST_PHASE = 0  # parity of an mbarrier's first phase


def tma_tile_copy(tmap, out):
    """Block (bx, by): TMA-load the box at (column bx*BOX_COLS, row by*BOX_ROWS)
    and copy it to the same place in ``out`` (rows, cols padded to whole boxes)."""
    tile = cuda.shared.array((BOX_ROWS, BOX_COLS), float32, alignment=128)  # (BOX_ROWS, BOX_COLS)
    bar = cuda.shared.array(1, uint64, alignment=8)
    tid = cuda.threadIdx.x
    bar_addr = smem_u32(bar)
    col0 = cuda.blockIdx.x * BOX_COLS  # innermost coordinate (c0)
    row0 = cuda.blockIdx.y * BOX_ROWS  # outer coordinate (c1)
    # Step 1: one thread initialises the barrier (one arrival completes a phase).
    if tid == 0:
        mbarrier_init(bar_addr, 1)
        fence_mbarrier_init_cluster()
    cuda.syncthreads()
    # Step 2: the same thread announces the box's bytes and issues the copy.
    if tid == 0:
        mbarrier_arrive_expect_tx(bar_addr, BOX_BYTES)
        tma_load_2d(smem_u32(tile), tmap, bar_addr, col0, row0)
    # Step 3: everyone waits for the bytes, then copies the box out.
    mbarrier_wait_parity(bar_addr, FIRST_PHASE)
    for i in range(tid, BOX_ROWS * BOX_COLS, cuda.blockDim.x):
        r = i // BOX_COLS
        c = i - r * BOX_COLS
        out[row0 + r, col0 + c] = tile[r, c]


#: name -> (Python kernel, its one explicit signature)
KERNELS = {"tma_tile_copy": (tma_tile_copy, "void(uint64, float32[:, ::1])")}


@functools.cache
def jitted(name):
    """KERNELS[name] compiled through the kernel cache and loaded (as the measure step does)."""
    function, signature = KERNELS[name]
    return load_cached(name, function, signature)


def boxes(extent: int, box: int) -> int:
    return -(-extent // box)


@pytest.mark.parametrize("rows, cols", [(256, 64), (200, 72)], ids=["whole-boxes", "partial-boxes"])
@pytest.mark.parametrize("oob_fill, fill_value", [("none", 0.0), ("nan", np.nan)])
def test_tma_loads_tiles_with_out_of_bounds_fill(rows, cols, oob_fill, fill_value):
    seed = secrets.randbits(32)
    src = np.random.default_rng(seed).standard_normal((rows, cols), dtype=np.float32)
    grid = (boxes(cols, BOX_COLS), boxes(rows, BOX_ROWS))
    padded = (grid[1] * BOX_ROWS, grid[0] * BOX_COLS)
    d_src = cuda.to_device(src)
    d_out = cuda.to_device(np.full(padded, POISON, dtype=np.float32))

    spec = tiled_2d(
        d_src,
        np.float32,
        rows,
        cols,
        row_stride_bytes=src.strides[0],
        box_rows=BOX_ROWS,
        box_cols=BOX_COLS,
        oob_fill=oob_fill,
    )
    tmap = to_device(encode(spec), spec)  # alive until the kernel has finished
    jitted("tma_tile_copy")[grid, THREADS](tmap.address, d_out)
    cuda.synchronize()

    expected = np.full(padded, fill_value, dtype=np.float32)
    expected[:rows, :cols] = src
    np.testing.assert_array_equal(d_out.copy_to_host(), expected, err_msg=f"seed={seed}")


def test_encoded_map_is_16_words_on_64_byte_aligned_memory():
    d_src = cuda.to_device(np.zeros((128, 64), dtype=np.float32))
    words = encode(tiled_2d(d_src, np.float32, 128, 64, 256, BOX_ROWS, BOX_COLS))
    assert words.shape == (TENSOR_MAP_WORDS,) and words.any()
    assert to_device(words).address % TENSOR_MAP_ALIGN_BYTES == 0


def test_spec_for_array_encodes_like_tiled_2d():
    d_src = cuda.to_device(np.zeros((200, 72), dtype=np.float32))
    by_array = encode(spec_for_array(d_src, (BOX_ROWS, BOX_COLS)))
    by_hand = encode(tiled_2d(d_src, np.float32, 200, 72, 72 * 4, BOX_ROWS, BOX_COLS))
    np.testing.assert_array_equal(by_array, by_hand)
