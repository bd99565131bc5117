"""The shared-memory layout the cluster rings share (``kernels/multicast/ring.py`` and
``kernels/dsm/broadcast.py``): operands are 2-D tensors of uint32 with 256-byte rows, a stage
starts at a 128-byte aligned offset of the ring, and each stage has a full and an empty mbarrier.
Host side: :mod:`tma_study.harness.cluster_ring`."""

RING_ALIGN_BYTES = 128
MBARRIER_BYTES = 8
ROW_BYTES = 256                  # operands are 2-D tensors of uint32, 64 per row
ROW_ELEMENTS = 64
LOG2_ROW_BYTES = 8
WARP = 32
