"""The gemm study's measurement protocol (protocol.py) and the clock columns of its analysis.

Order: every (shape, dtype) group times each of its candidates exactly once, in a permutation
fixed by the seed, and cuBLAS does not always go first. Pre-heat: planned only for groups from
preheat_min_gflop up, run in the harness after the check and before the samples. Analysis: each
measured row's TFLOP/s per GHz, and every comparison says how far apart its rows' clocks were.
"""
import copy
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml
from gemm_fixture import STUDY, write_raw_folder

from tma_study import config as config_mod
from tma_study.config import REPO_ROOT, ConfigError
from tma_study.harness import timing
from tma_study.studies import discover
from tma_study.studies.gemm import measure as M
from tma_study.gemm_lib import protocol as P
from tma_study.gemm_lib import shapes as shapes_mod
from tma_study.gemm_lib import variants as V
from tma_study.studies.gemm.aggregate import aggregate
from tma_study.gemm_lib.rows import TIE_TOLERANCE
from tma_study.studies.gemm.tables import protocol_text, run_table, write_tables

SHIPPED = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())["studies"]["gemm"]
SQUARE_8192 = "square/square/m8192n8192k8192"
# The last full sweep on the H200 took 366 s; the protocol must keep it under 8 minutes.
LAST_SWEEP_S, BUDGET_S = 366.0, 480.0


def _expected_candidates(study: dict, dtype: str) -> list[str]:
    return [f"{P.CUBLAS}_{dtype}", *(v.name for v in V.variants(study, "sm90") if v.dtype == dtype)]


# ------------------------------------------------------------------ order
def test_every_group_times_each_candidate_exactly_once():
    groups = P.plan(SHIPPED, "sm90")
    assert [(g.shape, g.dtype) for g in groups] == [(s, d) for s in shapes_mod.shapes(SHIPPED)
                                                    for d in ("bf16", "fp8_e4m3")]
    for group in groups:
        names = group.names()
        assert len(names) == len(set(names))
        assert sorted(names) == sorted(_expected_candidates(SHIPPED, group.dtype))


def test_the_order_is_a_deterministic_permutation_of_the_seed():
    first, again = P.plan(SHIPPED, "sm90"), P.plan(copy.deepcopy(SHIPPED), "sm90")
    assert [g.names() for g in first] == [g.names() for g in again]
    other = copy.deepcopy(SHIPPED)
    other["timing"]["order_seed"] = SHIPPED["timing"]["order_seed"] + 1
    assert [g.names() for g in P.plan(other, "sm90")] != [g.names() for g in first]


def test_a_group_order_depends_only_on_seed_shape_and_dtype():
    """Adding a shape to the config leaves every other group's order as it was."""
    more = copy.deepcopy(SHIPPED)
    more["shapes"]["square"] = [512, *SHIPPED["shapes"]["square"]]
    before = {(g.shape, g.dtype): g.names() for g in P.plan(SHIPPED, "sm90")}
    after = {(g.shape, g.dtype): g.names() for g in P.plan(more, "sm90")}
    assert all(after[key] == names for key, names in before.items())


def test_cublas_does_not_always_get_the_first_slot():
    groups = P.plan(SHIPPED, "sm90")
    first = pd.Series([g.names()[0] for g in groups])
    cublas_first = int(first.str.startswith(P.CUBLAS).sum())
    assert cublas_first < len(groups) / 4                      # it was first in all 90 before
    assert first.nunique() > len(groups) / 8                   # the first slot goes around


# ------------------------------------------------------------------ pre-heat
def test_preheat_is_planned_only_from_the_threshold_up():
    threshold = SHIPPED["timing"]["preheat_min_gflop"]
    for group in P.plan(SHIPPED, "sm90"):
        heated = group.shape.flop / 1e9 >= threshold
        assert group.preheat_s == (SHIPPED["timing"]["preheat_s"] if heated else 0.0), group.shape.key
    heated = [g for g in P.plan(SHIPPED, "sm90") if g.preheat_s]
    assert 0 < len(heated) < len(P.plan(SHIPPED, "sm90"))
    assert all(g.shape.flop >= 50e9 for g in heated)


@pytest.mark.parametrize("change", [{"preheat_s": 0}, {"preheat_min_gflop": 1e9}])
def test_no_preheat_when_it_is_off_or_no_group_reaches_the_threshold(change):
    study = copy.deepcopy(SHIPPED)
    study["timing"].update(change)
    assert P.preheat_total_s(study, "sm90") == 0


def test_the_preheat_keeps_the_sweep_within_budget():
    added = P.preheat_total_s(SHIPPED, "sm90")
    heated = sum(1 for g in P.plan(SHIPPED, "sm90") if g.preheat_s)
    assert added == pytest.approx(heated * SHIPPED["timing"]["preheat_s"])
    assert LAST_SWEEP_S + added < BUDGET_S
    assert M.estimate_seconds(SHIPPED, "sm90") >= added     # the printed estimate includes it


def test_preheat_runs_back_to_back_for_the_asked_time():
    now, log = [0.0], []

    def run_once():                      # a GEMM of 1 ms
        now[0] += 0.001
        log.append("launch")

    def synchronize():
        now[0] += 1e-5
        log.append("sync")

    ran = P.preheat(run_once, synchronize, 0.5, clock=lambda: now[0])
    assert 0.5 <= ran["seconds"] < 0.5 + 0.003               # overshoots by about one launch
    assert ran["launches"] == log.count("launch") and 490 <= ran["launches"] <= 502
    assert log.count("sync") < 20 and log[-1] == "sync"      # batches, each synchronised


def test_nvbench_gets_only_its_own_timing_keys():
    import inspect

    keys = P.nvbench_timing(SHIPPED["timing"])
    assert not set(keys) & set(P.PROTOCOL_KEYS)
    assert set(keys) <= set(inspect.signature(timing.run).parameters)
    assert set(SHIPPED["timing"]) - set(keys) == set(P.PROTOCOL_KEYS)


def _fake_bench(log: list):
    """cuda.bench's calls as timing.run makes them: one state per axis value, in axis order."""
    registered = []

    class Benchmark:
        def __init__(self, fn):
            self.fn, self.name, self.values = fn, None, []

        def set_name(self, name):
            self.name = name

        def add_string_axis(self, axis, values):
            self.values = list(values)

    class State:
        def __init__(self, key):
            self.key = key

        def get_string(self, axis):
            return self.key

        def skip(self, reason):
            log.append(("skip", self.key))

        def add_global_memory_reads(self, n):
            pass

        add_global_memory_writes = add_global_memory_reads

        def exec(self, fn, timer, batched):
            log.append(("samples", self.key))

    def register(fn):
        registered.append(Benchmark(fn))
        return registered[-1]

    def run_all_benchmarks(argv):
        for benchmark in registered:
            for key in benchmark.values:
                benchmark.fn(State(key))
        document = {"benchmarks": [{"name": b.name, "states": []} for b in registered]}
        Path(argv[argv.index("--json") + 1]).write_text(json.dumps(document))

    return SimpleNamespace(register=register, run_all_benchmarks=run_all_benchmarks)


def test_the_harness_runs_prepare_after_the_check_and_before_the_samples(monkeypatch):
    log = []
    monkeypatch.setitem(sys.modules, "cuda", SimpleNamespace(bench=_fake_bench(log)))
    cases = [timing.TimedCase(key, launch=lambda s: None, check=lambda key=key: log.append(("check", key)))
             for key in ("b", "a", "c")]
    cases[0].prepare = lambda: log.append(("prepare", "b"))
    timing.run(cases, study="order-test")
    assert log == [("check", "b"), ("prepare", "b"), ("samples", "b"),
                   ("check", "a"), ("samples", "a"), ("check", "c"), ("samples", "c")]


# ------------------------------------------------------------------ config
@pytest.fixture
def config() -> dict:
    return copy.deepcopy(yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text()))


@pytest.mark.parametrize("key, value, said", [
    ("preheat_s", -0.5, "-0.5"), ("preheat_s", 60, "60"), ("preheat_s", "long", "long"),
    ("preheat_min_gflop", -1, "-1"), ("order_seed", 1.5, "1.5"), ("order_seed", -3, "-3")])
def test_bad_protocol_values_are_rejected_naming_the_key(config, key, value, said):
    config["studies"]["gemm"]["timing"][key] = value
    with pytest.raises(ConfigError) as caught:
        config_mod.validate(config, discover())
    message = str(caught.value)
    assert f"studies.gemm.timing.{key}" in message and said in message


@pytest.mark.parametrize("key", P.PROTOCOL_KEYS)
def test_a_missing_protocol_key_is_rejected_by_name(config, key):
    del config["studies"]["gemm"]["timing"][key]
    with pytest.raises(ConfigError, match=key):
        config_mod.validate(config, discover())


# ------------------------------------------------------------------ analysis: clocks
CLOCKS_MHZ = {"cublas": 1600.0, "tma": 1300.0, "cpasync": 1400.0}


@pytest.fixture(scope="module")
def clocked(tmp_path_factory):
    """The synthetic run, and the same run with the 8192^3 rows at different clocks (cuBLAS
    hottest-clocked, as when it was always measured first)."""
    root = tmp_path_factory.mktemp("gemm-clocks")
    plain = write_raw_folder(root / "plain" / "gemm")
    aggregate(plain, plain / "derived")
    raw = write_raw_folder(root / "clocked" / "gemm")
    gemm = pd.read_csv(raw / "gemm.csv")
    for load, mhz in CLOCKS_MHZ.items():
        gemm.loc[(gemm["shape"] == SQUARE_8192) & (gemm.load == load) & (gemm.arch == "sm90"), "sm_clock_mhz_mean"] = mhz
    gemm.to_csv(raw / "gemm.csv", index=False)
    aggregate(raw, raw / "derived")
    provenance = json.loads((raw / "provenance.json").read_text())
    write_tables(raw / "derived", provenance, root / "tables")
    return plain / "derived", raw / "derived", root / "tables"


def test_every_measured_row_has_tflops_per_ghz(clocked):
    _, derived, _ = clocked
    measured = pd.read_csv(derived / "measured.csv")
    assert measured.tflops_per_ghz.to_numpy() == pytest.approx((measured.tflops / measured.sm_clock_mhz_mean * 1000).to_numpy())
    at = measured[measured["shape"] == SQUARE_8192]
    assert at.clock_ratio.to_numpy() == pytest.approx((at.sm_clock_mhz_mean / CLOCKS_MHZ["cublas"]).to_numpy())
    assert at.fraction_of_cublas_per_clock.to_numpy() == pytest.approx((at.fraction_of_cublas / at.clock_ratio).to_numpy())


def test_the_bar_says_its_clocks_differ(clocked):
    _, derived, tables = clocked
    bar = pd.read_csv(derived / "bar.csv").iloc[0]
    ratio = CLOCKS_MHZ["tma"] / CLOCKS_MHZ["cublas"]
    assert bar.clock_ratio == pytest.approx(ratio) and bool(bar.clocks_differ)
    assert bar.fraction_of_cublas_per_clock == pytest.approx(bar.fraction_of_cublas / ratio)
    assert bar.tflops_per_ghz == pytest.approx(bar.tflops / 1.3)
    assert bar.cublas_tflops_per_ghz == pytest.approx(bar.cublas_tflops / 1.6)
    text = (tables / "gemm_bar.md").read_text()
    assert f"clock ratio TMA / cuBLAS | {ratio:.3f} (clocks differ" in text
    assert "Per clock: TFLOP/s divided by each row's mean SM clock in GHz" in text


def test_comparisons_carry_their_clock_ratio(clocked):
    _, derived, tables = clocked
    speedup = pd.read_csv(derived / "speedup.csv")
    at = speedup[(speedup["shape"] == SQUARE_8192) & (speedup.arch == "sm90")]
    assert at.clock_ratio.to_numpy() == pytest.approx(CLOCKS_MHZ["tma"] / CLOCKS_MHZ["cpasync"])
    assert at.clocks_differ.all()
    assert at.speedup_per_clock.to_numpy() == pytest.approx((at.speedup / at.clock_ratio).to_numpy())
    elsewhere = speedup[speedup["shape"] != SQUARE_8192]
    assert (elsewhere.clock_ratio == 1).all() and not elsewhere.clocks_differ.any()
    gains = pd.read_csv(derived / "multicast.csv")
    compared = gains[gains.status == "measured"]
    assert (compared.clock_ratio == 1).all() and not compared.clocks_differ.any()   # both sides are TMA
    cublas = pd.read_csv(derived / "cublas.csv")
    at = cublas[cublas["shape"] == SQUARE_8192]
    assert at.clock_ratio.to_numpy() == pytest.approx((at.load.map(CLOCKS_MHZ) / CLOCKS_MHZ["cublas"]).to_numpy())
    assert "SM clock TMA/cp.async median (min-max)" in (tables / "gemm_speedup.md").read_text()
    assert abs(CLOCKS_MHZ["tma"] / CLOCKS_MHZ["cpasync"] - 1) > TIE_TOLERANCE


def test_the_clock_columns_change_no_winner_and_no_existing_column(clocked):
    plain, derived, _ = clocked
    for name in ("speedup", "multicast", "multicast_summary", "cublas", "bar"):
        before, after = pd.read_csv(plain / f"{name}.csv"), pd.read_csv(derived / f"{name}.csv")
        kept = [c for c in before.columns if "clock" not in c and "per_ghz" not in c]
        pd.testing.assert_frame_equal(before[kept], after[kept], check_like=True)


def test_the_run_table_says_how_the_candidates_were_ordered_and_preheated():
    old = protocol_text({})
    assert "cuBLAS first" in old[0] and "predates" in old[1]
    record = {"protocol": {"order_seed": 7, "preheat_s": 0.5, "preheat_min_gflop": 50,
                           "preheat_groups_planned": 50, "preheat_seconds_total": 25.3}}
    order, preheat = protocol_text(record)
    assert "seed 7" in order and "0.5 s" in preheat and ">= 50 GFLOP" in preheat and "50 groups" in preheat
    provenance = {"gpu": {"name": "x", "sm_count": 132}, "started_utc": "2026-01-01T00:00:00+00:00",
                  "finished_utc": "2026-01-01T00:06:00+00:00", **record}
    table = run_table(provenance).set_index("")
    assert table.loc["candidate order", "value"] == order and table.loc["pre-heat", "value"] == preheat


def test_the_fixture_config_plans_like_the_shipped_one():
    """The synthetic study's timing section is valid for the protocol (and pre-heats 8192^3 only
    among its square shapes)."""
    heated = {g.shape.key for g in P.plan(STUDY, "sm90") if g.preheat_s}
    assert SQUARE_8192 in heated and "square/square/m1024n1024k1024" not in heated


def test_the_paper_states_the_protocol_from_provenance():
    """The clocks paragraph's numbers come from provenance's protocol record (seconds keep
    their decimals); a run without the protocol gets none, and the paper says so."""
    from tma_study.studies.gemm.macros import _protocol
    record = {"preheat_s": 0.5, "preheat_min_gflop": 50, "order_seed": 0, "preheat_seconds_total": 25.128,
              "preheats": [{"shape": "s", "dtype": "bf16", "seconds": 0.5}] * 3}
    assert _protocol(record) == {"gemmPreheatS": "0.5", "gemmPreheatMinGflop": "50", "gemmPreheatGroups": "3",
                                 "gemmPreheatTotalS": "25", "gemmOrderSeed": "0"}
    assert _protocol({}) == {}
