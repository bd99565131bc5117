"""The catalog in numbers: per kernel and mechanism family, how many cataloged data movements
use it and which operands they move (``build/catalog/derived/``, read by the catalog's claims in
``config/claims/catalog.yaml``), the paper's summary table and its ``\\catalog...`` macros."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.atomic import atomic_write_text

FA3_SUBJECT = "fa3_forward"
# <derived dir>/<file> written by write_derived, read by the catalog's claims (config/claims/catalog.yaml)
DERIVED_FILES = ("entries.csv", "mechanisms.csv")
DERIVED_DIR = "build/catalog/derived"
# mechanisms grouped as the paper counts them: the TMA engine (loads, multicast, stores), cp.async,
# the SM's own loads and stores, and the rest (on-chip copies, DSM signals, atomics)
FAMILIES = {"tma": "tma", "tma_multicast": "tma", "tma_store": "tma", "cp_async": "cp_async",
            "plain_load": "plain", "plain_store": "plain", "dsm": "other", "other": "other"}


FAMILY_LABELS = {"tma": "TMA (load, multicast, store)", "cp_async": "cp.async", "plain": "plain loads and stores",
                 "other": "other (on-chip copies, signals, atomics)"}


def summary_table(catalog: dict[str, dict]) -> pd.DataFrame:
    """Per mechanism family (rows) and kernel (columns): 'n: operand; operand; ...'."""
    _, counts = derived_tables(catalog)
    subjects = [FA3_SUBJECT, *sorted(s for s in catalog if s != FA3_SUBJECT)]
    rows = []
    for family, label in FAMILY_LABELS.items():
        row = {"mechanism": label}
        for subject in subjects:
            cell = counts[(counts.subject == subject) & (counts.family == family)]
            row[catalog[subject]["title"]] = (f"{int(cell.entries.iloc[0])}: {cell.operands.iloc[0]}"
                                              if len(cell) else "0")
        rows.append(row)
    return pd.DataFrame(rows)


def derived_tables(catalog: dict[str, dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(entries, mechanisms): one row per catalog entry, and per subject and mechanism family the
    number of entries and the operands they move (the numbers the catalog's claims check)."""
    entries = pd.DataFrame([{"subject": subject, "entry": e["id"], "operand": e["operand"],
                             "direction": e["direction"], "mechanism": e["mechanism"],
                             "family": FAMILIES[e["mechanism"]]}
                            for subject, document in sorted(catalog.items()) for e in document["entries"]])
    rows = []
    for (subject, family), group in entries.groupby(["subject", "family"], sort=True):
        rows.append({"subject": subject, "family": family, "entries": len(group),
                     "entries_of_subject": int((entries.subject == subject).sum()),
                     "operands": "; ".join(dict.fromkeys(group.operand))})
    return entries, pd.DataFrame(rows)


def macros(derived_dir: Path) -> dict[str, str]:
    """``\\catalog...`` macros for the paper: per subject, its entries and the count per family."""
    counts = pd.read_csv(Path(derived_dir) / "mechanisms.csv")
    names = {"fa3_forward": "FaThree", "flashinfer_hopper": "Flashinfer", "cutlass_gemm": "Cutlass"}
    out = {}
    for subject, group in counts.groupby("subject"):
        name = names.get(subject)
        if name is None:
            continue
        out[f"catalog{name}Entries"] = str(int(group.entries_of_subject.iloc[0]))
        for family in FAMILY_NAMES:
            rows = group[group.family == family]
            out[f"catalog{name}{FAMILY_NAMES[family]}"] = str(int(rows.entries.sum()))
    return out


FAMILY_NAMES = {"tma": "Tma", "cp_async": "CpAsync", "plain": "Plain", "other": "Other"}


def write_derived(catalog: dict[str, dict], derived_dir: Path) -> list[Path]:
    """<derived_dir>/entries.csv and mechanisms.csv from a loaded catalog."""
    derived_dir = Path(derived_dir)
    derived_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, frame in zip(DERIVED_FILES, derived_tables(catalog)):
        atomic_write_text(derived_dir / name, frame.to_csv(index=False))
        paths.append(derived_dir / name)
    return paths
