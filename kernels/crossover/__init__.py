"""Kernels of the ``crossover`` study: one streaming kernel per load mechanism.

Every kernel streams the same bytes through the same multi-stage shared-memory ring and
hands each stage to the same consumer (:mod:`.consumer`); only the producer differs, so
``diff tma_tile.py bulk_copy.py`` shows exactly what one mechanism does that another does not.

Data layout (all kernels): the source is ``chunk_count`` chunks of ``bytes_per_transfer``
bytes each (a power of two, 256 B … 64 KiB). A *transfer* moves one whole chunk:

- ``tma_tile``     one ``cp.async.bulk.tensor.2d`` box (TMA engine, tensor map)
- ``bulk_copy``    one ``cp.async.bulk`` 1-D copy (TMA engine, no tensor map)
- ``cp_async``     ``bytes_per_transfer / 16`` ``cp.async.cg`` 16-byte copies (LDGSTS) spread over the CTA
- ``plain_loads``  ``bytes_per_transfer / 16`` 128-bit loads into registers, stored to shared memory

Transfers visit chunks in a scattered order, ``chunk = (transfer * order_multiplier) & chunk_mask``
(an odd multiplier permutes a power-of-two chunk count), so a transfer's size is its unit of
contiguity for every mechanism. One stage holds ``stage_bytes / bytes_per_transfer`` transfers;
``stages`` stages are in flight per CTA.
"""
from .kernels import MECHANISMS, stream_kernel  # noqa: F401
from .ring import KERNEL_SIGNATURE  # noqa: F401
from .latency import LATENCY_SIGNATURE, latency_kernel  # noqa: F401
from .latency_chain import CHAIN_SIGNATURE, WAITS, chain_kernel  # noqa: F401
from .read_ceiling import READ_SIGNATURE, read_stream  # noqa: F401
