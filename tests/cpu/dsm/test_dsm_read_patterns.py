"""CPU: the dsm study's two read patterns: the pair kernel compiles to the remote 128-bit loads
the ring's does, the host reference names the partner each pattern's kernel reads, and a run
measured before the pattern column existed reads as the ring."""
import numpy as np
import pandas as pd
import pytest

from tma_study.studies.dsm import STUDY
from tma_study.studies.dsm.aggregate import bandwidth_table, with_pattern
from tma_study.studies.dsm.measure import partner_ranks


@pytest.mark.parametrize("name", ["dsm_pair_read", "dsm_neighbour_read"])
def test_read_kernels_compile_to_remote_vector_loads(name):
    from tma_study.harness.kernel_builds import compile_build, missing_instructions
    (build,) = [b for b in STUDY.entry("kernels")({}) if b.name == name]
    compiled = compile_build(build)
    assert not missing_instructions(compiled, build.expected_sass)
    assert "LOP3" in compiled.sass or "IADD3" in compiled.sass      # the partner's rank is computed


@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_partners_are_permutations_and_agree_at_two(n):
    ranks = np.arange(n)
    ring, pair = partner_ranks(ranks, n, "ring"), partner_ranks(ranks, n, "pair")
    assert sorted(ring) == sorted(pair) == list(ranks)             # every CTA is read exactly once
    assert (ring != ranks).all() and (pair != ranks).all()
    assert (pair[pair] == ranks).all()                              # pairs read each other
    if n == 2:
        assert (ring == pair).all()
    else:
        assert ((ring // 2) != (ranks // 2)).sum() == n // 2         # half the ring's reads cross pairs


def test_a_run_without_the_pattern_column_reads_as_the_ring():
    frame = pd.DataFrame({"path": ["local", "remote", "remote"], "cluster_size": [1, 2, 4],
                          "ctas_per_sm": 1, "threads_per_cta": 256, "grid_ctas": 132, "busy_cta_share": 1.0,
                          "time_us_median": [100.0, 200.0, 250.0], "time_us_iqr": 1.0,
                          "gbps": [3000.0, 1500.0, 1200.0], "sm_clock_mhz_mean": 1980.0})
    assert list(with_pattern(frame).pattern) == ["own", "ring", "ring"]
    table = bandwidth_table(frame, 132).set_index(["pattern", "cluster_size"])
    assert table.loc[("ring", 4), "fraction_of_cluster_two"] == pytest.approx(0.8)
    assert np.isnan(table.loc[("own", 1), "fraction_of_cluster_two"])
