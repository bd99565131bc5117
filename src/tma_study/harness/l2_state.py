"""The state of L2 at the start of a cold sample: what nvbench leaves, and a clean one.

nvbench flushes L2 before every cold sample with ``cudaMemsetAsync`` over an L2-sized buffer
(``nvbench/detail/l2flush.cuh``), inside ``timer.start()``. L2 is write-back, so that flush
leaves L2 full of *dirty* lines: the first bytes a timed kernel brings into L2 evict them, and
their write-back to HBM (up to the L2 size: 60 MiB on the H200) runs inside the timed region.
A kernel that streams gigabytes hardly notices; one that reads 134 MB pays for up to 63 MB of
writes it never made. The ``clean`` state removes that: after nvbench's flush, and before
its start event is recorded, an untimed kernel reads a buffer of ``READ_L2_MULTIPLE`` times
the L2 size. Its lines replace the dirty ones, whose write-back happens then, untimed; the
timed kernel finds L2 holding clean lines of an unrelated buffer, so its data still come
from HBM and an eviction costs nothing (what Nsight Compute's own cache control gives a
profiled kernel).

- ``clean`` (the default): nvbench's flush, then the read described above.
- ``dirty``: nvbench's flush alone, as nvbench leaves L2 (the gemm reference data's state;
  docs/history.md: which data were measured in which state).

The ``paged_kv`` study measures copies of its decode points' sizes in both states in one run
(``d2d_copy_same_bytes`` and ``d2d_copy_same_bytes_dirty_l2`` in its ``ceilings.csv``).
"""
from __future__ import annotations

import functools

L2_STATES = ("clean", "dirty")
DEFAULT_L2_STATE = "clean"
# The cleaning read covers twice the L2 size: one pass leaves part of the dirty lines, more than
# two change nothing (docs/history.md: the probe that chose it).
READ_L2_MULTIPLE = 2
READ_THREADS = 256
READ_CTAS_PER_SM = 8
NEVER_MATCHES = 0x9E3779B97F4A7C15   # the XOR of a zero buffer is 0: the store never happens

DESCRIPTIONS = {
    "clean": (f"clean: nvbench's memset flush, then an untimed read of {READ_L2_MULTIPLE}x the L2 size "
              "(the flush's dirty lines written back before the timed region; harness.l2_state)"),
    "dirty": ("dirty: nvbench's memset flush alone (L2 left holding dirty lines, written back inside "
              "the timed region as the timed kernel evicts them)"),
}
LEGACY_DESCRIPTION = ("dirty: nvbench's memset flush alone (a run measured before the harness "
                      "recorded the L2 state; any untimed warm pass ran before that flush)")


def check_state(state: str, where: str = "l2_after_flush") -> str:
    if state not in L2_STATES:
        raise ValueError(f"{where}: {state!r} is not allowed; allowed: {', '.join(L2_STATES)}")
    return state


def describe(provenance: dict) -> str:
    """What L2 held at the start of each sample of a run, from its provenance.json."""
    return provenance.get("l2_before_each_sample", LEGACY_DESCRIPTION)


@functools.cache
def _read_kernel():
    from numba import cuda, uint64

    @cuda.jit("void(uint64[::1], uint64[::1])")
    def read_all(words, sink):
        """Read every word (grid-stride, coalesced); the sink store keeps the loads."""
        i = cuda.grid(1)
        acc = uint64(0)
        while i < words.size:
            acc ^= words[i]
            i += cuda.gridsize(1)
        if acc == uint64(NEVER_MATCHES):
            sink[0] = acc
    return read_all


class Cleaner:
    """Replaces every line of L2 by a clean line of its own zero buffer (see the module doc)."""

    def __init__(self, l2_bytes: int, sm_count: int):
        import numpy as np
        from numba import cuda
        self.words = cuda.to_device(np.zeros(READ_L2_MULTIPLE * l2_bytes // 8, np.uint64))
        self.sink = cuda.device_array(1, np.uint64)
        self.grid = sm_count * READ_CTAS_PER_SM
        self.kernel = _read_kernel()
        self(0)                 # load the module now: never while nvbench's blocking kernel spins
        cuda.synchronize()

    def __call__(self, stream) -> None:
        self.kernel[self.grid, READ_THREADS, stream](self.words, self.sink)
