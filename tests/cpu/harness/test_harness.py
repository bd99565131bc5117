"""The measurement harness without a GPU: statistics, parsing cuda-bench's JSON, and the
hashes in provenance.json."""

import json
import math
from pathlib import Path

import pytest

from tma_study.harness import provenance
from tma_study.harness.stats import relative_difference, summarize
from tma_study.harness.timing import parse_results


# ------------------------------------------------------------------ stats
def test_summarize_gives_median_quartiles_extremes_and_count():
    summary = summarize([9, 1, 5, 3, 7, 2, 8, 4, 6])   # 1..9, unsorted
    assert (summary.median, summary.q1, summary.q3) == (5.0, 3.0, 7.0)
    assert (summary.minimum, summary.maximum, summary.count) == (1.0, 9.0, 9)
    assert summary.iqr == 4.0 and summary.relative_iqr == pytest.approx(0.8)


def test_summarize_interpolates_quartiles_of_an_even_count():
    summary = summarize([10.0, 20.0, 30.0, 40.0])
    assert (summary.q1, summary.median, summary.q3) == (17.5, 25.0, 32.5)


def test_summary_columns_carry_the_prefix_and_the_sample_count():
    columns = summarize([1.0, 2.0, 3.0]).as_columns("time_us")
    assert columns == {"time_us_median": 2.0, "time_us_q1": 1.5, "time_us_q3": 2.5, "time_us_minimum": 1.0,
                       "time_us_maximum": 3.0, "time_us_iqr": 1.0, "samples": 3}


def test_summarize_refuses_no_samples():
    with pytest.raises(ValueError, match="no samples"):
        summarize([])


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_summarize_refuses_non_finite_samples(bad):
    with pytest.raises(ValueError, match="non-finite"):
        summarize([1.0, bad, 3.0])


def test_relative_difference_is_the_gap_over_the_mean_either_way_round():
    assert relative_difference(100.0, 110.0) == pytest.approx(10 / 105)
    assert relative_difference(110.0, 100.0) == relative_difference(100.0, 110.0)
    assert relative_difference(7.0, 7.0) == 0.0


def test_relative_difference_of_two_zeros_is_nan():
    assert math.isnan(relative_difference(0.0, 0.0))


# ------------------------------------------------------------------ parse_results
TAGS = {"nv/cold/time/gpu/median": "0.001", "nv/cold/time/gpu/q1": "0.00095",
        "nv/cold/time/gpu/q3": "0.00110", "nv/cold/time/gpu/min": "0.0009",
        "nv/cold/time/gpu/max": "0.0012", "nv/cold/time/gpu/stdev/relative": "0.004",
        "nv/cold/sample_size": "37", "nv/cold/sm_clock_rate/mean": "1980000000"}


def nvbench_state(case: str, tags: dict = TAGS, skipped: bool = False) -> dict:
    return {"axis_values": [{"name": "case", "type": "string", "value": case}],
            "is_skipped": skipped,
            "summaries": [{"tag": tag, "data": [{"name": "value", "type": "float64", "value": value}]}
                          for tag, value in tags.items()]}


def write_nvbench(path: Path, benchmarks: dict[str, list[dict]]) -> Path:
    path.write_text(json.dumps({"benchmarks": [{"name": name, "states": states}
                                               for name, states in benchmarks.items()]}))
    return path


def test_parse_results_converts_to_microseconds_and_megahertz(tmp_path):
    path = write_nvbench(tmp_path / "nvbench.json", {"crossover": [nvbench_state("k1")]})
    columns = parse_results(path, "crossover")["k1"].columns()
    assert columns.pop("timing_status") == "ok"
    assert columns == pytest.approx({
        "time_us_median": 1000.0, "time_us_q1": 950.0, "time_us_q3": 1100.0, "time_us_iqr": 150.0,
        "time_us_min": 900.0, "time_us_max": 1200.0, "time_relative_stdev": 0.004,
        "samples": 37, "sm_clock_mhz_mean": 1980.0})
    assert isinstance(columns["samples"], int)


def test_parse_results_leaves_out_skipped_states(tmp_path):
    path = write_nvbench(tmp_path / "nvbench.json",
                         {"crossover": [nvbench_state("k1"), nvbench_state("k2", skipped=True)]})
    assert list(parse_results(path, "crossover")) == ["k1"]


def test_parse_results_reads_only_the_named_benchmark(tmp_path):
    path = write_nvbench(tmp_path / "nvbench.json",
                         {"other": [nvbench_state("x")], "crossover": [nvbench_state("k1")]})
    assert list(parse_results(path, "crossover")) == ["k1"]


def test_missing_summary_tag_raises_key_error_naming_it(tmp_path):
    tags = {tag: value for tag, value in TAGS.items() if tag != "nv/cold/time/gpu/q3"}
    path = write_nvbench(tmp_path / "nvbench.json", {"crossover": [nvbench_state("k1", tags)]})
    timing = parse_results(path, "crossover")["k1"]
    with pytest.raises(KeyError, match="nv/cold/time/gpu/q3"):
        timing.columns()


# ------------------------------------------------------------------ provenance hashes
def test_config_hash_does_not_depend_on_key_order():
    a = {"stages": [2, 4], "timing": {"max_noise": 0.005, "min_samples": 10}}
    b = {"timing": {"min_samples": 10, "max_noise": 0.005}, "stages": [2, 4]}
    assert provenance.config_hash(a) == provenance.config_hash(b)


def test_config_hash_changes_with_a_value():
    assert provenance.config_hash({"stages": [2, 4]}) != provenance.config_hash({"stages": [2, 8]})


@pytest.fixture
def source_repo(tmp_path) -> Path:
    (tmp_path / "Snakefile").write_text("rule all:\n")
    for relative, text in {"src/tma_study/a.py": "A = 1\n", "kernels/k.py": "K = 1\n",
                           "workflow/rules/r.smk": "rule r:\n", "config/config.yaml": "measure: false\n"}.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text)
    return tmp_path


@pytest.mark.parametrize("changed", ["Snakefile", "src/tma_study/a.py", "kernels/k.py",
                                     "workflow/rules/r.smk", "config/config.yaml"])
def test_source_hash_changes_when_a_source_file_changes(source_repo, changed):
    before = provenance.source_hash(source_repo)
    (source_repo / changed).write_text((source_repo / changed).read_text() + "# edited\n")
    assert provenance.source_hash(source_repo) != before


def test_source_hash_changes_when_a_source_file_is_renamed(source_repo):
    before = provenance.source_hash(source_repo)
    (source_repo / "kernels" / "k.py").rename(source_repo / "kernels" / "k2.py")
    assert provenance.source_hash(source_repo) != before


def test_source_hash_ignores_caches_and_other_files(source_repo):
    before = provenance.source_hash(source_repo)
    (source_repo / "src" / "tma_study" / "__pycache__").mkdir()
    (source_repo / "src" / "tma_study" / "__pycache__" / "a.py").write_text("cached")
    (source_repo / "README.md").write_text("notes")
    (source_repo / "kernels" / "notes.txt").write_text("notes")
    assert provenance.source_hash(source_repo) == before


def test_a_case_without_surviving_samples_is_recorded_as_not_measured():
    """All samples throttled away: NaN times and the reason, not a crash that loses the run."""
    import math

    from tma_study.harness.timing import Timing
    columns = Timing("k", {"nv/cold/sample_size": 0, "nv/cold/walltime": 0.5}).columns()
    assert math.isnan(columns["time_us_median"]) and columns["samples"] == 0
    assert columns["timing_status"].startswith("not measured")


def test_an_unknown_l2_state_is_refused_before_any_gpu_work():
    from tma_study.harness import timing
    case = timing.TimedCase("k", lambda s: None, lambda: None, l2_after_flush="warm")
    with pytest.raises(ValueError, match="timing case 'k': l2_after_flush: 'warm' is not allowed; "
                                         "allowed: clean, dirty"):
        timing.run([case], study="harness_test")
    with pytest.raises(ValueError, match="l2_after_flush: 'lukewarm' is not allowed"):
        timing.run([], study="harness_test", l2_after_flush="lukewarm")


def test_a_run_timed_after_nvbench_flush_alone_is_labelled_so_in_figures():
    from tma_study.harness import l2_state
    from tma_study.report.figures import run_label
    gpu = {"gpu": {"name": "NVIDIA H200"}}
    assert run_label("h200-rerun", {**gpu, "l2_before_each_sample": l2_state.DESCRIPTIONS["clean"]}) == \
        "h200-rerun (H200)"
    assert run_label("old", gpu) == "old (H200, dirty L2)"     # before the field
    assert run_label("g", {**gpu, "l2_before_each_sample": l2_state.DESCRIPTIONS["dirty"]}).endswith("dirty L2)")


def test_provenance_records_the_l2_state_of_the_study_config(tmp_path):
    from tma_study.harness import l2_state, provenance
    for timing_config, state in (({}, "clean"), ({"l2_after_flush": "dirty"}, "dirty")):
        record = provenance.build(study="s", gpu={}, study_config={"timing": timing_config}, repo=tmp_path,
                                  started="2026-01-01T00:00:00+00:00")
        assert record["l2_before_each_sample"] == l2_state.DESCRIPTIONS[state]
        assert l2_state.describe(record) == l2_state.DESCRIPTIONS[state]
    assert l2_state.describe({}) == l2_state.LEGACY_DESCRIPTION
