"""Writes that never leave half a result behind, for every tier: the measure step's raw data,
the analysis's derived tables and the paper tier's tables, macros and claims.

One file is written through a temporary file and a rename (``atomic_write_text``). A study
writes its raw data into a staging folder beside the destination; only when every file is
written does the folder replace the destination (two renames). An interrupted run leaves the
previous data as it was, plus a stale staging folder that the next run removes (and a crash
between the two renames is undone by the next run: the old folder comes back).
"""
from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Iterator

STAGING_PREFIX = ".staging-"
RETIRED_PREFIX = ".retired-"


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename.

    The file gets the permissions an ordinary ``open(path, "w")`` would give it.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def staged_directory(final_dir: Path) -> Iterator[Path]:
    """Yield an empty staging folder; on success it becomes ``final_dir``.

    On an exception the staging folder is deleted and ``final_dir`` is untouched.
    """
    final_dir = Path(final_dir)
    final_dir.parent.mkdir(parents=True, exist_ok=True)
    for stale in final_dir.parent.glob(f"{STAGING_PREFIX}{final_dir.name}-*"):
        shutil.rmtree(stale, ignore_errors=True)
    for retired in final_dir.parent.glob(f"{RETIRED_PREFIX}{final_dir.name}-*"):
        if final_dir.exists():      # a crash after the swap: the retired copy is garbage
            shutil.rmtree(retired, ignore_errors=True)
        else:                       # a crash between the two renames: put the old data back
            os.replace(retired, final_dir)
    staging = Path(tempfile.mkdtemp(dir=final_dir.parent, prefix=f"{STAGING_PREFIX}{final_dir.name}-"))
    try:
        yield staging
        os.chmod(staging, 0o777 & ~_umask())    # mkdtemp's 0700 -> what mkdir would give
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    retired = None
    if final_dir.exists():
        retired = final_dir.parent / f"{RETIRED_PREFIX}{final_dir.name}-{os.getpid()}"
        os.replace(final_dir, retired)
    os.replace(staging, final_dir)
    if retired is not None:
        shutil.rmtree(retired, ignore_errors=True)


class PublishError(ValueError):
    """A staged measurement that is not only regular data files."""


def _copy_regular_file(source: Path, target: Path) -> None:
    """Copy the content of regular file ``source`` (never through a symbolic link) into a new
    ``target`` with the permissions an ordinary ``open(target, "w")`` gives."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
    with os.fdopen(os.open(source, flags), "rb") as reading:
        if not stat.S_ISREG(os.fstat(reading.fileno()).st_mode):
            raise PublishError(f"{source}: not a regular file; a measurement publishes regular files only")
        with open(target, "xb") as writing:
            shutil.copyfileobj(reading, writing)
    os.chmod(target, 0o666 & ~_umask())


def publish_directory(staged: Path, destination: Path, replacing: dict[str, str] | None = None) -> None:
    """Copy every data file of a finished staged measurement into ``destination``, atomically.

    Only regular files are copied, by content, with ordinary permissions; a symbolic link, a
    folder or any other kind of entry stops the publication, naming it (nothing is followed
    into results/). Hidden files are left behind: Snakemake marks a ``directory()`` output
    with a ``.snakemake_timestamp`` file, which is bookkeeping, not measured data.
    ``replacing``: {file name: text} published instead of the staged file's content (the
    provenance.json that seals the raw files, harness.publishing).
    """
    staged = Path(staged)
    if not (staged / "provenance.json").exists():
        raise FileNotFoundError(f"{staged} holds no provenance.json: the measurement did not finish")
    entries = sorted(p for p in staged.iterdir() if not p.name.startswith("."))
    odd = [p for p in entries if p.is_symlink() or not stat.S_ISREG(p.lstat().st_mode)]
    if odd:
        raise PublishError(f"{odd[0]}: a {'symbolic link' if odd[0].is_symlink() else 'non-regular entry'} in a "
                           "staged measurement; only regular files are published into results/")
    destination = Path(destination)
    linked = [p for p in (destination, destination.parent) if p.is_symlink()]
    if linked:
        raise PublishError(f"{linked[0]} is a symbolic link: a measurement is published into a real folder only")
    with staged_directory(destination) as target:
        for path in entries:
            if path.name in (replacing or {}):
                (target / path.name).write_text(replacing[path.name])
                os.chmod(target / path.name, 0o666 & ~_umask())
            else:
                _copy_regular_file(path, target / path.name)
