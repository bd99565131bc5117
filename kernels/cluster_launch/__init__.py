"""Kernels of the ``cluster_launch`` study: a near-empty kernel that records where and when
each CTA ran (see :mod:`.placement`)."""
from .placement import FIELDS, SIGNATURE, TIMES, record_placement

__all__ = ["FIELDS", "SIGNATURE", "TIMES", "record_placement"]
