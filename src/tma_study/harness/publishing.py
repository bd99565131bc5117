"""A finished measurement into results/, sealed; and the seal of data published before seals.

``publish`` checks a staged measurement (its provenance and every raw file against its schema),
seals its raw files into the provenance.json it publishes (harness.seal) and copies the folder
into results/<label>/<study>/ atomically (tma_study.atomic). ``seal_published`` seals, once, a
results/<label>/<study>/ folder published before publish sealed (``tma-study seal``): its data
are checked against their schema first, so damaged data are never sealed.
"""
from __future__ import annotations

import datetime as dt
from pathlib import Path

from ..atomic import atomic_write_text, publish_directory
from . import provenance as provenance_mod
from . import raw_data, seal

SEALED_ON_PUBLISH = "tma-study publish"


def _contents(study, folder: Path) -> dict[str, bytes]:
    """The raw files of ``folder``, checked (raw_data.load), as bytes: what a seal covers."""
    checked = raw_data.load(study, folder)
    boundary = seal.boundary_of(folder)
    return {name: seal.read_checked(Path(folder) / name, seal.MAX_RAW_FILE_BYTES, boundary)
            for name in checked.frames}


def publish(study, staged: Path, out: Path) -> None:
    """Check the measurement in ``staged``, seal it, publish it into ``out`` (bad data never reach results/)."""
    staged = Path(staged)
    record = provenance_mod.read(staged / "provenance.json", study=study.name)
    contents = _contents(study, staged)
    sealed = seal.sealed(record, contents, SEALED_ON_PUBLISH)
    publish_directory(staged, out, replacing={"provenance.json": provenance_mod.dumps(sealed)})


def seal_published(study, folder: Path, today: dt.date | None = None) -> str:
    """Seal the raw files of ``folder`` in its provenance.json where they are not yet sealed;
    one line saying what was done. A seal already there must hold (it is never rewritten)."""
    folder = Path(folder)
    record = provenance_mod.read(folder / "provenance.json", study=study.name)
    if record.get(seal.SEAL_KEY):
        raw_data.load(study, folder, require_seal=True)
        return f"{seal.shown(folder)}: already sealed ({record.get(seal.SEALED_BY_KEY, 'sealed')}); the seal holds"
    contents = _contents(study, folder)
    day = (today or dt.datetime.now(dt.timezone.utc).date()).isoformat()
    by = f"tma-study seal, {day}: published before tma-study publish sealed raw files; sealed as found"
    atomic_write_text(folder / "provenance.json", provenance_mod.dumps(seal.sealed(record, contents, by)))
    return f"{seal.shown(folder)}: sealed {len(contents)} raw files ({', '.join(contents)})"
