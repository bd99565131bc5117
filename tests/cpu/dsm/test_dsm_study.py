"""CPU: the dsm study's sweep and aggregation."""
import copy

import pandas as pd
import pytest
import yaml

from tma_study import config as config_mod
from tma_study.config import REPO_ROOT
from tma_study.studies import discover
from tma_study.studies.dsm import aggregate as dsm_aggregate
from tma_study.studies.dsm.grid import BroadcastConfig, broadcast_configs

H200_SMEM_PER_SM = 233472


def study_config(name):
    return copy.deepcopy(yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())["studies"][name])


# ---------------------------------------------------------------- sweep

def test_dsm_configs_have_two_warps_beside_the_consumers():
    configs = broadcast_configs(study_config("dsm"), H200_SMEM_PER_SM)
    pull = next(c for c in configs if c.variant == "dsm_pull")
    multicast = next(c for c in configs if c.variant == "multicast")
    assert pull.threads_per_cta == pull.consumer_threads + 64
    assert multicast.threads_per_cta == multicast.consumer_threads + 32



@pytest.mark.parametrize("key,value,fragment", [
    ("cluster_sizes", [1], "studies.dsm.cluster_sizes[0]"),
    ("working_sets", {"hbm": {"bytes": 5}}, "studies.dsm.working_sets.hbm"),
])
def test_bad_config_names_the_key(key, value, fragment):
    config = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())
    config["studies"]["dsm"][key] = value
    with pytest.raises(config_mod.ConfigError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        config_mod.validate(config, discover())


# ---------------------------------------------------------------- aggregation

def test_dsm_winners_and_ties():
    rows = []
    for variant, time in (("multicast", 100.0), ("dsm_pull", 100.5), ("dsm_push", 300.0)):
        rows.append({"working_set": "hbm", "cluster_size": 4, "variant": variant, "tile_bytes": 16384,
                     "stages": 2, "ctas_per_sm": 1, "consumer_threads": 256, "grid_ctas": 132, "clusters": 33,
                     "max_active_clusters": 40, "busy_cta_share": 1.0, "steps_total": 10,
                     "bytes_delivered": 1e9, "time_us_median": time, "time_us_iqr": 0.5, "gbps": 1e9 / (time * 1e3),
                     "sm_clock_mhz_mean": 1980.0})
    best = dsm_aggregate.best_configurations(pd.DataFrame(rows))
    winner = dsm_aggregate.winners(best).iloc[0]
    assert winner.winner == "multicast" and winner.runner_up == "dsm_pull" and winner.tie



def test_host_launch_geometry_matches_the_kernels():
    """grid.py restates the broadcast kernel's thread count (it must not import numba): keep them equal."""
    from tma_kernels.dsm import broadcast
    pull = BroadcastConfig("dsm_pull", 4, 16384, 2, 1, 256, "hbm", 2**28, 2**28)
    assert pull.threads_per_cta == broadcast.threads_per_cta(256)
