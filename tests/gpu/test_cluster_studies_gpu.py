"""GPU: the multicast and dsm studies' kernels deliver exactly the tiles the host predicts,
to every CTA of every cluster.

The checks run the measurements' own case classes on small operands (4 MiB, fresh random
data, poisoned outputs), without cuda-bench: ``Case.check()`` / ``BroadcastCase.check()``
compare each CTA's checksum with ``reference.cta_expected`` and raise ``CorrectnessError``
naming the CTAs that differ.

- multicast ring: 1-D broadcast at cluster sizes 1, 2, 4, 16 and 2-D shapes 2x2, 4x2, 1x2,
  for each variant (own copy without/with a cluster launch, multicast), small and large
  tiles, 2 and 4 stages;
- the compute ring (consumer churning every word, own or shared tile order) at 1x1, 1x2 and
  2x2, each variant;
- DSM broadcast (pull, push) and the multicast variant at cluster sizes 2, 4, 16;
- the checks fail when one word of the operand changes after the reference was taken;
- DSM neighbour reads (remote at 2 and 16, local) and the latency chase end where the host
  says.

``KERNELS`` lists the kernels with their signatures for
tests/cpu/kernels/test_gpu_test_kernels_compile.py (compiled for sm_90a on any machine).
"""
import functools

import numpy as np
import pytest
from tma_kernels.dsm import (
    bandwidth,
    broadcast,
    latency,
    make_broadcast,
    make_neighbour_read,
)
from tma_kernels.multicast import COMPUTE_SIGNATURE, SIGNATURE, cluster_compute_stream, cluster_stream

from tma_study import gpu as gpu_mod
from tma_study.harness.buffers import ChecksumOutputs
from tma_study.harness.cluster_ring import Operand
from tma_study.harness.timing import CorrectnessError
from tma_study.studies.dsm import measure as dsm_measure
from tma_study.studies.dsm.grid import BroadcastConfig
from tma_study.studies.multicast import measure as mc_measure
from tma_study.studies.multicast.grid import ClusterConfig, ComputeConfig, fits

OPERAND_BYTES = 4 * 2**20
CONSUMERS = 256

KERNELS = {
    "cluster_stream_own_copy": (cluster_stream(False), SIGNATURE),
    "cluster_stream_multicast": (cluster_stream(True), SIGNATURE),
    "cluster_stream_own_copy_cta_release": (cluster_stream(False, "cta"), SIGNATURE),
    "cluster_stream_multicast_cta_release": (cluster_stream(True, "cta"), SIGNATURE),
    "cluster_compute_stream_own_copy": (cluster_compute_stream(False), COMPUTE_SIGNATURE),
    "cluster_compute_stream_multicast": (cluster_compute_stream(True), COMPUTE_SIGNATURE),
    "broadcast_dsm_pull": (make_broadcast("dsm_pull"), broadcast.SIGNATURE),
    "broadcast_dsm_push": (make_broadcast("dsm_push"), broadcast.SIGNATURE),
    "dsm_neighbour_read": (make_neighbour_read(True), bandwidth.SIGNATURE),
    "dsm_own_read": (make_neighbour_read(False), bandwidth.SIGNATURE),
    "dsm_latency_chase": (latency.chase, latency.SIGNATURE),
}


@functools.cache
def gpu():
    return gpu_mod.require_hopper(gpu_mod.detect())


@functools.cache
def ring_kernels():
    return mc_measure.compile_kernels(compute=True)


@functools.cache
def dsm_kernels():
    return dsm_measure.compile_kernels()


@functools.cache
def operands():
    return {("small", "a"): Operand("small/a", OPERAND_BYTES), ("small", "b"): Operand("small/b", OPERAND_BYTES)}


_outputs = ChecksumOutputs()


def ring_config(pattern, variant, shape, tile, stages, ctas=1, release="warp"):
    return ClusterConfig(pattern, variant, shape[0], shape[1], tile, stages, ctas, CONSUMERS, "small",
                         OPERAND_BYTES, 2 * OPERAND_BYTES, release)


RING_CASES = [
    *[("1d", v, (1, n), tile, stages) for n in (2, 4, 16) for v in ("no_cluster", "cluster", "multicast")
      for tile, stages in ((4096, 4), (65536, 2))],
    ("1d", "no_cluster", (1, 1), 16384, 4),
    *[("2d", v, shape, 16384, 2) for shape in ((2, 2), (4, 2), (1, 2)) for v in ("no_cluster", "multicast")],
    ("2d", "cluster", (4, 2), 8192, 4),
]


@pytest.mark.parametrize("release", ["warp", "cta"])
@pytest.mark.parametrize("pattern,variant,shape,tile,stages", RING_CASES)
def test_ring_delivers_every_tile_to_every_cta(pattern, variant, shape, tile, stages, release):
    config = ring_config(pattern, variant, shape, tile, stages, release=release)
    assert fits(config, gpu().smem_per_sm_bytes)
    case = mc_measure.Case(config, ring_kernels(), operands(), gpu().sm_count, _outputs)
    case.check()


COMPUTE_CASES = [("no_cluster", (1, 1)), *[(v, shape) for shape in ((1, 2), (2, 2))
                                            for v in ("no_cluster", "cluster", "multicast")]]


@pytest.mark.parametrize("order", ["spread", "shared"])
@pytest.mark.parametrize("rounds", [0, 5])
@pytest.mark.parametrize("variant,shape", COMPUTE_CASES)
def test_compute_ring_delivers_churned_tiles_to_every_cta(variant, shape, rounds, order):
    config = ComputeConfig("2d", variant, shape[0], shape[1], 8192, 4, 1, CONSUMERS, "small", OPERAND_BYTES,
                           2 * OPERAND_BYTES, "warp", rounds, order)
    assert fits(config, gpu().smem_per_sm_bytes)
    case = mc_measure.Case(config, ring_kernels(), operands(), gpu().sm_count, _outputs)
    case.check()


def test_ring_check_fails_on_a_changed_word():
    config = ring_config("1d", "multicast", (1, 4), 8192, 2)
    case = mc_measure.Case(config, ring_kernels(), operands(), gpu().sm_count, _outputs)
    case.check()
    operand = operands()[("small", "a")]
    word = np.array([operand.words[12345] ^ 1], dtype=np.uint32)
    operand.device[12345:12346].copy_to_device(word)
    with pytest.raises(CorrectnessError, match="CTAs got wrong data"):
        case.check()
    operand.generation = None            # the next check uploads fresh data


@pytest.mark.parametrize("variant", ["multicast", "dsm_pull", "dsm_push"])
@pytest.mark.parametrize("n,tile,stages", [(2, 4096, 4), (4, 65536, 2), (16, 16384, 2)])
def test_broadcast_delivers_every_tile_to_every_cta(variant, n, tile, stages):
    config = BroadcastConfig(variant, n, tile, stages, 1, CONSUMERS, "small", OPERAND_BYTES, 2 * OPERAND_BYTES)
    case = dsm_measure.BroadcastCase(config, dsm_kernels(), {"small": operands()[("small", "a")]},
                                     gpu().sm_count, _outputs)
    case.check()


@pytest.mark.parametrize("pattern,n", [("ring", 2), ("ring", 16), ("pair", 4), ("pair", 16), ("own", 1)])
def test_neighbour_read_checksums(pattern, n):
    from numba import cuda
    remote = pattern != dsm_measure.LOCAL_PATTERN
    kernel = cuda.jit(bandwidth.SIGNATURE)(make_neighbour_read(remote, pattern if remote else "ring"))
    dsm_measure.NeighbourReadCase(kernel, pattern, n, 1, 256, 3, gpu().sm_count).check()


def test_latency_chases_end_where_the_host_says():
    frame = dsm_measure.measure_latency({"cluster_sizes": [2, 4], "hops": 256, "repeats": 2})
    assert set(frame["cluster_size"]) == {2, 4}
    assert (frame["cycles_per_hop_median"] > 0).all()
