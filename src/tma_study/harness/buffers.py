"""Device buffers every study's correctness checks share: fresh randomness, one reusable
per-thread checksum buffer, and poisoning before each check.

Imported only on the measure path and by GPU tests (``numba.cuda`` is imported lazily).
"""
from __future__ import annotations

import os

import numpy as np


def fresh_rng() -> np.random.Generator:
    """A generator seeded from the OS: every check sees data no earlier run saw."""
    return np.random.default_rng(int.from_bytes(os.urandom(8), "little"))


class ChecksumOutputs:
    """One device buffer for every configuration's per-thread checksums (a view each).

    Each check poisons its view before it launches, so sharing the memory hides nothing;
    it keeps a sweep of many configurations from holding an allocation per configuration.
    """

    def __init__(self):
        self.buffer = None

    def view(self, size: int):
        from numba import cuda
        if self.buffer is None or self.buffer.size < size:
            self.buffer = cuda.device_array(size, np.uint64)
        return self.buffer[:size]


def poison(out) -> None:
    """Overwrite a uint64 device array with random values, so a kernel that writes nothing fails."""
    out.copy_to_device(fresh_rng().integers(0, 2**63, size=out.size, dtype=np.uint64))
