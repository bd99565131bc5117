"""Host side of the cluster ring the cluster studies share (``multicast``, ``dsm``; device code
in ``kernels/common/`` and ``kernels/multicast/ring.py``): its shared-memory geometry and the
operand it streams, a device buffer of random uint32 in 256-byte rows with its tensor maps and
per-tile checks (:mod:`.cluster_checksums`).

``Operand`` is used only by the measure step and the GPU tests (it imports numba.cuda lazily).
"""
from __future__ import annotations

import numpy as np

from tma_study.harness import cluster_checksums as reference
from tma_study.harness.buffers import fresh_rng

ELEMENT_BYTES = 4
ROW_ELEMENTS = 64                      # kernels/common/cluster_tiles.py: 256-byte tensor rows
ROW_BYTES = 256                        # kernels/common/cluster_tiles.py
MAX_BOX_ROWS = 256                     # a TMA box has at most 256 rows
RING_ALIGN_BYTES = 128
STATIC_SHARED_BYTES = 128              # 2 x MAX_STAGES mbarriers
RESERVED_SHARED_PER_CTA_BYTES = 1024   # the driver reserves 1 KiB per CTA on sm_90
MAX_SHARED_PER_CTA_BYTES = 232448
WARP = 32
# every cluster ring's consumer: 128-bit shared loads after waiting on the stage's full barrier
CONSUMER_SASS = ("LDS.128", "SYNCS.PHASECHK")


def shared_memory_fits(dynamic_shared_bytes: int, ctas_per_sm: int, smem_per_sm_bytes: int) -> bool:
    """A CTA's shared memory (dynamic + the static mbarriers) fits the per-CTA limit, and
    ``ctas_per_sm`` of them (each with the driver's reserved 1 KiB) fit the SM."""
    per_cta = dynamic_shared_bytes + STATIC_SHARED_BYTES
    return (per_cta <= MAX_SHARED_PER_CTA_BYTES
            and ctas_per_sm * (per_cta + RESERVED_SHARED_PER_CTA_BYTES) <= smem_per_sm_bytes)


class Operand:
    """A device buffer of random uint32 (rows of 256 B), its tensor maps and tile checks."""

    def __init__(self, name: str, nbytes: int):
        from numba import cuda
        self.name, self.nbytes = name, nbytes
        self.device = cuda.device_array(nbytes // ELEMENT_BYTES, np.uint32)
        self.generation = None
        self._maps: dict[int, object] = {}

    def ensure_fresh(self, generation) -> None:
        """New random contents whenever a new group of configurations starts."""
        if generation == self.generation:
            return
        self.words = np.frombuffer(fresh_rng().bytes(self.nbytes), dtype=np.uint32)
        self.device.copy_to_device(self.words)
        self._checks: dict[tuple[int, int, int], np.ndarray] = {}
        self.generation = generation

    def checks(self, tile_bytes: int, vector_offset: int = 0, work_rounds: int = 0) -> np.ndarray:
        """Per-tile checks of the words (churned ``work_rounds`` times: the compute consumer)."""
        key = (tile_bytes, vector_offset, work_rounds)
        if key not in self._checks:
            self._checks[key] = reference.tile_checks(reference.churned(self.words, work_rounds), tile_bytes,
                                                      vector_offset)
        return self._checks[key]

    def tiles(self, tile_bytes: int) -> int:
        return self.nbytes // tile_bytes

    def tensor_map(self, box_rows: int) -> int:
        """Address of a tensor map over the buffer as rows of 64 uint32, box 64 x box_rows."""
        if box_rows not in self._maps:
            from tma_kernels import tensor_map
            rows = self.nbytes // (ROW_ELEMENTS * ELEMENT_BYTES)
            spec = tensor_map.tiled_2d(self.device, np.uint32, rows=rows, cols=ROW_ELEMENTS,
                                       row_stride_bytes=ROW_ELEMENTS * ELEMENT_BYTES,
                                       box_rows=box_rows, box_cols=ROW_ELEMENTS)
            self._maps[box_rows] = tensor_map.to_device(tensor_map.encode(spec), spec)
        return self._maps[box_rows].address
