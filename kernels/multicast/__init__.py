"""Kernels of the ``multicast`` study: a cluster ring where every CTA of a cluster needs the
same tiles, loaded with TMA per CTA or with TMA multicast (see :mod:`.ring`); the consumer
folds a checksum (load only) or first churns every word (:func:`.ring.cluster_compute_stream`).

Launch geometry (threads = consumers + one producer warp; dynamic shared memory = stages x
stage bytes + alignment slack) is computed on the host by
:class:`tma_study.studies.multicast.grid.ClusterConfig`.
"""
from .ring import (COMPUTE_SIGNATURE, MAX_STAGES, RELEASES, ROW_BYTES, ROW_ELEMENTS, SIGNATURE, cluster_compute_stream,
                   cluster_stream)

VARIANT_KERNEL = {"no_cluster": False, "cluster": False, "multicast": True}   # variant -> multicast build

__all__ = ["COMPUTE_SIGNATURE", "MAX_STAGES", "RELEASES", "ROW_BYTES", "ROW_ELEMENTS", "SIGNATURE", "VARIANT_KERNEL", "cluster_compute_stream",
           "cluster_stream"]
