"""CPU: the multicast study's sweep, host references and aggregation."""
import copy

import numpy as np
import pandas as pd
import pytest
import yaml

from tma_study import config as config_mod
from tma_study.config import REPO_ROOT
from tma_study.harness import cluster_checksums as reference
from tma_study.studies import discover
from tma_study.studies.multicast import aggregate as mc_aggregate
from tma_study.studies.multicast import comparison as mc_comparison
from tma_study.studies.multicast.grid import (
    ClusterConfig,
    cluster_configs,
    fits,
    slices_whole,
)

H200_SMEM_PER_SM = 233472


def study_config(name):
    return copy.deepcopy(yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())["studies"][name])


# ---------------------------------------------------------------- sweep

def test_every_multicast_config_fits_and_slices_whole():
    configs = cluster_configs(study_config("multicast"), H200_SMEM_PER_SM)
    assert configs and all(fits(c, H200_SMEM_PER_SM) and slices_whole(c) for c in configs)
    # cluster size 1 is only the baseline; every other shape has all three variants
    assert {c.variant for c in configs if c.cluster_size == 1} == {"no_cluster"}
    assert {c.variant for c in configs if c.cluster_size == 16} == {"no_cluster", "cluster", "multicast"}
    assert len({c.key for c in configs}) == len(configs)


def test_a_64kib_tile_never_runs_four_stages_and_slices_must_be_whole_rows():
    big = ClusterConfig("1d", "multicast", 1, 2, 65536, 4, 1, 256, "hbm", 2**28, 2**28)
    assert not fits(big, H200_SMEM_PER_SM)
    assert slices_whole(ClusterConfig("1d", "multicast", 1, 16, 4096, 2, 1, 256, "hbm", 2**28, 2**28))
    assert not slices_whole(ClusterConfig("2d", "multicast", 16, 1, 2048, 2, 1, 256, "hbm", 2**28, 2**28))



@pytest.mark.parametrize("key,value,fragment", [
    ("tile_bytes", [3000], "studies.multicast.tile_bytes[0]"),
    ("variants", ["teleport"], "studies.multicast.variants[0]"),
])
def test_bad_config_names_the_key(key, value, fragment):
    config = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())
    config["studies"]["multicast"][key] = value
    with pytest.raises(config_mod.ConfigError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        config_mod.validate(config, discover())


# ---------------------------------------------------------------- host reference

def test_tile_checks_xor_each_vector_sum_with_its_index():
    words = np.arange(2 * 64, dtype=np.uint32)          # two tiles of 256 B (16 vectors each)
    checks = reference.tile_checks(words, 256, vector_offset=3)
    vectors = words.reshape(-1, 4).astype(np.uint64).sum(axis=1)
    want0 = sum(int(v) ^ (i + 3) for i, v in enumerate(vectors[:16]))
    assert int(checks[0]) == want0 and checks.size == 2


def test_cta_expected_follows_the_kernel_schedule():
    a = np.arange(8, dtype=np.uint64) * 1000
    b = np.arange(6, dtype=np.uint64)
    # 2x2 cluster, 2 clusters, 5 steps: CTA (group g, x, y) gets A (q*2 + x) % 8 and B (q*2 + y) % 6
    got = reference.cta_expected(a, b, 5, 8, 2, 2)
    cta = 7                                              # group 1, rank 3: x=1, y=1; steps 1, 3
    want = sum(int(a[(q * 2 + 1) % 8]) + int(b[(q * 2 + 1) % 6]) for q in (1, 3))
    assert int(got[cta]) == want
    with pytest.raises(ValueError, match="whole number of clusters"):
        reference.cta_expected(a, None, 5, 6, 2, 2)


def test_mismatches_name_the_cluster_and_rank():
    want = np.zeros(8, dtype=np.uint64)
    got = want.copy()
    got[5] = 1
    assert reference.mismatches(want, want, 4) == ""
    assert "CTA 5 (cluster 1, rank 1)" in reference.mismatches(got, want, 4)


# ---------------------------------------------------------------- aggregation

def _stream(times: dict) -> pd.DataFrame:
    """Synthetic raw rows: times[(variant, tile)] = time in us for a 1x4 cluster; baseline at 1x1."""
    rows = []
    for (variant, tile), time in times.items():
        for stages, slower in ((2, 1.5), (4, 1.0)):      # the 4-stage ring is each variant's best
            n = 1 if variant == "baseline" else 4
            rows.append({"pattern": "1d", "working_set": "hbm", "cluster_x": 1, "cluster_y": n,
                         "variant": "no_cluster" if variant == "baseline" else variant, "tile_bytes": tile,
                         "stages": stages, "ctas_per_sm": 1, "consumer_threads": 256, "release": "warp", "grid_ctas": 132,
                         "clusters": 33, "max_active_clusters": 40, "busy_cta_share": 1.0, "steps_total": 10,
                         "stage_bytes": tile, "bytes_delivered": 1e9, "bytes_requested": 1e9,
                         "time_us_median": time * slower, "time_us_iqr": 0.001 * time,
                         "delivered_gbps": 1e9 / (time * slower * 1e3), "requested_gbps": 1.0,
                         "sm_clock_mhz_mean": 1980.0})
    return pd.DataFrame(rows)


def test_multicast_speedup_break_even_and_scheduling():
    times = {("baseline", 4096): 50.0, ("baseline", 65536): 50.0,
             ("no_cluster", 4096): 100.0, ("cluster", 4096): 110.0, ("multicast", 4096): 120.0,
             ("no_cluster", 65536): 100.0, ("cluster", 65536): 110.0, ("multicast", 65536): 80.0}
    best = mc_comparison.best_configurations(_stream(times))
    assert set(best.stages) == {4}
    speedup = mc_comparison.speedups(best)
    small = speedup[speedup.tile_bytes == 4096].iloc[0]
    large = speedup[speedup.tile_bytes == 65536].iloc[0]
    assert small.status == "loss" and small.best_alternative == "no_cluster"
    assert large.speedup_over_best_alternative == pytest.approx(100 / 80) and large.status == "win"
    even = mc_aggregate.break_even(speedup).iloc[0]
    assert even.break_even_tile_bytes == 65536 and even.bracket_low_tile_bytes == 4096
    sched = mc_aggregate.scheduling(speedup)
    row = sched[sched.tile_bytes == 65536].iloc[0]
    assert row.scheduling_factor == pytest.approx(1.1) and row.multicast_factor == pytest.approx(80 / 110)



def test_host_launch_geometry_matches_the_kernels():
    """The host geometry (harness.cluster_ring, re-exported by grid.py) restates the kernels' layout
    constants (it must not import numba): keep them equal."""
    from tma_kernels.multicast import ring
    from tma_study.studies.multicast import grid as mc_grid
    assert (mc_grid.ROW_BYTES, mc_grid.RING_ALIGN_BYTES, mc_grid.WARP) == (ring.ROW_BYTES, ring.RING_ALIGN_BYTES,
                                                                            ring.WARP)
    assert mc_grid.STATIC_SHARED_BYTES == 2 * ring.MAX_STAGES * ring.MBARRIER_BYTES
