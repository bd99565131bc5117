"""Kernels of the ``dsm`` study: broadcast through distributed shared memory (pull, push),
and DSM latency and bandwidth microbenchmarks."""
from . import bandwidth, broadcast, latency
from .bandwidth import make_neighbour_read
from .broadcast import make_broadcast

__all__ = ["bandwidth", "broadcast", "latency", "make_broadcast", "make_neighbour_read"]
