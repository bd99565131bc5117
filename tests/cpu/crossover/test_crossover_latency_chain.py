"""CPU: the crossover latency decomposition. The issue-to-arrival chase kernels compile to the bare
transfer and their wait form, with no CTA barrier; the measure step chases each form at the sizes
the config names; the host references of the plain-loads chase; and the aggregation of chase forms
into derived/latency_chain.csv, its table and macros, on synthetic cycles."""
import copy
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from crossover_fixture import ceiling_row, latency_row, stream_row, write_raw_folder
from tma_study.studies.crossover import STUDY, reference
from tma_study.studies.crossover.aggregate import aggregate
from tma_study.studies.crossover.macros import macros
from tma_study.studies.crossover.measure import chases
from tma_study.studies.crossover.tables import latency_chain_table

REPO = Path(__file__).resolve().parents[3]
CONFIG = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
MECHANISMS = ("tma_tile", "bulk_copy", "cp_async", "plain_loads")


# ---------------------------------------------------------------- kernels

def _chain_builds():
    return {b.name: b for b in STUDY.entry("kernels")(CONFIG["studies"]["crossover"])
            if b.name.startswith("issue_to_arrival")}


@pytest.mark.parametrize("name", ["issue_to_arrival_tma_tile_try_wait", "issue_to_arrival_tma_tile_test_wait",
                                  "issue_to_arrival_cp_async_try_wait_hint", "issue_to_arrival_plain_loads"])
def test_issue_to_arrival_chase_compiles_to_the_bare_transfer_and_its_wait(name):
    from tma_study.harness.kernel_builds import compile_build, missing_instructions
    compiled = compile_build(_chain_builds()[name])
    assert not missing_instructions(compiled, _chain_builds()[name].expected_sass)
    sass = compiled.sass
    assert "BAR.SYNC" not in sass and "WARPSYNC" not in sass        # no CTA barrier, no warp sync
    if name.endswith("test_wait"):
        assert "TRYWAIT" not in sass                                  # never suspends
    if name.endswith("plain_loads"):
        assert "SYNCS" not in sass and "STS" not in sass              # registers only
    assert compiled.spill_store_bytes == 0


@pytest.mark.exhaustive
def test_every_issue_to_arrival_chase_compiles_with_its_sass():
    from tma_study.harness.kernel_builds import compile_build, missing_instructions
    builds = _chain_builds()
    assert len(builds) == 3 * 3 + 1                                   # three wait forms per mbarrier mechanism
    for build in builds.values():
        assert not missing_instructions(compile_build(build), build.expected_sass), build.name


# ---------------------------------------------------------------- the forms measured

def test_chain_sizes_get_every_form_and_stream_sizes_the_full_chain_only():
    forms = {(c.chain, c.mechanism): c for c in chases(MECHANISMS, 16, [256, 1024], [16, 256])}
    assert len(forms) == 3 * 5 + 3                                    # plain loads: no wait forms
    assert forms[("full", "cp_async")].threads == 128 and forms[("one_thread", "cp_async")].threads == 1
    assert forms[("one_thread", "tma_tile")].kernel_name == forms[("full", "tma_tile")].kernel_name
    assert forms[("issue_to_arrival_hint", "bulk_copy")].kernel_name == "issue_to_arrival_bulk_copy_try_wait_hint"
    assert {c.chain for c in chases(MECHANISMS, 1024, [256, 1024], [16, 256])} == {"full"}


def test_the_shipped_config_chases_in_every_form_at_16_and_256_bytes():
    latency = CONFIG["studies"]["crossover"]["latency"]
    assert latency["chain_bytes_per_transfer"] == [16, 256]


# ---------------------------------------------------------------- host references

def test_chase_path_ends_where_follow_does():
    successor = reference.chase_chain(64, np.random.default_rng(3))
    path = reference.chase_path(successor, 5, 10)
    assert path[0] == 5 and int(successor[path[-1]]) == reference.follow(successor, 5, 10)
    assert all(int(successor[a]) == b for a, b in zip(path[:-1], path[1:]))


def test_chunk_word_sum_counts_every_word_of_every_visit():
    words = np.arange(32, dtype=np.uint32) + np.uint32(2**32 - 16)     # large words: no 32-bit overflow
    path = np.array([1, 0, 1])                                         # chunks of 16 words, chunk 1 twice
    want = int(words[16:].astype(np.int64).sum()) * 2 + int(words[:16].astype(np.int64).sum())
    assert reference.chunk_word_sum(words, 16, path) == want


# ---------------------------------------------------------------- aggregation

CYCLES = {  # (chain, mechanism) -> cycles from L2 at 16 B; HBM: + 400
    ("full", "tma_tile"): 800, ("one_thread", "tma_tile"): 700, ("issue_to_arrival", "tma_tile"): 400,
    ("issue_to_arrival_hint", "tma_tile"): 420, ("issue_to_arrival_test_wait", "tma_tile"): 390,
    ("full", "cp_async"): 430, ("one_thread", "cp_async"): 400, ("issue_to_arrival", "cp_async"): 330,
    ("issue_to_arrival_hint", "cp_async"): 340, ("issue_to_arrival_test_wait", "cp_async"): 320,
    ("full", "plain_loads"): 520, ("one_thread", "plain_loads"): 450, ("issue_to_arrival", "plain_loads"): 300,
}
CLOCK_MHZ = 1980.0


def _chain_row(chain, mechanism, size, level, cycles):
    row = latency_row(mechanism, size, level, cycles / CLOCK_MHZ * 1e3)
    return {"chain": chain, **row}


@pytest.fixture
def derived(tmp_path) -> Path:
    stream = pd.DataFrame([stream_row(m, "hbm", 256, 32768, 1000.0) for m in ("tma_tile", "cp_async")])
    ceilings = pd.DataFrame([ceiling_row("d2d_copy", "hbm", 4000.0), ceiling_row("read_stream", "hbm", 3500.0, 4)])
    rows = [_chain_row(c, m, 16, level, cycles + (400 if level == "hbm" else 0))
            for (c, m), cycles in CYCLES.items() for level in ("hbm", "l2")]
    rows += [_chain_row("full", m, 256, level, 900.0) for m in ("tma_tile", "cp_async") for level in ("hbm", "l2")]
    aggregate(write_raw_folder(tmp_path / "raw", stream, ceilings, pd.DataFrame(rows)), tmp_path / "derived")
    return tmp_path / "derived"


def test_latency_csv_keeps_the_full_chain_at_the_stream_sizes(derived):
    latency = pd.read_csv(derived / "latency.csv")
    assert "chain" not in latency.columns and set(latency.bytes_per_transfer) == {256}


def test_the_decomposition_has_every_form_against_the_full_chain_and_the_others(derived):
    chain = pd.read_csv(derived / "latency_chain.csv").set_index(["chain", "mechanism", "bytes_per_transfer", "level"])
    assert set(chain.index.get_level_values("bytes_per_transfer")) == {16}   # 256 B: the full chain only
    issue = chain.loc[("issue_to_arrival", "tma_tile", 16, "l2")]
    assert issue.fraction_of_full == pytest.approx(400 / 800, rel=1e-3)
    assert issue.cycles_minus_plain_loads == pytest.approx(100, abs=0.5)
    assert issue.cycles_minus_cp_async == pytest.approx(70, abs=0.5)
    # plain loads have no wait form: their try_wait chase stands for every one
    assert chain.loc[("issue_to_arrival_test_wait", "tma_tile", 16, "l2")].cycles_minus_plain_loads == \
        pytest.approx(90, abs=0.5)
    assert list(chain.loc[(slice(None), "tma_tile", 16, "l2"), "step"]) == [0, 1, 2, 3, 4]


def test_a_run_without_the_chain_column_is_the_full_chain_and_has_no_decomposition(tmp_path):
    stream = pd.DataFrame([stream_row("tma_tile", "hbm", 256, 32768, 1000.0)])
    ceilings = pd.DataFrame([ceiling_row("d2d_copy", "hbm", 4000.0)])
    latency = pd.DataFrame([latency_row("tma_tile", 256, "l2", 400.0)])
    aggregate(write_raw_folder(tmp_path / "raw", stream, ceilings, latency), tmp_path / "derived")
    assert len(pd.read_csv(tmp_path / "derived" / "latency.csv")) == 1
    chain = pd.read_csv(tmp_path / "derived" / "latency_chain.csv")
    assert chain.empty
    assert latency_chain_table(chain)["chase form"].iloc[0].startswith("not measured")


def test_table_rows_and_macros(derived):
    table = latency_chain_table(pd.read_csv(derived / "latency_chain.csv"))
    row = table[(table["from"] == "L2") & (table["chase form"] == "issue-arrival, try_wait")].iloc[0]
    assert (row["TMA"], row["plain"], row["TMA - plain"]) == ("400", "300", "100")
    out = macros(derived, {"started_utc": "2026-12-04T00:00:00Z", "finished_utc": "2026-12-04T00:02:00Z"})
    assert out["crossoverChainSmallestIssueTmaLtwo"] == "400"
    assert out["crossoverChainSmallestIssueTmaMinusPlainLtwo"] == "100"
    assert out["crossoverChainSmallestIssueTmaPercentOfFullLtwo"] == "50"
    assert out["crossoverChainSmallestSize"] == "16 B"
    assert out["crossoverChainStreamIssueTmaLtwo"] == "n/a"               # 256 B: the full chain only
