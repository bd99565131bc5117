"""The crossover study's CPU side: the sweep grid, the host checksum references, and the
aggregation of raw data into crossovers, best configurations and fractions of ceilings,
on synthetic data where the test decides which mechanism wins at each size."""

import copy
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from tma_study.studies.crossover import grid, reference
from tma_study.studies.crossover.aggregate import aggregate, crossovers
from tma_study.studies.crossover.tables import write_tables

from crossover_fixture import ceiling_row, latency_row, provenance_record, stream_row, write_raw_folder

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def study() -> dict:
    """The shipped crossover section, free to change."""
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    return copy.deepcopy(config["studies"]["crossover"])


def narrowed(study: dict, **changes) -> dict:
    """``study`` with one working set, one order and the given lists."""
    return {**study, "working_sets": {"hbm": study["working_sets"]["hbm"]}, "access_order": ["scattered"],
            **changes}


# ------------------------------------------------------------------ grid
def test_a_stage_smaller_than_a_transfer_is_dropped(study):
    configs = grid.stream_configs(narrowed(study, mechanisms=["cp_async"], ring_bytes_per_sm=[32768],
                                           stages=[4], ctas_per_sm=[1], bytes_per_transfer=[4096, 16384]))
    assert {c.stage_bytes for c in configs} == {8192}
    assert {c.bytes_per_transfer for c in configs} == {4096}


def test_shared_memory_over_the_sm_limit_is_dropped(study):
    small = narrowed(study, mechanisms=["tma_tile"], ring_bytes_per_sm=[65536], stages=[2], ctas_per_sm=[2],
                     bytes_per_transfer=[256], consumer_threads=[128], tma_issue_threads=[1])
    per_cta_overhead = grid.RING_ALIGN_BYTES + grid.STATIC_SHARED_BYTES + grid.RESERVED_SHARED_PER_CTA_BYTES
    just_enough = 65536 + 2 * per_cta_overhead
    assert len(grid.stream_configs(small, shared_per_sm_bytes=just_enough)) == 1
    assert grid.stream_configs(small, shared_per_sm_bytes=just_enough - 1) == []


def test_more_threads_than_an_sm_holds_are_dropped(study):
    configs = grid.stream_configs(narrowed(study, mechanisms=["cp_async"], ring_bytes_per_sm=[131072],
                                           stages=[2], ctas_per_sm=[2, 4], bytes_per_transfer=[256],
                                           consumer_threads=[128], producer_threads=[512]))
    assert [c.ctas_per_sm for c in configs] == [2]      # 4 CTAs x 640 threads > 2048


def test_tma_issue_threads_expand_only_tma_engine_mechanisms(study):
    configs = grid.stream_configs(narrowed(study, tma_issue_threads=[1, 32], producer_threads=[128, 512]))
    issuers = {m: {c.issue_threads for c in configs if c.mechanism == m} for m in study["mechanisms"]}
    assert issuers == {"tma_tile": {1, 32}, "bulk_copy": {1, 32}, "cp_async": {1}, "plain_loads": {1}}


def test_producer_threads_expand_only_cp_async_and_plain_loads(study):
    configs = grid.stream_configs(narrowed(study, producer_threads=[128, 512]))
    producers = {m: {c.producer_threads for c in configs if c.mechanism == m} for m in study["mechanisms"]}
    assert producers == {"tma_tile": {grid.TMA_ENGINE_PRODUCER_THREADS},
                         "bulk_copy": {grid.TMA_ENGINE_PRODUCER_THREADS},
                         "cp_async": {128, 512}, "plain_loads": {128, 512}}


def test_every_shipped_configuration_has_a_unique_key(study):
    configs = grid.stream_configs(study)
    assert configs
    assert len({c.key for c in configs}) == len(configs)


def test_every_shipped_configuration_fits(study):
    for config in grid.stream_configs(study):
        assert config.stage_bytes >= config.bytes_per_transfer and config.stage_bytes % config.bytes_per_transfer == 0
        assert config.ctas_per_sm * config.threads_per_cta <= grid.MAX_THREADS_PER_SM


# ------------------------------------------------------------------ reference checksums
def brute_force_checksum(words: np.ndarray, bytes_per_transfer: int | None, passes: int) -> int:
    """The kernels' checksum spelled out: per 16-byte vector, (sum of its 4 words) ^ chunk index."""
    total = 0
    for vector in range(len(words) // 4):
        value = sum(int(w) for w in words[4 * vector:4 * vector + 4])
        if bytes_per_transfer is not None:
            value ^= vector * 16 // bytes_per_transfer
        total += value
    return (total * passes) % 2**64


@pytest.fixture(scope="module")
def words() -> np.ndarray:
    return np.random.default_rng(7).integers(0, 2**32, size=4096 // 4, dtype=np.uint32)   # 4 KiB


@pytest.mark.parametrize("bytes_per_transfer", [None, 16, 32, 256, 1024, 4096])
@pytest.mark.parametrize("passes", [1, 3, 2**62 + 1])   # the last wraps modulo 2**64
def test_expected_checksum_matches_a_brute_force_loop(words, bytes_per_transfer, passes):
    got = reference.expected_checksum(reference.vector_sums(words), bytes_per_transfer, passes)
    assert got == brute_force_checksum(words, bytes_per_transfer, passes)


def test_vector_sums_do_not_overflow_32_bits():
    words = np.full(8, 2**32 - 1, dtype=np.uint32)
    assert reference.vector_sums(words).tolist() == [4 * (2**32 - 1)] * 2


def test_total_of_wraps_modulo_2_to_the_64():
    assert reference.total_of(np.array([2**63, 2**63, 5], dtype=np.uint64)) == 5


@pytest.mark.parametrize("chunk_count", [1, 2, 7, 64, 1000])
def test_chase_chain_is_one_cycle_through_every_chunk(chunk_count):
    successor = reference.chase_chain(chunk_count, np.random.default_rng(chunk_count))
    assert sorted(successor.tolist()) == list(range(chunk_count))     # a permutation
    seen, chunk = [], 0
    for _ in range(chunk_count):
        seen.append(chunk)
        chunk = int(successor[chunk])
    assert chunk == 0 and sorted(seen) == list(range(chunk_count))      # back at the start only after all


def test_chase_chains_differ_between_random_streams():
    a = reference.chase_chain(256, np.random.default_rng(1))
    b = reference.chase_chain(256, np.random.default_rng(2))
    assert not np.array_equal(a, b)


def test_follow_walks_the_chain():
    successor = np.array([2, 0, 3, 1])   # 0 -> 2 -> 3 -> 1 -> 0
    assert [reference.follow(successor, 0, hops) for hops in range(6)] == [0, 2, 3, 1, 0, 2]
    assert reference.follow(successor, 3, 1) == 1


# ------------------------------------------------------------------ aggregate
# hbm, scattered, ring 32 KiB. TMA against each alternative, size by size:
#   cp_async:    loss, loss, win, win    -> crossover 4 KiB, bracket (1 KiB, 4 KiB]
#   bulk_copy:   tie, tie, win, win      -> TMA never loses, crossover at the smallest size
#   plain_loads: win, loss, loss, loss   -> TMA never catches up (the early win does not count)
SIZES = [256, 1024, 4096, 16384]
RING = 32768
DEEP_RING = 131072
GBPS = {"tma_tile": [100, 200, 400, 800],
        "cp_async": [300, 301, 302, 303],
        "bulk_copy": [100, 199, 390, 700],
        "plain_loads": [50, 1000, 1001, 1002]}
D2D_GBPS = 4000.0
READ_GBPS = {2: 3000.0, 4: 3500.0, 8: 3400.0}   # the ceiling is the best of these


@pytest.fixture
def derived(tmp_path) -> Path:
    rows = [stream_row(m, "hbm", size, RING, gbps) for m, series in GBPS.items() for size, gbps in zip(SIZES, series)]
    rows.append(stream_row("tma_tile", "hbm", 4096, RING, 350, stages=4))            # slower than stages=2
    rows.append(stream_row("tma_tile", "hbm", 4096, DEEP_RING, 500, stages=4, ctas_per_sm=2))  # best of all rings
    ceilings = [ceiling_row("d2d_copy", "hbm", D2D_GBPS)]
    ceilings += [ceiling_row("read_stream", "hbm", gbps, ctas) for ctas, gbps in READ_GBPS.items()]
    latency = [latency_row("tma_tile", 4096, level, ns) for level, ns in (("hbm", 900.0), ("l2", 300.0))]
    raw = write_raw_folder(tmp_path / "raw", pd.DataFrame(rows), pd.DataFrame(ceilings), pd.DataFrame(latency))
    aggregate(raw, tmp_path / "derived")
    return tmp_path / "derived"


def crossover_row(derived: Path, alternative: str, ring: int = RING) -> pd.Series:
    table = pd.read_csv(derived / "crossover.csv")
    rows = table[(table.alternative == alternative) & (table.ring_bytes_per_sm == ring)]
    assert len(rows) == 1
    return rows.iloc[0]


def test_aggregate_writes_every_derived_file(derived):
    from tma_study.studies.crossover import STUDY

    assert sorted(p.name for p in derived.iterdir()) == sorted(STUDY.derived_files)


def test_reproducibility_says_when_no_second_run_exists(derived):
    table = pd.read_csv(derived / "reproducibility.csv")
    assert list(table.compared) == ["no second run of this sweep is present"]


def test_reproducibility_of_a_run_against_a_perturbed_copy(tmp_path, derived):
    raw = derived.parent / "raw"
    repeat = tmp_path / "repeat"
    shutil.copytree(raw, repeat)
    stream = pd.read_csv(repeat / "stream.csv")
    times = [c for c in stream.columns if c.startswith("time_us_")]
    stream.loc[0, times] /= 1.10           # one configuration 10 % faster in the second run
    stream.loc[0, "gbps"] = stream.bytes_moved[0] / (stream.time_us_median[0] * 1e3)
    stream.to_csv(repeat / "stream.csv", index=False)
    aggregate(raw, tmp_path / "again", repeat)
    table = pd.read_csv(tmp_path / "again" / "reproducibility.csv").set_index("compared")
    every = table.loc["every configuration (stream.csv)"]
    assert every.configurations == len(stream)
    assert every.max_relative_difference == pytest.approx(0.10 / 1.05)
    assert every.median_relative_difference == 0.0
    assert table.loc["ceilings"].max_relative_difference == 0.0


def test_crossover_is_the_first_size_after_the_last_loss(derived):
    row = crossover_row(derived, "cp_async")
    assert (row.crossover_bytes, row.crossover_bracket_low_bytes) == (4096, 1024)
    assert not row.tma_never_loses and not row.tma_never_catches_up
    assert row.status_by_size == "256:loss 1024:loss 4096:win 16384:win"


def test_ties_within_one_percent_count_as_not_slower(derived):
    row = crossover_row(derived, "bulk_copy")
    assert row.tma_never_loses and not row.tma_never_catches_up
    assert row.crossover_bytes == 256 and math.isnan(row.crossover_bracket_low_bytes)
    assert row.status_by_size == "256:tie 1024:tie 4096:win 16384:win"


def test_a_loss_at_the_largest_size_means_tma_never_catches_up(derived):
    row = crossover_row(derived, "plain_loads")
    assert row.tma_never_catches_up and not row.tma_never_loses
    assert math.isnan(row.crossover_bytes) and row.crossover_bracket_low_bytes == 16384
    assert row.status_by_size == "256:win 1024:loss 4096:loss 16384:loss"


def test_crossover_ratios_at_the_ends(derived):
    row = crossover_row(derived, "cp_async")
    assert row.ratio_at_smallest == pytest.approx(100 / 300)
    assert row.ratio_at_largest == pytest.approx(800 / 303)
    assert (row.smallest_size_bytes, row.largest_size_bytes) == (256, 16384)


def test_crossovers_are_also_computed_over_the_best_of_all_rings(derived):
    row = crossover_row(derived, "cp_async", ring=0)
    assert (row.crossover_bytes, row.crossover_bracket_low_bytes) == (4096, 1024)


def test_best_configuration_is_the_fastest_of_its_group(derived):
    best = pd.read_csv(derived / "best.csv")
    row = best[(best.mechanism == "tma_tile") & (best.bytes_per_transfer == 4096) & (best.ring_bytes_per_sm == RING)]
    assert len(row) == 1
    assert row.iloc[0].gbps == pytest.approx(400) and row.iloc[0].stages == 2


def test_best_over_all_rings_records_which_ring_won(derived):
    best = pd.read_csv(derived / "best.csv")
    over_all = best[(best.mechanism == "tma_tile") & (best.ring_bytes_per_sm == 0)].set_index("bytes_per_transfer")
    assert over_all.gbps.tolist() == pytest.approx([100, 200, 500, 800])
    assert over_all.loc[4096, "best_ring_bytes_per_sm"] == DEEP_RING
    assert (over_all.loc[4096, "stages"], over_all.loc[4096, "ctas_per_sm"]) == (4, 2)
    assert over_all.loc[16384, "best_ring_bytes_per_sm"] == RING


def test_best_rows_are_fractions_of_the_best_ceilings(derived):
    best = pd.read_csv(derived / "best.csv")
    row = best[(best.mechanism == "tma_tile") & (best.bytes_per_transfer == 16384) & (best.ring_bytes_per_sm == RING)]
    assert row.iloc[0].fraction_of_d2d_copy == pytest.approx(800 / D2D_GBPS)
    assert row.iloc[0].fraction_of_read_stream == pytest.approx(800 / max(READ_GBPS.values()))


def test_derived_ceilings_keep_the_best_of_each(derived):
    ceilings = pd.read_csv(derived / "ceilings.csv").set_index("ceiling")
    assert ceilings.loc["read_stream", "gbps"] == pytest.approx(3500.0)
    assert ceilings.loc["read_stream", "ctas_per_sm"] == 4
    assert ceilings.loc["d2d_copy", "gbps"] == pytest.approx(D2D_GBPS)


def test_peaks_are_each_mechanisms_best_anywhere(derived):
    peaks = pd.read_csv(derived / "peaks.csv").set_index("mechanism")
    assert peaks.gbps.to_dict() == pytest.approx({"tma_tile": 800, "cp_async": 303, "bulk_copy": 700,
                                                  "plain_loads": 1002})
    assert (peaks.bytes_per_transfer == 16384).all()


def test_latency_is_passed_through(derived, tmp_path):
    assert pd.read_csv(derived / "latency.csv").equals(pd.read_csv(tmp_path / "raw" / "latency.csv"))


def test_d2d_fraction_uses_the_copy_ceiling_of_a_config_without_hbm(tmp_path):
    """measure.py copies the first working set when there is no "hbm" one (here: l2)."""
    stream = pd.DataFrame([stream_row("tma_tile", "l2", 4096, RING, 2000.0)])
    ceilings = pd.DataFrame([ceiling_row("d2d_copy", "l2", 5000.0), ceiling_row("read_stream", "l2", 8000.0, 4)])
    latency = pd.DataFrame([latency_row("tma_tile", 4096, "l2", 300.0)])
    aggregate(write_raw_folder(tmp_path / "raw", stream, ceilings, latency), tmp_path / "derived")
    best = pd.read_csv(tmp_path / "derived" / "best.csv")
    assert best.fraction_of_d2d_copy.tolist() == pytest.approx([2000 / 5000] * 2)   # per ring and over all


def test_a_gap_within_the_measured_spread_is_a_tie():
    noisy = 0.03   # each median has a 3 % IQR: a 4 % gap is within the spread
    best = pd.DataFrame([
        {"working_set": "hbm", "access_order": "scattered", "ring_bytes_per_sm": RING, "mechanism": m,
         "bytes_per_transfer": size, "gbps": gbps, "relative_iqr": noisy}
        for m, series in {"tma_tile": [100, 100], "cp_async": [104, 108]}.items()
        for size, gbps in zip([1024, 4096], series)])
    row = crossovers(best).iloc[0]
    assert row.status_by_size == "1024:tie 4096:loss"


# ------------------------------------------------------------------ tables
def test_write_tables_writes_latex_and_markdown(derived, tmp_path):
    tables = tmp_path / "tables"
    write_tables(derived, provenance_record(), tables)
    for name in ("crossover_summary", "crossover_crossovers"):
        tex, md = (tables / f"{name}.tex").read_text(), (tables / f"{name}.md").read_text()
        assert r"\toprule" in tex and r"\bottomrule" in tex and rf"\label{{tab:{name}}}" in tex
        assert md.count("\n| ") >= 2                      # header and at least one row
        assert "synthetic test data" in tex and "synthetic test data" in md   # the source line


def test_crossover_table_states_the_bracket_and_the_extremes(derived, tmp_path):
    write_tables(derived, provenance_record(), tmp_path)
    md = (tmp_path / "crossover_crossovers.md").read_text()
    assert "1 KiB < x <= 4 KiB" in md
    assert "TMA never slower (from 256 B)" in md
    assert "TMA slower up to 16 KiB" in md
