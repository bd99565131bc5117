"""Writes that never leave half a result behind (tma_study.atomic): one file through a rename,
a study's folder through a staging folder, a finished measurement published into results/."""
from pathlib import Path

import pytest

from tma_study.atomic import STAGING_PREFIX, atomic_write_text, publish_directory, staged_directory


def tree(folder: Path) -> dict[str, bytes]:
    """{relative path: content} of every file under ``folder``."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# ------------------------------------------------------------------ atomic_write_text
def test_atomic_write_text_writes_the_content_and_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "deep" / "out.csv"
    atomic_write_text(target, "a,b\n1,2\n")
    assert target.read_text() == "a,b\n1,2\n"
    assert [p.name for p in target.parent.iterdir()] == ["out.csv"]


def test_atomic_write_text_replaces_an_existing_file(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    atomic_write_text(target, "new")
    assert target.read_text() == "new"


def test_failed_atomic_write_keeps_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(TypeError):
        atomic_write_text(target, 12345)   # not text: fails while writing
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


# ------------------------------------------------------------------ staged_directory
@pytest.fixture
def old_results(tmp_path) -> Path:
    final = tmp_path / "results" / "crossover"
    (final / "sub").mkdir(parents=True)
    (final / "stream.csv").write_bytes(b"old stream\x00\xff")
    (final / "sub" / "note.txt").write_text("old note")
    return final


def test_staged_directory_replaces_the_old_folder_on_success(old_results):
    with staged_directory(old_results) as staging:
        assert staging != old_results and staging.parent == old_results.parent
        (staging / "stream.csv").write_text("new stream")
    assert tree(old_results) == {"stream.csv": b"new stream"}
    assert [p.name for p in old_results.parent.iterdir()] == ["crossover"]   # no staging or retired folder


def test_staged_directory_creates_a_folder_that_did_not_exist(tmp_path):
    final = tmp_path / "a" / "b"
    with staged_directory(final) as staging:
        (staging / "x").write_text("x")
    assert tree(final) == {"x": b"x"}


def test_exception_inside_staged_directory_leaves_the_old_folder_byte_identical(old_results):
    before = tree(old_results)
    with pytest.raises(RuntimeError, match="interrupted"):
        with staged_directory(old_results) as staging:
            (staging / "stream.csv").write_text("half written")
            raise RuntimeError("interrupted")
    assert tree(old_results) == before
    assert not staging.exists()
    assert [p.name for p in old_results.parent.iterdir()] == ["crossover"]


def test_stale_staging_folder_from_a_crash_is_removed(old_results):
    stale = old_results.parent / f"{STAGING_PREFIX}{old_results.name}-crashed"
    stale.mkdir()
    (stale / "stream.csv").write_text("from a run that died")
    with staged_directory(old_results) as staging:
        assert not stale.exists()
        (staging / "stream.csv").write_text("new")
    assert sorted(p.name for p in old_results.parent.iterdir()) == ["crossover"]


def test_staging_folders_of_other_destinations_are_left_alone(old_results):
    other = old_results.parent / f"{STAGING_PREFIX}multicast-running"
    other.mkdir()
    with staged_directory(old_results):
        pass
    assert other.exists()


# ------------------------------------------------------------------ publish_directory
def test_publish_refuses_a_folder_without_provenance(tmp_path, old_results):
    staged = tmp_path / "staged"
    staged.mkdir()
    (staged / "stream.csv").write_text("unfinished")
    before = tree(old_results)
    with pytest.raises(FileNotFoundError, match="provenance.json"):
        publish_directory(staged, old_results)
    assert tree(old_results) == before


def test_publish_copies_every_data_file_of_a_finished_measurement(tmp_path, old_results):
    staged = tmp_path / "staged"
    staged.mkdir()
    (staged / "stream.csv").write_text("new")
    (staged / "provenance.json").write_text("{}")
    (staged / ".snakemake_timestamp").write_text("")      # Snakemake's directory() marker
    publish_directory(staged, old_results)
    assert tree(old_results) == {"provenance.json": b"{}", "stream.csv": b"new"}
    assert ".snakemake_timestamp" in tree(staged)
