"""GPU: the cluster_launch study's recorded launch (its correctness check) on a Hopper GPU.

For a plain launch and cluster launches of 1..16 CTAs at one and two CTAs per SM, every CTA
must write its record (SM below the SM count, the cluster id and rank its block index implies,
stayed at least the spin: ``measure.cta_records``), and the CTAs of one cluster must run at once
(gang scheduling: their [start, end] intervals share an instant) on at most as many SMs as the
cluster has CTAs.
"""
import functools

import numpy as np
import pytest
from tma_kernels.cluster_launch import SIGNATURE, record_placement

from tma_study.harness.kernel_builds import load_cached
from tma_study.studies.cluster_launch.grid import LaunchPoint, grid_ctas
from tma_study.studies.cluster_launch.kernels import KERNEL

KERNELS = {KERNEL: (record_placement, SIGNATURE)}
SPIN_NS = 20_000
SETTINGS = [(1, 131200), (2, 65664)]          # (CTAs per SM, dynamic shared bytes): one fits, three fit


@functools.cache
def kernel():
    return load_cached(KERNEL, *KERNELS[KERNEL])


def recorded(point: LaunchPoint):
    from numba import cuda

    from tma_study.studies.cluster_launch.measure import Case, Records
    from tma_kernels import launch
    sm_count = cuda.get_current_device().MULTIPROCESSOR_COUNT
    launch.set_max_dynamic_shared_bytes(kernel(), max(s for _, s in SETTINGS))
    case = Case(point, kernel(), Records(point.grid_ctas), sm_count,
                launch.max_active_clusters(kernel(), point.cluster_size, point.threads_per_cta,
                                           point.dynamic_shared_bytes))
    case.check()
    return case


@pytest.mark.parametrize("ctas_per_sm,smem", SETTINGS)
@pytest.mark.parametrize("cluster_size", [None, 1, 2, 4, 8, 16])
def test_every_cta_records_and_a_cluster_runs_at_once(cluster_size, ctas_per_sm, smem):
    from numba import cuda
    sm_count = cuda.get_current_device().MULTIPROCESSOR_COUNT
    n = cluster_size or 1
    point = LaunchPoint("cluster" if cluster_size else "no_cluster", n, grid_ctas(n, ctas_per_sm, sm_count),
                        ctas_per_sm, smem, SPIN_NS, 128)
    case = recorded(point)
    ctas = case.ctas
    assert len(ctas) == point.grid_ctas and (ctas.end_ns - ctas.start_ns >= SPIN_NS).all()
    columns = case.columns()
    assert 1 <= columns["sms_used"] <= sm_count
    if cluster_size and cluster_size > 1:
        by_cluster = ctas.groupby("cluster_id")
        assert (by_cluster.start_ns.max() <= by_cluster.end_ns.min()).all(), "a cluster's CTAs did not overlap"
        assert (by_cluster.smid.nunique() <= cluster_size).all()
    if ctas_per_sm == 1:                          # one fits an SM: never two CTAs on one SM at once
        for _, on_sm in ctas.groupby("smid"):
            order = np.argsort(on_sm.start_ns.to_numpy())
            starts, ends = on_sm.start_ns.to_numpy()[order], on_sm.end_ns.to_numpy()[order]
            assert (starts[1:] >= ends[:-1]).all()
