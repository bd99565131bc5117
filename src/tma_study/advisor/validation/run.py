"""The advisor's validation for one results label: ``results/<label>/advisor/derived/``.

    tma-study advisor-validate --results results/h200 --out results/h200/advisor/derived

- ``cases.csv``: every case of every set, the advisor's prediction and each policy's pick and result;
- ``scores.csv``: per set and family, each policy's wins, ties, losses, share not worse and mean
  regret, with bootstrap 95 % intervals;
- ``comparison.csv``: the advisor against each baseline (paired bootstrap);
- ``catalog.csv``: the catalog's choices beside the advisor's; ``catalog_agreement.csv``: how often they agree;
- ``decision_map.csv``: the advisor's choice for a contiguous, load-only, streaming operand by
  level, transfer size and bytes in flight per SM (the decision-map figure).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from tma_study.atomic import atomic_write_text

from .. import advise_with, evidence, frozen, from_mapping
from . import catalog, loso, scores
from .cases import COLUMNS, operand_spec

SCORED_FILES = ("cases.csv", "scores.csv", "comparison.csv", "catalog.csv", "catalog_agreement.csv")
MAP_FILE = "decision_map.csv"          # its own job: it needs only the microbenchmarks (write_map)
DERIVED_FILES = (*SCORED_FILES, MAP_FILE)
FIGURES = ("advisor_decision_map",)
TABLES = ("advisor_scores", "advisor_comparison", "advisor_catalog", "advisor_misses", "advisor_scores_by_family")
HELDOUT_CASES = Path("heldout") / "derived" / "cases.csv"
MAP_SIZES = tuple(2 ** k for k in range(6, 18))                    # 64 B .. 128 KiB
MAP_IN_FLIGHT = (16384, 32768, 65536, 131072, 196608)
ALL = "all"


def output_files() -> list[str]:
    """The paper tables and figures the advisor's rules make (workflow/rules/advisor.smk)."""
    return ([f"paper/tables/{t}.{ext}" for t in TABLES for ext in ("tex", "md")]
            + [f"figures/{f}.{ext}" for f in FIGURES for ext in ("pdf", "png")])


class Advisor:
    """advise_with over one set of evidence, once per distinct operand. Its tables keep only the
    columns the rules read (evidence.TABLES): the same rows and values, a fraction of the copying."""

    def __init__(self, variants: list):
        self.variants = [replace(ev, tables={k: v[list(evidence.TABLES[k])] for k, v in ev.tables.items()})
                         for ev in variants]
        self.known: dict = {}

    def __call__(self, operand):
        if operand not in self.known:
            self.known[operand] = advise_with(operand, self.variants)
        return self.known[operand]


def _advisor_picks(cases: pd.DataFrame, advisor: Advisor) -> pd.DataFrame:
    rows = []
    for case in cases.itertuples():
        advice = advisor(from_mapping(operand_spec(case)))
        ranked = {r.mechanism: r.predicted_time_ratio for r in advice.ranking}
        predicted = ranked["tma"] / ranked[case.alternative]
        if advice.choice in ("tma", case.alternative):
            pick = "tma" if advice.choice == "tma" else scores.ALTERNATIVE_PICK
        else:
            pick = "tma" if predicted <= 1 else scores.ALTERNATIVE_PICK
        rows.append({"advisor_choice": advice.choice, "advisor_tied": " ".join(advice.tied),
                     "advisor_predicted_ratio": predicted, "advisor_inside_range": advice.inside_measured_range,
                     "advisor_extrapolation_octaves": advice.extrapolation_octaves, "advisor": pick})
    return pd.DataFrame(rows, index=cases.index)


def heldout_cases(results_dir: Path, sha256: str) -> pd.DataFrame:
    """The held-out study's cases measured with this version of the advisor frozen, if any."""
    path = Path(results_dir) / HELDOUT_CASES
    if not path.is_file():
        return pd.DataFrame(columns=COLUMNS)
    frame = pd.read_csv(path)
    return frame[frame.advisor_sha256 == sha256][list(COLUMNS)]


def validation_cases(results_dir: Path, sha256: str) -> pd.DataFrame:
    results_dir = Path(results_dir)
    parts = [heldout_cases(results_dir, sha256)]
    if (results_dir / "paged_kv" / "derived" / "speedup.csv").is_file():
        parts.append(loso.paged_kv_cases(results_dir / "paged_kv"))
    if (results_dir / "gemm" / "derived" / "speedup.csv").is_file():
        parts.append(loso.gemm_cases(results_dir / "gemm"))
    parts = [p for p in parts if len(p)]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=COLUMNS)


def picks(cases: pd.DataFrame, advisor: Advisor, crossover: pd.DataFrame) -> pd.DataFrame:
    out = _advisor_picks(cases, advisor)
    out["always_tma"] = "tma"
    out["always_alternative"] = scores.ALTERNATIVE_PICK
    out["transfer_size_only"] = scores.transfer_size_pick(cases, crossover)
    fa3 = cases.fa3_load_path.fillna("")
    out["fa3_rule"] = np.where(fa3 == "", None, np.where(fa3 == "tma", "tma", scores.ALTERNATIVE_PICK))
    return out


def score_sets(cases: pd.DataFrame, chosen: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    rows, compared = [], []
    for name in cases.set.unique():
        in_set = cases.set == name
        for family in [ALL, *sorted(cases.family[in_set].unique())]:
            mask = in_set & ((cases.family == family) if family != ALL else True)
            subset, picked = cases[mask], chosen[mask].copy()
            picked["majority_class"] = scores.majority_pick(subset)
            r, c = scores.score(subset.reset_index(drop=True), picked.reset_index(drop=True),
                                {"set": name, "family": family})
            rows += r
            compared += c
    return pd.DataFrame(rows), pd.DataFrame(compared)


def decision_map(advisor: Advisor) -> pd.DataFrame:
    rows = []
    for level in ("hbm", "l2"):
        for size in MAP_SIZES:
            for in_flight in MAP_IN_FLIGHT:
                advice = advisor(from_mapping({"level": level, "shape": "bulk", "bytes_per_transfer": size,
                                               "bytes_in_flight_per_sm": in_flight}))
                runner = next((r for r in advice.ranking if r.mechanism not in advice.tied), None)
                rows.append({"level": level, "bytes_per_transfer": size, "bytes_in_flight_per_sm": in_flight,
                             "choice": advice.choice, "tied": " ".join(advice.tied),
                             "fastest_other": runner.mechanism if runner else "",
                             "fastest_other_over_choice": runner.predicted_time_ratio if runner else np.nan,
                             "inside_measured_range": advice.inside_measured_range,
                             "extrapolation_octaves": advice.extrapolation_octaves})
    return pd.DataFrame(rows)


def validate(results_dir: Path, out_dir: Path) -> None:
    results_dir, out_dir = Path(results_dir), Path(out_dir)
    advisor = Advisor(evidence.load(results_dir))
    version = frozen.current_version()
    cases = validation_cases(results_dir, version["sha256"])
    crossover = pd.read_csv(results_dir / "crossover" / "derived" / "crossover.csv")
    chosen = picks(cases, advisor, crossover) if len(cases) else pd.DataFrame()
    scored, compared = score_sets(cases, chosen) if len(cases) else (pd.DataFrame(), pd.DataFrame())
    table = pd.concat([cases, chosen], axis=1) if len(cases) else cases
    if len(cases):
        result = scores.outcomes(cases, chosen["advisor"])
        table["advisor_result"], table["advisor_regret"] = result.result, result.regret
    table["advisor_version"], table["advisor_sha256"] = version["version"], version["sha256"]
    out_dir.mkdir(parents=True, exist_ok=True)
    library = catalog.compare(advisor, cases)
    outputs = {"cases.csv": table, "scores.csv": scored, "comparison.csv": compared, "catalog.csv": library,
               "catalog_agreement.csv": catalog.agreement(library)}
    for name, frame in outputs.items():
        atomic_write_text(out_dir / name, frame.to_csv(index=False))


def write_map(results_dir: Path, out_dir: Path) -> None:
    """``decision_map.csv`` alone, from the microbenchmarks of results/<label>/."""
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    atomic_write_text(Path(out_dir) / MAP_FILE, decision_map(Advisor(evidence.load(results_dir))).to_csv(index=False))
