"""tma-study advise: the text and JSON answers, and one-line errors naming the field or file."""
import json
import subprocess
import sys

import pytest
from advisor_fixture import write_results

ARGS = ["--level", "hbm", "--shape", "gather", "--row-bytes", "256", "--bytes-in-flight-per-sm", "65536"]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return write_results(tmp_path_factory.mktemp("results"))


@pytest.fixture
def _advise(results):
    def run(*args):
        extra = [] if "--results" in args else ["--results", str(results)]
        return subprocess.run([sys.executable, "-m", "tma_study", "advise", *args, *extra], capture_output=True,
                              text=True)
    return run


def test_the_json_answer_ranks_every_candidate_with_an_interval_and_names_its_version(_advise):
    result = _advise(*ARGS, "--json")
    assert result.returncode == 0, result.stderr
    advice = json.loads(result.stdout)
    assert {r["mechanism"] for r in advice["ranking"]} == {"tma", "bulk_copy", "cp_async", "plain_loads"}
    assert all(r["interval"][0] <= r["predicted_time_ratio"] <= r["interval"][1] for r in advice["ranking"])
    assert advice["advisor"]["sha256"] and advice["claims"] and advice["figures"] and advice["choice"] == "cp_async"


def test_the_text_answer_says_what_to_load_it_with(_advise):
    result = _advise(*ARGS)
    assert result.returncode == 0 and "load it with:" in result.stdout


def test_a_wrong_field_is_one_line_naming_it(_advise):
    result = _advise("--level", "dram", "--shape", "bulk", "--bytes-per-transfer", "4096",
                     "--bytes-in-flight-per-sm", "65536")
    assert result.returncode == 1 and "'level'" in result.stderr and "hbm, l2, unknown" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_results_folder_without_the_tables_is_named(_advise, tmp_path):
    result = _advise(*ARGS, "--results", str(tmp_path / "mine"))
    assert result.returncode == 1 and "crossover/derived/best.csv" in result.stderr
