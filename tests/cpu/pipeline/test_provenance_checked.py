"""Provenance checked, not trusted (harness.provenance_checks): the GPU a record names is the GPU
of its results/<label>/ folder and agrees with itself and with the published SM count, no time
lies after the analysis's clock, and the commit it names is in the repository unless the record
says the run came from an archive. Each case edits a tmp copy of a committed record and runs the
command that reads it: a non-zero exit, one line naming the file and the key, nothing written.
"""
import json

import pytest

from bad_input_fixture import REPO, assert_one_line_error, raw_copy, run_cli
from tma_study import cli
from tma_study.harness import provenance, provenance_checks
import subprocess

from tma_study.harness.source import own_repository, shallow_repository

pytestmark = pytest.mark.usefixtures("results_unchanged")  # tests/cpu/conftest.py

A100 = {"name": "NVIDIA A100-SXM4-40GB", "sm_count": 108, "l2_bytes": 40 * 2**20}
ABSENT_COMMIT = "0123456789abcdef0123456789abcdef01234567"


def edit(folder, change) -> None:
    path = folder / "provenance.json"
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record, indent=2) + "\n")


def relabelled(folder, label):
    """``folder`` (results/<label>/<study>/) moved to results/<this label>/<study>/."""
    target = folder.parent.parent / label / folder.name
    target.parent.mkdir()
    return folder.rename(target)


def aggregate_refused(capsys, tmp_path, raw, *names):
    out = tmp_path / "derived"
    status, error = run_cli(capsys, "aggregate", raw.name, "--raw", raw, "--out", out)
    assert_one_line_error(status, error, "provenance.json", *names)
    assert not out.exists(), "derived data written from a refused record"


@pytest.fixture
def dsm(tmp_path):
    return raw_copy(tmp_path, "dsm")


@pytest.mark.parametrize("change, names", [
    (lambda r: r["gpu"].update(A100), ["key 'gpu.name'", "'NVIDIA A100-SXM4-40GB'", "results/h200/",
                                        "model H200"]),
    (lambda r: r["gpu"].update(sm_count=108), ["key 'gpu.sm_count'", "108", "132 SMs", "gpu_specs.yaml"]),
    (lambda r: r["gpu"].update(slug="a100"), ["key 'gpu.slug'", "'a100'", "'h200'"]),
    (lambda r: r["device"].update(name="NVIDIA H100 80GB HBM3"), ["key 'device.name'", "'NVIDIA H100 80GB HBM3'"]),
    (lambda r: r["device"].update(uuid="GPU-00000000-0000-0000-0000-000000000000"), ["key 'device.uuid'"]),
], ids=["an-a100-under-h200", "h200-with-108-sms", "slug-of-another-gpu", "device-of-another-gpu",
        "device-uuid-of-another-gpu"])
def test_a_record_naming_another_gpu_is_refused(tmp_path, dsm, capsys, change, names):
    """The A100 case: per-SM bandwidth was recomputed with 108 SMs and a claim flipped to FAIL."""
    edit(dsm, change)
    aggregate_refused(capsys, tmp_path, dsm, *names)


@pytest.mark.parametrize("key", ["started_utc", "finished_utc"])
def test_a_measurement_dated_after_the_analysis_is_refused(tmp_path, dsm, capsys, key):
    edit(dsm, lambda r: r.update({"started_utc": "2031-01-01T00:00:00+00:00",
                                  "finished_utc": "2031-01-01T00:02:00+00:00"} if key == "started_utc"
                                 else {"finished_utc": "2031-01-01T00:02:00+00:00"}))
    aggregate_refused(capsys, tmp_path, dsm, f"key '{key}'", "2031-01-01", "after this analysis")


def test_a_label_names_a_gpu_only_where_it_starts_with_a_gpu_model(tmp_path, capsys):
    """results/mine/ holds any GPU's data (accepted); results/a100-rerun/ only an A100's."""
    mine = relabelled(raw_copy(tmp_path / "a", "dsm"), "mine")
    status, error = run_cli(capsys, "check-provenance", mine / "provenance.json")
    assert status == 0, error
    other = relabelled(raw_copy(tmp_path / "b", "dsm"), "a100-rerun")
    status, error = run_cli(capsys, "check-provenance", other / "provenance.json")
    assert_one_line_error(status, error, "results/a100-rerun/", "key 'gpu.name'", "'NVIDIA H200'")


FULL_HISTORY = own_repository(REPO) and not shallow_repository(REPO)


@pytest.mark.skipif(not FULL_HISTORY, reason="needs the checkout's whole git history")
def test_check_provenance_refuses_a_commit_the_repository_lacks(tmp_path, dsm, capsys):
    edit(dsm, lambda r: r["git"].update(commit=ABSENT_COMMIT, dirty=False, commit_source="git: HEAD"))
    status, error = run_cli(capsys, "check-provenance", dsm / "provenance.json")
    assert_one_line_error(status, error, "provenance.json", "key 'git.commit'", ABSENT_COMMIT,
                          "does not say the run came from an archive")


@pytest.mark.skipif(not own_repository(REPO), reason="needs the checkout's git history")
def test_check_provenance_accepts_an_archive_run_whose_stated_commit_is_not_here(tmp_path, dsm, capsys):
    """Handled, not refused: a record without a checked commit says the source hash alone names
    the code; the commit a runner stated may be one this repository never saw."""
    edit(dsm, lambda r: r["git"].update(commit=None, stated_commit=ABSENT_COMMIT))
    assert cli.main(["check-provenance", str(dsm / "provenance.json")]) == 0
    assert "the record says the run came from an archive" in capsys.readouterr().out


def test_a_shallow_clone_says_it_cannot_check_an_older_commit(tmp_path):
    """Handled, not refused: a clone with --depth lacks older commits by design (a CI checkout),
    so the commit is named as not checked instead of stopping the main job."""
    origin, clone = tmp_path / "origin", tmp_path / "clone"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q", str(origin)], check=True)
    for n in (1, 2):
        subprocess.run([*git, "-C", str(origin), "commit", "-q", "--allow-empty", "-m", str(n)], check=True)
    first = subprocess.run(["git", "-C", str(origin), "rev-parse", "HEAD~1"], check=True,
                           capture_output=True, text=True).stdout.strip()
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{origin}", str(clone)], check=True)
    record = {"git": {"commit": first, "commit_source": "git: HEAD"}}
    assert "shallow clone" in provenance_checks.check_commit(record, clone, "provenance.json")
    assert provenance_checks.check_commit(record, origin, "provenance.json") == ""     # whole history: there
    absent = {"git": {"commit": ABSENT_COMMIT, "commit_source": "git: HEAD"}}
    with pytest.raises(provenance_checks.ProvenanceCheckError, match="key 'git.commit'"):
        provenance_checks.check_commit(absent, origin, "provenance.json")               # whole history: refused


def test_every_committed_record_is_valid_and_names_a_commit_of_the_repository():
    """What the main job checks at its start, on every committed record (check-provenance also
    hashes each commit's files: too slow for the suite)."""
    records = sorted((REPO / "results").glob("*/*/provenance.json"))
    for path in records:
        record = provenance.read(path, study=path.parent.name)           # its schema, GPU and dates
        provenance_checks.check_commit(record, REPO, str(path))          # raises where the commit is absent
    assert len(records) >= 30
