"""Provenance cannot lie about its source: a commit is recorded only where the project is its
own git repository (never the commit of a repository it was unpacked into), a commit stated by
a runner is checked against the files, and ``tma-study check-provenance`` tells whether the
commit a record names holds the code its source hash names."""
import subprocess

import pytest

from bad_input_fixture import assert_one_line_error, run_cli
from tma_study.harness import provenance, source
from tma_study.harness.source import SOURCE_COMMIT_VARIABLE, SourceMismatchError

pytestmark = pytest.mark.usefixtures("results_unchanged")  # tests/cpu/conftest.py


def git(root, *args):
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout.strip()


def project(root):
    """A minimal project: its source files (harness.source.SOURCE_FOLDERS) and a Snakefile."""
    for relative, text in {"Snakefile": "rule all:\n", "src/tma_study/a.py": "A = 1\n",
                           "kernels/k.py": "K = 1\n", "config/config.yaml": "measure: false\n"}.items():

        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    return root


def commit_all(root) -> str:
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "state")
    return git(root, "rev-parse", "HEAD")


@pytest.fixture
def repository(tmp_path, monkeypatch):
    monkeypatch.delenv(SOURCE_COMMIT_VARIABLE, raising=False)
    root = project(tmp_path / "project")
    git(root, "init", "-q")
    return root, commit_all(root)


def test_the_projects_own_commit_is_recorded_clean(repository):
    root, head = repository
    state = source.git_state(root)
    assert state["commit"] == head and state["dirty"] is False
    assert source.source_hash_at(root, head) == source.source_hash(root)


def test_an_edited_source_file_makes_the_record_dirty(repository):
    root, head = repository
    (root / "kernels" / "k.py").write_text("K = 2\n")
    state = source.git_state(root)
    assert state["commit"] == head and state["dirty"] is True


def test_an_artifact_unpacked_inside_another_repository_records_no_commit(tmp_path, monkeypatch):
    """The reviewer's own repository around the artifact is not the artifact's source."""
    monkeypatch.delenv(SOURCE_COMMIT_VARIABLE, raising=False)
    outer = tmp_path / "reviewer"
    outer.mkdir()
    git(outer, "init", "-q")
    (outer / "notes.txt").write_text("mine\n")
    commit_all(outer)
    inner = project(outer / "artifact")
    state = source.git_state(inner)
    assert state["commit"] is None and "not the top level of a git repository" in state["commit_source"]


def test_a_stated_commit_holding_these_files_is_recorded_as_checked(repository, monkeypatch):
    root, head = repository
    monkeypatch.setenv(SOURCE_COMMIT_VARIABLE, head[:7])
    state = source.git_state(root)
    assert state["commit"] == head and "checked" in state["commit_source"]


def test_a_stated_commit_that_is_not_these_files_stops_the_measurement(repository, monkeypatch):
    root, head = repository
    (root / "src" / "tma_study" / "a.py").write_text("A = 2\n")
    monkeypatch.setenv(SOURCE_COMMIT_VARIABLE, head)
    with pytest.raises(SourceMismatchError, match=f"{SOURCE_COMMIT_VARIABLE}={head}.*differ"):
        source.git_state(root)


def test_a_stated_commit_without_git_to_check_it_leaves_the_source_hash_alone(tmp_path, monkeypatch):
    root = project(tmp_path / "copy")
    monkeypatch.setenv(SOURCE_COMMIT_VARIABLE, "0123abc")
    state = source.git_state(root)
    assert state["commit"] is None and state["stated_commit"] == "0123abc"
    assert "source_sha256 alone identifies the code" in state["commit_source"]


def test_check_provenance_says_whether_a_commit_holds_the_measured_code(repository, capsys, monkeypatch):
    root, head = repository
    record = {"git": {"commit": head}, "source_sha256": source.source_hash(root)}
    assert "verified" in source.check_recorded(record, root)
    record["source_sha256"] = "0" * 64
    assert "does NOT hold the measured code" in source.check_recorded(record, root)
    assert "no commit recorded" in source.check_recorded({"git": {"commit": None}}, root)


def test_check_provenance_of_a_malformed_file_is_one_line(tmp_path, capsys):
    (tmp_path / "provenance.json").write_text('{"study": ')
    status, error = run_cli(capsys, "check-provenance", tmp_path / "provenance.json")
    assert_one_line_error(status, error, "provenance.json", "line 1 column 11", "not valid JSON")


def test_a_runner_stated_commit_that_cannot_be_checked_is_kept_apart_from_the_commit(monkeypatch, tmp_path):
    """A copy without .git cannot check $TMA_STUDY_SOURCE_COMMIT: the source hash alone names the
    code, and the record says so (the tests above check the other cases)."""
    monkeypatch.setenv(provenance.SOURCE_COMMIT_VARIABLE, "abc123")
    state = provenance.git_state(tmp_path)
    assert state["commit"] is None and state["stated_commit"] == "abc123"
    assert "source_sha256 alone" in state["commit_source"]
    monkeypatch.delenv(provenance.SOURCE_COMMIT_VARIABLE)
    assert provenance.git_state(tmp_path)["commit"] is None     # no .git, nothing stated
