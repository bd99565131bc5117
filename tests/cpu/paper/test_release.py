"""`tma-study release`: an archive of the committed tree (code, raw data, CITATION.cff), the PDF
and SHA256SUMS, refused for a work tree that differs from its commit or lacks the PDF, and the
same bytes when built twice; CITATION.cff names the project, with pyproject's version."""
import hashlib
import shutil
import subprocess
import tarfile
import tomllib
from pathlib import Path

import pytest
import yaml

from tma_study.release import ReleaseError, build

REPO = Path(__file__).resolve().parents[3]
FILES = ["pyproject.toml", "CITATION.cff", "LICENSE", "results/h200/dsm/provenance.json",
         "results/h200/dsm/broadcast.csv", "src/tma_study/release.py"]


@pytest.fixture
def repository(tmp_path) -> Path:
    """A small git repository with some of the checkout's files and a PDF beside them."""
    root = tmp_path / "repo"
    for relative in FILES:
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / relative, root / relative)
    git = ["git", "-C", str(root), "-c", "user.name=test", "-c", "user.email=test@example.invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "release test"], check=True)
    (root / "paper").mkdir()
    (root / "paper" / "main.pdf").write_bytes(b"%PDF-1.5 not a real paper\n")
    return root


def test_the_archive_holds_the_tree_the_pdf_and_their_checksums(repository, tmp_path):
    archive, count = build(repository, tmp_path / "out")
    assert count == len(FILES) + 2
    with tarfile.open(archive) as tar:
        members = {m.name.split("/", 1)[1]: tar.extractfile(m).read() for m in tar.getmembers()}
    assert set(members) == {*FILES, "paper/main.pdf", "SHA256SUMS"}
    sums = dict(reversed(line.split("  ")) for line in members["SHA256SUMS"].decode().splitlines())
    assert set(sums) == {*FILES, "paper/main.pdf"}
    assert all(hashlib.sha256(members[path]).hexdigest() == digest for path, digest in sums.items())
    recorded = archive.with_name(archive.name + ".sha256").read_text().split()
    assert recorded == [hashlib.sha256(archive.read_bytes()).hexdigest(), archive.name]


def test_two_builds_of_one_commit_are_the_same_file(repository, tmp_path):
    first, _ = build(repository, tmp_path / "one")
    second, _ = build(repository, tmp_path / "two")
    assert first.name == second.name and first.read_bytes() == second.read_bytes()


def test_a_changed_tree_or_a_missing_pdf_is_refused(repository, tmp_path):
    (repository / "LICENSE").write_text("changed")
    with pytest.raises(ReleaseError, match="a release is a commit.*LICENSE"):
        build(repository, tmp_path / "out")
    subprocess.run(["git", "-C", str(repository), "checkout", "-q", "--", "LICENSE"], check=True)
    (repository / "paper" / "main.pdf").unlink()
    with pytest.raises(ReleaseError, match="snakemake -c2 paper"):
        build(repository, tmp_path / "out")


def test_a_folder_that_is_no_repository_is_refused(tmp_path):
    (tmp_path / "paper").mkdir()
    (tmp_path / "paper" / "main.pdf").write_bytes(b"%PDF")
    with pytest.raises(ReleaseError, match="not the top level of a git repository"):
        build(tmp_path, tmp_path / "out")


def test_the_citation_names_the_project_and_pyprojects_version():
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0" and citation["message"] and citation["title"]
    assert citation["authors"] == [{"name": "The TMA study artifact"}]      # the project, no person
    assert citation["version"] == tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
