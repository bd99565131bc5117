"""Damaged or edited raw data never become a derived table: ``tma-study aggregate`` (and every
other reader) checks a study's raw files against its raw_schema.yaml and its provenance.json
against its schema first, and stops with one line naming file, row and column (or key), before
writing anything. Each case damages a tmp copy of the committed H200 data and reseals it (the
seal alone would refuse it first: test_sealed_data.py), so that the schema is what is tested;
none touches results/.
"""
import json
import re
import shutil

import pandas as pd
import pytest

from bad_input_fixture import (REPO, assert_one_line_error, assert_stopped_by_the_first_job, main_job, raw_copy, reseal,
                               run_cli)
from tma_study.harness import raw_data, raw_schema
from tma_study.harness.timing import Timing
from tma_study.studies import discover

pytestmark = pytest.mark.usefixtures("results_unchanged")  # tests/cpu/conftest.py

STUDIES = discover()


def lines(path):
    return path.read_text().splitlines(keepends=True)


def set_cell(path, row: int, column: str, value: str) -> None:
    """Data row ``row`` (0-based) of CSV ``path``: ``column`` set to the text ``value``."""
    text = lines(path)
    index = text[0].rstrip("\n").split(",").index(column)
    fields = text[row + 1].rstrip("\n").split(",")
    fields[index] = value
    text[row + 1] = ",".join(fields) + "\n"
    path.write_text("".join(text))


def aggregate(capsys, tmp_path, raw, *extra):
    for folder in (raw, *extra[1:2]):          # the raw folder and a --repeat folder
        reseal(folder)
    out = tmp_path / "derived"
    status, error = run_cli(capsys, "aggregate", raw.name, "--raw", raw, "--out", out, *extra)
    return status, error, out


def refused(capsys, tmp_path, raw, *names, extra=()):
    """The aggregate step stops, one line naming ``names``, and writes no derived file."""
    status, error, out = aggregate(capsys, tmp_path, raw, *extra)
    assert_one_line_error(status, error, *names)
    assert not out.exists() or not any(out.iterdir()), "derived data written from bad raw data"
    return error


@pytest.fixture
def crossover(tmp_path):
    return raw_copy(tmp_path, "crossover")


# ------------------------------------------------------------------ every committed data set passes
@pytest.mark.parametrize("folder", sorted(p.relative_to(REPO).as_posix() for p in (REPO / "results").glob("*/*")
                                          if p.is_dir() and p.name in STUDIES))
def test_every_committed_data_set_follows_its_schema(folder):
    raw = raw_data.load(STUDIES[folder.split("/")[-1]], REPO / folder, require_seal=True)   # sealed, and the seal holds
    assert raw.provenance["configurations"] > 0


def test_every_study_has_a_raw_schema_for_each_file_it_measures():
    for study in STUDIES.values():
        measured = set(study.measured_files) - {"provenance.json"}
        files = raw_schema.load(study).files
        assert {name for name, f in files.items() if not f.optional} == measured, study.name
        assert not {name for name, f in files.items() if f.optional} & set(study.raw_files), study.name


def test_the_kernels_a_run_timed_are_checked_where_recorded(tmp_path, crossover, capsys):
    from bad_input_fixture import SYNTHETIC_KERNELS
    (crossover / "kernels.csv").write_text(SYNTHETIC_KERNELS.replace(",64,", ",300,"))
    refused(capsys, tmp_path, crossover, "kernels.csv", "row 1", "column registers", "300")
    (crossover / "kernels.csv").write_text(SYNTHETIC_KERNELS)
    status, error, _ = aggregate(capsys, tmp_path, crossover)
    assert status == 0, error


# ------------------------------------------------------------------ rows lost, cut or added
def test_a_stream_file_cut_to_720_lines_is_refused_naming_the_count(tmp_path, crossover, capsys):
    (crossover / "stream.csv").write_text("".join(lines(crossover / "stream.csv")[:720]))
    refused(capsys, tmp_path, crossover, "provenance.json", "configurations", "stream.csv 719", "1440")


def test_a_file_cut_mid_line_is_refused_naming_the_line(tmp_path, crossover, capsys):
    text = (crossover / "stream.csv").read_text()
    (crossover / "stream.csv").write_text(text[: len(text) // 2])
    refused(capsys, tmp_path, crossover, "stream.csv", "ends in the middle of a line")


def test_duplicated_rows_are_refused_naming_the_repeated_configuration(tmp_path, crossover, capsys):
    text = lines(crossover / "stream.csv")
    (crossover / "stream.csv").write_text("".join(text + text[1:101]))
    refused(capsys, tmp_path, crossover, "stream.csv", "row 1441", "the same configuration as row 1")


def test_half_of_dsm_broadcast_is_refused(tmp_path, capsys):
    dsm = raw_copy(tmp_path, "dsm")
    text = lines(dsm / "broadcast.csv")
    (dsm / "broadcast.csv").write_text("".join(text[: len(text) // 2]))
    measured = json.loads((dsm / "provenance.json").read_text())["configurations"]
    bandwidth_rows = len(lines(dsm / "bandwidth.csv")) - 1
    refused(capsys, tmp_path, dsm, "configurations", "broadcast.csv 251", f"bandwidth.csv {bandwidth_rows}",
            str(measured))


def test_a_header_only_file_is_refused(tmp_path, crossover, capsys):
    (crossover / "latency.csv").write_text(lines(crossover / "latency.csv")[0])
    refused(capsys, tmp_path, crossover, "latency.csv", "no rows")


def test_an_empty_file_is_refused(tmp_path, crossover, capsys):
    (crossover / "ceilings.csv").write_text("")
    refused(capsys, tmp_path, crossover, "ceilings.csv", "empty file")


def test_a_missing_raw_file_is_named(tmp_path, crossover, capsys):
    (crossover / "latency.csv").unlink()
    refused(capsys, tmp_path, crossover, "latency.csv", "missing")


# ------------------------------------------------------------------ values out of range or edited
def test_an_edited_gbps_is_refused_naming_row_and_column(tmp_path, crossover, capsys):
    set_cell(crossover / "stream.csv", 722, "gbps", "99999")
    refused(capsys, tmp_path, crossover, "stream.csv", "row 723 (line 724)", "column gbps", "99999")


def test_a_gbps_that_disagrees_with_its_time_is_refused(tmp_path, crossover, capsys):
    set_cell(crossover / "stream.csv", 10, "gbps", "1000.5")
    refused(capsys, tmp_path, crossover, "row 11", "column gbps", "bytes_moved / (time_us_median * 1e3)")


@pytest.mark.parametrize("value, says", [("", "empty on a row whose timing_status is ok"),
                                         ("nan", "empty on a row whose timing_status is ok"),
                                         ("-5.0", "not above 0"), ("inf", "not a finite"),
                                         ("fast", "'fast' is not a number")])
def test_a_bad_median_time_is_refused_naming_row_and_column(tmp_path, crossover, capsys, value, says):
    set_cell(crossover / "stream.csv", 4, "time_us_median", value)
    refused(capsys, tmp_path, crossover, "stream.csv", "row 5 (line 6)", "column time_us_median", says)


def test_a_timing_status_outside_the_allowed_ones_is_refused(tmp_path, crossover, capsys):
    set_cell(crossover / "stream.csv", 3, "timing_status", "timeout")
    refused(capsys, tmp_path, crossover, "row 4", "column timing_status", "'timeout' is not allowed", "ok")


def test_a_dropped_column_is_named(tmp_path, crossover, capsys):
    frame = pd.read_csv(crossover / "stream.csv").drop(columns="time_us_median")
    frame.to_csv(crossover / "stream.csv", index=False)
    refused(capsys, tmp_path, crossover, "stream.csv", "missing column(s) ['time_us_median']")


def test_a_column_of_another_file_is_named(tmp_path, crossover, capsys):
    frame = pd.read_csv(crossover / "latency.csv").assign(bytes_moved=1)
    frame.to_csv(crossover / "latency.csv", index=False)
    refused(capsys, tmp_path, crossover, "latency.csv", "['bytes_moved'] are not in the schema")


def test_a_time_on_a_row_that_was_not_timed_is_refused(tmp_path, crossover, capsys):
    set_cell(crossover / "stream.csv", 7, "timing_status", f'"{Timing.NO_SAMPLE}"')
    refused(capsys, tmp_path, crossover, "row 8", "time_us_median", "only ok rows are timed")


def test_a_row_without_a_valid_sample_is_kept_out_of_derived_data(tmp_path, crossover, capsys):
    """Handled, not refused: a row nvbench could not time (empty times, timing_status saying
    why) is valid raw data, and no derived table takes anything from it."""
    frame = pd.read_csv(crossover / "stream.csv")
    best = frame.loc[frame.gbps.idxmax()]
    timed = ["time_us_median", "time_us_q1", "time_us_q3", "time_us_iqr", "time_us_min", "time_us_max",
             "time_relative_stdev", "sm_clock_mhz_mean", "gbps"]
    frame.loc[best.name, timed] = float("nan")
    frame.loc[best.name, ["samples", "timing_status"]] = [0, Timing.NO_SAMPLE]
    frame.to_csv(crossover / "stream.csv", index=False)
    status, error, out = aggregate(capsys, tmp_path, crossover)
    assert status == 0, error
    derived = pd.read_csv(out / "best.csv")
    assert derived.gbps.notna().all() and best.gbps not in set(derived.gbps)


def test_a_gemm_row_measured_without_a_timing_is_refused(tmp_path, capsys):
    gemm = raw_copy(tmp_path, "gemm")
    frame = pd.read_csv(gemm / "gemm.csv")
    row = int(frame.index[frame.timing_status.isna()][0])
    set_cell(gemm / "gemm.csv", row, "status", "measured")
    refused(capsys, tmp_path, gemm, "gemm.csv", f"row {row + 1}", "'measured' exactly when")


def test_an_unknown_paged_kv_consumer_is_refused(tmp_path, capsys):
    paged_kv = raw_copy(tmp_path, "paged_kv")
    set_cell(paged_kv / "attention.csv", 0, "score_layout", "kq_magic")
    refused(capsys, tmp_path, paged_kv, "attention.csv", "row 1", "column score_layout", "'kq_magic'")


def test_a_multicast_cluster_size_that_is_not_x_times_y_is_refused(tmp_path, capsys):
    multicast = raw_copy(tmp_path, "multicast")
    frame = pd.read_csv(multicast / "stream.csv")
    row = int(frame.index[frame.cluster_size == 4][0])
    set_cell(multicast / "stream.csv", row, "cluster_size", "8")
    refused(capsys, tmp_path, multicast, "stream.csv", f"row {row + 1}", "cluster_size is cluster_x x cluster_y")


def test_a_bad_second_run_is_refused_too(tmp_path, crossover, capsys):
    repeat = raw_copy(tmp_path, "crossover", label="h200-rerun")
    set_cell(repeat / "ceilings.csv", 0, "gbps", "1")
    refused(capsys, tmp_path, crossover, "h200-rerun/crossover/ceilings.csv", "row 1", "column gbps",
            extra=("--repeat", repeat))


# ------------------------------------------------------------------ provenance.json
@pytest.mark.parametrize("edit, names", [
    (lambda text: text[: len(text) // 2], ["provenance.json", "line", "not valid JSON"]),
    (lambda text: "", ["provenance.json", "line 1 column 1", "not valid JSON"]),
    (lambda text: "[1, 2]", ["provenance.json", "holds a JSON list"]),
], ids=["cut", "empty", "a-list"])
def test_an_unreadable_provenance_is_named(tmp_path, crossover, capsys, edit, names):
    path = crossover / "provenance.json"
    path.write_text(edit(path.read_text()))
    refused(capsys, tmp_path, crossover, *names)


@pytest.mark.parametrize("change, names", [
    (lambda p: p.pop("started_utc"), ["key '<top level>'", "'started_utc' is a required property"]),
    (lambda p: p.update(configurations=1441), ["key configurations", "1441", "stream.csv 1440"]),
    (lambda p: p["config"].update(stages=[4]), ["key 'config_sha256'", "edited after the measurement"]),
    (lambda p: p.update(study="dsm"), ["key 'study'", "'dsm'", "'crossover'"]),
    (lambda p: p["git"].update(commit="$(touch PWNED)"), ["key 'git.commit'", "does not match"]),
    (lambda p: p.update(finished_utc="2020-01-01T00:00:00+00:00"), ["key 'finished_utc'", "before started_utc"]),
], ids=["no-start", "count", "config-edited", "other-study", "odd-commit", "ends-before-start"])
def test_an_edited_provenance_is_refused_naming_the_key(tmp_path, crossover, capsys, change, names):
    path = crossover / "provenance.json"
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record, indent=2))
    refused(capsys, tmp_path, crossover, "provenance.json", *names)


def test_the_tables_step_checks_its_provenance(tmp_path, crossover, capsys):
    (crossover / "provenance.json").write_text("{")
    status, error = run_cli(capsys, "tables", "crossover", "--derived", tmp_path, "--provenance",
                            crossover / "provenance.json", "--out", tmp_path / "tables")
    assert_one_line_error(status, error, "provenance.json", "not valid JSON")
    assert not (tmp_path / "tables").exists()


# ------------------------------------------------------------------ the main job's first job stops it
def test_the_main_job_refuses_damaged_raw_data_before_any_output(checkout):
    stream = checkout / "results" / "h200" / "crossover" / "stream.csv"
    stream.write_text("".join(lines(stream)[:720]))
    reseal(stream.parent)
    status, output = main_job(checkout, "paper/tables/crossover_summary.md")
    assert_stopped_by_the_first_job(checkout, status, output, "results/h200/crossover/provenance.json",
                                    "configurations")


def test_the_main_job_refuses_damaged_data_of_another_run_it_would_overlay(checkout):
    set_cell(checkout / "results" / "h200-wide-grid" / "crossover" / "stream.csv", 0, "mechanism", "magic")
    reseal(checkout / "results" / "h200-wide-grid" / "crossover")
    status, output = main_job(checkout, "figures/crossover_bandwidth.pdf")
    assert_stopped_by_the_first_job(checkout, status, output, "results/h200-wide-grid/crossover/stream.csv",
                                    "row 1", "column mechanism")

    assert re.search(r"'magic' is not allowed", output)
    shutil.rmtree(checkout)
