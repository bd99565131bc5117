"""Which code produced a measurement: the source hash, and a git commit only where it is checked.

``source_hash(root)`` hashes the code and config that produce the data (SOURCE_FOLDERS, path and
content, sorted); ``source_hash_at(root, commit)`` hashes the same files as a commit holds them,
so a stated commit can be checked against the files. ``git_state(root)`` records a commit only
when it is the project's own: the git top level must be ``root`` itself (an artifact unpacked
inside another repository must not record that repository's commit), and a commit stated by a
runner in $TMA_STUDY_SOURCE_COMMIT must hash to the files here. Otherwise the record says so and
the source hash alone identifies the code (``tma-study check-provenance`` checks it later in a
checkout).
"""
from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path, PurePosixPath

SOURCE_COMMIT_VARIABLE = "TMA_STUDY_SOURCE_COMMIT"
SOURCE_FOLDERS = ("kernels", "src", "workflow", "config")
SOURCE_SUFFIXES = (".py", ".yaml", ".smk")
TOP_FILE = "Snakefile"


class SourceMismatchError(RuntimeError):
    """A commit stated for this run does not hold the files that are here."""


def _is_source(relative: PurePosixPath) -> bool:
    return (relative.parts[0] in SOURCE_FOLDERS and relative.suffix in SOURCE_SUFFIXES
            and "__pycache__" not in relative.parts)


def _digest(entries) -> str:
    """sha256 over (relative path, content) pairs, in the order given."""
    digest = hashlib.sha256()
    for relative, content in entries:
        digest.update(str(relative).encode() + b"\0" + content + b"\0")
    return digest.hexdigest()


def source_hash(root: Path) -> str:
    """sha256 over the code and config that produce the data (path + content, sorted).

    Checkable without git: hash the same files of a checkout with this function.
    """
    root = Path(root)
    files = [root / TOP_FILE] + sorted(
        p for folder in SOURCE_FOLDERS for p in (root / folder).rglob("*")
        if p.suffix in SOURCE_SUFFIXES and "__pycache__" not in p.parts)
    return _digest((p.relative_to(root), p.read_bytes()) for p in files if p.is_file())


def _git(root: Path, *args: str, binary: bool = False):
    out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, check=True).stdout
    return out if binary else out.decode().strip()


def own_repository(root: Path) -> bool:
    """True where ``root`` is the top level of a git work tree (not a folder inside another)."""
    try:
        top = _git(root, "rev-parse", "--show-toplevel")
    except (OSError, subprocess.CalledProcessError):
        return False
    return Path(top).resolve() == Path(root).resolve()


def source_hash_at(root: Path, commit: str) -> str | None:
    """source_hash of the files as ``commit`` holds them (None where git or the commit is missing)."""
    try:
        full = _git(root, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")
        listed = _git(root, "ls-tree", "-r", "-z", "--name-only", full, "--", TOP_FILE, *SOURCE_FOLDERS,
                      binary=True).decode().split("\0")
        names = [PurePosixPath(n) for n in listed if n]
        files = [n for n in names if str(n) == TOP_FILE] + sorted(n for n in names if _is_source(n))
        return _digest(zip(files, _blobs(root, [f"{full}:{n}" for n in files])))
    except (OSError, subprocess.CalledProcessError):
        return None


def _blobs(root: Path, objects: list[str]) -> list[bytes]:
    """The contents of git objects ("commit:path"), read by one `git cat-file --batch`."""
    out = subprocess.run(["git", "-C", str(root), "cat-file", "--batch"], input="\n".join(objects).encode() + b"\n",
                         capture_output=True, check=True).stdout
    contents, at = [], 0
    for name in objects:
        header_end = out.index(b"\n", at)
        header = out[at:header_end].split()
        if len(header) != 3:                    # "<object> missing"
            raise subprocess.CalledProcessError(1, ["git", "cat-file", name])
        size = int(header[2])
        contents.append(out[header_end + 1:header_end + 1 + size])
        at = header_end + 1 + size + 1
    return contents


def shallow_repository(root: Path) -> bool:
    """True where the git repository at ``root`` is a shallow clone (``git clone --depth``), whose
    history lacks older commits by design."""
    try:
        return _git(root, "rev-parse", "--is-shallow-repository").strip() == "true"
    except (OSError, subprocess.CalledProcessError):
        return False


def commit_in_repository(root: Path, commit: str) -> bool:
    """Does the git repository at ``root`` hold ``commit``?"""
    try:
        _full_commit(root, commit)
    except (OSError, subprocess.CalledProcessError):
        return False
    return True


def _full_commit(root: Path, commit: str) -> str:
    return _git(root, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")


def git_state(root: Path) -> dict:
    """The run's commit where it is checked, whether the files differ from it, and how it was found.

    Raises SourceMismatchError where $TMA_STUDY_SOURCE_COMMIT names a commit of this repository
    whose files are not the ones here (a measurement must not record a commit it did not run).
    """
    root = Path(root)
    stated = os.environ.get(SOURCE_COMMIT_VARIABLE, "").strip()
    here = source_hash(root)
    own = own_repository(root)
    if stated:
        at_commit = source_hash_at(root, stated) if own else None
        if at_commit is None:
            return {"commit": None, "dirty": None, "stated_commit": stated,
                    "commit_source": f"none: ${SOURCE_COMMIT_VARIABLE} stated {stated}, but no git repository "
                                     "of this project here holds it to check against the files; "
                                     "source_sha256 alone identifies the code"}
        if at_commit != here:
            raise SourceMismatchError(
                f"${SOURCE_COMMIT_VARIABLE}={stated}, but the source files here differ from that commit's "
                f"(source hash {here[:12]} here, {at_commit[:12]} at {stated}): commit the changes or state "
                "the commit that holds these files")
        return {"commit": _full_commit(root, stated), "dirty": False,
                "commit_source": f"${SOURCE_COMMIT_VARIABLE}, checked: its files hash to source_sha256"}
    if not own:
        return {"commit": None, "dirty": None,
                "commit_source": f"none: {root} is not the top level of a git repository; source_sha256 "
                                 "alone identifies the code"}
    try:
        head = _full_commit(root, "HEAD")
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None, "commit_source": "none: the repository has no commit yet"}
    return {"commit": head, "dirty": source_hash_at(root, head) != here,
            "commit_source": "git: HEAD of the project's own repository; dirty: its source files "
                             "(harness.source.SOURCE_FOLDERS) differ from the commit"}


def check_recorded(provenance: dict, root: Path) -> str:
    """One line: does the commit a provenance record names hold the code its source_sha256 hashes?"""
    git = provenance.get("git") or {}
    commit = git.get("commit") or git.get("stated_commit")
    if not commit:
        return "no commit recorded: source_sha256 alone identifies the code"
    at_commit = source_hash_at(root, commit)
    if at_commit is None:
        return f"commit {commit} is not in the git repository at {root}: cannot check it"
    if at_commit == provenance.get("source_sha256"):
        return f"commit {commit}: verified (its files hash to source_sha256)"
    return (f"commit {commit}: does NOT hold the measured code (its files hash to {at_commit[:12]}, "
            f"source_sha256 is {str(provenance.get('source_sha256'))[:12]}): the measured tree differed from it")
