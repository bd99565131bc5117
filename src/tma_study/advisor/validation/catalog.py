"""The catalog's choices beside the advisor's (``config/advisor_catalog.yaml``).

For every describable load of the catalog (FlashAttention-3, FlashInfer, CUTLASS), the
advisor's choice for the operand in the library's typical configuration, the library's own
mechanism (``catalog/*.yaml``), whether they agree, and where they differ and a validation set
measured such an operand, what its cases measured.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import yaml

from tma_study.config import REPO_ROOT

from .. import from_mapping
from .cases import TIE, TMA

OPERANDS = REPO_ROOT / "config" / "advisor_catalog.yaml"
CATALOG_DIR = REPO_ROOT / "catalog"


def library_mechanisms(catalog_dir: Path = CATALOG_DIR) -> dict[str, dict]:
    """catalog entry id -> its entry (mechanism, operand, condition) and its file's subject."""
    entries = {}
    for path in sorted(Path(catalog_dir).glob("*.yaml")):
        document = yaml.safe_load(path.read_text())
        for entry in document.get("entries", []):
            entries[entry["id"]] = {**entry, "library": document.get("title", path.stem)}
    return entries


def _measured(link: dict | None, cases: pd.DataFrame) -> tuple[str, int, int, int]:
    """(what the linked cases measured, TMA wins, alternative wins, ties)."""
    if not link:
        return "no validation case measures this operand", 0, 0, 0
    chosen = cases[(cases.set == link["set"]) & (cases.family == link["family"])] if len(cases) else cases
    for text in link.get("case_contains", []):
        chosen = chosen[chosen.case.str.contains(text, regex=False)]
    if chosen.empty:
        return f"not measured here (no {link['set']} / {link['family']} case)", 0, 0, 0
    tma = int((chosen.winner == TMA).sum())
    ties = int((chosen.winner == TIE).sum())
    alternative = len(chosen) - tma - ties
    return (f"{link['family']} ({link['set']}): TMA faster in {tma}, {chosen.alternative.iloc[0]} in "
            f"{alternative}, tied in {ties} of {len(chosen)}"), tma, alternative, ties


def compare(advisor, cases: pd.DataFrame, operands: Path = OPERANDS,
            catalog_dir: Path = CATALOG_DIR) -> pd.DataFrame:
    library = library_mechanisms(catalog_dir)
    rows = []
    for item in yaml.safe_load(Path(operands).read_text())["entries"]:
        if item["id"] not in library:
            raise KeyError(f"{operands}: entry {item['id']!r} is not in {catalog_dir}/*.yaml")
        entry = library[item["id"]]
        advice = advisor(from_mapping(item["operand"]))
        mechanism = entry["mechanism"]
        text, tma, alternative, ties = _measured(item.get("measured"), cases)
        ranked = {r.mechanism: r for r in advice.ranking}
        rows.append({"id": item["id"], "library": entry["library"], "operand": entry["operand"],
                     "configuration": item["configuration"], "library_mechanism": mechanism,
                     "advisor_choice": advice.choice, "advisor_tied": " ".join(advice.tied),
                     "agree": advice.choice == mechanism,
                     "agree_or_tied": mechanism in advice.tied,
                     "library_over_choice": ranked[mechanism].predicted_time_ratio if mechanism in ranked else None,
                     "inside_measured_range": advice.inside_measured_range, "measured": text,
                     "measured_tma_wins": tma, "measured_alternative_wins": alternative, "measured_ties": ties})
    return pd.DataFrame(rows)


def agreement(table: pd.DataFrame) -> pd.DataFrame:
    """One row: entries compared, how many the advisor agrees with (or ties with), and the shares."""
    n = len(table)
    agree, tied = int(table.agree.sum()), int(table.agree_or_tied.sum())
    return pd.DataFrame([{"entries": n, "agree": agree, "agree_or_tied": tied,
                          "share_agree": agree / n if n else float("nan"),
                          "share_agree_or_tied": tied / n if n else float("nan")}])
