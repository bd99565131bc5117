"""Raw files sealed by their provenance, and read only where they are safe to read.

``tma-study publish`` records each raw file's sha256, size in bytes and row count in the
``provenance.json`` it publishes (key ``raw_files``; ``raw_files_sealed_by`` says who sealed
it); ``tma-study seal`` does the same once for data published before seals existed
(docs/provenance.md). Every reader of raw data (harness.raw_data.load) reads each file through
``read_checked`` and compares it with its seal before parsing any of it: a file whose digest
is not the sealed one, a sealed file that is missing and a file the seal does not list are
refused, naming the file and both digests.

``read_checked`` refuses, before reading a byte, a symbolic link that leaves the results folder
(``boundary_of``), anything but a regular file (a device such as /dev/zero, a named pipe, a
folder) and a file larger than its bound.
"""
from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

SEAL_KEY = "raw_files"
SEALED_BY_KEY = "raw_files_sealed_by"
MAX_RAW_FILE_BYTES = 64 * 2**20        # the largest committed raw file holds 1.9 MB
MAX_PROVENANCE_BYTES = 4 * 2**20       # the largest committed provenance.json holds 40 kB
RESULTS_FOLDER = "results"
_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"))


class UnsafeFileError(ValueError):
    """A data file that is not read: a link out of the results folder, a device, too large."""


class SealError(ValueError):
    """Raw files that are not the ones their provenance sealed; the message names the file."""


def shown(path: Path) -> str:
    """``path`` relative to the working folder where it lies under it (the project root in jobs)."""
    path = Path(path)
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def boundary_of(folder: Path) -> Path:
    """The folder a data file's symbolic link must stay inside: the ``results/`` folder above
    ``folder`` (results/<label>/<study>/), else ``folder`` itself (a staged measurement)."""
    folder = Path(os.path.abspath(folder))
    for parent in (folder, *folder.parents):
        if parent.name == RESULTS_FOLDER:
            return parent.resolve()
    return folder.resolve()


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def read_checked(path: Path, limit: int = MAX_RAW_FILE_BYTES, boundary: Path | None = None) -> bytes:
    """The bytes of data file ``path``, read only where it is a regular file (or a symbolic link
    to one inside ``boundary``, default ``boundary_of`` its folder) of at most ``limit`` bytes.

    FileNotFoundError where it does not exist (a dangling link included); UnsafeFileError else.
    """
    path = Path(path)
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        target = Path(os.path.realpath(path))
        inside = Path(boundary or boundary_of(path.parent)).resolve()
        if not target.is_relative_to(inside):
            raise UnsafeFileError(
                f"{shown(path)}: a symbolic link to {target}, outside {shown(inside)}/: data are read from "
                "the results folder only (put the file itself there)")
        info = target.stat()
    if not stat.S_ISREG(info.st_mode):
        raise UnsafeFileError(f"{shown(path)}: {_kind(info.st_mode)}, not a regular file: not read")
    if info.st_size > limit:
        raise UnsafeFileError(f"{shown(path)}: {info.st_size} bytes, more than the {limit} bytes a data file "
                              "may hold (harness.seal): not read")
    with open(path, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise UnsafeFileError(f"{shown(path)}: grew beyond {limit} bytes while read: not read")
    return data


def file_seal(data: bytes) -> dict:
    """A raw file's seal: its sha256, its size and its rows (lines after the header)."""
    return {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data), "rows": max(data.count(b"\n") - 1, 0)}


def sealed(record: dict, contents: dict[str, bytes], by: str) -> dict:
    """``record`` with the seal of ``contents`` ({file name: bytes}) and who sealed it."""
    record = {k: v for k, v in record.items() if k not in (SEAL_KEY, SEALED_BY_KEY)}
    return {**record, SEAL_KEY: {name: file_seal(contents[name]) for name in sorted(contents)}, SEALED_BY_KEY: by}


def run_identity(record: dict) -> tuple | None:
    """What identifies a run's data: its raw files' names and digests (None where unsealed).
    Two folders with the same identity hold one run, not two."""
    files = record.get(SEAL_KEY)
    return tuple(sorted((name, seal["sha256"]) for name, seal in files.items())) if files else None


def require(record: dict, folder: Path) -> None:
    """Raise SealError where ``record`` (``folder``'s provenance) seals no raw file."""
    if not record.get(SEAL_KEY):
        raise SealError(
            f"{shown(Path(folder) / 'provenance.json')}: no key '{SEAL_KEY}': its raw files are not sealed "
            f"(tma-study publish seals a measurement; data published before seals: tma-study seal "
            f"{shown(folder)}, docs/provenance.md)")


def verify(record: dict, contents: dict[str, bytes], folder: Path, required: bool = True) -> None:
    """Raise SealError unless ``contents`` ({file name: bytes}: every raw file present in
    ``folder``) are exactly the files ``record`` seals (no seal: refused where ``required``)."""
    folder = Path(folder)
    provenance = shown(folder / "provenance.json")
    files = record.get(SEAL_KEY)
    if files is None:
        if required:
            require(record, folder)
        return
    unsealed = [name for name in contents if name not in files]
    if unsealed:
        raise SealError(f"{shown(folder / unsealed[0])}: not among the raw files {provenance} seals "
                        f"({', '.join(sorted(files))}): added after the data were published?")
    for name, expected in files.items():
        if name not in contents:
            raise SealError(f"{shown(folder / name)}: missing, but {provenance} seals it (restore it)")
        found = file_seal(contents[name])
        if found["sha256"] != expected["sha256"]:
            raise SealError(
                f"{shown(folder / name)}: sha256 {found['sha256']} is not the sealed {expected['sha256']} "
                f"({provenance} key {SEAL_KEY}; {found['bytes']} bytes and {found['rows']} rows, sealed "
                f"{expected['bytes']} and {expected['rows']}): the file changed after it was published; "
                "restore it (git checkout -- FILE) or measure again")
