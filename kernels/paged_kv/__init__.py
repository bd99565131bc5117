"""Paged-KV attention forward for the ``paged_kv`` study (kernel.py has the layouts).

One kernel per :class:`~.geometry.Variant`; the load path (``tma`` or ``cp_async``) is
the only difference a ``diff producers.py`` shows between two otherwise equal variants.
"""
from .combine import COMBINE_SIGNATURE, combine_kernel, launch_combine, make_combine  # noqa: F401
from .geometry import Variant, VariantError  # noqa: F401
from .kernel import SIGNATURE, make_attention_kernel  # noqa: F401
