"""CPU: the multicast study's compute sweep: its configurations, host reference, kernels' SASS
and analysis (synthetic timings)."""
import copy

import numpy as np
import pandas as pd
import pytest
import yaml

from tma_study.config import REPO_ROOT
from tma_study.harness import cluster_checksums as reference
from tma_study.studies.multicast import compute as compute_mod
from tma_study.studies.multicast.grid import ComputeConfig, compute_configs, fits, slices_whole

H200_SMEM_PER_SM = 233472
LCG_INCREMENT_HEX = "0x3c6ef35f"        # reference.LCG_INCREMENT: the churn's IMAD immediate


def study_config():
    return copy.deepcopy(yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())["studies"]["multicast"])


def test_compute_sweep_fits_has_unique_keys_and_every_shape_has_a_baseline():
    configs = compute_configs(study_config(), H200_SMEM_PER_SM)
    assert configs and all(fits(c, H200_SMEM_PER_SM) and slices_whole(c) for c in configs)
    assert len({c.key for c in configs}) == len(configs)
    assert {c.variant for c in configs if c.cluster_size == 1} == {"no_cluster"}
    assert {c.work_rounds for c in configs} >= {0}
    assert all(c.columns()["imads_per_stage"] == c.stage_bytes // 4 * c.work_rounds for c in configs)
    assert compute_configs({k: v for k, v in study_config().items() if k != "compute"}, H200_SMEM_PER_SM) == []


def test_churned_is_the_kernels_lcg_in_closed_form():
    words = np.random.default_rng(1).integers(0, 2**32, 4096, dtype=np.uint64).astype(np.uint32)
    stepped = words.astype(np.uint64)
    for rounds in range(1, 12):
        stepped = (stepped * reference.LCG_MULTIPLIER + reference.LCG_INCREMENT) % 2**32
        assert np.array_equal(reference.churned(words, rounds), stepped.astype(np.uint32))
    assert reference.churned(words, 0) is words


def test_same_tiles_gives_every_cluster_the_same_tile_sequence():
    checks = np.arange(1, 65, dtype=np.uint64) ** 3
    spread = reference.cta_expected(checks, None, 40, 8, 1, 2)
    shared = reference.cta_expected(checks, None, 40, 8, 1, 2, same_tiles=True)
    assert len(set(shared[0::2])) == 1 and len(set(shared[1::2])) == 1      # rank 0 of every cluster alike
    assert len(set(spread[0::2])) > 1
    assert shared[0] == checks[0:10].sum()                                  # 40 steps / 4 clusters, tiles 0..9


@pytest.mark.parametrize("name", ["cluster_compute_stream_own_copy", "cluster_compute_stream_multicast"])
def test_compute_kernels_churn_with_imad_and_keep_their_loads(name):
    from tma_kernels import numpy_compat  # noqa: F401  before the first numba compile

    from tma_study.harness.kernel_builds import compile_build, missing_instructions
    from tma_study.studies.multicast.kernels import compile_list
    build = next(b for b in compile_list() if b.name == name)
    compiled = compile_build(build)
    assert not missing_instructions(compiled, build.expected_sass)
    churn = [i for i in compiled.instructions() if i.startswith("IMAD ") and LCG_INCREMENT_HEX in i.lower()]
    assert churn, f"{name}: no IMAD adding the LCG increment (the consumer's churn was dropped)"


def synthetic_rows(lose_from_rounds=8):
    """Timed compute rows: own copies take 1 us per stage plus the work; multicast wins (0.8x the
    time) while the stage is load-bound and loses (1.1x) from ``lose_from_rounds`` on."""
    rows = []
    for c in compute_configs(study_config(), H200_SMEM_PER_SM):
        cols = c.columns()
        clusters = 132 // c.cluster_size
        stages_per_cta = c.steps_total / clusters
        stage_us = 1.0 + 0.05 * c.work_rounds * c.tile_bytes / 8192
        if c.variant == "multicast":
            stage_us *= 0.8 if c.work_rounds < lose_from_rounds else 1.1
        time_us = stage_us * stages_per_cta
        delivered = c.steps_total * c.cluster_size * c.stage_bytes
        requested = delivered if c.variant != "multicast" else c.steps_total * (
            c.cluster_x * c.tile_bytes + c.cluster_y * c.b_tile_bytes)
        rows.append({**cols, "grid_ctas": clusters * c.cluster_size, "clusters": clusters,
                     "max_active_clusters": clusters if c.variant != "no_cluster" else None, "busy_cta_share": 1.0,
                     "bytes_delivered": delivered, "bytes_requested": requested,
                     "time_us_median": time_us, "time_us_q1": 0.9995 * time_us, "time_us_q3": 1.0005 * time_us,
                     "time_us_iqr": 0.001 * time_us, "time_us_min": 0.999 * time_us, "time_us_max": 1.001 * time_us,
                     "time_relative_stdev": 0.001, "samples": 20, "sm_clock_mhz_mean": 1980.0, "timing_status": "ok",
                     "delivered_gbps": delivered / (time_us * 1e3), "requested_gbps": requested / (time_us * 1e3)})
    return pd.DataFrame(rows)


def test_a_run_with_compute_rows_passes_the_raw_schema_and_aggregates(tmp_path):
    import json
    import shutil

    from tma_study.harness import raw_data
    from tma_study.studies.multicast import STUDY
    from tma_study.studies.multicast.aggregate import aggregate
    raw = tmp_path / "raw"
    shutil.copytree(REPO_ROOT / "results" / "h200" / "multicast", raw)
    compute = synthetic_rows()
    compute.to_csv(raw / "compute.csv", index=False)
    record = json.loads((raw / "provenance.json").read_text())
    record.pop("raw_files")                         # synthetic compute rows: an unsealed (staged) run
    stream_rows = len(pd.read_csv(raw / "stream.csv"))
    record["configurations"] = stream_rows          # as a run before the compute sweep counted
    (raw / "provenance.json").write_text(json.dumps(record))
    with pytest.raises(raw_data.RawDataError, match="configurations"):
        raw_data.load(STUDY, raw)                   # the compute rows must be counted too
    record["configurations"] = stream_rows + len(compute)
    (raw / "provenance.json").write_text(json.dumps(record))
    aggregate(raw, tmp_path / "derived")
    table = pd.read_csv(tmp_path / "derived" / "compute.csv")
    assert len(table) == len(compute[compute.variant == "multicast"])
    assert len(pd.read_csv(tmp_path / "derived" / "compute_boundary.csv")) == 3
    # the paper tier reads the measured sweep: table, macros, the rule of thumb
    from tma_study.studies.multicast.macros import macros
    from tma_study.studies.multicast.rules import rules_of_thumb
    from tma_study.studies.multicast.tables import write_tables
    write_tables(tmp_path / "derived", record, tmp_path / "tables")
    assert "wins from own-copy L2 read rate" in (tmp_path / "tables" / "multicast_compute.md").read_text()
    numbers = macros(tmp_path / "derived", record)
    assert numbers["multicastComputeWins"] == str(int((table.multicast_status == "win").sum()))
    assert "not measured" not in numbers["multicastComputeWinFromPercentTwoByTwo"]
    rule = next(r for r in rules_of_thumb(tmp_path / "derived", record) if r["figure"] == "multicast_compute")
    assert "multicast_wins_from_an_l2_read_rate" in rule["claims"]
    # the figure draws the measured sweep
    import runpy
    from types import SimpleNamespace
    snakemake = SimpleNamespace(params=SimpleNamespace(derived=str(tmp_path / "derived")),
                                input=SimpleNamespace(provenance=str(raw / "provenance.json")),
                                output=SimpleNamespace(pdf=str(tmp_path / "multicast_compute.pdf")))
    runpy.run_path(str(REPO_ROOT / "notebooks" / "multicast_compute.py"), init_globals={"snakemake": snakemake})
    assert (tmp_path / "multicast_compute.png").stat().st_size > 10000


def test_compute_speedups_ratio_and_boundary_follow_the_timings():
    table = compute_mod.compute_speedups(synthetic_rows())
    assert set(table.status) == {"measured"}
    assert set(table[table.work_rounds < 8].multicast_status) == {"win"}
    assert set(table[table.work_rounds >= 8].multicast_status) == {"loss"}
    # the 1x1 ring's load time: 1 us per stage; the consumer-to-load ratio grows with the rounds
    assert np.allclose(table.load_ns_per_stage, 1000.0)
    zero = table[table.work_rounds == 0]
    assert np.allclose(zero.consumer_to_load, 0.0)
    assert (table.l2_read_fraction <= 1.0 + 1e-12).all() and np.isclose(table.l2_read_fraction.max(), 1.0)
    bound = compute_mod.boundary(table)
    assert len(bound) == 3 and (bound.wins > 0).all() and bound.has_boundary.all()
    # from the boundary up no row is a loss; the row just below it is one
    for r in bound.itertuples():
        rows = table[(table.cluster_x == r.cluster_x) & (table.cluster_y == r.cluster_y)]
        assert (rows[rows.l2_read_fraction >= r.win_from_l2_read_fraction].multicast_status != "loss").all()
        assert rows[rows.l2_read_fraction == r.below_it_l2_read_fraction].multicast_status.iloc[0] == "loss"
        assert r.wins_max_consumer_to_load < rows[rows.work_rounds == 8].consumer_to_load.min()


def test_no_compute_rows_is_not_measured():
    assert compute_mod.compute_speedups(None).status.iloc[0].startswith("not measured")
    assert compute_mod.boundary(compute_mod.compute_speedups(None)).status.iloc[0].startswith("not measured")
