"""The advisor's rules on small synthetic tables: the numbers come out of the tables, not typed."""
import pytest
from advisor_fixture import evidence

from tma_study.advisor import advise_with, rules
from tma_study.advisor.operand import from_mapping

def _advice(spec, variants=None):
    return advise_with(from_mapping(spec), variants or [evidence()])


def test_small_transfers_go_to_cp_async_large_ones_to_tma():
    small = _advice({"level": "hbm", "shape": "bulk", "bytes_per_transfer": 1024, "bytes_in_flight_per_sm": 131072})
    large = _advice({"level": "hbm", "shape": "bulk", "bytes_per_transfer": 16384, "bytes_in_flight_per_sm": 131072})
    assert small.choice == "cp_async"
    ranked = {r.mechanism: r.predicted_time_ratio for r in small.ranking}
    assert ranked["tma"] == pytest.approx(3000.0 / 2048.0)        # from the table: 1024 B at the deep ring
    assert large.choice == "tma" and large.tied == ["tma", "bulk_copy"]   # equal rates tie: fewest issuers


def test_a_shallow_ring_caps_what_tma_reaches():
    spec = {"level": "hbm", "shape": "bulk", "bytes_per_transfer": 2048}
    assert _advice({**spec, "bytes_in_flight_per_sm": 131072}).choice == "tma"        # 4000 vs 3000
    assert _advice({**spec, "bytes_in_flight_per_sm": 65536}).choice == "cp_async"    # 2048 vs 3000


def test_sizes_between_measured_ones_interpolate_in_log2():
    advice = _advice({"level": "hbm", "shape": "bulk", "bytes_per_transfer": 512, "bytes_in_flight_per_sm": 131072})
    ranked = {r.mechanism: r.predicted_time_ratio for r in advice.ranking}
    assert ranked["tma"] == pytest.approx(3000.0 / 1280.0)        # halfway (in log2 size) from 512 to 2048 GB/s


def test_outside_the_measured_range_says_how_far():
    advice = _advice({"level": "hbm", "shape": "bulk", "bytes_per_transfer": 64, "bytes_in_flight_per_sm": 8192})
    assert not advice.inside_measured_range
    whats = {n["what"]: n["octaves"] for n in advice.extrapolation}
    assert whats["bytes per transfer"] == pytest.approx(2.0) and whats["bytes in flight per SM"] == pytest.approx(2.0)


def test_a_box_over_256_elements_is_split_into_smaller_tma_copies():
    spec = {"level": "hbm", "shape": "box", "element_bytes": 2, "bytes_in_flight_per_sm": 131072}
    whole = _advice({**spec, "box_dims": [8, 256]})                # 4 KiB in one copy: TMA
    split = _advice({**spec, "box_dims": [2, 1024]})               # 4 KiB in four 1 KiB copies: cp.async
    assert whole.choice == "tma" and split.choice == "cp_async"


def test_dependent_loads_rank_by_latency():
    advice = _advice({"level": "l2", "shape": "gather", "row_bytes": 64, "pattern": "dependent"})
    assert [r.mechanism for r in advice.ranking][:2] == ["cp_async", "plain_loads"]
    assert advice.rules == ["dependent"]


def test_a_consumer_that_outruns_every_load_makes_them_tie():
    spec = {"level": "hbm", "shape": "bulk", "bytes_per_transfer": 1024, "bytes_in_flight_per_sm": 131072}
    heavy = _advice({**spec, "consumer": "compute", "flops_per_byte": 1000.0})
    assert heavy.choice == "tma" and set(heavy.tied) == {"tma", "bulk_copy", "cp_async", "plain_loads"}


def test_unknown_level_takes_the_choice_that_loses_least_at_either():
    advice = _advice({"level": "unknown", "shape": "bulk", "bytes_per_transfer": 16384,
                      "bytes_in_flight_per_sm": 131072})
    assert advice.rules == ["streaming_hbm", "streaming_l2"] and advice.choice == "tma"


def test_shared_tiles_weigh_multicast_and_dsm():
    advice = _advice({"level": "l2", "shape": "bulk", "bytes_per_transfer": 16384, "bytes_in_flight_per_sm": 131072,
                      "cluster_sharing": 2})
    ranked = {r.mechanism: r.predicted_time_ratio for r in advice.ranking}
    assert advice.choice == "tma" and ranked["tma_multicast"] == pytest.approx(1 / 0.9)   # 0.9x own copies
    assert ranked["dsm"] == pytest.approx(ranked["tma_multicast"] * 2.0)                       # 3000 / 1500 GB/s


def test_the_interval_spans_the_runs_and_a_run_can_make_a_tie():
    variants = [evidence(), evidence(scale=0.74, label="other")]   # TMA 26 % slower in another run
    advice = _advice({"level": "hbm", "shape": "box", "box_dims": [8, 256], "element_bytes": 2,
                      "bytes_in_flight_per_sm": 131072}, variants)
    cp = next(r for r in advice.ranking if r.mechanism == "cp_async")
    assert cp.interval[0] < cp.predicted_time_ratio and cp.interval[1] == pytest.approx(cp.predicted_time_ratio)
    assert "cp_async" in advice.tied and advice.choice == "tma"


def test_rules_name_their_figures_and_claims():
    advice = _advice({"level": "l2", "shape": "bulk", "bytes_per_transfer": 4096, "bytes_in_flight_per_sm": 131072,
                      "consumer": "mma", "mma_dtype": "bf16", "mma_tile": "128x128x64"})
    assert advice.rules == ["streaming_l2", "consumer"]
    assert "crossover_map" in advice.figures and "multicast_not_faster_when_the_consumer_dominates" in advice.claims


def test_every_named_claim_and_figure_exists():
    from tma_study.paper.claims import load_claims
    from tma_study.studies import discover
    ids = {c.id for c in load_claims()}
    figures = {f for s in discover().values() for f in s.figures}
    for names, claims in rules.EVIDENCE.values():
        assert set(names) <= figures and set(claims) <= ids
