"""The four streaming kernels of the crossover study, one per load mechanism."""
from . import bulk_copy, cp_async, plain_loads, tma_tile
from .ring import ARRIVALS_EVERY_PRODUCER, ARRIVALS_ONE_THREAD, make_stream_kernel

# mechanism name -> (producer module, how its stage barrier completes)
MECHANISMS = {
    "tma_tile": (tma_tile, ARRIVALS_ONE_THREAD),
    "bulk_copy": (bulk_copy, ARRIVALS_ONE_THREAD),
    "cp_async": (cp_async, ARRIVALS_EVERY_PRODUCER),
    "plain_loads": (plain_loads, ARRIVALS_EVERY_PRODUCER),
}


def stream_kernel(mechanism: str):
    """The Python kernel function of ``mechanism`` (compile with KERNEL_SIGNATURE)."""
    try:
        producer, arrivals = MECHANISMS[mechanism]
    except KeyError:
        raise ValueError(f"unknown mechanism {mechanism!r}; known: {', '.join(MECHANISMS)}") from None
    kernel = make_stream_kernel(producer.produce_stage, arrivals)
    kernel.__name__ = f"stream_{mechanism}"
    kernel.__qualname__ = kernel.__name__
    return kernel
