"""Raw files sealed by their provenance: every reader compares each raw file with the sha256 its
provenance.json records (harness.seal) before parsing it, and refuses a link out of results/, a
device or pipe, and a file beyond the size bound before reading a byte. Each case damages a tmp
copy of committed data and runs the tma-study command a rule or a user would run: a non-zero
exit, one line naming the culprit, nothing written, results/ unchanged (``results_unchanged``).
"""
import hashlib
import json
import os
import shutil

import pandas as pd
import pytest

from bad_input_fixture import REPO, assert_one_line_error, raw_copy, reseal, run_cli
from tma_study.harness import seal

pytestmark = pytest.mark.usefixtures("results_unchanged")  # tests/cpu/conftest.py


def aggregate(capsys, tmp_path, raw):
    out = tmp_path / "derived"
    status, error = run_cli(capsys, "aggregate", raw.name, "--raw", raw, "--out", out)
    return status, error, out


def refused(capsys, tmp_path, raw, *names):
    """The aggregate step stops, one line naming ``names``, and writes no derived file."""
    status, error, out = aggregate(capsys, tmp_path, raw)
    assert_one_line_error(status, error, *names)
    assert not out.exists() or not any(out.iterdir()), "derived data written from refused raw data"
    return error


def edit_cell(path, row: int, column: str, value: str) -> None:
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    frame.loc[row, column] = value
    frame.to_csv(path, index=False)


def sealed_sha256(folder, name) -> str:
    return json.loads((folder / "provenance.json").read_text())[seal.SEAL_KEY][name]["sha256"]


@pytest.fixture
def dsm(tmp_path):
    return raw_copy(tmp_path, "dsm")


# ------------------------------------------------------------------ a file that is not the sealed one
def test_an_edited_raw_file_is_refused_naming_both_digests(tmp_path, dsm, capsys):
    expected = sealed_sha256(dsm, "latency.csv")
    edit_cell(dsm / "latency.csv", 0, "hops", "7")
    found = hashlib.sha256((dsm / "latency.csv").read_bytes()).hexdigest()
    refused(capsys, tmp_path, dsm, "latency.csv", f"sha256 {found}", f"sealed {expected}")


def test_another_runs_copy_linked_inside_results_is_refused_by_its_seal(tmp_path, dsm, capsys):
    other = raw_copy(tmp_path, "dsm", label="h200-rerun")
    (dsm / "broadcast.csv").unlink()
    (dsm / "broadcast.csv").symlink_to(other / "broadcast.csv")
    refused(capsys, tmp_path, dsm, "broadcast.csv", f"sealed {sealed_sha256(dsm, 'broadcast.csv')}")


def test_a_sealed_file_that_is_missing_is_named(tmp_path, dsm, capsys):
    (dsm / "kernels.csv").unlink()
    refused(capsys, tmp_path, dsm, "kernels.csv", "missing")


def test_a_raw_file_the_seal_does_not_list_is_refused(tmp_path, capsys):
    multicast = raw_copy(tmp_path, "multicast", label="h200-2026-12-04")       # measured before compute.csv
    shutil.copyfile(REPO / "results" / "h200" / "multicast" / "compute.csv", multicast / "compute.csv")
    refused(capsys, tmp_path, multicast, "compute.csv", "not among the raw files", "provenance.json seals")


def test_data_whose_seal_was_removed_are_refused_by_the_analysis(tmp_path, dsm, capsys):
    record = json.loads((dsm / "provenance.json").read_text())
    del record[seal.SEAL_KEY]
    (dsm / "provenance.json").write_text(json.dumps(record))
    refused(capsys, tmp_path, dsm, "provenance.json", "no key 'raw_files'", "tma-study seal")


def test_a_dropped_optional_column_is_refused_by_the_seal_and_by_the_schema(tmp_path, capsys):
    """gemm's accumulation column dropped: the seal refuses it; resealed, the schema (the column
    is required: an inferred value turned the paper's 'without promotion' into 'with')."""
    gemm = raw_copy(tmp_path, "gemm")
    pd.read_csv(gemm / "gemm.csv").drop(columns="accumulation").to_csv(gemm / "gemm.csv", index=False)
    refused(capsys, tmp_path, gemm, "gemm.csv", "is not the sealed")
    reseal(gemm)
    refused(capsys, tmp_path, gemm, "gemm.csv", "missing column(s) ['accumulation']")


@pytest.mark.parametrize("column, value, says", [
    ("family", "squre", "'squre' is not part 1 of shape 'square/square/"),
    ("measured_on", "NVIDIA A100-SXM4-40GB", "is not the GPU provenance.json names ('NVIDIA H200')"),
], ids=["family-typo", "measured-on-an-a100"])
def test_a_gemm_row_that_contradicts_itself_is_refused(tmp_path, capsys, column, value, says):
    gemm = raw_copy(tmp_path, "gemm")
    frame = pd.read_csv(gemm / "gemm.csv", dtype=str, keep_default_na=False)
    frame.loc[:0 if column == "family" else None, column] = value          # one row, or every row
    frame.to_csv(gemm / "gemm.csv", index=False)
    reseal(gemm)                       # as if measured so: the schema behind the seal refuses it
    refused(capsys, tmp_path, gemm, "gemm.csv", "row 1 (line 2)", f"column {column}", says)


# ------------------------------------------------------------------ refused before reading a byte
def test_a_raw_file_linked_to_another_runs_copy_outside_results_is_refused(tmp_path, dsm, capsys):
    elsewhere = tmp_path / "other-run"
    elsewhere.mkdir()
    shutil.copyfile(REPO / "results" / "h200-rerun" / "dsm" / "broadcast.csv", elsewhere / "broadcast.csv")
    (dsm / "broadcast.csv").unlink()
    (dsm / "broadcast.csv").symlink_to(elsewhere / "broadcast.csv")
    refused(capsys, tmp_path, dsm, "broadcast.csv", "a symbolic link to", "outside")


def test_a_raw_file_linked_to_dev_zero_is_refused_before_reading(tmp_path, dsm, capsys):
    (dsm / "broadcast.csv").unlink()
    (dsm / "broadcast.csv").symlink_to("/dev/zero")
    refused(capsys, tmp_path, dsm, "broadcast.csv", "/dev/zero", "outside")


def test_a_named_pipe_is_refused_without_waiting_for_it(tmp_path, dsm, capsys):
    (dsm / "latency.csv").unlink()
    os.mkfifo(dsm / "latency.csv")             # reading it would wait for a writer forever
    refused(capsys, tmp_path, dsm, "latency.csv", "a named pipe (FIFO), not a regular file")


def test_a_file_beyond_the_size_bound_is_refused_before_reading(tmp_path, dsm, capsys):
    with open(dsm / "broadcast.csv", "r+b") as handle:    # sparse: no disk is used
        handle.truncate(seal.MAX_RAW_FILE_BYTES + 1)
    refused(capsys, tmp_path, dsm, "broadcast.csv", f"{seal.MAX_RAW_FILE_BYTES + 1} bytes",
            f"more than the {seal.MAX_RAW_FILE_BYTES} bytes")


def test_a_provenance_linked_out_of_results_is_refused(tmp_path, dsm, capsys):
    outside = tmp_path / "provenance.json"
    shutil.copyfile(dsm / "provenance.json", outside)
    (dsm / "provenance.json").unlink()
    (dsm / "provenance.json").symlink_to(outside)
    refused(capsys, tmp_path, dsm, "provenance.json", "a symbolic link to", "outside")


# ------------------------------------------------------------------ who seals: publish, and seal once
def test_publish_seals_the_raw_files_it_publishes(tmp_path, capsys):
    staged = raw_copy(tmp_path / "staged", "dsm", sealed=False)
    destination = tmp_path / "results" / "mine" / "dsm"
    status, error = run_cli(capsys, "publish", "--staged", staged, "--out", destination)
    assert status == 0, error
    files = json.loads((destination / "provenance.json").read_text())[seal.SEAL_KEY]
    assert sorted(files) == ["bandwidth.csv", "broadcast.csv", "kernels.csv", "latency.csv"]
    for name, sealed in files.items():
        assert sealed["sha256"] == hashlib.sha256((destination / name).read_bytes()).hexdigest()
    status, error = run_cli(capsys, "check-raw", "dsm", "--raw", destination)
    assert status == 0, error


def test_seal_refuses_damaged_data_and_writes_nothing(tmp_path, capsys):
    unsealed = raw_copy(tmp_path, "dsm", sealed=False)
    edit_cell(unsealed / "bandwidth.csv", 0, "timing_status", "timeout")
    before = (unsealed / "provenance.json").read_bytes()
    status, error = run_cli(capsys, "seal", unsealed)
    assert_one_line_error(status, error, "bandwidth.csv", "row 1", "column timing_status", "'timeout'")
    assert (unsealed / "provenance.json").read_bytes() == before


def test_seal_never_rewrites_a_seal_that_does_not_hold(tmp_path, dsm, capsys):
    edit_cell(dsm / "latency.csv", 0, "hops", "7")
    before = (dsm / "provenance.json").read_bytes()
    status, error = run_cli(capsys, "seal", dsm)
    assert_one_line_error(status, error, "latency.csv", "is not the sealed")
    assert (dsm / "provenance.json").read_bytes() == before


def test_seal_seals_a_folder_published_before_seals(tmp_path, capsys):
    """Handled, not refused: the documented command adds the seal, and only the seal."""
    unsealed = raw_copy(tmp_path, "dsm", sealed=False)
    status, error = run_cli(capsys, "seal", unsealed)
    assert status == 0, error
    record = json.loads((unsealed / "provenance.json").read_text())
    original = json.loads((REPO / "results" / "h200" / "dsm" / "provenance.json").read_text())
    assert record[seal.SEAL_KEY] == original[seal.SEAL_KEY]
    assert {k: v for k, v in record.items() if k != seal.SEALED_BY_KEY} == \
        {k: v for k, v in original.items() if k != seal.SEALED_BY_KEY}
