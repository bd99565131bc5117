"""A release archive to deposit (the ACM "Available" badge asks for an archived, citable copy).

``tma-study release`` packs the committed tree at HEAD (the code, the raw data under results/,
CITATION.cff), the paper's PDF and ``SHA256SUMS`` (the sha256 of every file in the archive) into
``<out>/tma-study-<version>-<commit>.tar.gz``, with ``<archive>.sha256`` beside it. A release is
a commit: a work tree whose tracked files differ from HEAD is refused, and so is a missing PDF.
The archive's bytes depend on the commit and the PDF alone (entries dated by the commit), so
two builds of one commit are the same file.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import subprocess
import tarfile
import tomllib
from pathlib import Path

from .atomic import atomic_write_text

CHECKSUMS = "SHA256SUMS"
PDF = Path("paper") / "main.pdf"


class ReleaseError(RuntimeError):
    """The tree cannot be released as it is; the message says what to do."""


def _git(root: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, check=True).stdout


def _version(root: Path) -> str:
    return tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]


def _check_releasable(root: Path, pdf: Path) -> None:
    from .harness.source import own_repository
    if not own_repository(root):
        raise ReleaseError(f"{root} is not the top level of a git repository: a release is a commit "
                           "(release from a clone of the repository)")
    changed = [line[3:] for line in _git(root, "status", "--porcelain", "--untracked-files=no").decode().splitlines()]
    if changed:
        raise ReleaseError("a release is a commit: commit or discard the changes to tracked files first: "
                           + ", ".join(changed[:5]))
    if not pdf.is_file():
        raise ReleaseError(f"no {pdf}: build the paper from this commit first (.venv/bin/snakemake -c2 paper)")


def _add(archive: tarfile.TarFile, name: str, data: bytes, mtime: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), mtime, 0o644
    archive.addfile(info, io.BytesIO(data))


def build(root: Path, out_dir: Path, pdf: Path | None = None) -> tuple[Path, int]:
    """Write the archive and its .sha256 into ``out_dir``; return (archive path, files in it)."""
    root = Path(root).resolve()
    pdf = Path(pdf) if pdf is not None else root / PDF
    _check_releasable(root, pdf)
    commit = _git(root, "rev-parse", "HEAD").decode().strip()
    mtime = int(_git(root, "show", "-s", "--format=%ct", commit).decode())
    name = f"tma-study-{_version(root)}-{commit[:7]}"
    tree = tarfile.open(fileobj=io.BytesIO(_git(root, "archive", "--format=tar", commit)))
    files = {m.name: tree.extractfile(m).read() for m in tree.getmembers() if m.isfile()}
    files[PDF.as_posix()] = pdf.read_bytes()
    sums = "".join(f"{hashlib.sha256(data).hexdigest()}  {path}\n" for path, data in sorted(files.items()))
    files[CHECKSUMS] = sums.encode()
    packed = io.BytesIO()
    with tarfile.open(fileobj=packed, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for path in sorted(files):
            _add(archive, f"{name}/{path}", files[path], mtime)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{name}.tar.gz"
    with open(target, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=mtime) as zipped:
        zipped.write(packed.getvalue())
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    atomic_write_text(target.with_name(target.name + ".sha256"), f"{digest}  {target.name}\n")
    return target, len(files)
