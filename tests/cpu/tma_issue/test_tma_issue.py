"""CPU: the tma_issue study: its kernels' SASS (the chases hold nothing but their transfer and wait,
the issue-rate kernel its copies), the host's checksum of the issue-rate kernel against a direct
simulation of it, the chase buffer's layout, and the analysis (derived files, tables, macros,
figure) on synthetic data that pass the raw schema."""
import copy
import json
import runpy
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import yaml

from raw_fixture import timed, valid_provenance
from tma_study.studies.tma_issue import STUDY
from tma_study.studies.tma_issue.aggregate import aggregate
from tma_study.studies.tma_issue.issue_rate import IssueRateConfig, expected_checksums, issue_rate_configs, issue_rate_row
from tma_study.studies.tma_issue.macros import macros
from tma_study.studies.tma_issue.tables import write_tables

REPO = Path(__file__).resolve().parents[3]
CONFIG = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
FORMS = ("tma_tile", "bulk_copy", "plain_indexed", "plain_minimal")


@pytest.fixture
def study_config():
    return copy.deepcopy(CONFIG["studies"]["tma_issue"])


# ---------------------------------------------------------------- kernels

@pytest.mark.parametrize("name", ["chase_tma_tile", "chase_plain_minimal", "issue_rate_bulk_copy"])
def test_kernels_compile_to_their_transfer_and_nothing_the_form_does_not_need(name, study_config):
    from tma_study.harness.kernel_builds import compile_build, missing_instructions
    build = {b.name: b for b in STUDY.entry("kernels")(study_config)}[name]
    compiled = compile_build(build)
    assert not missing_instructions(compiled, build.expected_sass)
    assert compiled.spill_store_bytes == 0
    if name.startswith("chase"):
        assert "BAR.SYNC" not in compiled.sass                     # one thread: no CTA barrier
    if name == "chase_plain_minimal":
        loop = [line for line in compiled.sass.splitlines() if "LDG" in line]
        assert loop and all("LDG.E.64" in line for line in loop)   # the load of the next address only
        assert "SHF.L.U64" not in compiled.sass.split("CS2R")[2]   # no index arithmetic between the clocks


# ---------------------------------------------------------------- host references

def _simulated_checksums(words, config, ctas):
    """What the issue-rate kernel's check launch adds up, step by step as the kernel copies."""
    size = config.bytes_per_transfer
    chunks = words.reshape(-1, size // 4)
    mask = chunks.shape[0] - 1
    out = []
    for cta in range(ctas):
        stages = {}
        for r in range(config.rounds):
            first = (cta * 4099 + r * config.transfers_per_round) & 0xFFFFFFFF
            stages[r % config.stages] = [chunks[(first + j) & mask] for j in range(config.transfers_per_round)]
        out.append(sum(int(c.astype(np.uint64).sum()) for stage in stages.values() for c in stage) % 2**64)
    return out


@pytest.mark.parametrize("stages, rounds_bytes", [(3, 8 * 256), (4, 2 * 256)])
def test_expected_checksums_follow_the_kernel(stages, rounds_bytes):
    rng = np.random.default_rng(7)
    words = rng.integers(0, 2**32, size=4096, dtype=np.uint32)
    config = IssueRateConfig("bulk_copy", 64, 4, stages, stages * 256, rounds_bytes, words.nbytes)
    sums = words.reshape(-1, 16).astype(np.uint64).sum(axis=1, dtype=np.uint64)
    assert [int(v) for v in expected_checksums(sums, config, 5)] == _simulated_checksums(words, config, 5)


def test_issue_rate_sweep_is_the_config(study_config):
    configs = issue_rate_configs(study_config)
    settings = study_config["issue_rate"]
    assert len(configs) == 2 * len(settings["bytes_per_transfer"]) * len(settings["issue_threads"])
    for c in configs:
        assert c.transfers_per_round * max(c.bytes_per_transfer, 128) * c.stages == settings["in_flight_bytes_per_sm"]
        assert c.rounds * c.transfers_per_round * c.bytes_per_transfer == settings["bytes_per_sm"]
        assert c.threads_per_cta % 32 == 0 and c.threads_per_cta >= c.issue_threads


# ---------------------------------------------------------------- analysis on synthetic data

def synthetic_raw(folder: Path, study_config: dict) -> Path:
    """Raw data of the whole configured sweep that pass the raw schema (chases: a fixed excess per
    form, a little more at larger working sets; issue rate: one thread at half the rate of several)."""
    chase = []
    extra = {"tma_tile": 80.0, "bulk_copy": 95.0, "plain_indexed": 18.0, "plain_minimal": 0.0}
    for nbytes in study_config["chase"]["working_set_bytes"]:
        for level, base in (("l2", 290.0), ("hbm", 660.0)):
            for form in FORMS:
                c = base + extra[form] + (nbytes >> 24)
                chase.append({"form": form, "bytes_per_transfer": 16, "working_set_bytes": nbytes, "level": level,
                              "hops": 256, "cycles_per_hop_median": c, "cycles_per_hop_q1": c - 1,
                              "cycles_per_hop_q3": c + 1, "cycles_per_hop_minimum": c - 2,
                              "cycles_per_hop_maximum": c + 3, "cycles_per_hop_iqr": 2.0, "samples": 5,
                              "ns_per_hop_median": c / 1.98})
    configs = issue_rate_configs(study_config)
    rows = []
    for c in configs:
        cycles = 6.0 * (1 + c.bytes_per_transfer / 256) * (2.0 if c.issue_threads == 1 else 1.0)
        transfers = 132 * c.rounds * c.transfers_per_round
        rows.append(issue_rate_row(c, 132, timed(transfers / 132 * cycles / 1980.0)))
    folder.mkdir(parents=True)
    pd.DataFrame(chase).to_csv(folder / "chase.csv", index=False)
    pd.DataFrame(rows).to_csv(folder / "issue_rate.csv", index=False)
    (folder / "provenance.json").write_text(json.dumps(valid_provenance(
        "tma_issue", len(configs), config=study_config, gpu={"name": "NVIDIA H200"})))
    return folder


@pytest.fixture
def derived(tmp_path, study_config):
    raw = synthetic_raw(tmp_path / "raw", study_config)
    aggregate(raw, tmp_path / "derived")
    return tmp_path / "derived", json.loads((raw / "provenance.json").read_text())


def test_derived_chase_is_against_the_minimal_load_and_the_smallest_working_set(derived):
    chase = pd.read_csv(derived[0] / "chase.csv")
    tma = chase[chase.form == "tma_tile"]
    assert np.allclose(tma.cycles_minus_plain_minimal, 80.0)
    assert np.allclose(chase[chase.form == "plain_minimal"].cycles_minus_plain_minimal, 0.0)
    smallest = chase[chase.working_set_bytes == chase.working_set_bytes.min()]
    assert np.allclose(smallest.fraction_of_smallest_working_set, 1.0)
    assert (chase.fraction_of_smallest_working_set >= 1.0).all()


def test_derived_issue_rate_counts_cycles_per_copy_and_the_best_thread_count(derived):
    rate = pd.read_csv(derived[0] / "issue_rate.csv")
    one = rate[(rate.issue_threads == 1) & (rate.bytes_per_transfer == 256)]
    assert np.allclose(one.fraction_of_best_threads, 0.5, rtol=1e-6)
    several = rate[(rate.issue_threads == 32) & (rate.bytes_per_transfer == 256)]
    assert np.allclose(several.sm_cycles_per_transfer, 12.0, rtol=1e-6)


def test_tables_macros_and_figure(derived, tmp_path):
    derived_dir, provenance = derived
    write_tables(derived_dir, provenance, tmp_path / "tables")
    for name in STUDY.tables:
        assert (tmp_path / "tables" / f"{name}.md").read_text().strip()
    out = macros(derived_dir, provenance)
    assert out["tmaIssueChaseTmaOverMinimalLtwoMin"] == "80"
    assert out["tmaIssueChaseIndexOverMinimalHbmMax"] == "18"
    assert out["tmaIssueRateTmaTwoFiftySixOneThreadShare"] == "0.50"
    assert all(name.isalpha() for name in out)                    # LaTeX macro names: letters only
    pdf = tmp_path / "tma_issue_limits.pdf"
    snakemake = SimpleNamespace(params=SimpleNamespace(derived=str(derived_dir)),
                                input=SimpleNamespace(provenance=str(tmp_path / "p.json")),
                                output=SimpleNamespace(pdf=str(pdf)))
    (tmp_path / "p.json").write_text(json.dumps(provenance))
    runpy.run_path(str(REPO / "notebooks" / "tma_issue_limits.py"), init_globals={"snakemake": snakemake})
    assert pdf.stat().st_size > 0 and pdf.with_suffix(".png").stat().st_size > 0
